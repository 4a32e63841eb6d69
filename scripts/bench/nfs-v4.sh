#!/usr/bin/env bash
# NFS v3 vs v4.1 on an emulated link (issue 16): round trips and time per
# operation for create, stat and open-read-close of 4 KiB files and one
# large read, tristore's server vs nfs-ganesha (VFS FSAL), both versions,
# same link, same client, same run, interleaved rounds. Root only.
#
#   sudo scripts/bench/nfs-v4.sh                 # ROUNDS=3 PRESET=realistic FILES=50 BIG=64MiB
#   ROUNDS=2 PRESET=lan FILES=200 sudo scripts/bench/nfs-v4.sh
#
# Per round and server (the order rotates by one per round), one `tristore
# netem run --preset PRESET` starts the server in the server namespace
# (ganesha in its own mount namespace with its own rpcbind, /run and
# /var/lib/nfs) and runs `tristore nfs bench-ops` from the client
# namespace, once per version (the order of versions rotates too). The
# client does one operation at a time, so on a 50 ms link the time per
# operation is about the round trips per operation times the RTT: seed
# 000's claim that v4's COMPOUND needs fewer round trips is the "round
# trips/op" rows. Raw rounds: docs/bench/raw/nfs-v4-<time>.jsonl.
set -euo pipefail
BENCH_NAME=nfs-v4
. "$(dirname "$0")/lib.sh"
cd "$BENCH_ROOT"
ROUNDS=${ROUNDS:-3}
PRESET=${PRESET:-realistic}
FILES=${FILES:-50}
BIG=${BIG:-64MiB}
WORK=""
cleanup() { if [ -n "$WORK" ]; then rm -rf "$WORK"; fi; }
bench_need_root "network namespaces, ganesha"
bench_need_cmd ganesha.nfsd "apt-get install nfs-ganesha nfs-ganesha-vfs"
bench_need_cmd rpcbind "apt-get install rpcbind"
bench_need_cmd python3 "apt-get install python3"
for c in ip unshare; do bench_need_cmd "$c" "apt-get install iproute2 util-linux"; done

WORK=$(mktemp -d "${BENCH_DIR:-/var/tmp}/tristore-nfs-v4.XXXXXX")
chmod 755 "$WORK"
bench_start "$WORK"
mkdir -p "$WORK/data" "$WORK/ganesha/export"
cat >"$WORK/ganesha/ganesha.conf" <<EOC
NFS_CORE_PARAM {
	NFS_Port = 2049; MNT_Port = 20048; NLM_Port = 32803; Rquota_Port = 875;
	Protocols = 3,4; Enable_UDP = false; Enable_NLM = false; Enable_RQUOTA = false;
}
NFSV4 { Graceless = true; }
NFS_KRB5 { Active_krb5 = false; }
EXPORT {
	Export_Id = 1; Path = $WORK/ganesha/export; Pseudo = /export;
	Access_Type = RW; Squash = No_Root_Squash; Protocols = 3,4; Transports = TCP; SecType = sys;
	FSAL { Name = VFS; }
}
EOC
# The ganesha server command (run by netem in the server namespace): a
# private mount namespace so its rpcbind and state touch nothing else.
cat >"$WORK/ganesha.sh" <<EOS
#!/usr/bin/env bash
exec unshare --mount --propagation private bash -c '
  set -e
  mount -t tmpfs tmpfs /run
  mount -t tmpfs tmpfs /var/lib/nfs
  mkdir -p /var/lib/nfs/ganesha /run/ganesha
  rpcbind -f &
  for i in \$(seq 1 100); do [ -S /run/rpcbind.sock ] && break; sleep 0.1; done
  exec ganesha.nfsd -F -f $WORK/ganesha/ganesha.conf -L $WORK/ganesha/ganesha.log -p $WORK/ganesha/ganesha.pid
'
EOS
chmod +x "$WORK/ganesha.sh"
# The client command: bench-ops once per version, JSON per run.
cat >"$WORK/client.sh" <<'EOS'
#!/usr/bin/env bash
set -euo pipefail
for v in $VERSIONS; do
  case "$SIDE/$v" in
  tristore/3) url="nfs://192.0.2.2:2049/" ;;
  tristore/4.1) url="nfs://192.0.2.2:2049/" ;;
  ganesha/3) url="nfs://192.0.2.2:2049$GEXPORT?mountport=20048" ;;
  ganesha/4.1) url="nfs://192.0.2.2:2049/export" ;;
  esac
  "$BIN" nfs bench-ops --json --version "$v" --files "$FILES" --big "$BIG" "$url" >"$OUTDIR/$SIDE-$v.json"
done
EOS
chmod +x "$WORK/client.sh"
ver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo unknown; }
bench_machine "sudo ROUNDS=$ROUNDS PRESET=$PRESET FILES=$FILES BIG=$BIG scripts/bench/nfs-v4.sh" -ours tristore-v4.1 \
  -peer "ganesha=$(ver nfs-ganesha) (VFS FSAL)" \
  -note "tristore netem run --preset $PRESET between one client and one server namespace; the server is tristore serve (this commit) or ganesha on the same $(findmnt -no FSTYPE -T "$WORK") file system. Client: tristore nfs bench-ops (this commit), one operation at a time: $FILES files of 4 KiB created (v3 CREATE+WRITE FILE_SYNC, v4.1 OPEN+WRITE+CLOSE), stat (v3 LOOKUP, v4.1 PUTFH+LOOKUP+GETATTR), open-read-close (v3 LOOKUP+READ, v4.1 OPEN+READ+CLOSE), then one $BIG file written and read back with parallel READs (read timed)."

for r in $(seq 1 "$ROUNDS"); do
  for s in $(bench_order "$r" tristore ganesha); do
    echo "round $r: $s" >&2
    rm -rf "$WORK/data" "$WORK/ganesha/export"
    mkdir -p "$WORK/data" "$WORK/ganesha/export" "$WORK/out"
    if [ "$s" = tristore ]; then
      scmd="exec $WORK/tristore serve --data $WORK/data --nfs-addr 192.0.2.2:2049 --s3-addr off --iscsi-addr off --admin-addr off --log-level warn --nfs-export /=rw,clients=192.0.2.0/24,no_root_squash"
    else
      scmd="exec $WORK/ganesha.sh"
    fi
    lb=$(bench_load)
    SIDE=$s VERSIONS="$(bench_order "$r" 3 4.1)" BIN=$WORK/tristore FILES=$FILES BIG=$BIG OUTDIR=$WORK/out GEXPORT=$WORK/ganesha/export \
      "$WORK/tristore" netem run --preset "$PRESET" --server-cmd "$scmd" --server-ready 192.0.2.2:2049 \
      --server-ready-timeout 60s --counters-file "$WORK/counters.txt" \
      -- "$WORK/client.sh" >"$WORK/run.log" 2>&1 || bench_fail "$s, round $r failed: $(tail -5 "$WORK/run.log")"
    for v in 3 4.1; do
      f="$WORK/out/$s-$v.json"
      args=()
      for op in create stat open-read-close "read-$BIG"; do
        read -r ms rt < <(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
o = [x for x in d["ops"] if x["op"] == sys.argv[2]][0]
print(o["ms_per_op"], o["round_trips_per_op"])' "$f" "$op")
        args+=(-v "$op: ms/op=$ms" -v "$op: round trips/op=$rt")
      done
      bench_record "$r" "$s-v$v" "$lb" "${args[@]}"
    done
  done
done
bench_table
