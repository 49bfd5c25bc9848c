#!/usr/bin/env bash
# make test-platforms: the release's platforms other than this machine's, under
# user-mode emulation (Debian's qemu-user, installed when missing; its binfmt
# package is not: every emulator is called by name, nothing is registered with
# the kernel). Per platform:
#   - the image's binary, built as `make build` builds it (static), runs
#     `--version` under qemu-<arch> and must say VERSION;
#   - the test binaries of PKGS (registration server, socket ownership, the
#     control loop; `go test -c`, CGO_ENABLED=0) run under qemu-<arch> from their
#     package's directory, and each must print the platformtest line of its
#     GOARCH (internal/platformtest: runtime, its own ELF header, int width).
# The Makefile passes GO, VERSION, TAGS and LDFLAGS (GOBUILD's). PLATFORMS (GOARCH
# list) narrows the run; OUT (bin/platforms) holds the binaries and logs.
#   test-platforms.sh      (from the repository's root)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
: "${GO:=go}" "${OUT:=bin/platforms}" "${VERSION:?the Makefile passes VERSION}" "${TAGS:?the Makefile passes TAGS}" "${LDFLAGS:?the Makefile passes LDFLAGS}"

# The packages run under emulation: the registration server and the control
# loop (./registrar), the socket names and the kubelet's side of registration
# (csiplugin), socket ownership (sockfile), the gRPC server (grpcserve).
PKGS=(./registrar ./registrar/csiplugin ./registrar/csiplugin/sockfile ./registrar/csiplugin/grpcserve)
# Tests left out under emulation, with why. Every other test of PKGS runs.
#   TestProcessMetrics (./registrar): under qemu-user /proc/self/stat is written
#   by the emulator, not the kernel: its CPU-time and RSS fields read 0 (seen:
#   process_cpu_seconds_total = 0 where getrusage says 0.15 s), so the metric's
#   comparison with getrusage cannot hold there. Natively, make test runs it.
#   The state-file tests that compare a start time skip themselves under the
#   emulator (platformtest.SkipUnderEmulation says why in the log).
SKIP='^TestProcessMetrics$'
# Tests that re-execute their binary (sockfile's TestTwoProcessesNeverTakeEachOthersSocket)
# do it through $CSI_REGISTRAR_TEST_EXEC, set to the emulator below; no test of
# PKGS runs `go build` or `go run`.

emulator() { # GOARCH -> qemu-user's program for it
  case "$1" in
    amd64) echo qemu-x86_64 ;; arm) echo qemu-arm ;; arm64) echo qemu-aarch64 ;;
    ppc64le) echo qemu-ppc64le ;; s390x) echo qemu-s390x ;;
    *) echo "test-platforms: GOARCH $1 is no platform of a release (amd64 arm arm64 ppc64le s390x)" >&2; return 2 ;;
  esac
}
host=$("$GO" env GOHOSTARCH)
if [[ -z "${PLATFORMS:-}" ]]; then
  PLATFORMS=""
  for a in amd64 arm arm64 ppc64le s390x; do [[ "$a" == "$host" ]] || PLATFORMS+="$a "; done
fi
for a in $PLATFORMS; do emulator "$a" >/dev/null; done

start=$(date +%s)
bash kind/localnode/install-deps.sh qemu-user
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
rm -f "$OUT"/*.log

build_env() { # GOARCH -> env assignments for a static build
  echo "CGO_ENABLED=0 GOOS=linux GOARCH=$1"
  [[ "$1" != arm ]] || echo "GOARM=7"
}

# Builds: one at a time (they use every core), before any run.
for a in $PLATFORMS; do
  echo "building linux/$a: csi-registrar and ${#PKGS[@]} test binaries"
  # shellcheck disable=SC2046
  env $(build_env "$a") "$GO" build -trimpath -tags "$TAGS" -ldflags "$LDFLAGS" -o "$OUT/csi-registrar-linux-$a" ./cmd/csi-registrar
  for p in "${PKGS[@]}"; do
    # shellcheck disable=SC2046
    env $(build_env "$a") "$GO" test -c -trimpath -o "$OUT/$(basename "$p").$a.test" "$p"
  done
done
built=$(date +%s)

# Runs: the platforms side by side (the emulated tests mostly wait on sockets
# and timers), each platform's packages one after the other.
run_platform() {
  local a=$1 emu log rc=0
  emu=$(command -v "$(emulator "$a")")
  log="$OUT/$a.log"
  {
    out=$("$emu" "$OUT/csi-registrar-linux-$a" --version 2>&1) || rc=1
    if [[ "$out" != "csi-registrar $VERSION" ]]; then
      echo "FAIL linux/$a: $emu csi-registrar --version said \"$out\", want \"csi-registrar $VERSION\""; rc=1
    else
      echo "ok   linux/$a: $(basename "$emu") csi-registrar --version: $out"
    fi
    for p in "${PKGS[@]}"; do
      local t0 t1 plog="$OUT/$(basename "$p").$a.log"
      t0=$(date +%s)
      if (cd "$p" && CSI_REGISTRAR_TEST_GOARCH=$a CSI_REGISTRAR_TEST_EXEC=$emu \
            "$emu" "$OUT/$(basename "$p").$a.test" -test.count=1 -test.timeout=10m -test.skip "$SKIP") >"$plog" 2>&1; then
        t1=$(date +%s)
        if grep -q "^platformtest: .* GOARCH=$a " "$plog"; then
          echo "ok   linux/$a: $p ($((t1 - t0)) s)"
        else
          echo "FAIL linux/$a: $p passed but printed no platformtest line for GOARCH=$a ($plog)"; rc=1
        fi
      else
        echo "FAIL linux/$a: $p ($plog):"; { grep -E '^(--- FAIL|panic|FAIL|\s+\S+_test\.go:[0-9]+:)' "$plog" || tail -5 "$plog"; } | head -20; rc=1
      fi
      grep -h '^platformtest: \|^kubeletversion: ' "$plog" || true
    done
  } >"$log" 2>&1
  return $rc
}

pids=() rc=0
for a in $PLATFORMS; do run_platform "$a" & pids+=("$!"); done
for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
for a in $PLATFORMS; do cat "$OUT/$a.log"; done
end=$(date +%s)
echo "make test-platforms ($PLATFORMS): builds $((built - start)) s, emulated runs $((end - built)) s, total $((end - start)) s; skipped under emulation: $SKIP"
exit $rc
