package chunkstore

import (
	"container/list"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// cache is the local disk cache of clean chunks: clean/<sha256>, in LRU
// order, bounded together with the dirty chunks (dirty/<ino>.<idx>, which
// are never evicted: they are the only copy until uploaded) by limit bytes.
// Because clean chunks are named by content, the index is rebuilt after a
// restart from the directory alone (LRU order from the files' mtimes,
// which a use refreshes at most once a minute) and a chunk shared by two
// files is cached once.
type cache struct {
	dir   string
	limit int64

	mu    sync.Mutex
	lru   *list.List // *centry, front = most recently used
	idx   map[string]*list.Element
	clean int64 // bytes in clean/
	dirty int64 // bytes reserved for dirty chunks (chunk size each)
}

type centry struct {
	hash    string
	size    int64
	touched time.Time
}

func openCache(dir string, limit int64) (*cache, error) {
	for _, d := range []string{"clean", "dirty", "partial", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	// Half-written downloads from a crash are garbage.
	tmps, _ := os.ReadDir(filepath.Join(dir, "tmp"))
	for _, e := range tmps {
		os.Remove(filepath.Join(dir, "tmp", e.Name()))
	}
	c := &cache{dir: dir, limit: limit, lru: list.New(), idx: map[string]*list.Element{}}
	ents, err := os.ReadDir(filepath.Join(dir, "clean"))
	if err != nil {
		return nil, err
	}
	var es []*centry
	for _, e := range ents {
		info, err := e.Info()
		if err != nil || !validHash(e.Name()) {
			os.Remove(filepath.Join(dir, "clean", e.Name()))
			continue
		}
		es = append(es, &centry{hash: e.Name(), size: info.Size(), touched: info.ModTime()})
	}
	sort.Slice(es, func(i, j int) bool { return es[i].touched.After(es[j].touched) })
	for _, e := range es {
		c.idx[e.hash] = c.lru.PushBack(e)
		c.clean += e.size
	}
	return c, nil
}

func (c *cache) cleanPath(h string) string { return filepath.Join(c.dir, "clean", h) }

// has reports whether h is cached, marking it used.
func (c *cache) has(h string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	el := c.idx[h]
	if el == nil {
		return false
	}
	c.lru.MoveToFront(el)
	e := el.Value.(*centry)
	if now := time.Now(); now.Sub(e.touched) > time.Minute {
		e.touched = now
		os.Chtimes(c.cleanPath(h), now, now) // LRU order for the next restart
	}
	return true
}

// peek is has without touching the LRU order (prefetch decisions).
func (c *cache) peek(h string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.idx[h] != nil
}

// forget drops h from the index (its file vanished or is damaged).
func (c *cache) forget(h string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el := c.idx[h]; el != nil {
		c.clean -= el.Value.(*centry).size
		c.lru.Remove(el)
		delete(c.idx, h)
	}
	os.Remove(c.cleanPath(h))
}

// put stores data as clean chunk h (temp file + rename) and evicts.
func (c *cache) put(h string, data []byte) error {
	if c.peek(h) {
		return nil
	}
	f, err := os.CreateTemp(filepath.Join(c.dir, "tmp"), "get-")
	if err != nil {
		return noSpace(err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), c.cleanPath(h))
	}
	if err != nil {
		os.Remove(f.Name())
		return noSpace(err)
	}
	c.add(h, int64(len(data)))
	return nil
}

// adopt moves a file (an uploaded dirty chunk) in as clean chunk h.
func (c *cache) adopt(h, path string, size int64) error {
	if c.peek(h) {
		return os.Remove(path)
	}
	if err := os.Rename(path, c.cleanPath(h)); err != nil {
		return err
	}
	c.add(h, size)
	return nil
}

func (c *cache) add(h string, size int64) {
	c.mu.Lock()
	if c.idx[h] == nil {
		c.idx[h] = c.lru.PushFront(&centry{hash: h, size: size, touched: time.Now()})
		c.clean += size
	}
	c.mu.Unlock()
	c.evict()
}

// evict removes least recently used clean chunks while over the limit.
// A chunk being read stays readable: its reader holds an open descriptor.
func (c *cache) evict() {
	c.mu.Lock()
	defer c.mu.Unlock()
	// The most recently used chunk stays even over the limit: it is the
	// one just fetched for a reader.
	for c.clean+c.dirty > c.limit && c.lru.Len() > 1 {
		el := c.lru.Back()
		e := el.Value.(*centry)
		c.lru.Remove(el)
		delete(c.idx, e.hash)
		c.clean -= e.size
		if err := os.Remove(c.cleanPath(e.hash)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			continue
		}
	}
}

// reserveDirty accounts n more bytes of dirty chunks (negative: fewer) and
// reports whether dirty data alone now exceeds the limit, in which case
// the caller must write back before adding more.
func (c *cache) reserveDirty(n int64) (over bool) {
	c.mu.Lock()
	c.dirty += n
	over = c.dirty > c.limit
	c.mu.Unlock()
	if n > 0 {
		c.evict()
	}
	return over
}

// pressure reports whether dirty chunks fill more than half the limit
// (the early write-back's mark) and how many bytes of them must be
// uploaded for a quarter to be left.
func (c *cache) pressure() (high bool, excess int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dirty > c.limit/2, c.dirty - c.limit/4
}

func (c *cache) usage() (clean, dirty int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.clean, c.dirty
}

// shed evicts least recently used clean chunks until n bytes are freed or
// none are left, after the disk filled up before the limit was reached
// (the limit is larger than the disk, or something else uses it). It
// reports whether anything was freed.
func (c *cache) shed(n int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	freed := int64(0)
	for freed < n && c.lru.Len() > 0 {
		el := c.lru.Back()
		e := el.Value.(*centry)
		c.lru.Remove(el)
		delete(c.idx, e.hash)
		c.clean -= e.size
		if os.Remove(c.cleanPath(e.hash)) == nil {
			freed += e.size
		}
	}
	return freed > 0
}
