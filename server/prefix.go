package server

import (
	"context"
	"errors"

	"github.com/aimaproject/aimac/prefixcache"
	"github.com/aimaproject/aimac/runtime"
)

// Snapshotter is implemented by engines whose sequence state can be saved
// and restored (*runtime.Engine); the prefix cache needs it.
type Snapshotter interface {
	Snapshot(logits []float32) (*runtime.Snapshot, error)
	Restore(s *runtime.Snapshot) (runtime.Restored, error)
}

// prefixCache is the server's cache of engine snapshots.
type prefixCache = prefixcache.Cache[*runtime.Snapshot]

// pendingSnapshot is a snapshot to add to the cache once the request
// succeeds: a failed or cancelled request never changes the cache.
type pendingSnapshot struct {
	tokens []int32
	snap   *runtime.Snapshot
}

// sequence is a started request's cache work: the snapshots it took, to be
// committed once it succeeds, and the snapshot of its prompt's end, taken
// only after the first token is out (settle).
type sequence struct {
	pending []pendingSnapshot
	end     func() error // takes the prompt end's snapshot; nil once taken
}

// settle takes the prompt end's snapshot if it is still to take: before the
// first step that changes the engine's state, and before the commit. The
// first token is drawn from the prompt's logits and changes nothing, so
// the snapshot is off the time to first token.
func (q *sequence) settle() error {
	if q == nil || q.end == nil {
		return nil
	}
	f := q.end
	q.end = nil
	return f()
}

// startSequence puts the engine at the end of prompt and returns the logits
// of its next token. With the cache it restores the longest cached prefix
// (an exact hit needs no prefill at all) and prefills only the rest, taking
// a snapshot at the turn boundary (where the next chat turn's prompt will
// diverge) and leaving the one of the prompt's end to settle; both are
// committed after success.
//
// The time of each part goes to the request's TTFT parts: restore (the
// lookup and restore, or the reset of a miss), prefill, snapshot.
func (s *Server) startSequence(ctx context.Context, m *Model, prompt []int32, boundary int, useCache bool) (logits []float32, cached int, seq *sequence, err error) {
	parts := partsOf(ctx)
	snapper, ok := m.Engine.(Snapshotter)
	if !ok || !useCache || !s.prefix.Enabled() {
		if err := m.Engine.Reset(); err != nil {
			return nil, 0, nil, err
		}
		parts.mark(partRestore)
		logits, err := m.Engine.Prefill(ctx, prompt, nil)
		parts.mark(partPrefill)
		return logits, 0, &sequence{}, err
	}
	q := &sequence{}
	defer func() {
		if err != nil { // what this request took is not cached
			release(q.pending)
		}
	}()
	snap, n := s.prefix.Lookup(prompt)
	if n > 0 {
		r, err := snapper.Restore(snap)
		if errors.Is(err, runtime.ErrReleased) {
			n = 0 // evicted between the lookup and the restore: a miss
		} else if err != nil {
			return nil, 0, nil, err
		} else {
			logits, cached = snap.Logits(), n
			s.metrics.Restore(string(r.Tier), r.Copied, r.Adopted)
			if parts != nil {
				parts.cached, parts.restored = n, r
			}
		}
	}
	s.metrics.PrefixCache(n > 0)
	if n == 0 {
		if err := m.Engine.Reset(); err != nil {
			return nil, 0, nil, err
		}
	}
	parts.mark(partRestore)
	pos := n
	// take snapshots the state at end, whose next token logits predict.
	take := func(end int, logits []float32) error {
		sn, err := snapper.Snapshot(logits)
		if err != nil {
			return err
		}
		q.pending = append(q.pending, pendingSnapshot{tokens: prompt[:end], snap: sn})
		return nil
	}
	prefill := func(end int) error {
		if logits, err = m.Engine.Prefill(ctx, prompt[pos:end], nil); err != nil {
			return err
		}
		parts.mark(partPrefill)
		pos = end
		return nil
	}
	if boundary > pos && boundary < len(prompt) {
		if err := prefill(boundary); err != nil {
			return nil, 0, nil, err
		}
		if err := take(boundary, logits); err != nil {
			return nil, 0, nil, err
		}
		parts.mark(partSnapshot)
	}
	if pos < len(prompt) {
		if err := prefill(len(prompt)); err != nil {
			return nil, 0, nil, err
		}
		last := logits
		q.end = func() error { return take(len(prompt), last) }
	}
	return logits, cached, q, nil
}

// commit adds a successful request's snapshots to the cache, which owns
// them from then on.
func (s *Server) commit(pending []pendingSnapshot) {
	for _, p := range pending {
		s.prefix.Put(p.tokens, p.snap)
	}
}

// release gives back the snapshots of a request that did not succeed (a
// snapshot may hold device memory).
func release(pending []pendingSnapshot) {
	for _, p := range pending {
		p.snap.Release()
	}
}

// turnBoundary is where the generation prompt starts: the last
// "<|im_start|>" of a chat prompt. The next turn of the conversation repeats
// everything before it, whatever the template drops from the answer.
func turnBoundary(m *Model, prompt []int32) int {
	id, ok := m.Tokenizer.ID("<|im_start|>")
	if !ok {
		return 0
	}
	for i := len(prompt) - 1; i > 0; i-- {
		if prompt[i] == id {
			return i
		}
	}
	return 0
}
