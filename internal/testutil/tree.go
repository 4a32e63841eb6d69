package testutil

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// TreeSums walks root and returns one line per entry, keyed by its path
// relative to root: type, mode, size and sha256 of the content, or the
// link target. Ownership and times are not compared (the server stores
// what tar set, but atime moves on reads). Two trees are equal as far as
// tar, git or a copy is concerned when their maps are.
func TreeSums(root string) (map[string]string, error) {
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[rel] = "link " + target
		case fi.IsDir():
			out[rel] = fmt.Sprintf("dir %o", fi.Mode().Perm())
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			out[rel] = fmt.Sprintf("file %o %d %s", fi.Mode().Perm(), len(b), hex.EncodeToString(sum[:]))
		default:
			out[rel] = "other " + fi.Mode().String()
		}
		return nil
	})
	return out, err
}
