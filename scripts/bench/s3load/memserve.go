package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The memory-only ceiling of scripts/bench/s3.sh (-serve-mem ADDR): the
// least an S3 server can do for s3load's PUT/GET phases, so the benchmark
// shows how far a server is from what this machine's loopback, Go's
// net/http and the client allow. Objects live in a map; PUT of a bucket
// creates nothing (every bucket exists), PUT of an object reads the body
// into memory, GET writes it back in one Write. No signature check, no
// MD5 (the ETag is a counter), no durability: it is a ceiling, not a peer.

var serveMem string // -serve-mem

type memObject struct {
	body  []byte
	etag  string
	mtime string
}

type memStore struct {
	mu   sync.RWMutex
	objs map[string]*memObject
	n    atomic.Int64
}

func (m *memStore) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Path style: /bucket or /bucket/key.
	p := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, _ := strings.Cut(p, "/")
	switch {
	case bucket == "":
		w.WriteHeader(http.StatusOK) // the script's "is it up" probe
	case key == "" && r.Method == http.MethodPut:
		w.WriteHeader(http.StatusOK) // CreateBucket: every bucket exists
	case key != "" && r.Method == http.MethodPut:
		var body []byte
		if r.ContentLength >= 0 {
			body = make([]byte, r.ContentLength)
			if _, err := io.ReadFull(r.Body, body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		} else {
			var err error
			if body, err = io.ReadAll(r.Body); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
		}
		o := &memObject{body: body, etag: fmt.Sprintf("\"%032x\"", m.n.Add(1)), mtime: time.Now().UTC().Format(http.TimeFormat)}
		m.mu.Lock()
		m.objs[p] = o
		m.mu.Unlock()
		w.Header().Set("ETag", o.etag)
		w.WriteHeader(http.StatusOK)
	case key != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		m.mu.RLock()
		o := m.objs[p]
		m.mu.RUnlock()
		if o == nil {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NoSuchKey</Code><Message>no such key</Message></Error>`)
			return
		}
		h := w.Header()
		h.Set("Content-Length", strconv.Itoa(len(o.body)))
		h.Set("ETag", o.etag)
		h.Set("Last-Modified", o.mtime)
		h.Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusOK)
		if r.Method == http.MethodGet {
			w.Write(o.body)
		}
	default:
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusNotImplemented)
		fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>NotImplemented</Code><Message>memory ceiling: PUT/GET of objects only</Message></Error>`)
	}
}

// serveMemory runs the memory-only server until the process is killed.
func serveMemory(addr string) error {
	srv := &http.Server{Addr: addr, Handler: &memStore{objs: map[string]*memObject{}}, ReadHeaderTimeout: 30 * time.Second}
	return srv.ListenAndServe()
}
