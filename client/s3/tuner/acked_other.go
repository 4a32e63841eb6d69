//go:build !linux

package tuner

import "net"

// tcpAcked is not available here; uploads are counted as written.
func tcpAcked(net.Conn) int64 { return -1 }
