// Package reqmemo lets the layers under one request (the S3 front end, the
// store, the user database) look a thing up once per request instead of
// once per question: the S3 handler of a PUT asks the store for four or
// five bucket documents and the user database twice for one access key.
//
// A front end starts a memo for each request (With); a layer that finds
// one in its context keeps what it validated there (Set) and answers later
// questions of the same request from it (Get). A layer that changes what
// it memoised deletes the entry (Delete), so the request that made a change
// sees it. Without a memo in the context (background work, other callers)
// Get finds nothing and every question is answered as before.
//
// What this means for the answers: one request sees one state of a bucket's
// configuration and of a user, the one it found first; a change made by
// another request or process during it applies from the next request on.
package reqmemo

import (
	"context"
	"sync"
)

type ctxKey struct{}

// Memo holds one request's entries. Safe for concurrent use (a handler may
// hand its context to goroutines).
type Memo struct {
	mu sync.Mutex
	m  map[any]any
}

// With returns ctx carrying a new, empty memo.
func With(ctx context.Context) context.Context {
	return context.WithValue(ctx, ctxKey{}, &Memo{})
}

// From returns ctx's memo, or nil (whose methods do nothing).
func From(ctx context.Context) *Memo {
	if ctx == nil {
		return nil
	}
	m, _ := ctx.Value(ctxKey{}).(*Memo)
	return m
}

// Get returns the entry for k.
func (m *Memo) Get(k any) (any, bool) {
	if m == nil {
		return nil, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.m[k]
	return v, ok
}

// Set keeps v under k for the rest of the request.
func (m *Memo) Set(k, v any) {
	if m == nil {
		return
	}
	m.mu.Lock()
	if m.m == nil {
		m.m = map[any]any{}
	}
	m.m[k] = v
	m.mu.Unlock()
}

// Delete drops the entry for k.
func (m *Memo) Delete(k any) {
	if m == nil {
		return
	}
	m.mu.Lock()
	delete(m.m, k)
	m.mu.Unlock()
}
