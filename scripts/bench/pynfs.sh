#!/usr/bin/env bash
# NFSv4 conformance (issue 16): pynfs's nfs4.0 and nfs4.1 server test runners
# against tristore and against nfs-ganesha (VFS FSAL) in the same run.
#
#   sudo scripts/bench/pynfs.sh [--server tristore|ganesha|both] [--suite 4.0|4.1|both]
#                               [--timeout SECONDS] [--tests "CODES OR FLAGS"]
#   scripts/bench/pynfs.sh --report docs/bench/raw/pynfs-*.json   # table + diff of earlier runs
#
# Defaults: both servers, both suites, 840 s per suite and server, tests "all".
# ganesha 4.3's nfs4.0 `all` took 567 s on the 2-core VM at load ~5 (lease 10 s;
# the timed tests sleep 1.5-2 leases each); to keep a locked run under 15 min run
# one server and suite per invocation:
#   flock /tmp/bench.lock scripts/bench/pynfs.sh --server ganesha --suite 4.0
# For each server and suite it writes docs/bench/raw/pynfs-<stamp>-<server>-<suite>.json
# (BENCH_RAW_DIR overrides the directory): the command, the commit built,
# pynfs's commit, load average before/after, duration, exit code, whether the
# timeout hit, pass/fail/warn/skip counts and every test's result and message.
# Then it prints passes per suite per server and, with both servers, the tests
# ganesha passes that tristore does not (PASS or WARNING counts as passed).
#
# pynfs is not in this repository and this script does not build it. It
# needs a built pynfs tree at $PYNFS_DIR (default /work/pynfs): the public
# repository linux-nfs/pynfs (a git clone of https://github.com/linux-nfs/pynfs),
# built as its README says (./setup.py build in the tree, with python3 and the
# `ply` module; the `gssapi` module is optional, without it only AUTH_SYS
# runs). Python comes from $PYNFS_DIR/.venv if present, else python3.
#
# Servers, each in its own private network namespace (nothing listens outside it):
#   ganesha:  ganesha.nfsd, NFSv4 only (Protocols = 4, minor versions 0-2),
#             127.0.0.1:$GANESHA_PORT (default 20490), export Pseudo = /pynfs,
#             AUTH_SYS, no_root_squash, Graceless, Lease_Lifetime = $PYNFS_LEASE
#             (default 10 s); own tmpfs /run and /var/lib/nfs; no rpcbind.
#             Delegations off (ganesha's default), so its DELEG* tests fail; with
#             Delegations on (NFSV4 and EXPORT) 4.3's VFS FSAL still granted none.
#   tristore: `tristore serve`, NFS on 127.0.0.1:$TRISTORE_PORT (default 20491),
#             export "/=rw,clients=127.0.0.0/8,no_root_squash", bucket /pynfs
#             created before the start. Built from `git archive $BENCH_REV`
#             (default HEAD; BENCH_REV=worktree builds the working tree), or
#             TRISTORE_BIN=/path/to/tristore. TRISTORE_ADDR=HOST:PORT skips the
#             start and tests a server that is already running (pynfs then runs
#             in the caller's namespace; its export must have a writable /pynfs).
#             TRISTORE_ARGS adds flags to `tristore serve`.
# pynfs URLs: HOST:PORT/pynfs/v40 and HOST:PORT/pynfs/v41 with --maketree
# (pynfs creates <path>/tmp and <path>/tree itself); nfs4.1 runs with
# --minorversion=1 (its default is 2). PYNFS_FLAGS adds testserver.py options.
# The timeout sends SIGINT (pynfs then prints the results it has), SIGKILL
# 60 s later; a timed-out suite is recorded with timed_out=true.
# Servers and the work directory (BENCH_DIR, default /var/tmp) are removed on
# exit; KEEP_WORK=1 keeps the directory (pynfs output, serve.log, ganesha.log).
# The exit status is 0 when every suite produced a result (failures are results).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"

CMDLINE="scripts/bench/pynfs.sh${*:+ $*}"
SERVERS="tristore ganesha"
SUITES="4.0 4.1"
TIMEOUT=${PYNFS_TIMEOUT:-840}
TESTS=${PYNFS_TESTS:-all}
while [ $# -gt 0 ]; do
  case "$1" in
  --server)
    case "${2:-}" in tristore | ganesha) SERVERS=$2 ;; both) SERVERS="tristore ganesha" ;; *) echo "--server tristore|ganesha|both" >&2; exit 2 ;; esac
    shift 2 ;;
  --suite)
    case "${2:-}" in 4.0 | 4.1) SUITES=$2 ;; both) SUITES="4.0 4.1" ;; *) echo "--suite 4.0|4.1|both" >&2; exit 2 ;; esac
    shift 2 ;;
  --timeout) TIMEOUT=${2:?}; shift 2 ;;
  --tests) TESTS=${2:?}; shift 2 ;;
  --report) REPORT=1; shift; break ;;
  -h | --help) sed -n '2,50p' "$0"; exit 0 ;;
  *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done

PYNFS_DIR=${PYNFS_DIR:-/work/pynfs}
LEASE=${PYNFS_LEASE:-10}
GANESHA_PORT=${GANESHA_PORT:-20490}
TRISTORE_PORT=${TRISTORE_PORT:-20491}
RAWDIR=${BENCH_RAW_DIR:-$ROOT/docs/bench/raw}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
for v in PYNFS_LEASE PYNFS_FLAGS PYNFS_TESTS PYNFS_TIMEOUT BENCH_REV TRISTORE_ARGS TRISTORE_ADDR; do
  if [ -n "${!v:-}" ]; then CMDLINE="$v='${!v}' $CMDLINE"; fi
done

# report RAW.json...: the passes table and the ganesha-passes-tristore-fails
# list (needs a tristore and a ganesha file of the same suite).
report() {
  python3 - "$@" <<'EOF'
import json, sys
recs = [json.load(open(f)) for f in sys.argv[1:]]
by = {(r["server"], r["suite"]): r for r in recs}
servers = sorted({r["server"] for r in recs}, key=lambda s: s != "tristore")
suites = sorted({r["suite"] for r in recs})
print("\npynfs results per suite (passed = PASS; warned = WARNING or UNSUPPORTED; skipped = OMIT, a dependency not met)")
print("| suite | " + " | ".join(servers) + " |")
print("|---|" + "--:|" * len(servers))
for su in suites:
    cells = []
    for s in servers:
        r = by.get((s, su))
        if not r:
            cells.append("-")
        elif not r["counts"]:
            cells.append("no result (exit %d%s)" % (r["exit_code"], ", timed out" if r["timed_out"] else ""))
        else:
            c = r["counts"]
            cells.append("%d passed +%d warned, %d failed, %d skipped; %.0f s%s" % (
                c["passed"], c["warned"], c["failed"], c["skipped"], r["duration_s"],
                ", TIMED OUT" if r["timed_out"] else ""))
    print("| nfs%s | " % su + " | ".join(cells) + " |")
ok = ("PASS", "WARNING")
for su in suites:
    g, t = by.get(("ganesha", su)), by.get(("tristore", su))
    if not g or not t:
        continue
    missing = sorted(c for c, v in g["tests"].items() if v["result"] in ok and t["tests"].get(c, {}).get("result") not in ok)
    print("\nnfs%s: %d tests ganesha passes that tristore does not:" % (su, len(missing)))
    for c in missing:
        v = t["tests"].get(c)
        print("  %-10s %-40s %s" % (c, g["tests"][c]["name"], (v["result"] + (": " + v.get("msg", "") if v.get("msg") else "")) if v else "no result")[:200])
bad = [r["server"] + " nfs" + r["suite"] for r in recs if not r["counts"]]
if bad:
    print("\nno result from: " + ", ".join(bad) + " (server did not answer or pynfs could not start; see output_tail in the raw files)")
    sys.exit(1)
EOF
}

fail() { echo "pynfs.sh: $*" >&2; exit 1; }

if [ -n "${REPORT:-}" ]; then
  [ $# -gt 0 ] || fail "--report needs raw files (docs/bench/raw/pynfs-*.json)"
  report "$@"
  exit
fi
[ "$(id -u)" -eq 0 ] || fail "needs root (network namespaces, ganesha)"
for c in ip unshare timeout; do command -v "$c" >/dev/null || fail "$c not found (apt-get install iproute2 util-linux coreutils)"; done
case " $SERVERS " in *" ganesha "*) command -v ganesha.nfsd >/dev/null || fail "ganesha.nfsd not found (apt-get install nfs-ganesha nfs-ganesha-vfs; scripts/deps.d/nfs-client.sh)" ;; esac
[ -x "$PYNFS_DIR/nfs4.0/testserver.py" ] && [ -x "$PYNFS_DIR/nfs4.1/testserver.py" ] ||
  fail "no pynfs at PYNFS_DIR=$PYNFS_DIR: git clone https://github.com/linux-nfs/pynfs there and build it as its README says (python3 with ply; ./setup.py build), see the header of this script"
PY=python3
[ -x "$PYNFS_DIR/.venv/bin/python3" ] && PY="$PYNFS_DIR/.venv/bin/python3"
(cd "$PYNFS_DIR/nfs4.1" && "$PY" -c 'import ply, xdrdef.nfs4_type' 2>/dev/null) ||
  fail "pynfs at $PYNFS_DIR is not built (or $PY lacks ply): build it as its README says (./setup.py build)"
PYNFS_COMMIT=$(git -C "$PYNFS_DIR" rev-parse HEAD 2>/dev/null || cat "$PYNFS_DIR/.source-commit" 2>/dev/null || echo unknown)

WORK=""
TS_PID=""
NS_G="tspynfs-g-$$"
NS_T="tspynfs-t-$$"
G_UP=""
T_NS_UP=""
cleanup() {
  set +e
  if [ -n "$TS_PID" ]; then
    kill "$TS_PID" 2>/dev/null
    for _ in $(seq 1 100); do kill -0 "$TS_PID" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$TS_PID" 2>/dev/null
    wait "$TS_PID" 2>/dev/null
  fi
  local ns
  for ns in ${G_UP:+$NS_G} ${T_NS_UP:+$NS_T}; do
    # Only what runs inside our own namespace, then the namespace.
    for i in $(seq 1 50); do
      pids=$(ip netns pids "$ns" 2>/dev/null)
      [ -z "$pids" ] && break
      if [ "$i" -lt 25 ]; then kill $pids 2>/dev/null; else kill -9 $pids 2>/dev/null; fi
      sleep 0.2
    done
    ip netns del "$ns" 2>/dev/null
  done
  if [ -n "$WORK" ]; then
    if [ -n "${KEEP_WORK:-}" ]; then echo "work directory kept: $WORK (pynfs logs, server logs)"; else rm -rf "$WORK"; fi
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

WORK=$(mktemp -d "${BENCH_DIR:-/var/tmp}/tristore-pynfs.XXXXXX")
mkdir -p "$RAWDIR"

netns_up() {
  ip netns add "$1"
  ip netns exec "$1" ip link set lo up
}

wait_port() { # NS|"" HOST PORT SECONDS
  local ns=$1 host=$2 port=$3 n=$(($4 * 5)) i
  for ((i = 0; i < n; i++)); do
    if ${ns:+ip netns exec "$ns"} bash -c "exec 3<>/dev/tcp/$host/$port" 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  return 1
}

GANESHA_VERSION=""
start_ganesha() {
  local d="$WORK/ganesha"
  mkdir -p "$d/export"
  cat >"$d/ganesha.conf" <<EOF
NFS_CORE_PARAM {
	NFS_Port = $GANESHA_PORT; Protocols = 4; Enable_UDP = false;
	Enable_NLM = false; Enable_RQUOTA = false;
}
NFSV4 { Graceless = true; Lease_Lifetime = $LEASE; }
NFS_KRB5 { Active_krb5 = false; }
EXPORT {
	Export_Id = 1; Path = $d/export; Pseudo = /pynfs;
	Access_Type = RW; Squash = No_Root_Squash; Protocols = 4; Transports = TCP; SecType = sys;
	FSAL { Name = VFS; }
}
EOF
  netns_up "$NS_G"
  G_UP=1
  # Without rpcbind ganesha logs "Cannot register NFS V4 on TCP" and serves anyway.
  setsid ip netns exec "$NS_G" unshare --mount --propagation private bash -c "
    set -e
    mount -t tmpfs tmpfs /run
    mount -t tmpfs tmpfs /var/lib/nfs
    mkdir -p /var/lib/nfs/ganesha /run/ganesha
    exec ganesha.nfsd -F -f '$d/ganesha.conf' -L '$d/ganesha.log' -p '$d/ganesha.pid'
  " >"$d/ganesha.out" 2>&1 </dev/null &
  wait_port "$NS_G" 127.0.0.1 "$GANESHA_PORT" 60 || { tail -20 "$d/ganesha.log" >&2; fail "ganesha did not start"; }
  GANESHA_VERSION=$(ganesha.nfsd -v 2>/dev/null | sed -n 's/.*Release = //p' | head -1)
  echo "ganesha $GANESHA_VERSION up in netns $NS_G at 127.0.0.1:$GANESHA_PORT (export $d/export as /pynfs)"
}

TS_COMMIT=""
start_tristore() {
  if [ -n "${TRISTORE_ADDR:-}" ]; then
    TS_COMMIT="external server at $TRISTORE_ADDR"
    echo "tristore: using the running server at $TRISTORE_ADDR"
    return
  fi
  local d="$WORK/tristore" bin rev=${BENCH_REV:-HEAD}
  mkdir -p "$d/data/pynfs"
  if [ -n "${TRISTORE_BIN:-}" ]; then
    bin=$TRISTORE_BIN
    TS_COMMIT="TRISTORE_BIN=$bin"
  elif [ "$rev" = worktree ]; then
    TS_COMMIT=$(git rev-parse --short=12 HEAD)
    git diff --quiet HEAD || TS_COMMIT="$TS_COMMIT+dirty"
    bin="$d/tristore"
    go build -o "$bin" ./cmd/tristore || fail "go build of the working tree failed"
  else
    TS_COMMIT=$(git rev-parse --short=12 "$rev^{commit}") || fail "BENCH_REV=$rev is not a commit"
    mkdir -p "$d/src"
    git archive "$TS_COMMIT" | tar -x -C "$d/src"
    bin="$d/tristore"
    (cd "$d/src" && go build -o "$bin" ./cmd/tristore) || fail "go build of $TS_COMMIT failed"
  fi
  netns_up "$NS_T"
  T_NS_UP=1
  # shellcheck disable=SC2086
  ip netns exec "$NS_T" "$bin" serve --data "$d/data" --nfs-addr "127.0.0.1:$TRISTORE_PORT" \
    --nfs-export "/=rw,clients=127.0.0.0/8,no_root_squash" \
    --s3-addr off --iscsi-addr off --admin-addr off --ready-file "$d/ready.json" \
    ${TRISTORE_ARGS:-} >"$d/serve.log" 2>&1 </dev/null &
  TS_PID=$!
  for _ in $(seq 1 300); do [ -s "$d/ready.json" ] && break; kill -0 "$TS_PID" 2>/dev/null || break; sleep 0.1; done
  [ -s "$d/ready.json" ] || { tail -20 "$d/serve.log" >&2; fail "tristore did not start"; }
  echo "tristore $TS_COMMIT up in netns $NS_T at 127.0.0.1:$TRISTORE_PORT (data $d/data)"
}

# run_suite SERVER SUITE: one pynfs runner against one server; writes the raw JSON.
RESULTS=()
run_suite() {
  local server=$1 suite=$2 ns="" hostport dir minor path out log t0 t1 rc lb la timed_out=false
  case "$server" in
  ganesha) ns=$NS_G; hostport="127.0.0.1:$GANESHA_PORT" ;;
  tristore)
    if [ -n "${TRISTORE_ADDR:-}" ]; then hostport=$TRISTORE_ADDR; else ns=$NS_T; hostport="127.0.0.1:$TRISTORE_PORT"; fi ;;
  esac
  case "$suite" in
  4.0) dir=nfs4.0; minor=0; path=/pynfs/v40 ;;
  4.1) dir=nfs4.1; minor=1; path=/pynfs/v41 ;;
  esac
  out="$RAWDIR/pynfs-$STAMP-$server-$suite.json"
  log="$WORK/$server-$suite.log"
  # shellcheck disable=SC2206
  local args=("$hostport$path" --maketree --minorversion="$minor" --showomit ${PYNFS_FLAGS:-} $TESTS)
  local pj="$WORK/$server-$suite.pynfs.json"
  echo "== $server nfs$suite: testserver.py ${args[*]} (timeout ${TIMEOUT}s)"
  lb=$(cat /proc/loadavg)
  t0=$(date +%s.%N)
  set +e
  (cd "$PYNFS_DIR/$dir" && timeout -s INT -k 60 "$TIMEOUT" ${ns:+ip netns exec "$ns"} "$PY" ./testserver.py --json="$pj" "${args[@]}") >"$log" 2>&1 </dev/null
  rc=$?
  set -e
  t1=$(date +%s.%N)
  la=$(cat /proc/loadavg)
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then timed_out=true; fi
  local version=$GANESHA_VERSION commit=""
  if [ "$server" = tristore ]; then version=""; commit=$TS_COMMIT; fi
  R_SERVER=$server R_SUITE=$suite R_VERSION=$version R_COMMIT=$commit R_CMD=$CMDLINE \
    R_RUNNER="cd \$PYNFS_DIR/$dir && ./testserver.py ${args[*]}" R_PYNFS=$PYNFS_COMMIT \
    R_TIMEOUT=$TIMEOUT R_STAMP=$STAMP R_T0=$t0 R_T1=$t1 R_RC=$rc R_TIMED_OUT=$timed_out \
    R_LB=$lb R_LA=$la "$PY" - "$log" "$out" "$pj" <<'EOF'
import json, os, re, sys
e = os.environ
log, out, pj = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(log, errors="replace").read()
line = re.compile(r'^(\S+)\s+(\S+)\s+: (PASS|FAILURE|WARNING|UNSUPPORTED|OMIT|NOT RUN|RUNNING|WAITING TO RUN)\s*$')
tests, cur = {}, None
for l in text.splitlines():
    m = line.match(l)
    if m:
        cur = m.group(1)
        tests[cur] = {"name": m.group(2), "result": m.group(3)}
    elif cur and l.startswith("          ") and tests[cur]["result"] != "PASS":
        tests[cur]["msg"] = (tests[cur].get("msg", "") + " " + l.strip()).strip()[:600]
    elif l.startswith("*****") or not l.strip():
        cur = None
# pynfs's own JSON (written only when the runner finished) has each test's time.
if os.path.exists(pj):
    for t in json.load(open(pj)).get("testcase", []):
        if t.get("code") in tests:
            tests[t["code"]]["time_s"] = round(float(t.get("time") or 0), 2)
summary = re.findall(r'Of those: (\d+) Skipped, (\d+) Failed, (\d+) Warned, (\d+) Passed', text)
counts = None
if summary:
    s = [int(x) for x in summary[-1]]
    counts = {"skipped": s[0], "failed": s[1], "warned": s[2], "passed": s[3]}
timed_out = e["R_TIMED_OUT"] == "true"
dur = float(e["R_T1"]) - float(e["R_T0"])
rec = {
    "type": "pynfs", "server": e["R_SERVER"], "suite": e["R_SUITE"],
    "server_version": e["R_VERSION"], "tristore_commit": e["R_COMMIT"],
    "command": e["R_CMD"], "runner": e["R_RUNNER"], "pynfs_commit": e["R_PYNFS"],
    "timeout_s": int(e["R_TIMEOUT"]), "start_utc": e["R_STAMP"], "duration_s": round(dur, 1),
    "exit_code": int(e["R_RC"]), "timed_out": timed_out,
    "interrupted": "Tests interrupted!" in text or "KeyboardInterrupt" in text,
    "load_before": e["R_LB"], "load_after": e["R_LA"],
    "counts": counts, "tests": tests,
    "output_tail": text[-3000:] if counts is None else "",
}
with open(out, "w") as f:
    json.dump(rec, f, indent=1, sort_keys=True)
c = counts or {}
print("   %s nfs%s: %s passed, %s warned, %s failed, %s skipped; %.0f s%s%s" % (
    e["R_SERVER"], e["R_SUITE"], c.get("passed", "-"), c.get("warned", "-"), c.get("failed", "-"),
    c.get("skipped", "-"), dur, ", TIMED OUT" if timed_out else "",
    "" if counts else ", no result (exit %s; see output_tail in the raw file)" % e["R_RC"]))
EOF
  echo "   raw: ${out#"$ROOT"/}"
  RESULTS+=("$out")
}

case " $SERVERS " in *" ganesha "*) start_ganesha ;; esac
case " $SERVERS " in *" tristore "*) start_tristore ;; esac
echo "load: $(cat /proc/loadavg)"
for suite in $SUITES; do
  for server in $SERVERS; do
    run_suite "$server" "$suite"
  done
done

report "${RESULTS[@]}"
