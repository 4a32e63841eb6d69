package posix

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"testing"
)

// TestItemListWith: a chunked list changed by random batches (creates,
// removals, a file becoming a directory) matches a sorted slice of the
// same names, at every index and for every search, and is never changed
// in place (the previous list, which a walk may still use, stays as it
// was).
func TestItemListWith(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	model := map[string]bool{} // name -> isDir
	var items []dirItem
	for i := range 5000 {
		n := fmt.Sprintf("k%05d", i*3)
		model[n] = false
		items = append(items, dirItem{sk: n})
	}
	flat := func() []dirItem {
		var out []dirItem
		for n, d := range model {
			if d {
				out = append(out, dirItem{sk: n + "/", isDir: true})
			} else {
				out = append(out, dirItem{sk: n})
			}
		}
		sort.Slice(out, func(i, j int) bool { return out[i].sk < out[j].sk })
		return out
	}
	l := newItemList(items)
	for round := range 60 {
		ch := map[string]dirChange{}
		for range 1 + rng.IntN(3000) {
			n := fmt.Sprintf("k%05d", rng.IntN(16000))
			if rng.IntN(3) == 0 {
				n += "-x" // sorts between k00001 and k00001/
			}
			switch rng.IntN(3) {
			case 0:
				delete(model, n)
				ch[n] = dirChange{}
			default:
				d := rng.IntN(4) == 0
				model[n] = d
				ch[n] = dirChange{present: true, isDir: d}
			}
		}
		before := make([]dirItem, 0, l.Len())
		for i := range l.Len() {
			before = append(before, l.At(i))
		}
		nl := l.with(ch)
		for i := range before {
			if l.At(i) != before[i] {
				t.Fatalf("round %d: the old list changed at %d", round, i)
			}
		}
		l = nl
		want := flat()
		if l.Len() != len(want) {
			t.Fatalf("round %d: %d entries, want %d", round, l.Len(), len(want))
		}
		for i, w := range want {
			if got := l.At(i); got != w {
				t.Fatalf("round %d: entry %d is %+v, want %+v", round, i, got, w)
			}
		}
		for c, chunk := range l.chunks {
			if len(chunk) == 0 || len(chunk) > 2*itemChunk {
				t.Fatalf("round %d: chunk %d has %d entries", round, c, len(chunk))
			}
		}
		for range 50 {
			k := fmt.Sprintf("k%05d", rng.IntN(17000))
			got := l.Search(func(it dirItem) bool { return it.sk >= k })
			if w := sort.Search(len(want), func(i int) bool { return want[i].sk >= k }); got != w {
				t.Fatalf("round %d: Search(%s) = %d, want %d", round, k, got, w)
			}
		}
	}
}
