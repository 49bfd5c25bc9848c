#!/usr/bin/env bash
# The host state the kind harness must leave as it found it, for a before/after diff:
# iptables and ip6tables rules (legacy and nft back ends, counters stripped), the
# nft rule set, sysctls (all of them but the ones that move by themselves and the
# per-interface ones of interfaces that come and go), network interfaces, mounts
# under /run and /var/lib, /lib/modules.
#   hoststate.sh snapshot FILE     write the state to FILE
#   hoststate.sh check FILE        compare with FILE; exit 1 and print the diff if it changed
# Another user of the host (the local node, under /tmp/csi-registrar-localnode.lock)
# changes the same things: a difference seen while that lock was held is reported as
# not attributable (exit 0 with a warning) rather than failed.
set -euo pipefail

snapshot() {
  local t
  for t in iptables ip6tables iptables-legacy ip6tables-legacy; do
    command -v "$t-save" >/dev/null 2>&1 || continue
    echo "## $t"
    "$t-save" 2>/dev/null | grep -v '^#' | sed -E 's/\[[0-9]+:[0-9]+\]//' || true
  done
  if command -v nft >/dev/null 2>&1; then echo "## nft"; nft list ruleset 2>/dev/null || true; fi
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

localnode_busy() { ! flock -n /tmp/csi-registrar-localnode.lock true 2>/dev/null; }

case "${1:-}" in
  snapshot)
    f=${2:?usage: $0 snapshot FILE}
    snapshot >"$f"
    if localnode_busy; then echo busy >"$f.localnode"; else rm -f "$f.localnode"; fi ;;
  check)
    f=${2:?usage: $0 check FILE}
    [[ -s "$f" ]] || { echo "hoststate: no snapshot $f" >&2; exit 2; }
    if diff -u "$f" <(snapshot) >"$f.diff"; then
      echo "host state unchanged: iptables, ip6tables, nft, sysctls, links, mounts, /lib/modules"
      rm -f "$f.diff"
    elif [[ -f "$f.localnode" ]] || localnode_busy; then
      echo "warning: the host state changed while the local node was in use (its lock was held): not attributable to kind" >&2
      grep -E '^[-+][^-+]' "$f.diff" | head -20 >&2
    else
      echo "error: the kind harness changed the host:" >&2
      grep -E '^[-+][^-+]' "$f.diff" | head -40 >&2
      exit 1
    fi ;;
  *) echo "usage: $0 snapshot|check FILE" >&2; exit 2 ;;
esac
