# The pid of the node's kubelet process, or "none". Run by the node pod's own sh (hostPID).
pid=none
for p in /proc/[0-9]*; do
  [ "$(cat "$p/comm" 2>/dev/null)" = kubelet ] && pid=${p#/proc/}
done
echo "$pid"
