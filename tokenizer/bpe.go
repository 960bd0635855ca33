package tokenizer

import (
	"hash/maphash"
	"sync"
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

// mergeCand is a possible merge of the symbol at pos with its successor.
type mergeCand struct {
	rank  uint32
	pos   int32
	newID int32
}

// before orders candidates as HF's merge heap does: lowest rank first, then
// leftmost position.
func (a mergeCand) before(b mergeCand) bool {
	return a.rank < b.rank || (a.rank == b.rank && a.pos < b.pos)
}

// mergeScratch holds the buffers of one merge, reused across words.
type mergeScratch struct {
	syms []symbol
	heap []mergeCand
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
			h = heapPush(h, mergeCand{rank: uint32(v >> 32), pos: int32(i), newID: int32(uint32(v))})
		}
	}
	for len(h) > 0 {
		var top mergeCand
		h, top = heapPop(h)
		cur := &syms[top.pos]
		if cur.dead || cur.next < 0 {
			continue
		}
		right := &syms[cur.next]
		if v, ok := m.merges[pairKey(cur.id, right.id)]; !ok || int32(uint32(v)) != top.newID {
			continue
		}
		cur.id = top.newID
		right.dead = true
		cur.next = right.next
		if cur.next >= 0 {
			syms[cur.next].prev = top.pos
		}
		if cur.prev >= 0 {
			if v, ok := m.merges[pairKey(syms[cur.prev].id, cur.id)]; ok {
				h = heapPush(h, mergeCand{rank: uint32(v >> 32), pos: cur.prev, newID: int32(uint32(v))})
			}
		}
		if cur.next >= 0 {
			if v, ok := m.merges[pairKey(cur.id, syms[cur.next].id)]; ok {
				h = heapPush(h, mergeCand{rank: uint32(v >> 32), pos: top.pos, newID: int32(uint32(v))})
			}
		}
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		out = append(out, syms[i].id)
	}
	sc.syms, sc.heap = syms, h
	return out
}

// heapPush adds c to the binary min-heap h.
func heapPush(h []mergeCand, c mergeCand) []mergeCand {
	h = append(h, c)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

// heapPop removes and returns the first candidate of the min-heap h.
func heapPop(h []mergeCand) ([]mergeCand, mergeCand) {
	top := h[0]
	last := len(h) - 1
	h[0] = h[last]
	h = h[:last]
	i := 0
	for {
		l := 2*i + 1
		if l >= len(h) {
			break
		}
		c := l
		if r := l + 1; r < len(h) && h[r].before(h[l]) {
			c = r
		}
		if !h[c].before(h[i]) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	return h, top
}

// Cache bounds: pre-tokens longer than cacheMaxKey bytes are not cached, and
// a shard that reaches cacheShardCap entries starts over, so memory stays
// bounded whatever text is encoded.
const (
	cacheShards   = 16
	cacheShardCap = 4096
	cacheMaxKey   = 256
)

// wordCache maps pre-tokens to their ids. It is sharded so that concurrent
// Encode calls rarely wait on one another.
type wordCache struct {
	seed   maphash.Seed
	shards [cacheShards]cacheShard
}

// cacheShard is one lock-protected part of the cache.
type cacheShard struct {
	mu sync.Mutex
	m  map[string][]int32
}

// shard picks the shard that holds key.
func (c *wordCache) shard(key string) *cacheShard {
	return &c.shards[maphash.String(c.seed, key)%cacheShards]
}

// get returns the cached ids of key; callers must not modify them.
func (c *wordCache) get(key string) ([]int32, bool) {
	if len(key) > cacheMaxKey {
		return nil, false
	}
	s := c.shard(key)
	s.mu.Lock()
	ids, ok := s.m[key]
	s.mu.Unlock()
	return ids, ok
}

// put stores a copy of ids under a copy of key (the key is usually a slice
// of a larger text that the cache must not keep alive).
func (c *wordCache) put(key string, ids []int32) {
	if len(key) > cacheMaxKey {
		return
	}
	k := string([]byte(key))
	v := append([]int32(nil), ids...)
	s := c.shard(key)
	s.mu.Lock()
	if s.m == nil || len(s.m) >= cacheShardCap {
		s.m = make(map[string][]int32, 256)
	}
	s.m[k] = v
	s.mu.Unlock()
}
