package nfs3

import "github.com/tristore/tristore/proto/sunrpc"

// Portmapper v2 (RFC 1833) GETPORT, the only call tristore answers or makes:
// kernel clients ask port 111 where MOUNT and NFS live.

// PortmapProcNull and PortmapProcGetport are portmapper v2 procedure numbers.
const (
	PortmapProcNull    = 0
	PortmapProcGetport = 3
)

// Mapping is the portmapper's mapping (GETPORT argument).
type Mapping struct {
	Prog, Vers, Prot, Port uint32
}

func (m *Mapping) Encode(w *sunrpc.Writer) {
	w.Uint32(m.Prog)
	w.Uint32(m.Vers)
	w.Uint32(m.Prot)
	w.Uint32(m.Port)
}

func (m *Mapping) Decode(r *sunrpc.Reader) error {
	m.Prog, m.Vers, m.Prot, m.Port = r.Uint32(), r.Uint32(), r.Uint32(), r.Uint32()
	return r.Err()
}
