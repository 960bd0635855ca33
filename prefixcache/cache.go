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
// number of tokens it covers. Bytes is the host memory it takes now; a
// snapshot may move between device and host memory while cached, so the
// cache sums its entries' Bytes whenever it checks its bound.
type Snapshot interface {
	Bytes() int64
	Position() int
}

// Releaser is implemented by snapshots that hold memory to give back (a
// device buffer) when the cache lets go of them: evicted, replaced, or not
// stored at all.
type Releaser interface{ Release() }

// DeviceHolder is implemented by snapshots that may live in device memory;
// Stats counts it.
type DeviceHolder interface{ DeviceBytes() int64 }

func release[S Snapshot](s S) {
	if r, ok := any(s).(Releaser); ok {
		r.Release()
	}
}

// Cache is safe for concurrent use.
type Cache[S Snapshot] struct {
	mu         sync.Mutex
	maxEntries int
	maxBytes   int64
	lru        *list.List // front: most recently used; values *entry
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
	Bytes                   int64 // host memory of the entries
	DeviceBytes             int64 // device memory of the entries
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
// snapshot larger than the byte bound is not stored. The cache owns s from
// here: what it does not keep, it releases.
func (c *Cache[S]) Put(tokens []int32, s S) {
	if !c.Enabled() || s.Bytes() > c.maxBytes || s.Position() != len(tokens) {
		release(s)
		return
	}
	// Released after the lock: a release may wait for the engine's step.
	var drop []S
	defer func() {
		for _, d := range drop {
			release(d)
		}
	}()
	c.mu.Lock()
	defer c.mu.Unlock()
	for e := c.lru.Front(); e != nil; e = e.Next() {
		if en := e.Value.(*entry[S]); slices.Equal(en.tokens, tokens) {
			if any(en.snap) != any(s) {
				drop = append(drop, en.snap)
			}
			en.snap = s
			c.lru.MoveToFront(e)
			drop = append(drop, c.evict()...)
			return
		}
	}
	c.lru.PushFront(&entry[S]{tokens: slices.Clone(tokens), snap: s})
	drop = append(drop, c.evict()...)
}

// bytes is the host memory of the entries now.
func (c *Cache[S]) bytes() int64 {
	var n int64
	for e := c.lru.Front(); e != nil; e = e.Next() {
		n += e.Value.(*entry[S]).snap.Bytes()
	}
	return n
}

// evict removes least recently used entries beyond the bounds and returns
// their snapshots, to be released.
func (c *Cache[S]) evict() (out []S) {
	for c.lru.Len() > c.maxEntries || c.bytes() > c.maxBytes {
		back := c.lru.Back()
		c.lru.Remove(back)
		out = append(out, back.Value.(*entry[S]).snap)
		c.stats.Evictions++
	}
	return out
}

// Stats returns the counters.
func (c *Cache[S]) Stats() Stats {
	if c == nil {
		return Stats{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.stats
	s.Entries, s.Bytes = c.lru.Len(), c.bytes()
	for e := c.lru.Front(); e != nil; e = e.Next() {
		if d, ok := any(e.Value.(*entry[S]).snap).(DeviceHolder); ok {
			s.DeviceBytes += d.DeviceBytes()
		}
	}
	return s
}
