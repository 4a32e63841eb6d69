package nfs

import (
	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
)

// A minimal portmapper (RFC 1833 version 2): NULL and GETPORT, answering
// that NFS v3 and MOUNT v3 over TCP live on the server's one port. It is
// served on the main port too (harmless) and on --nfs-portmap-addr when set.

var portmapProcs = []procFunc{
	nfs3.PortmapProcNull:    nfsNull,
	nfs3.PortmapProcGetport: portmapGetport,
}

func portmapGetport(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var m nfs3.Mapping
	if err := decodeArgs(r, &m); err != nil {
		return err
	}
	var port uint32
	if (m.Prog == nfs3.ProgNFS && m.Vers == nfs3.VersNFS || m.Prog == nfs3.ProgMount && m.Vers == nfs3.VersMount) &&
		m.Prot == nfs3.PortmapProto {
		s.mu.Lock()
		port = s.port
		s.mu.Unlock()
	}
	w.Uint32(port) // 0 means "not registered"
	return nil
}
