package nfstree

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tristore/tristore/client/nfs"
)

// Caller credentials (Options.CallerCreds). The kernel NFS client sends
// each process's uid, gid and groups in AUTH_SYS, so the server decides
// permissions and owners and its export rules (root_squash, all_squash)
// apply per user. With CallerCreds the mount does the same: metadata calls
// go out as the calling process, and an open file's I/O (including the
// write-behind sent later and the COMMIT at close) as the process that
// opened it, as the kernel uses the opener's credentials for writeback.
// FUSE tells us only uid, gid and pid; supplementary groups are read from
// /proc/<pid>/status and cached briefly.

const groupsTTL = 2 * time.Second

type groupCache struct {
	mu sync.Mutex
	m  map[uint32]groupEntry
}

type groupEntry struct {
	gids []uint32
	at   time.Time
}

func (g *groupCache) get(pid uint32) []uint32 {
	g.mu.Lock()
	if e, ok := g.m[pid]; ok && time.Since(e.at) < groupsTTL {
		g.mu.Unlock()
		return e.gids
	}
	g.mu.Unlock()
	gids := procGroups(pid)
	g.mu.Lock()
	if g.m == nil || len(g.m) > 4096 {
		g.m = map[uint32]groupEntry{}
	}
	g.m[pid] = groupEntry{gids, time.Now()}
	g.mu.Unlock()
	return gids
}

// procGroups reads the supplementary groups of pid ("Groups:" line).
func procGroups(pid uint32) []uint32 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		rest, ok := strings.CutPrefix(line, "Groups:")
		if !ok {
			continue
		}
		var gids []uint32
		for _, f := range strings.Fields(rest) {
			if v, err := strconv.ParseUint(f, 10, 32); err == nil {
				gids = append(gids, uint32(v))
			}
		}
		return gids
	}
	return nil
}

// cctx attaches the calling process's identity to ctx (CallerCreds only).
// Requests without a process (pid 0) keep the mount's own identity.
//
// It also detaches ctx from the FUSE request's cancellation. The kernel
// interrupts a request whenever the calling thread gets a signal (Go
// programs get SIGURG for preemption all the time); giving up the NFS call
// then would turn a harmless signal into a failed syscall. The interrupt
// is passed on with nfs.WithInterrupt instead, which honours it only while
// the call waits for a server that is down or silent: on a hard mount a
// process blocked by an outage can still be interrupted or killed (the
// kernel waits for our answer even on SIGKILL once it sent the request),
// and gets EINTR.
func (f *FS) cctx(ctx context.Context) context.Context {
	ctx = nfs.WithInterrupt(context.WithoutCancel(ctx), ctx.Done())
	if !f.opts.CallerCreds {
		return ctx
	}
	caller, ok := fuse.FromContext(ctx)
	if !ok || caller == nil || caller.Pid == 0 {
		return ctx
	}
	return nfs.WithCred(ctx, nfs.Cred{UID: caller.Uid, GID: caller.Gid, GIDs: f.groups.get(caller.Pid)})
}
