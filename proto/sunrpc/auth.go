package sunrpc

import "fmt"

// AuthSys is the AUTH_SYS (a.k.a. AUTH_UNIX) credential body (RFC 5531 appendix A).
type AuthSys struct {
	Stamp       uint32
	MachineName string // at most 255 bytes
	UID         uint32
	GID         uint32
	GIDs        []uint32 // at most 16
}

// Limits of AUTH_SYS fields.
const (
	MaxMachineName = 255
	MaxAuthSysGIDs = 16
)

// Encode writes the authsys_parms body (not the flavor).
func (a AuthSys) Encode(w *Writer) {
	w.Uint32(a.Stamp)
	w.String(a.MachineName)
	w.Uint32(a.UID)
	w.Uint32(a.GID)
	w.Uint32(uint32(len(a.GIDs)))
	for _, g := range a.GIDs {
		w.Uint32(g)
	}
}

// Auth returns the credential as an opaque_auth of flavor AUTH_SYS.
func (a AuthSys) Auth() OpaqueAuth {
	var w Writer
	a.Encode(&w)
	return OpaqueAuth{Flavor: AuthFlavorSys, Body: w.Bytes()}
}

// DecodeAuthSys parses an AUTH_SYS credential body. The body must be
// consumed exactly; trailing bytes or over-limit fields are garbage.
func DecodeAuthSys(body []byte) (AuthSys, error) {
	r := NewReader(body)
	var a AuthSys
	a.Stamp = r.Uint32()
	a.MachineName = r.String(MaxMachineName)
	a.UID = r.Uint32()
	a.GID = r.Uint32()
	n := r.Uint32()
	if n > MaxAuthSysGIDs {
		r.Fail("auth_sys: %d gids (limit %d)", n, MaxAuthSysGIDs)
	}
	if r.Err() == nil && n > 0 {
		a.GIDs = make([]uint32, n)
		for i := range a.GIDs {
			a.GIDs[i] = r.Uint32()
		}
	}
	if r.Err() == nil && r.Remaining() != 0 {
		r.Fail("auth_sys: %d trailing bytes", r.Remaining())
	}
	if r.Err() != nil {
		return AuthSys{}, fmt.Errorf("auth_sys credential: %w", r.Err())
	}
	return a, nil
}
