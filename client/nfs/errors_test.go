package nfs

import (
	"errors"
	"fmt"
	"syscall"
	"testing"
)

func TestErrorsIsAndErrno(t *testing.T) {
	err := fmt.Errorf("walk: %w", &OpError{Op: "RMDIR", Err: ErrNotEmpty})
	if !errors.Is(err, ErrNotEmpty) || errors.Is(err, ErrNoEnt) {
		t.Fatalf("errors.Is through OpError: %v", err)
	}
	var oe *OpError
	if !errors.As(err, &oe) || oe.Op != "RMDIR" {
		t.Fatalf("errors.As: %v", err)
	}
	cases := map[Status]syscall.Errno{
		ErrNotEmpty: syscall.ENOTEMPTY, ErrNameTooLong: syscall.ENAMETOOLONG, ErrStale: syscall.ESTALE,
		ErrDQuot: syscall.EDQUOT, ErrNoEnt: syscall.ENOENT, ErrNotSupp: syscall.EOPNOTSUPP, ErrJukebox: syscall.EAGAIN,
	}
	for st, want := range cases {
		if got := ToErrno(&OpError{Op: "X", Err: st}); got != want {
			t.Errorf("%v -> %v, want %v", st, got, want)
		}
	}
	if ToErrno(nil) != 0 || ToErrno(errors.New("other")) != syscall.EIO || ToErrno(ErrClosed) != syscall.ENOTCONN {
		t.Error("ToErrno of nil/other/closed")
	}
}
