#!/usr/bin/env bash
# RAID benchmarks (issue 10, seeds 002 and 003). Root only (FUSE, loop
# devices and mounts for postmark; iozone and xor need no root but share
# the script). One mode per run, each its own raw file:
#
#   sudo scripts/bench/raid.sh iozone [ROUNDS] [RATE] [DATASET] [THREADS]   # defaults: 2 100mbit 4Mi 1,8
#   scripts/bench/raid.sh xor [ROUNDS]                                      # default 5
#   sudo scripts/bench/raid.sh postmark [ROUNDS] [INSTANCES] [TRANSACTIONS]  # defaults: 2 1,2,3,4,5 2000
#
# iozone (seed 002): a single target vs RAID-0 over 2, 3, 4 targets and
# RAID-5 over 3, 4 targets. Every target is its own `tristore serve`
# process behind its own emulated link (netem's TCP proxy at RATE each
# way, so target bandwidth is the bottleneck), the array is built by the
# raid package over our initiator's sessions, and bench's iozone suite runs
# on the raw device: sequential and random write and read of DATASET in
# 4 ... 64 KiB requests, by THREADS threads; the figure is the mean over
# the request sizes of iozone's four-way average (test/raid
# TestBenchIozone). The layouts run in an order rotated per round.
#
# xor (seed 002): go test -bench XOR -cpu 1 ./raid: RAID-5 parity XOR of
# 64 KiB buffers on one core, in GB/s.
#
# postmark (seed 003): 1 ... 5 concurrent instances of Debian's postmark
# binary on `tristore serve --disks D1,...,D5 --layout L` for L in
# independent, raid0, raid5 (five directories on one local file system,
# each holding one member file): independent = five volumes, one per
# disk, each its own ext4, instance i on volume i; raid0/raid5 = one volume
# striped over the five files, one ext4, instance i in its own directory.
# Every volume is mounted through the gateway with `tristore mount
# iscsi://` + loop, as a user would. The figure is the sum of the
# instances' transactions per second.
set -euo pipefail
MODE=${1:-}
case "$MODE" in
iozone | xor | postmark) ;;
*)
  echo "usage: $0 iozone|xor|postmark [ROUNDS] ..." >&2
  exit 2
  ;;
esac
BENCH_NAME=raid-$MODE
. "$(dirname "$0")/lib.sh"
cd "$BENCH_ROOT"
WORK=""
MNTS=()
LOOPS=()
PIDS=()
cleanup() {
  local m l p
  for m in "${MNTS[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true; done
  for l in "${LOOPS[@]}"; do losetup -d "$l" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  [ -n "$WORK" ] && rm -rf "$WORK"
}
WORK=$(mktemp -d /var/tmp/raid-bench.XXXXXX)
bench_start "$WORK"

run_iozone() {
  local rounds=${1:-2} rate=${2:-100mbit} ds=${3:-4Mi} threads=${4:-1,8}
  (cd "$SRC" && go test -c -o "$WORK/raid.test" ./test/raid) || bench_fail "cannot build the test/raid test binary"
  local sides=(single raid0-2 raid0-3 raid0-4 raid5-3 raid5-4)
  bench_machine "sudo scripts/bench/raid.sh iozone $rounds $rate $ds $threads" -ours single \
    -note "Each target: a tristore serve process behind its own emulated link (netem TCP proxy, $rate each way); array built by the raid package (64 KiB chunk) over tristore's initiator; bench iozone on the raw device, data set $ds, requests 4/8/16/32/64 KiB; MB/s = 10^6 bytes/s, the mean over the request sizes; ratio = single / layout (below 1: the layout is faster)."
  local r s layout n lb t
  for r in $(seq 1 "$rounds"); do
    for s in $(bench_order "$r" "${sides[@]}"); do
      layout=${s%-*}
      n=${s#*-}
      [ "$s" = single ] && n=1
      echo "round $r: $s" >&2
      lb=$(bench_load)
      rm -f "$WORK/res.json"
      (cd "$SRC" && RAID_BENCH_OUT="$WORK/res.json" RAID_BENCH_LAYOUT=$layout RAID_BENCH_TARGETS=$n RAID_BENCH_RATE=$rate \
        RAID_BENCH_DATASET=$ds RAID_BENCH_THREADS=$threads "$WORK/raid.test" -test.run '^TestBenchIozone$' -test.count 1 \
        >"$WORK/run.log" 2>&1) || bench_fail "$s failed in round $r: $(tail -5 "$WORK/run.log")"
      args=()
      for t in ${threads//,/ }; do
        while IFS=$'\t' read -r name val; do
          args+=(-v "$t thread(s): $name, MB/s=$val")
        done < <(python3 -c '
import json, sys
res, t = json.load(open(sys.argv[1])), sys.argv[2]
m = res["mean"][t]
names = {"Average": "iozone average", "Write": "write", "Read": "read", "RandWrite": "random write", "RandRead": "random read"}
for k in ("Average", "Write", "Read", "RandWrite", "RandRead"):
    print(names[k] + " (mean over 4-64 KiB)", m[k], sep="\t")
for a in res["averages"]:
    if str(a["threads"]) == t and a["unit"] == 65536:
        print("iozone average, 64 KiB requests", a["average_mb_per_s"], sep="\t")
        print("read, 64 KiB requests", a["read_mb_per_s"], sep="\t")
        print("write, 64 KiB requests", a["write_mb_per_s"], sep="\t")' "$WORK/res.json" "$t")
      done
      bench_record "$r" "$s" "$lb" -json "$WORK/res.json" "${args[@]}"
    done
  done
}

run_xor() {
  local rounds=${1:-5} r lb out line mbs cpu iters=100000
  bench_need_cmd /usr/bin/time "apt-get install time"
  (cd "$SRC" && go test -c -o "$WORK/raidpkg.test" ./raid) || bench_fail "cannot build the raid test binary"
  bench_machine "scripts/bench/raid.sh xor $rounds" -ours xor \
    -note "go test -run '^\$' -bench '^BenchmarkXOR\$' -benchtime ${iters}x -cpu 1 ./raid: dst ^= src over 64 KiB buffers (in cache). Wall GB/s is Go's figure (a share of a core under this load); CPU GB/s = bytes XORed / user+system CPU seconds of the benchmark process, i.e. one core's rate. GB/s = 10^9 bytes/s."
  for r in $(seq 1 "$rounds"); do
    lb=$(bench_load)
    out=$(/usr/bin/time -f 'cpu %U %S' "$WORK/raidpkg.test" -test.run '^$' -test.bench '^BenchmarkXOR$' -test.benchtime ${iters}x -test.cpu 1 2>&1) ||
      bench_fail "Go benchmark failed: $(echo "$out" | tail -3)"
    line=$(echo "$out" | grep '^BenchmarkXOR' | tail -1)
    mbs=$(echo "$line" | awk '{for (i = 2; i <= NF; i++) if ($i == "MB/s") print $(i-1)}')
    cpu=$(echo "$out" | awk '$1 == "cpu" {print $2 + $3}')
    [ -n "$mbs" ] && [ -n "$cpu" ] || bench_fail "Go benchmark printed no MB/s or CPU time: $out"
    bench_record "$r" xor "$lb" -v "RAID-5 parity XOR, 64 KiB, wall GB/s=$(python3 -c "print($mbs / 1000)")" \
      -v "RAID-5 parity XOR, 64 KiB, GB/s per CPU second (one core)=$(python3 -c "print(($iters + 1) * 65536 / $cpu / 1e9)")"
  done
}

# pm_up LAYOUT: serve --disks over five directories with LAYOUT, its
# volumes mounted (tristore mount iscsi:// + loop + ext4) on $WORK/pm/mnt-*;
# sets PM_DIRS (the instance directories' parents, one per volume).
pm_up() {
  local layout=$1 base=$WORK/pm-$1 i vols=() v addr
  rm -rf "$base"
  mkdir -p "$base/data"
  local disks=()
  for i in 1 2 3 4 5; do
    mkdir -p "$base/disk$i"
    disks+=("$base/disk$i")
  done
  if [ "$layout" = independent ]; then
    for i in 1 2 3 4 5; do vols+=("v$i=256Mi"); done
  else
    vols=("v1=1Gi")
  fi
  local vflags=()
  for v in "${vols[@]}"; do vflags+=(--disk-volume "$v"); done
  XDG_CONFIG_HOME=$WORK/cfg "$WORK/tristore" serve --data "$base/data" --ready-file "$base/ready.json" \
    --iscsi-addr 127.0.0.1:0 --s3-addr off --nfs-addr off --admin-addr off \
    --disks "$(IFS=,; echo "${disks[*]}")" --layout "$layout" "${vflags[@]}" >"$base/serve.log" 2>&1 &
  PIDS+=($!)
  for i in $(seq 1 300); do [ -s "$base/ready.json" ] && break; sleep 0.1; done
  addr=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["iscsi"])' "$base/ready.json") ||
    bench_fail "serve --layout $layout did not start: $(tail -5 "$base/serve.log")"
  PM_DIRS=()
  for v in "${vols[@]}"; do
    v=${v%%=*}
    mkdir -p "$base/fuse-$v" "$base/mnt-$v"
    XDG_CONFIG_HOME=$WORK/cfg "$WORK/tristore" mount "iscsi://$addr/iqn.2026-11.io.tristore:-disk:$v/0" "$base/fuse-$v" \
      >"$base/mount-$v.log" 2>&1 &
    PIDS+=($!)
    for i in $(seq 1 300); do [ -e "$base/fuse-$v/lun" ] && break; sleep 0.1; done
    [ -e "$base/fuse-$v/lun" ] || bench_fail "mount of $v failed: $(tail -5 "$base/mount-$v.log")"
    local l
    l=$(losetup -f --show "$base/fuse-$v/lun")
    LOOPS+=("$l")
    mkfs.ext4 -q -F -E nodiscard,lazy_itable_init=1,lazy_journal_init=1 "$l"
    mount -t ext4 "$l" "$base/mnt-$v"
    MNTS+=("$base/mnt-$v")
    PM_DIRS+=("$base/mnt-$v")
  done
}

# pm_down: unmount everything pm_up made and stop its processes.
pm_down() {
  local m l p
  for m in "${MNTS[@]}"; do umount "$m" || umount -l "$m"; done
  for l in "${LOOPS[@]}"; do losetup -d "$l" || true; done
  sleep 0.5
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  MNTS=() LOOPS=() PIDS=()
}

run_postmark() {
  local rounds=${1:-2} instances=${2:-1,2,3,4,5} tx=${3:-2000}
  bench_need_cmd postmark "apt-get install postmark"
  bench_need_cmd mkfs.ext4 "apt-get install e2fsprogs"
  local pmv
  pmv=$(dpkg-query -W -f '${Version}' postmark 2>/dev/null || echo unknown)
  bench_machine "sudo scripts/bench/raid.sh postmark $rounds $instances $tx" -ours independent -peer "postmark=$pmv" \
    -note "tristore serve --disks (five directories on one local file system, /var/tmp) --layout L; independent: five 256 MiB volumes, one per disk, each its own ext4, instance i on volume i; raid0/raid5: one 1 GiB volume striped over the five (64 KiB chunk), one ext4, instance i in its own directory. Each volume mounted through tristore mount iscsi:// + loop. PostMark (Debian postmark; prints v1.51): 500 files of 500 B-10 KB, $tx transactions per instance, seed 42+i; figure = instances x $tx / wall seconds from start until every instance ended and each file system was synced (creation and deletion included); ratio = independent / layout."
  local r layout n i t0 t1 lb
  for r in $(seq 1 "$rounds"); do
    for layout in $(bench_order "$r" independent raid0 raid5); do
      echo "round $r: $layout" >&2
      pm_up "$layout"
      local args=()
      for n in ${instances//,/ }; do
        lb=$(bench_load)
        local pids=()
        t0=$(date +%s.%N)
        for i in $(seq 1 "$n"); do
          local d=${PM_DIRS[$(((i - 1) % ${#PM_DIRS[@]}))]}/pm$i
          mkdir -p "$d"
          printf 'set location %s\nset number 500\nset size 500 10000\nset transactions %s\nset seed %s\nrun\nquit\n' \
            "$d" "$tx" $((42 + i)) >"$WORK/pm$i.cfg"
          postmark "$WORK/pm$i.cfg" >"$WORK/pm$i.out" 2>&1 &
          pids+=($!)
        done
        for p in "${pids[@]}"; do wait "$p" || bench_fail "postmark failed ($layout, $n instances): $(tail -3 "$WORK"/pm*.out)"; done
        for d in "${PM_DIRS[@]}"; do sync -f "$d"; done
        t1=$(date +%s.%N)
        args+=(-v "$n instance(s): transactions/s=$(python3 -c "print($n * $tx / ($t1 - $t0))")")
      done
      bench_record "$r" "$layout" "$lb" "${args[@]}"
      pm_down
    done
  done
}

case "$MODE" in
iozone) run_iozone "${@:2}" ;;
xor) run_xor "${@:2}" ;;
postmark) run_postmark "${@:2}" ;;
esac
bench_table
