# sockowner: which processes listen on the unix socket at the node path $1.
# Run by sh on the node (the local node: this host; kind: inside the node's
# container). Output, one fact a line:
#   target <dev:inode>       the socket file's identity (or: nofile, notsocket)
#   scanned <procs> <socks>  processes with a socket fd, listening unix sockets with a path among them
#   owner <pid> <container-id or -> <comm>
# A socket is the file when its path, seen through /proc/<pid>/root (the
# owner's mount namespace), has the file's device and inode.
target=$1
if [ ! -e "$target" ]; then echo nofile; exit 0; fi
if [ ! -S "$target" ]; then echo notsocket; exit 0; fi
want=$(stat -L -c '%d:%i' "$target") || exit 1
echo "target $want"
tmp=$(mktemp) || exit 1
trap 'rm -f "$tmp"' EXIT
# pid inode, for every socket fd of every process.
find /proc/[0-9]*/fd -mindepth 1 -maxdepth 1 -lname 'socket:*' -printf '%h %l\n' 2>/dev/null |
  sed -n 's#^/proc/\([0-9]*\)/fd socket:\[\([0-9]*\)\]$#\1 \2#p' | sort -u >"$tmp"
procs=0; socks=0
for pid in $(cut -d' ' -f1 "$tmp" | uniq); do
  procs=$((procs + 1))
  # The listening (flag 00010000) unix sockets of this process's network
  # namespace with a path, joined with the process's socket inodes.
  paths=$(awk -v pid="$pid" 'FNR == NR { if ($1 == pid) mine[$2] = 1; next }
    FNR > 1 && $4 == "00010000" && NF >= 8 && ($7 in mine) && substr($8, 1, 1) == "/" { print $8 }' "$tmp" "/proc/$pid/net/unix" 2>/dev/null)
  for p in $paths; do
    socks=$((socks + 1))
    got=$(stat -L -c '%d:%i' "/proc/$pid/root$p" 2>/dev/null) || continue
    [ "$got" = "$want" ] || continue
    cid=$(grep -o '[0-9a-f]\{64\}' "/proc/$pid/cgroup" 2>/dev/null | tail -n 1)
    echo "owner $pid ${cid:--} $(cat "/proc/$pid/comm" 2>/dev/null)"
    break
  done
done
echo "scanned $procs $socks"
