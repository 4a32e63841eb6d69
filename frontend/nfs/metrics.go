package nfs

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tristore/tristore/proto/nfs3"
)

// metrics counts calls and their latency per program and procedure.
type metrics struct {
	calls   *prometheus.CounterVec
	seconds *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "tristore_nfs_calls_total",
			Help: "RPC calls handled by the NFS front end, by program, procedure and RPC accept status.",
		}, []string{"prog", "proc", "rpc_status"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "tristore_nfs_call_seconds",
			Help:    "Time from decoding a call to sending its reply.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 4, 10),
		}, []string{"prog", "proc"}),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.calls, m.seconds} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

var nfsProcNames = [...]string{"NULL", "GETATTR", "SETATTR", "LOOKUP", "ACCESS", "READLINK", "READ", "WRITE",
	"CREATE", "MKDIR", "SYMLINK", "MKNOD", "REMOVE", "RMDIR", "RENAME", "LINK", "READDIR", "READDIRPLUS",
	"FSSTAT", "FSINFO", "PATHCONF", "COMMIT"}
var mountProcNames = [...]string{"NULL", "MNT", "DUMP", "UMNT", "UMNTALL", "EXPORT"}

func procLabels(prog, proc uint32) (string, string) {
	switch prog {
	case nfs3.ProgNFS:
		if int(proc) < len(nfsProcNames) {
			return "nfs", nfsProcNames[proc]
		}
		return "nfs", "unknown"
	case nfs3.ProgMount:
		if int(proc) < len(mountProcNames) {
			return "mount", mountProcNames[proc]
		}
		return "mount", "unknown"
	case nfs3.ProgPortmap:
		return "portmap", strconv.Itoa(int(proc))
	}
	return "other", "unknown"
}

func (m *metrics) observe(prog, proc uint32, status string, start time.Time) {
	if m == nil {
		return
	}
	p, n := procLabels(prog, proc)
	m.calls.WithLabelValues(p, n, status).Inc()
	m.seconds.WithLabelValues(p, n).Observe(time.Since(start).Seconds())
}
