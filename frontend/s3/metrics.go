package s3

import (
	"errors"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the per-operation Prometheus collectors of the S3 front end.
type metrics struct {
	requests *prometheus.CounterVec   // op, code (HTTP status)
	errors   *prometheus.CounterVec   // op, error (S3 error code)
	bytesIn  *prometheus.CounterVec   // op
	bytesOut *prometheus.CounterVec   // op
	latency  *prometheus.HistogramVec // op
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "tristore", Subsystem: "s3", Name: "requests_total",
			Help: "S3 requests by operation and HTTP status.",
		}, []string{"op", "code"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "tristore", Subsystem: "s3", Name: "errors_total",
			Help: "S3 error responses by operation and S3 error code.",
		}, []string{"op", "error"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "tristore", Subsystem: "s3", Name: "bytes_in_total",
			Help: "Request body bytes received, by operation.",
		}, []string{"op"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "tristore", Subsystem: "s3", Name: "bytes_out_total",
			Help: "Response body bytes sent, by operation.",
		}, []string{"op"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "tristore", Subsystem: "s3", Name: "request_duration_seconds",
			Help:    "Time from request headers to the end of the response, by operation.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}, []string{"op"}),
	}
	if reg == nil {
		return m, nil
	}
	// A second server on the same registry (tests) shares the collectors.
	var err error
	m.requests, err = register(reg, m.requests)
	if err == nil {
		m.errors, err = register(reg, m.errors)
	}
	if err == nil {
		m.bytesIn, err = register(reg, m.bytesIn)
	}
	if err == nil {
		m.bytesOut, err = register(reg, m.bytesOut)
	}
	if err == nil {
		m.latency, err = register(reg, m.latency)
	}
	return m, err
}

func register[T prometheus.Collector](reg prometheus.Registerer, c T) (T, error) {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if ex, ok := are.ExistingCollector.(T); ok {
				return ex, nil
			}
		}
		return c, err
	}
	return c, nil
}

func (m *metrics) observe(op string, status int, ae *APIError, in, out int64, d time.Duration) {
	m.requests.WithLabelValues(op, strconv.Itoa(status)).Inc()
	if ae != nil {
		m.errors.WithLabelValues(op, ae.Code).Inc()
	}
	if in > 0 {
		m.bytesIn.WithLabelValues(op).Add(float64(in))
	}
	if out > 0 {
		m.bytesOut.WithLabelValues(op).Add(float64(out))
	}
	m.latency.WithLabelValues(op).Observe(d.Seconds())
}
