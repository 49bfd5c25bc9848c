#!/usr/bin/env bash
# The host state the kind harness must leave as it found it, for a before/after diff:
# iptables and ip6tables rules (legacy and nft back ends, counters stripped), the
# nft rule set, sysctls (all of them but the ones that move by themselves and the
# per-interface ones of interfaces that come and go), network interfaces, mounts
# under /run and /var/lib, /lib/modules.
#   hoststate.sh snapshot FILE     write the state to FILE
#   hoststate.sh check FILE        compare with FILE; exit 1 and print the diff if it changed
#   hoststate.sh restore-sysctls FILE
#                                  write back every sysctl of FILE whose value changed:
#                                  the node containers are privileged, and what their
#                                  systemd and kubelet set in the (not namespaced) fs.,
#                                  kernel. and vm. keys is the host's (e.g. fs.file-max,
#                                  fs.protected_*, kernel.panic, vm.overcommit_memory)
# Callers hold the node lock (/tmp/csi-registrar-localnode.lock): the local node's
# kubelet changes the same host state.
set -euo pipefail

snapshot() {
  local t
  # A tool that is not installed shows as no rules: the harness may install it
  # (docker.io pulls in iptables), and an empty rule set is what it then shows.
  for t in iptables ip6tables iptables-legacy ip6tables-legacy; do
    echo "## $t"
    command -v "$t-save" >/dev/null 2>&1 || continue
    "$t-save" 2>/dev/null | grep -v '^#' | sed -E 's/\[[0-9]+:[0-9]+\]//' || true
  done
  echo "## nft"
  if command -v nft >/dev/null 2>&1; then nft list ruleset 2>/dev/null || true; fi
  echo "## sysctl"
  sysctl -a 2>/dev/null | grep -vE \
    -e '^(kernel\.(random|ns_last_pid|pty\.nr|sched_domain)|fs\.(dentry-state|inode-nr|inode-state|file-nr|quota)|net\.netfilter\.nf_conntrack_count)' \
    -e '^net\.ipv[46]\.(conf|neigh)\.[^.]+\.' -e '^net\.ipv6\.conf\.' -e '^kernel\.(perf_event_max_sample_rate|tainted)' \
    -e '^vm\.(nr_|stat_)' || true
  sysctl -a 2>/dev/null | grep -E '^net\.ipv[46]\.(conf|neigh)\.(all|default)\.' || true
  echo "## links"
  ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | sort
  echo "## mounts"
  awk '$5 ~ "^/(run|var/lib|lib/modules)" {print $5}' /proc/self/mountinfo | sort
  echo "## /lib/modules"
  ls -ld /lib/modules 2>/dev/null || echo absent
}

# sysctls FILE: the "key = value" lines of FILE's sysctl section.
sysctls() { sed -n '/^## sysctl$/,/^## /{/^## /d;p}' "$1"; }

restore_sysctls() {
  local f=$1 line key want now
  while IFS= read -r line; do
    key=${line%% = *} want=${line#* = }
    [[ "$key" != "$line" && -w "/proc/sys/${key//.//}" ]] || continue
    now=$(sysctl -n "$key" 2>/dev/null) || continue
    [[ "$now" == "$want" ]] && continue
    printf '%s\n' "$want" >"/proc/sys/${key//.//}" && echo "restored sysctl $key = $want (was $now)"
  done < <(sysctls "$f")
}

case "${1:-}" in
  snapshot)
    f=${2:?usage: $0 snapshot FILE}
    snapshot >"$f" ;;
  check)
    f=${2:?usage: $0 check FILE}
    [[ -s "$f" ]] || { echo "hoststate: no snapshot $f" >&2; exit 2; }
    if diff -u "$f" <(snapshot) >"$f.diff"; then
      echo "host state unchanged: iptables, ip6tables, nft, sysctls, links, mounts, /lib/modules"
      rm -f "$f.diff"
    else
      echo "error: the kind harness changed the host:" >&2
      grep -E '^[-+][^-+]' "$f.diff" | head -40 >&2
      exit 1
    fi ;;
  restore-sysctls) restore_sysctls "${2:?usage: $0 restore-sysctls FILE}" ;;
  *) echo "usage: $0 snapshot|check|restore-sysctls FILE" >&2; exit 2 ;;
esac
