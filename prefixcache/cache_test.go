package prefixcache

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

type snap struct {
	pos   int
	bytes int64
}

func (s *snap) Bytes() int64  { return s.bytes }
func (s *snap) Position() int { return s.pos }

func TestLookupLongestPrefix(t *testing.T) {
	c := New[*snap](8, 1000)
	c.Put([]int32{1, 2}, &snap{2, 10})
	c.Put([]int32{1, 2, 3, 4}, &snap{4, 10})
	c.Put([]int32{9}, &snap{1, 10})
	tests := []struct {
		tokens []int32
		want   int
	}{
		{[]int32{1, 2, 3, 4, 5}, 4}, // extension of the longest
		{[]int32{1, 2, 3, 4}, 4},    // exact hit
		{[]int32{1, 2, 3}, 2},       // only the shorter is a prefix
		{[]int32{1}, 0},             // shorter than every key
		{[]int32{2, 1}, 0},
	}
	for _, tt := range tests {
		s, n := c.Lookup(tt.tokens)
		if n != tt.want || (n > 0 && s.pos != n) || (n == 0 && s != nil) {
			t.Errorf("Lookup(%v) = %v, %d; want length %d", tt.tokens, s, n, tt.want)
		}
	}
	if diff := cmp.Diff(Stats{Hits: 3, Misses: 2, Entries: 3, Bytes: 30}, c.Stats()); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
}

func TestEvictionRespectsBothBounds(t *testing.T) {
	c := New[*snap](3, 100)
	for i := int32(1); i <= 4; i++ {
		c.Put([]int32{i}, &snap{1, 10})
	}
	if _, n := c.Lookup([]int32{1}); n != 0 {
		t.Error("entry bound: the oldest entry survived")
	}
	c.Put([]int32{5, 5}, &snap{2, 85}) // 10+10+85 > 100: evicts two
	st := c.Stats()
	if st.Entries != 2 || st.Bytes != 95 || st.Evictions != 3 {
		t.Errorf("after byte eviction: %+v", st)
	}
	c.Put([]int32{6}, &snap{1, 101}) // larger than the bound: not stored
	if _, n := c.Lookup([]int32{6}); n != 0 {
		t.Error("an oversized snapshot was stored")
	}
	// Replacing an entry updates its bytes.
	c.Put([]int32{5, 5}, &snap{2, 50})
	if st := c.Stats(); st.Bytes != 60 {
		t.Errorf("bytes after replace = %d, want 60", st.Bytes)
	}
	// A snapshot whose position disagrees with its key is refused.
	c.Put([]int32{7, 7, 7}, &snap{2, 1})
	if _, n := c.Lookup([]int32{7, 7, 7}); n != 0 {
		t.Error("mismatched snapshot stored")
	}
}

func TestDisabled(t *testing.T) {
	c := New[*snap](0, 0)
	c.Put([]int32{1}, &snap{1, 1})
	if s, n := c.Lookup([]int32{1}); n != 0 || s != nil {
		t.Error("a disabled cache returned an entry")
	}
}

// relSnap counts its releases and may move its bytes between tiers.
type relSnap struct {
	snap
	dev      int64
	released int
}

func (s *relSnap) Release()           { s.released++ }
func (s *relSnap) DeviceBytes() int64 { return s.dev }

// TestReleaseWhatIsNotKept: the cache releases every snapshot it lets go of
// — evicted, replaced, refused — exactly once, and none that it keeps.
func TestReleaseWhatIsNotKept(t *testing.T) {
	c := New[*relSnap](2, 100)
	mk := func(n int, bytes, dev int64) *relSnap {
		return &relSnap{snap: snap{pos: n, bytes: bytes}, dev: dev}
	}
	a, b, b2, big, short, d := mk(1, 10, 500), mk(2, 10, 0), mk(2, 20, 0), mk(3, 101, 0), mk(5, 1, 0), mk(4, 10, 7)
	c.Put([]int32{1}, a)
	c.Put([]int32{1, 2}, b)
	c.Put([]int32{1, 2}, b2)       // replaces b
	c.Put([]int32{1, 2}, b2)       // the same snapshot again: kept, not released
	c.Put([]int32{1, 2, 3}, big)   // over the byte bound: refused
	c.Put([]int32{1, 2, 3}, short) // position does not match its tokens: refused
	c.Put([]int32{1, 2, 3, 4}, d)  // evicts a (entries bound)
	got := []int{a.released, b.released, b2.released, big.released, short.released, d.released}
	if diff := cmp.Diff([]int{1, 1, 0, 1, 1, 0}, got); diff != "" {
		t.Errorf("releases of a, b, b2, big, short, d (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Stats{Evictions: 1, Entries: 2, Bytes: 30, DeviceBytes: 7}, c.Stats()); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
	// A snapshot moved from the device to the host after it was stored
	// counts at the next check of the bound.
	d.bytes, d.dev = 96, 0
	c.Put([]int32{9}, mk(1, 5, 0))
	if st := c.Stats(); st.Entries != 1 || st.Bytes != 5 || d.released != 1 || b2.released != 1 {
		t.Errorf("after the move: %+v, d released %d, b2 released %d", st, d.released, b2.released)
	}
}
