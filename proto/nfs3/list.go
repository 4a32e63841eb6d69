package nfs3

import "github.com/tristore/tristore/proto/sunrpc"

// XDR optional-data linked lists (entry3, entryplus3, mountbody, exportnode,
// groupnode): each item is preceded by value_follows = TRUE and the list ends
// with FALSE. One encoder and one bounded decoder serve every list so the
// maxListItems bound is applied the same way everywhere.

// encodeList writes list, calling item for each element after its
// value_follows flag, then the terminating FALSE.
func encodeList[E any](w *sunrpc.Writer, list []E, item func(*E)) {
	for i := range list {
		w.Bool(true)
		item(&list[i])
	}
	w.Bool(false)
}

// decodeList appends the decoded items of a list to dst and returns it. It
// fails r with tooLong after maxListItems items, and stops (without
// appending the item) at the first decoding error.
func decodeList[E any](r *sunrpc.Reader, dst []E, tooLong string, item func(*E)) []E {
	for i := 0; r.Bool(); i++ {
		if i >= maxListItems {
			r.Fail("%s", tooLong)
			break
		}
		var e E
		item(&e)
		if r.Err() != nil {
			break
		}
		dst = append(dst, e)
	}
	return dst
}
