package posix

import (
	"math/rand/v2"
	"slices"
	"sort"
	"testing"
)

// TestSortItems: sortItems orders like sort.Slice by sk on names that tie
// on their first 8 bytes or not, shorter than 8 bytes, with zero and high
// bytes and directory entries ("d/").
func TestSortItems(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	alpha := []byte{0, 1, '-', '.', '/', '0', '9', 'a', 'z', 0x7f, 0x80, 0xff}
	for round := range 200 {
		n := rng.IntN(3000)
		items := make([]dirItem, n)
		for i := range items {
			var b []byte
			if rng.IntN(2) == 0 {
				b = append(b, "samepre"[:rng.IntN(8)]...) // ties on the prefix key
			}
			for range rng.IntN(12) {
				b = append(b, alpha[rng.IntN(len(alpha))])
			}
			if rng.IntN(5) == 0 {
				items[i] = dirItem{sk: string(b) + "/", isDir: true}
			} else {
				items[i] = dirItem{sk: string(b)}
			}
		}
		want := slices.Clone(items)
		sort.SliceStable(want, func(i, j int) bool { return want[i].sk < want[j].sk })
		got := sortItems(items)
		if len(got) != len(want) {
			t.Fatalf("round %d: %d items, want %d", round, len(got), len(want))
		}
		for i := range got {
			if got[i].sk != want[i].sk {
				t.Fatalf("round %d: item %d is %q, want %q", round, i, got[i].sk, want[i].sk)
			}
		}
	}
}
