package posix

import "sort"

// itemList is a directory snapshot's entries in key order, cut into chunks
// of at most 2*itemChunk, so that a change found by a directory watch
// (dirwatch.go) is applied by copying one chunk and the chunk index
// (O(chunk + entries/chunk)) instead of the whole list: on a directory of
// a million entries a page after a few changes costs what it costs on a
// small one. An itemList is never changed in place (a walk may be using
// it); with returns a new one sharing the untouched chunks.
type itemList struct {
	chunks [][]dirItem // each non-empty and sorted; their concatenation sorted
	ends   []int       // ends[c]: entries in chunks[0..c]
}

const itemChunk = 1024

// newItemList cuts sorted items into chunks (sharing their array).
func newItemList(items []dirItem) itemList {
	var l itemList
	for i := 0; i < len(items); i += itemChunk {
		j := min(i+itemChunk, len(items))
		l.chunks = append(l.chunks, items[i:j:j])
		l.ends = append(l.ends, j)
	}
	return l
}

// Len is the number of entries.
func (l itemList) Len() int {
	if len(l.ends) == 0 {
		return 0
	}
	return l.ends[len(l.ends)-1]
}

// chunkOf is the chunk holding entry i and the index of its first entry.
func (l itemList) chunkOf(i int) (int, int) {
	c := 0
	if len(l.ends) > 1 {
		c = sort.Search(len(l.ends), func(c int) bool { return l.ends[c] > i })
	}
	return c, l.ends[c] - len(l.chunks[c])
}

// At is entry i (0 <= i < Len).
func (l itemList) At(i int) dirItem {
	c, start := l.chunkOf(i)
	return l.chunks[c][i-start]
}

// Search is the first index whose entry satisfies f (false then true
// along the list), Len if none, as sort.Search.
func (l itemList) Search(f func(dirItem) bool) int {
	c := sort.Search(len(l.chunks), func(c int) bool { ch := l.chunks[c]; return f(ch[len(ch)-1]) })
	if c == len(l.chunks) {
		return l.Len()
	}
	ch := l.chunks[c]
	return l.ends[c] - len(ch) + sort.Search(len(ch), func(i int) bool { return f(ch[i]) })
}

// dirChange is the state of one name after the changes a watch saw:
// present (as a directory or not) or gone.
type dirChange struct {
	present, isDir bool
}

// with returns the list with the changes applied (names: entries of the
// directory, not reserved ones).
func (l itemList) with(changes map[string]dirChange) itemList {
	type op struct {
		sk  string
		add bool
		dir bool
	}
	ops := make([]op, 0, 2*len(changes))
	for name, ch := range changes {
		// A name is a file (sk name) or a directory (sk name/), never both.
		ops = append(ops, op{sk: name}, op{sk: name + "/"})
		if ch.present {
			sk := name
			if ch.isDir {
				sk += "/"
			}
			ops = append(ops, op{sk: sk, add: true, dir: ch.isDir})
		}
	}
	// Sorted by sk, removals before the addition of the same sk.
	sort.Slice(ops, func(i, j int) bool {
		if ops[i].sk != ops[j].sk {
			return ops[i].sk < ops[j].sk
		}
		return !ops[i].add && ops[j].add
	})
	chunks := make([][]dirItem, 0, len(l.chunks)+1)
	oi := 0
	for c := 0; c <= len(l.chunks); c++ {
		// The ops for chunk c: those up to its last sk (all the rest for
		// the last chunk; an empty list gets one new chunk).
		var ch []dirItem
		if c < len(l.chunks) {
			ch = l.chunks[c]
		} else if len(l.chunks) > 0 {
			break
		}
		oj := len(ops)
		if c < len(l.chunks)-1 {
			last := ch[len(ch)-1].sk
			oj = oi + sort.Search(len(ops)-oi, func(k int) bool { return ops[oi+k].sk > last })
		}
		if oi == oj {
			if len(ch) > 0 {
				chunks = append(chunks, ch)
			}
			continue
		}
		merged := make([]dirItem, 0, len(ch)+oj-oi)
		i := 0
		for _, o := range ops[oi:oj] {
			for i < len(ch) && ch[i].sk < o.sk {
				merged = append(merged, ch[i])
				i++
			}
			if i < len(ch) && ch[i].sk == o.sk && !o.add {
				i++ // removed
				continue
			}
			if o.add && (i >= len(ch) || ch[i].sk != o.sk) && (len(merged) == 0 || merged[len(merged)-1].sk != o.sk) {
				merged = append(merged, dirItem{sk: o.sk, isDir: o.dir})
			}
		}
		merged = append(merged, ch[i:]...)
		oi = oj
		for len(merged) > 2*itemChunk {
			chunks = append(chunks, merged[:itemChunk:itemChunk])
			merged = merged[itemChunk:]
		}
		if len(merged) > 0 {
			chunks = append(chunks, merged)
		}
	}
	out := itemList{chunks: chunks, ends: make([]int, len(chunks))}
	n := 0
	for c, ch := range chunks {
		n += len(ch)
		out.ends[c] = n
	}
	return out
}
