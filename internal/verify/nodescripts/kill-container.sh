# SIGKILL the init process of the container whose ID is $1 (without the
# runtime prefix): the process in its cgroup whose parent is not. Run by the
# node pod's own sh (hostPID). Prints the pid killed.
id=$1
in_container() { grep -q "$id" "/proc/$1/cgroup" 2>/dev/null; }
for p in /proc/[0-9]*; do
  pid=${p#/proc/}
  in_container "$pid" || continue
  ppid=$(awk '/^PPid:/ {print $2}' "$p/status" 2>/dev/null)
  in_container "$ppid" && continue
  kill -KILL "$pid" && echo "$pid" && exit 0
done
echo "no process of container $id on the node (tried: /proc/<pid>/cgroup of every process)" >&2
exit 3
