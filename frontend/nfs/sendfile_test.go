package nfs

import (
	"bytes"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/proto/sunrpc"
)

// TestSendFileTailOneSegment: a READ reply sent with sendfile leaves as
// one TCP segment when it fits in one (header and data together), not as
// a small header segment followed by the data, which woke a waiting
// client twice per reply; the file descriptor's offset is not moved (the
// offset goes to sendfile), and the bytes on the wire are the record.
func TestSendFileTailOneSegment(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	var server net.Conn
	select {
	case server = <-accepted:
	case <-time.After(5 * time.Second):
		t.Fatal("no connection")
	}
	if server == nil {
		t.Fatal("accept failed")
	}
	defer server.Close()

	data := bytes.Repeat([]byte("0123456789abcdef"), 64) // 1 KiB
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	segsOut := func() uint32 {
		t.Helper()
		rc, err := server.(*net.TCPConn).SyscallConn()
		if err != nil {
			t.Fatal(err)
		}
		var info *unix.TCPInfo
		var ierr error
		rc.Control(func(fd uintptr) { info, ierr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) })
		if ierr != nil {
			t.Fatal(ierr)
		}
		return info.Data_segs_out
	}
	head := []byte("reply-header") // 12 bytes: no XDR padding question
	for round := 0; round < 3; round++ {
		before := segsOut()
		if err := sendFileTail(server, head, &fileTail{f: f, off: 100, n: 700}); err != nil {
			t.Fatal(err)
		}
		want := append(sunrpc.AppendFragmentHeader(nil, len(head)+700, true), head...)
		want = append(want, data[100:800]...)
		got := make([]byte, len(want))
		client.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(client, got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d: record on the wire differs from header + file range", round)
		}
		if n := segsOut() - before; n != 1 {
			t.Errorf("round %d: reply of %d bytes left in %d TCP segments, want 1 (header sent apart from the data)", round, len(want), n)
		}
		if off, err := f.Seek(0, io.SeekCurrent); err != nil || off != 0 {
			t.Errorf("round %d: descriptor offset %d (%v) after the send, want 0", round, off, err)
		}
	}
}
