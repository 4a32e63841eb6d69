package powerloss

// chunkSize is the unit of the sparse chunk map. A chunk absent from the
// map is a hole (reads as zeros, uses no memory).
const chunkSize = 64 << 10

// fileData is a sparse file's content: a chunk map and a size. Chunks are
// shared copy-on-write between the volatile state and durable snapshots:
// owned names the chunks only the volatile state holds (writable in
// place); every other chunk is cloned before its first write.
type fileData struct {
	chunks map[int64][]byte
	owned  map[int64]bool
	size   int64
}

func newData() fileData {
	return fileData{chunks: map[int64][]byte{}, owned: map[int64]bool{}}
}

// snapshot returns a durable copy sharing every chunk; afterwards no chunk
// is owned, so the next write to any of them clones it first.
func (d *fileData) snapshot() durData {
	m := make(map[int64][]byte, len(d.chunks))
	for k, v := range d.chunks {
		m[k] = v
	}
	clear(d.owned)
	return durData{chunks: m, size: d.size}
}

// durData is the durable content of a file: immutable once made.
type durData struct {
	chunks map[int64][]byte
	size   int64
}

// restore makes a volatile copy of a durable snapshot (sharing chunks).
func (d durData) restore() fileData {
	fd := newData()
	for k, v := range d.chunks {
		fd.chunks[k] = v
	}
	fd.size = d.size
	return fd
}

// writable returns chunk i ready to be written in place.
func (d *fileData) writable(i int64) []byte {
	c, ok := d.chunks[i]
	if ok && d.owned[i] {
		return c
	}
	n := make([]byte, chunkSize)
	if ok {
		copy(n, c)
	}
	d.chunks[i] = n
	d.owned[i] = true
	return n
}

// writeAt writes p at off, growing the file.
func (d *fileData) writeAt(p []byte, off int64) {
	for len(p) > 0 {
		i, o := off/chunkSize, off%chunkSize
		n := copy(d.writable(i)[o:], p)
		p, off = p[n:], off+int64(n)
	}
	if off > d.size {
		d.size = off
	}
}

// readAt fills p from off (holes read as zeros) and returns the count,
// short at the end of the file.
func (d *fileData) readAt(p []byte, off int64) int {
	if off >= d.size {
		return 0
	}
	if rest := d.size - off; int64(len(p)) > rest {
		p = p[:rest]
	}
	n := 0
	for n < len(p) {
		i, o := (off+int64(n))/chunkSize, (off+int64(n))%chunkSize
		m := min(int64(len(p)-n), chunkSize-o)
		if c, ok := d.chunks[i]; ok {
			copy(p[n:n+int(m)], c[o:])
		} else {
			clear(p[n : n+int(m)])
		}
		n += int(m)
	}
	return n
}

// zero makes [off, off+n) read as zeros: whole chunks are dropped (a hole),
// partial ones are zeroed in place (cloned first if shared).
func (d *fileData) zero(off, n int64) {
	end := off + n
	for off < end {
		i, o := off/chunkSize, off%chunkSize
		m := min(end-off, chunkSize-o)
		if _, ok := d.chunks[i]; ok {
			if o == 0 && m == chunkSize {
				delete(d.chunks, i)
				delete(d.owned, i)
			} else {
				clear(d.writable(i)[o : o+m])
			}
		}
		off += m
	}
}

// truncate sets the size; bytes past a shrunk end are gone (a later grow
// reads zeros there).
func (d *fileData) truncate(size int64) {
	if size < d.size {
		last := (d.size + chunkSize - 1) / chunkSize
		d.zero(size, last*chunkSize-size)
		for i := range d.chunks {
			if i*chunkSize >= size {
				delete(d.chunks, i)
				delete(d.owned, i)
			}
		}
	}
	d.size = size
}

// blocks is the allocated size in 512-byte units (for stat and statfs).
func (d *fileData) blocks() uint64 { return uint64(len(d.chunks)) * chunkSize / 512 }

// seekData finds the next data (data=true) or hole at or after off, as
// lseek SEEK_DATA/SEEK_HOLE; ok is false past the end (ENXIO).
func (d *fileData) seekData(off int64, data bool) (int64, bool) {
	if off >= d.size {
		return 0, false
	}
	for i := off / chunkSize; i*chunkSize < d.size; i++ {
		_, has := d.chunks[i]
		if has == data {
			return max(off, i*chunkSize), true
		}
	}
	if data {
		return 0, false
	}
	return d.size, true
}
