package vfs

import (
	"encoding/binary"
	"errors"
	"strings"

	"golang.org/x/sys/unix"
)

// DirEntry is one directory entry. Cookie is the position after it: pass it
// back to ReadDir to continue. Cookies are the file system's own directory
// offsets (ext4: name hashes), so they stay valid across server restarts
// and across unrelated changes to the directory, which is what lets the
// cookie verifier stay constant (as knfsd does on ext4).
type DirEntry struct {
	Name   string
	FileID uint64
	Cookie uint64
	Type   FileType
	// Handle and Attr are filled by ReadDirPlus (nil/zero when the entry
	// vanished between listing and stat).
	Handle Handle
	Attr   *Attr
}

// ReadDir lists up to max entries of dir after cookie (0: from the start)
// as c. "." and "..", and reserved names, are not listed. eof reports that
// the listing is complete.
func (fs *FS) ReadDir(c Cred, dir Handle, cookie uint64, max int, plus bool) (ents []DirEntry, eof bool, da Attr, err error) {
	o, err := fs.resolve(dir)
	if err != nil {
		return nil, false, Attr{}, err
	}
	defer o.close()
	da = fs.attrOf(&o.st)
	if !o.isDir() {
		return nil, false, da, unix.ENOTDIR
	}
	if max <= 0 {
		max = 1
	}
	err = fs.as(c, func() error {
		fd, err := unix.Openat(o.fd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if cookie != 0 {
			if _, err := unix.Seek(fd, int64(cookie), 0); err != nil {
				return errBadCookie
			}
		}
		buf := make([]byte, 32<<10)
		// Bounded: each getdents call either makes progress or ends the listing.
		for iter := 0; iter < 1<<20 && len(ents) < max; iter++ {
			n, err := unix.Getdents(fd, buf)
			if err != nil {
				return err
			}
			if n == 0 {
				eof = true
				return nil
			}
			b := buf[:n]
			for len(b) >= 19 {
				ino := binary.LittleEndian.Uint64(b[0:8])
				doff := binary.LittleEndian.Uint64(b[8:16])
				reclen := int(binary.LittleEndian.Uint16(b[16:18]))
				typ := b[18]
				if reclen < 19 || reclen > len(b) {
					return unix.EIO
				}
				name := b[19:reclen]
				if i := indexNUL(name); i >= 0 {
					name = name[:i]
				}
				b = b[reclen:]
				nm := string(name)
				if nm == "." || nm == ".." || strings.HasPrefix(nm, ReservedPrefix) {
					continue
				}
				if len(ents) >= max {
					// Full: reposition so the next call starts at this entry.
					return nil
				}
				e := DirEntry{Name: nm, FileID: ino, Cookie: doff, Type: dtType(typ)}
				if plus {
					var st unix.Stat_t
					if unix.Fstatat(o.fd, nm, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
						a := fs.attrOf(&st)
						e.Attr = &a
						e.Type = a.Type
						if h, err := fs.handleOf(o.fd, nm, &st, o.st.Ino, o.path); err == nil {
							e.Handle = h
						}
					}
				}
				ents = append(ents, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, false, da, err
	}
	if len(ents) == 0 && !eof {
		eof = true
	}
	return ents, eof, da, nil
}

// errBadCookie is returned for a cookie the directory cannot seek to.
var errBadCookie = errors.New("vfs: bad directory cookie")

// ErrBadCookie is returned by ReadDir for an unusable cookie.
var ErrBadCookie = errBadCookie

func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

func dtType(t byte) FileType {
	switch t {
	case unix.DT_DIR:
		return TypeDir
	case unix.DT_LNK:
		return TypeSymlink
	case unix.DT_BLK:
		return TypeBlock
	case unix.DT_CHR:
		return TypeChar
	case unix.DT_SOCK:
		return TypeSocket
	case unix.DT_FIFO:
		return TypeFIFO
	}
	return TypeRegular
}
