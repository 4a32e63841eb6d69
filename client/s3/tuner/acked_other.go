//go:build !linux

package tuner

import (
	"net"
	"time"
)

// tcpAcked is not available here; uploads are counted as written.
func tcpAcked(net.Conn) int64 { return -1 }

// tcpRTT is not available here; the connect's wall time is used.
func tcpRTT(net.Conn) (time.Duration, bool) { return 0, false }
