// Package prefixcache keeps engine state snapshots keyed by the token
// prefix that produced them: a bounded LRU (entries and bytes) from which a
// request restores the longest cached prefix of its prompt and prefills
// only the rest. Snapshots are immutable, so a hit never changes an entry,
// and entries are added only after a request succeeded.
package prefixcache

import (
	"container/list"
	"slices"
	"sync"
)

// Snapshot is what the cache holds (a *runtime.Snapshot): its size and the
// number of tokens it covers.
type Snapshot interface {
	Bytes() int64
	Position() int
}

// Cache is safe for concurrent use.
type Cache[S Snapshot] struct {
	mu         sync.Mutex
	maxEntries int
	maxBytes   int64
	lru        *list.List // front: most recently used; values *entry
	bytes      int64
	stats      Stats
}

type entry[S Snapshot] struct {
	tokens []int32
	snap   S
}

// Stats are the cache's counters.
type Stats struct {
	Hits, Misses, Evictions uint64
	Entries                 int
	Bytes                   int64
}

// New returns a cache bounded by entry count and bytes (a bound ≤ 0
// disables the cache).
func New[S Snapshot](maxEntries int, maxBytes int64) *Cache[S] {
	return &Cache[S]{maxEntries: maxEntries, maxBytes: maxBytes, lru: list.New()}
}

// Enabled reports whether the cache can hold anything.
func (c *Cache[S]) Enabled() bool { return c != nil && c.maxEntries > 0 && c.maxBytes > 0 }

// Lookup returns the snapshot of the longest cached prefix of tokens (the
// whole of tokens at most) and its length; nil, 0 on a miss.
func (c *Cache[S]) Lookup(tokens []int32) (S, int) {
	var none S
	if !c.Enabled() {
		return none, 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var best *list.Element
	for e := c.lru.Front(); e != nil; e = e.Next() {
		k := e.Value.(*entry[S]).tokens
		if len(k) <= len(tokens) && slices.Equal(k, tokens[:len(k)]) &&
			(best == nil || len(k) > len(best.Value.(*entry[S]).tokens)) {
			best = e
		}
	}
	if best == nil {
		c.stats.Misses++
		return none, 0
	}
	c.stats.Hits++
	c.lru.MoveToFront(best)
	en := best.Value.(*entry[S])
	return en.snap, len(en.tokens)
}

// Put stores the snapshot of tokens (replacing an entry for the same
// tokens) and evicts least recently used entries beyond the bounds. A
// snapshot larger than the byte bound is not stored.
func (c *Cache[S]) Put(tokens []int32, s S) {
	if !c.Enabled() || s.Bytes() > c.maxBytes || s.Position() != len(tokens) {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.lru.Front(); e != nil; e = e.Next() {
		if en := e.Value.(*entry[S]); slices.Equal(en.tokens, tokens) {
			c.bytes += s.Bytes() - en.snap.Bytes()
			en.snap = s
			c.lru.MoveToFront(e)
			c.evict()
			return
		}
	}
	c.lru.PushFront(&entry[S]{tokens: slices.Clone(tokens), snap: s})
	c.bytes += s.Bytes()
	c.evict()
}

func (c *Cache[S]) evict() {
	for c.lru.Len() > c.maxEntries || c.bytes > c.maxBytes {
		back := c.lru.Back()
		c.bytes -= back.Value.(*entry[S]).snap.Bytes()
		c.lru.Remove(back)
		c.stats.Evictions++
	}
}

// Stats returns the counters.
func (c *Cache[S]) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries, s.Bytes = c.lru.Len(), c.bytes
	return s
}
