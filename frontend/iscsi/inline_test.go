package iscsi

import (
	"bytes"
	"net"
	"sync/atomic"
	"testing"

	wire "github.com/tristore/tristore/proto/iscsi"
)

// countLn counts the write(2) calls of the connections it accepts.
type countLn struct {
	net.Listener
	writes *atomic.Int64
}

func (l countLn) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return countConn{c, l.writes}, nil
}

type countConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestPipelinedWritesAnsweredTogether: cached 4 KiB writes that arrive
// together (immediate data, one TCP write from the initiator) are run by
// the connection's reader and answered together, in CmdSN order, with a
// few write(2) calls instead of one per command; the data is there.
func TestPipelinedWritesAnsweredTogether(t *testing.T) {
	var writes atomic.Int64
	tt := startTargetLn(t, Config{}, func(ln net.Listener) net.Listener { return countLn{ln, &writes} })
	in, err := dial(t, tt.addr, loginOpts{target: tt.iqn, immediate: true})
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	data := make([][]byte, n)
	var batch []byte
	for i := range n {
		data[i] = randBytes(4096)
		p := &wire.PDU{Opcode: wire.OpSCSICommand, Final: true, Write: true, Attr: wire.AttrSimple,
			ITT: in.nextITT(), CmdSN: in.cmdSN, ExpStatSN: in.expStatSN, ExpectedDataLength: 4096,
			CDB: wire.Write10(uint32(i*8), 8, false), Data: data[i]}
		in.cmdSN++
		if batch, err = wire.AppendPDU(batch, p, wire.Options{}); err != nil {
			t.Fatal(err)
		}
	}
	before := writes.Load()
	if _, err := in.nc.Write(batch); err != nil {
		t.Fatal(err)
	}
	var statSN uint32
	for i := range n {
		p, err := in.recv()
		if err != nil {
			t.Fatal(err)
		}
		if p.Opcode != wire.OpSCSIResponse || p.Status != wire.StatusGood {
			t.Fatalf("answer %d: %v status %#x", i, p.Opcode, p.Status)
		}
		if i > 0 && p.StatSN != statSN+1 {
			t.Fatalf("answer %d: StatSN %d after %d", i, p.StatSN, statSN)
		}
		statSN = p.StatSN
	}
	if w := writes.Load() - before; w > 3 {
		t.Errorf("%d write(2) calls for %d answers, want at most 3", w, n)
	}
	for i := range n {
		if got := in.mustCmd(wire.Read10(uint32(i*8), 8, false), nil, 4096); !bytes.Equal(got, data[i]) {
			t.Fatalf("block %d: read back differs", i)
		}
	}
}
