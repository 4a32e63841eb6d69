package chunkstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Lease is the lease object: the gateway that may write the store, and
// until when. A gateway renews it every third of its TTL; one that stops
// (crash, lost network) loses it when it expires, and then another may
// take over. Expiry is compared against each gateway's own clock, so
// clocks must agree to well within the TTL.
type Lease struct {
	Owner   string `json:"owner"`
	Token   string `json:"token"` // random per Open: tells two opens by one owner apart
	Expires int64  `json:"expires"`
}

type lease struct {
	b     *bucket
	owner string
	token string
	ttl   time.Duration
	log   *slog.Logger

	mu      sync.Mutex
	expires time.Time
}

// acquire takes the lease, or fails with ErrLeased naming the holder. It
// reads the lease back after writing it, so of two gateways racing for a
// free lease at most one goes on (the one whose write landed last).
func (l *lease) acquire(ctx context.Context) error {
	var tok [8]byte
	rand.Read(tok[:])
	l.token = hex.EncodeToString(tok[:])
	if cur, err := l.read(ctx); err != nil {
		return err
	} else if cur != nil && time.Now().UnixNano() < cur.Expires {
		return fmt.Errorf("%w: %s holds it until %s (or until it is released)",
			ErrLeased, cur.Owner, time.Unix(0, cur.Expires).UTC().Format(time.RFC3339))
	}
	if err := l.write(ctx); err != nil {
		return err
	}
	// Give a racing writer's PUT time to land, then see who won.
	t := time.NewTimer(200 * time.Millisecond)
	select {
	case <-t.C:
	case <-ctx.Done():
		t.Stop()
		return ctx.Err()
	}
	cur, err := l.read(ctx)
	if err != nil {
		return err
	}
	if cur == nil || cur.Token != l.token {
		owner := "another gateway"
		if cur != nil {
			owner = cur.Owner
		}
		return fmt.Errorf("%w: %s took it at the same time", ErrLeased, owner)
	}
	return nil
}

func (l *lease) read(ctx context.Context) (*Lease, error) {
	raw, _, err := l.b.get(ctx, leaseKey, nil, 1<<20)
	if errors.Is(err, errNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read lease: %w", err)
	}
	var cur Lease
	if err := json.Unmarshal(raw, &cur); err != nil {
		return nil, fmt.Errorf("%w: lease object: %v", ErrCorrupt, err)
	}
	return &cur, nil
}

func (l *lease) write(ctx context.Context) error {
	exp := time.Now().Add(l.ttl)
	b, _ := json.Marshal(Lease{Owner: l.owner, Token: l.token, Expires: exp.UnixNano()})
	if _, err := l.b.put(ctx, leaseKey, b, ""); err != nil {
		return fmt.Errorf("write lease: %w", err)
	}
	l.mu.Lock()
	l.expires = exp
	l.mu.Unlock()
	return nil
}

// valid reports whether the lease is ours for at least another margin.
func (l *lease) valid(margin time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return time.Now().Add(margin).Before(l.expires)
}

// start renews the lease every ttl/3 until ctx ends. A renewal that finds
// someone else's lease (or none: it was released by someone who held it)
// calls lost: the store then refuses writes rather than risk two writers.
// A renewal that fails (a slow or broken link) only delays publishing
// until one succeeds: our token still in the lease object proves nobody
// else took over meanwhile.
func (l *lease) start(ctx context.Context, wg *sync.WaitGroup, lost func(error)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		tk := time.NewTicker(l.ttl / 3)
		defer tk.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tk.C:
			}
			rctx, cancel := context.WithTimeout(ctx, l.ttl/3)
			cur, err := l.read(rctx)
			if errors.Is(err, ErrCorrupt) {
				cur, err = &Lease{Owner: "an unreadable lease object"}, nil
			}
			if err == nil && (cur == nil || cur.Token != l.token) {
				err = fmt.Errorf("%w: the lease object now names %v", ErrLeased, cur)
				cancel()
				l.log.Error("chunkstore: lease taken over; store is read-only now", "err", err)
				lost(err)
				return
			}
			if err == nil {
				err = l.write(rctx)
			}
			cancel()
			if err != nil {
				// Not lost yet: nothing is published while the lease is
				// not valid (publish checks), local writes go on, and the
				// next renewal that finds our token takes it up again.
				l.log.Warn("chunkstore: lease renewal failed; publishing waits for the next renewal", "err", err)
			}
		}
	}()
}

// release deletes the lease if it is still ours.
func (l *lease) release(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if cur, err := l.read(ctx); err == nil && cur != nil && cur.Token == l.token {
		if err := l.b.del(ctx, leaseKey); err != nil {
			l.log.Warn("chunkstore: could not release the lease", "err", err)
		}
	}
}
