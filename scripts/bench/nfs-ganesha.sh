#!/usr/bin/env bash
# Start or stop nfs-ganesha (VFS FSAL) + rpcbind inside a private network
# namespace and a private mount namespace (own /run and /var/lib/nfs), so
# rpcbind's listen-everywhere socket and ganesha's state touch nothing else.
#
#   scripts/bench/nfs-ganesha.sh start NS WORKDIR   # exports WORKDIR/export
#   scripts/bench/nfs-ganesha.sh stop  NS WORKDIR
#
# Inside NS: NFS on 127.0.0.1:2049, MOUNT on 127.0.0.1:20048; the NFSv3
# mount path is WORKDIR/export. Run clients with `ip netns exec NS ...`.
# Needs root, nfs-ganesha, nfs-ganesha-vfs, rpcbind, iproute2, util-linux.
set -euo pipefail
cmd=${1:?start|stop}
NS=${2:?namespace name}
WORK=${3:?work directory}

case "$cmd" in
start)
  mkdir -p "$WORK/export"
  WORK=$(cd "$WORK" && pwd)
  cat >"$WORK/ganesha.conf" <<EOF
NFS_CORE_PARAM {
	NFS_Port = 2049; MNT_Port = 20048; NLM_Port = 32803; Rquota_Port = 875;
	Protocols = 3,4; Enable_UDP = false; Enable_NLM = false; Enable_RQUOTA = false;
}
NFSV4 { Graceless = true; }
NFS_KRB5 { Active_krb5 = false; }
EXPORT {
	Export_Id = 1; Path = $WORK/export; Pseudo = /export;
	Access_Type = RW; Squash = No_Root_Squash; Protocols = 3,4; Transports = TCP; SecType = sys;
	FSAL { Name = VFS; }
}
EOF
  ip netns add "$NS"
  ip netns exec "$NS" ip link set lo up
  # Bind_addr is left out: ganesha resolves it with AI_ADDRCONFIG, which
  # fails in a namespace with only lo; the namespace is private anyway.
  setsid ip netns exec "$NS" unshare --mount --propagation private bash -c "
    set -e
    mount -t tmpfs tmpfs /run
    mount -t tmpfs tmpfs /var/lib/nfs
    mkdir -p /var/lib/nfs/ganesha /run/ganesha
    rpcbind -f & echo \$! > '$WORK/rpcbind.pid'
    for i in \$(seq 1 100); do [ -S /run/rpcbind.sock ] && break; sleep 0.1; done
    exec ganesha.nfsd -F -f '$WORK/ganesha.conf' -L '$WORK/ganesha.log' -p '$WORK/ganesha.pid'
  " >"$WORK/ganesha.out" 2>&1 &
  echo $! >"$WORK/ganesha.sh.pid"
  for i in $(seq 1 300); do
    if ip netns exec "$NS" bash -c 'exec 3<>/dev/tcp/127.0.0.1/2049 && exec 4<>/dev/tcp/127.0.0.1/20048' 2>/dev/null; then
      echo "ganesha up in netns $NS, export $WORK/export"
      exit 0
    fi
    sleep 0.2
  done
  echo "ganesha did not start; log:" >&2
  tail -20 "$WORK/ganesha.log" >&2 || true
  exit 1
  ;;
stop)
  # Kill only what runs inside our own namespace, then delete it.
  for i in $(seq 1 50); do
    pids=$(ip netns pids "$NS" 2>/dev/null || true)
    [ -z "$pids" ] && break
    if [ "$i" -lt 25 ]; then kill $pids 2>/dev/null || true; else kill -9 $pids 2>/dev/null || true; fi
    sleep 0.2
  done
  ip netns del "$NS" 2>/dev/null || true
  ;;
*)
  echo "usage: $0 start|stop NS WORKDIR" >&2
  exit 2
  ;;
esac
