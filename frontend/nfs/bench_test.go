package nfs

import (
	"fmt"
	"testing"

	"github.com/tristore/tristore/proto/nfs3"
)

// BenchmarkRead: one READ at a time over loopback (per-call latency of
// the server's READ path on a cached file), of 64 KiB, 1 MiB and 4 MiB.
func BenchmarkRead(b *testing.B) {
	for _, size := range []int{64 << 10, 1 << 20, 4 << 20} {
		b.Run(fmt.Sprintf("%dKiB", size>>10), func(b *testing.B) {
			_, addr := testServer(b, b.TempDir())
			c := dial(b, addr)
			root := c.mount("/")
			var cr nfs3.CreateRes
			c.call(nfs3.ProgNFS, 3, nfs3.ProcCreate, &nfs3.CreateArgs{Where: nfs3.DirOpArgs{Dir: root, Name: "f"}}, &cr)
			fh := cr.FH.FH
			data := make([]byte, 1<<20)
			for off := 0; off < size; off += len(data) {
				var wr nfs3.WriteRes
				c.call(nfs3.ProgNFS, 3, nfs3.ProcWrite, &nfs3.WriteArgs{FH: fh, Offset: uint64(off), Count: uint32(min(size, len(data))), Data: data[:min(size, len(data))]}, &wr)
			}
			b.SetBytes(int64(size))
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				var rr nfs3.ReadRes
				c.call(nfs3.ProgNFS, 3, nfs3.ProcRead, &nfs3.ReadArgs{FH: fh, Count: uint32(size)}, &rr)
				if rr.Status != nfs3.OK || len(rr.Data) != size {
					b.Fatal(rr.Status)
				}
			}
		})
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
