package vfs

import (
	"runtime"
	"sync"

	"golang.org/x/sys/unix"
)

var (
	baseGroupsOnce sync.Once
	baseGroups     []int
)

// as runs fn on a locked OS thread whose fsuid, fsgid and supplementary
// groups are the caller's, so the kernel applies its own permission checks.
// setfsuid/setfsgid/setgroups (raw, via x/sys) change only the calling
// thread. If the identity cannot be restored the thread is not unlocked, so
// the Go runtime retires it when the goroutine exits instead of reusing it.
func (fs *FS) as(c Cred, fn func() error) error {
	if !fs.switchID || (c.UID == 0 && c.GID == 0 && len(c.Groups) == 0) {
		// Not root (nothing to switch) or the caller is root itself.
		return fn()
	}
	baseGroupsOnce.Do(func() { baseGroups, _ = unix.Getgroups() })
	runtime.LockOSThread()
	groups := make([]int, len(c.Groups))
	for i, g := range c.Groups {
		groups[i] = int(g)
	}
	ok := unix.Setgroups(groups) == nil
	unix.Setfsgid(int(c.GID))
	unix.Setfsuid(int(c.UID))
	var err error
	if ok {
		err = fn()
	} else {
		err = unix.EPERM
	}
	unix.Setfsuid(0)
	unix.Setfsgid(0)
	restored := unix.Setgroups(baseGroups) == nil
	if prev, _ := unix.SetfsuidRetUid(0); prev == 0 && restored {
		runtime.UnlockOSThread()
	}
	return err
}
