package tokenizer

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// bpeModel is the byte-level BPE model of SPEC §6: each pre-token's bytes
// start as one symbol each and adjacent pairs merge by rank.
type bpeModel struct {
	// merges maps a pair (left<<32 | right) to rank<<32 | merged id.
	merges map[uint64]uint64
	// byteID is the vocabulary id of each byte's symbol, -1 where the
	// vocabulary lacks it (HF then drops the byte, or uses unk).
	byteID [256]int32
	// unkID is the unk token's id, -1 when the model has none.
	unkID   int32
	fuseUnk bool
	// ignoreMerges emits a pre-token that is itself in the vocabulary as
	// that one token, without merging (HF's ignore_merges).
	ignoreMerges bool
	vocab        map[string]int32
	cache        wordCache
	scratch      sync.Pool // *mergeScratch
}

// pairKey packs a symbol pair into the merges map's key.
func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// symbol is one node of the doubly linked list a word's symbols form while
// merging; dead marks the right half of a merge.
type symbol struct {
	id         int32
	prev, next int32
	dead       bool
}

// A merge candidate is packed as rank<<32 | pos: the merge of the symbol at
// pos with its successor by the merge of that rank. Ordering the packed
// values orders candidates as HF's merge heap does: lowest rank first, then
// leftmost position.
func mergeCand(rank uint32, pos int32) uint64 { return uint64(rank)<<32 | uint64(uint32(pos)) }

// mergeScratch holds the buffers of one merge, reused across words.
type mergeScratch struct {
	syms []symbol
	heap []uint64
}

// encodeWord appends the ids of one pre-token (raw bytes) to out, through
// the cache: the same pre-token always gives the same ids.
func (m *bpeModel) encodeWord(piece string, out []int32) []int32 {
	if len(piece) == 1 && !m.ignoreMerges {
		// One symbol: nothing can merge.
		if id := m.byteID[piece[0]]; id >= 0 {
			return append(out, id)
		}
		if m.unkID >= 0 {
			return append(out, m.unkID)
		}
		return out
	}
	if ids, ok := m.cache.get(piece); ok {
		return append(out, ids...)
	}
	start := len(out)
	out = m.merge(piece, out)
	m.cache.put(piece, out[start:])
	return out
}

// merge runs BPE on one pre-token and appends the resulting ids. It follows
// HF's Word::merge_all: a min-heap of candidate merges keyed by (rank,
// position); stale candidates (a side already merged away, or the pair no
// longer giving the same token) are skipped when popped.
func (m *bpeModel) merge(piece string, out []int32) []int32 {
	if m.ignoreMerges {
		if id, ok := m.vocab[byteLevelString(piece)]; ok {
			return append(out, id)
		}
	}
	sc, _ := m.scratch.Get().(*mergeScratch)
	if sc == nil {
		sc = &mergeScratch{}
	}
	defer m.scratch.Put(sc)

	syms := sc.syms[:0]
	pendingUnk := false
	for i := 0; i < len(piece); i++ {
		id := m.byteID[piece[i]]
		if id < 0 {
			if m.unkID < 0 {
				continue
			}
			if pendingUnk && m.fuseUnk {
				continue
			}
			id, pendingUnk = m.unkID, true
		} else {
			pendingUnk = false
		}
		n := int32(len(syms))
		syms = append(syms, symbol{id: id, prev: n - 1, next: n + 1})
	}
	if len(syms) == 0 {
		sc.syms = syms
		return out
	}
	syms[len(syms)-1].next = -1

	h := sc.heap[:0]
	for i := 0; i+1 < len(syms); i++ {
		if v, ok := m.merges[pairKey(syms[i].id, syms[i+1].id)]; ok {
			h = heapPush(h, mergeCand(uint32(v>>32), int32(i)))
		}
	}
	for len(h) > 0 {
		var top uint64
		h, top = heapPop(h)
		rank, pos := uint32(top>>32), int32(uint32(top))
		cur := &syms[pos]
		if cur.dead || cur.next < 0 {
			continue
		}
		right := &syms[cur.next]
		// Stale when the pair at pos has changed since the candidate was
		// pushed: ranks name pairs one to one, so comparing them is HF's
		// comparison of the merged ids.
		v, ok := m.merges[pairKey(cur.id, right.id)]
		if !ok || uint32(v>>32) != rank {
			continue
		}
		cur.id = int32(uint32(v))
		right.dead = true
		cur.next = right.next
		if cur.next >= 0 {
			syms[cur.next].prev = pos
		}
		if cur.prev >= 0 {
			if v, ok := m.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
				h = heapPush(h, mergeCand(uint32(v>>32), cur.prev))
			}
		}
		if cur.next >= 0 {
			if v, ok := m.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
				h = heapPush(h, mergeCand(uint32(v>>32), pos))
			}
		}
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		out = append(out, syms[i].id)
	}
	sc.syms, sc.heap = syms, h
	return out
}

// heapPush adds c to the 4-ary min-heap h (shallower than a binary one,
// as HF's QuaternaryHeap).
func heapPush(h []uint64, c uint64) []uint64 {
	h = append(h, c)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 4
		if h[p] <= c {
			break
		}
		h[i] = h[p]
		i = p
	}
	h[i] = c
	return h
}

// heapPop removes and returns the smallest candidate of the 4-ary heap h.
func heapPop(h []uint64) ([]uint64, uint64) {
	top := h[0]
	last := h[len(h)-1]
	h = h[:len(h)-1]
	n := len(h)
	if n == 0 {
		return h, top
	}
	i := 0
	for {
		c := 4*i + 1
		if c >= n {
			break
		}
		m := c
		for k := c + 1; k < c+4 && k < n; k++ {
			if h[k] < h[m] {
				m = k
			}
		}
		if h[m] >= last {
			break
		}
		h[i] = h[m]
		i = m
	}
	h[i] = last
	return h, top
}

// Cache bounds: pre-tokens longer than cacheMaxKey bytes are not cached,
// and the cache holds at most cacheSlots entries, so its memory stays
// bounded whatever text is encoded.
const (
	cacheSlots  = 1 << 16
	cacheMaxKey = 256
)

// wordCache maps pre-tokens to their ids. It is direct-mapped by hash, a
// newer entry replacing an older one in its slot, and lock-free: slots are
// swapped atomically, so concurrent Encode calls never wait on each other.
type wordCache struct {
	seed  maphash.Seed
	slots []atomic.Pointer[cacheEntry]
}

// cacheEntry is one cached pre-token and its ids; immutable once stored.
type cacheEntry struct {
	key string
	ids []int32
}

// newWordCache returns an empty cache.
func newWordCache() wordCache {
	return wordCache{seed: maphash.MakeSeed(), slots: make([]atomic.Pointer[cacheEntry], cacheSlots)}
}

// slot is where key lives.
func (c *wordCache) slot(key string) *atomic.Pointer[cacheEntry] {
	return &c.slots[maphash.String(c.seed, key)&(cacheSlots-1)]
}

// get returns the cached ids of key; callers must not modify them.
func (c *wordCache) get(key string) ([]int32, bool) {
	if len(key) > cacheMaxKey {
		return nil, false
	}
	if e := c.slot(key).Load(); e != nil && e.key == key {
		return e.ids, true
	}
	return nil, false
}

// put stores copies of key (usually a slice of a larger text that the cache
// must not keep alive) and ids.
func (c *wordCache) put(key string, ids []int32) {
	if len(key) > cacheMaxKey {
		return
	}
	c.slot(key).Store(&cacheEntry{key: strings.Clone(key), ids: slices.Clone(ids)})
}
