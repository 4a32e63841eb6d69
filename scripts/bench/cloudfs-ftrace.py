#!/usr/bin/env python3
"""Splits the time of each pwrite(2) of a cloudfs replay from the kernel trace
that scripts/bench/cloudfs.sh records with PROFILE_DIR (ftrace.txt: the
replay's pread64/pwrite64 and every FUSE request sent and answered).

For each pwrite of the replay: 'before' is from the call to its FUSE WRITE
being sent (the kernel taking i_rwsem and locking the page-cache pages, which
waits for any READ holding them, e.g. read-ahead), 'fs' from the WRITE's send
to its answer (the file system's daemon: its dispatch and its own work),
'after' from the answer to the call's return. Writes are also split by
whether a READ of the same connection was in flight when the call began.

Usage: cloudfs-ftrace.py ftrace.txt [...]
"""
import re
import sys

LINE = re.compile(r'^\s*(.+?)-(\d+)\s+\[\d+\]\s+\S+\s+([\d.]+): (\w+)(: | -> |\()(.*)$')


def analyze(path):
    wakes = {}      # pid -> [ts] of sched_wakeup
    runs = {}       # pid -> [ts] of sched_switch to it
    calls = {}      # pid -> open call dict
    writes = []     # finished pwrite calls
    reads = []
    reqs = {}       # (conn, unique) -> dict(op, send, end, pid)
    conn_of = {}    # connection used by the replay's pwrites
    for line in open(path, errors='replace'):
        m = LINE.match(line)
        if not m:
            continue
        comm, pid, ts, ev, sep, rest = m.group(1), int(m.group(2)), float(m.group(3)), m.group(4), m.group(5), m.group(6)
        if sep == '(' and ev in ('sys_pwrite64', 'sys_pread64'):
            ev = 'sys_enter_' + ev[4:]
        elif sep == ' -> ' and ev in ('sys_pwrite64', 'sys_pread64'):
            ev = 'sys_exit_' + ev[4:]
        if ev == 'sched_wakeup':
            f = re.search(r'pid=(\d+)', rest)
            if f:
                wakes.setdefault(int(f.group(1)), []).append(ts)
            continue
        if ev == 'sched_switch':
            f = re.search(r'==> next_comm=.* next_pid=(\d+)', rest)
            if f:
                runs.setdefault(int(f.group(1)), []).append(ts)
            continue
        if ev in ('sys_enter_pwrite64', 'sys_enter_pread64'):
            calls[pid] = {'op': 'w' if 'pwrite' in ev else 'r', 'enter': ts, 'reqs': [], 'pid': pid}
        elif ev in ('sys_exit_pwrite64', 'sys_exit_pread64'):
            c = calls.pop(pid, None)
            if c:
                c['exit'] = ts
                (writes if c['op'] == 'w' else reads).append(c)
        elif ev == 'fuse_request_send':
            f = re.match(r'connection (\d+) req (\d+) opcode (\d+) \((\w+)\)', rest)
            if not f:
                continue
            key = (int(f.group(1)), int(f.group(2)))
            r = {'op': f.group(4), 'send': ts, 'end': None, 'pid': pid, 'conn': key[0]}
            reqs[key] = r
            if pid in calls:
                calls[pid]['reqs'].append(r)
        elif ev == 'fuse_request_end':
            f = re.match(r'connection (\d+) req (\d+)', rest)
            if f:
                r = reqs.get((int(f.group(1)), int(f.group(2))))
                if r and r['end'] is None:
                    r['end'] = ts
                    r['endpid'] = pid
    allreqs = list(reqs.values())
    rows = []
    for c in writes:
        ws = [r for r in c['reqs'] if r['op'] == 'FUSE_WRITE' and r['end'] is not None]
        total = (c['exit'] - c['enter']) * 1e3
        if not ws:
            rows.append({'total': total, 'before': total, 'fs': 0.0, 'after': 0.0, 'nreq': 0, 'rdfl': 0, 'rdwait': 0.0})
            continue
        conn = ws[0]['conn']
        before = (ws[0]['send'] - c['enter']) * 1e3
        fs = sum((r['end'] - r['send']) for r in ws) * 1e3
        after = (c['exit'] - ws[-1]['end']) * 1e3
        infl = [r for r in allreqs if r['conn'] == conn and r['op'] == 'FUSE_READ' and r['send'] < c['enter']
                and (r['end'] is None or r['end'] > c['enter'])]
        rdwait = max([((r['end'] or c['exit']) - c['enter']) * 1e3 for r in infl], default=0.0)
        row = {'total': total, 'before': before, 'fs': fs, 'after': after, 'nreq': len(ws), 'rdfl': len(infl), 'rdwait': rdwait}
        # The daemon's side of the last WRITE: until the thread that
        # answered it was woken, then until it ran, then its work; and
        # the caller's side after the answer: until it ran again.
        w = ws[-1]
        t = w.get('endpid')
        if wakes or runs:
            wk = [x for x in wakes.get(t, []) if w['send'] <= x <= w['end']]
            rn = [x for x in runs.get(t, []) if w['send'] <= x <= w['end']]
            wake = wk[-1] if wk else w['send']
            run = min([x for x in rn if x >= wake], default=wake)
            row['d_thread'] = (wake - w['send']) * 1e3
            row['d_cpu'] = (run - wake) * 1e3
            row['d_work'] = (w['end'] - run) * 1e3
            cr = [x for x in runs.get(c['pid'], []) if w['end'] <= x <= c['exit']]
            row['a_cpu'] = ((cr[-1] if cr else w['end']) - w['end']) * 1e3
        rows.append(row)
    return rows, reads, allreqs


def summary(name, rows):
    if not rows:
        print(f'  {name}: none')
        return
    n = len(rows)
    avg = lambda k: sum(r[k] for r in rows) / n
    med = sorted(r['total'] for r in rows)[n // 2]
    print(f'  {name}: n={n} total avg {avg("total"):.3f} ms (median {med:.3f}) = before-send {avg("before"):.3f}'
          f' + fs {avg("fs"):.3f} + after {avg("after"):.3f}; WRITE requests per call {avg("nreq"):.2f}')
    if 'd_work' in rows[0]:
        print(f'    fs = until a daemon thread was woken {avg("d_thread"):.3f} + until it ran {avg("d_cpu"):.3f}'
              f' + its work until the answer {avg("d_work"):.3f}; after: the caller waiting for a CPU {avg("a_cpu"):.3f}')


for path in sys.argv[1:]:
    rows, reads, reqs = analyze(path)
    print(path)
    summary('all writes', rows)
    summary('writes with a READ of the mount in flight at the call', [r for r in rows if r['rdfl']])
    summary('writes with none', [r for r in rows if not r['rdfl']])
    fsw = sorted((r for r in reqs if r['op'] == 'FUSE_WRITE' and r['end']), key=lambda r: r['end'] - r['send'])
    if fsw:
        d = [(r['end'] - r['send']) * 1e3 for r in fsw]
        print(f'  FUSE WRITE answer time: n={len(d)} median {d[len(d) // 2]:.3f} p90 {d[len(d) * 9 // 10]:.3f} max {d[-1]:.3f} ms')
    fsr = [(r['end'] - r['send']) * 1e3 for r in reqs if r['op'] == 'FUSE_READ' and r['end']]
    if fsr:
        fsr.sort()
        print(f'  FUSE READ answer time: n={len(fsr)} median {fsr[len(fsr) // 2]:.3f} p90 {fsr[len(fsr) * 9 // 10]:.3f} max {fsr[-1]:.3f} ms')
    slow = sorted(rows, key=lambda r: -r['total'])[:8]
    print('  slowest writes (total, before-send, fs, after, READs in flight, longest of them after the call began), ms:')
    for r in slow:
        print(f'    {r["total"]:.3f} {r["before"]:.3f} {r["fs"]:.3f} {r["after"]:.3f} {r["rdfl"]} {r["rdwait"]:.3f}')
