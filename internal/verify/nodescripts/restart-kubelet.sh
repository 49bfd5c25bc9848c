# Restart the node's kubelet; run by the node pod's own sh (busybox), with
# hostPID and the host's root at /host. Prints one line:
#   restarting <old pid> systemd|supervisor <parent>
# and starts the restart detached (setsid, after a moment): the exec stream
# this runs in goes through the kubelet and dies with it.
pids=
for p in /proc/[0-9]*; do
  [ "$(cat "$p/comm" 2>/dev/null)" = kubelet ] && pids="$pids ${p#/proc/}"
done
set -- $pids
[ $# -eq 1 ] || { echo "found $# processes named kubelet on the node ($pids): cannot tell which to restart" >&2; exit 3; }
pid=$1
ns="nsenter -t 1 -m -u -i -n -p --"
if [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ] && $ns systemctl is-active --quiet kubelet 2>/dev/null; then
  setsid sh -c "sleep 1; $ns systemctl restart kubelet" </dev/null >/dev/null 2>&1 &
  echo "restarting $pid systemd"
  exit 0
fi
ppid=$(awk '/^PPid:/ {print $2}' "/proc/$pid/status")
parent=$(tr '\0' ' ' <"/proc/$ppid/cmdline" 2>/dev/null)
case "$parent" in
  *supervis* | *runsv* | *s6-supervise*) ;;
  *)
    echo "the kubelet (pid $pid) is neither a systemd unit (PID 1 is $(cat /proc/1/comm 2>/dev/null)) nor run by a supervisor that starts it again (its parent, pid $ppid, is: ${parent:-gone}); killing it would leave the node without a kubelet. Fix: run the kubelet under systemd or a restart loop (kind/localnode/kubelet-supervisor.sh)" >&2
    exit 3 ;;
esac
setsid sh -c "sleep 1; kill -TERM $pid" </dev/null >/dev/null 2>&1 &
echo "restarting $pid supervisor $ppid"
