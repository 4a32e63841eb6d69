package nfs

import (
	"testing"

	"github.com/tristore/tristore/proto/nfs3"
)

// BenchmarkRead1MiB: one 1 MiB READ at a time over loopback (per-call
// latency of the server's READ path on a cached file).
func BenchmarkRead1MiB(b *testing.B) {
	_, addr := testServer(b, b.TempDir())
	c := dial(b, addr)
	root := c.mount("/")
	var cr nfs3.CreateRes
	c.call(nfs3.ProgNFS, 3, nfs3.ProcCreate, &nfs3.CreateArgs{Where: nfs3.DirOpArgs{Dir: root, Name: "f"}}, &cr)
	fh := cr.FH.FH
	data := make([]byte, 1<<20)
	var wr nfs3.WriteRes
	c.call(nfs3.ProgNFS, 3, nfs3.ProcWrite, &nfs3.WriteArgs{FH: fh, Count: 1 << 20, Data: data}, &wr)
	b.SetBytes(1 << 20)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var rr nfs3.ReadRes
		c.call(nfs3.ProgNFS, 3, nfs3.ProcRead, &nfs3.ReadArgs{FH: fh, Count: 1 << 20}, &rr)
		if rr.Status != nfs3.OK || len(rr.Data) != 1<<20 {
			b.Fatal(rr.Status)
		}
	}
}

// BenchmarkGetattr: one small call at a time (fixed per-call overhead).
func BenchmarkGetattr(b *testing.B) {
	_, addr := testServer(b, b.TempDir())
	c := dial(b, addr)
	root := c.mount("/")
	for i := 0; i < b.N; i++ {
		var ga nfs3.GetattrRes
		c.call(nfs3.ProgNFS, 3, nfs3.ProcGetattr, &nfs3.GetattrArgs{FH: root}, &ga)
	}
}
