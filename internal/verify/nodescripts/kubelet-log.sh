# The last $1 lines of the node's kubelet log, run by the node pod's own sh:
# the journal of the kubelet unit where systemd runs it, else the file its
# standard error goes to (read through the host's root at /host; with the
# file of the previous run, <file>.1, first when the current one is short).
n=$1
ns="nsenter -t 1 -m -u -i -n -p --"
if [ "$(cat /proc/1/comm 2>/dev/null)" = systemd ] && $ns systemctl is-active --quiet kubelet 2>/dev/null; then
  exec $ns journalctl -u kubelet --no-pager -n "$n"
fi
pid=
for p in /proc/[0-9]*; do
  [ "$(cat "$p/comm" 2>/dev/null)" = kubelet ] && pid=${p#/proc/}
done
[ -n "$pid" ] || { echo "no kubelet process on the node (tried: /proc/*/comm)" >&2; exit 3; }
f=$(readlink "/proc/$pid/fd/2")
case "$f" in
  /*) ;;
  *) echo "the kubelet (pid $pid) logs neither to the journal of a systemd unit nor to a file (its stderr is ${f:-unknown})" >&2; exit 3 ;;
esac
[ -f "/host$f" ] || { echo "the kubelet's log file $f is not at /host$f" >&2; exit 3; }
if [ "$(wc -l <"/host$f")" -lt "$n" ] && [ -f "/host$f.1" ]; then
  { cat "/host$f.1"; echo "---- kubelet restarted: $f ----"; cat "/host$f"; } | tail -n "$n"
else
  tail -n "$n" "/host$f"
fi
