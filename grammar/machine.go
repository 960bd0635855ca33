package grammar

import (
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Grammar is a compiled constraint over one vocabulary: a pushdown
// automaton over bytes whose nodes come from a JSON schema (or a tool-call
// format). It is safe for concurrent use; each generation has its own
// Matcher.
type Grammar struct {
	root  *node
	vocab *Vocab
	mu    sync.Mutex
	cache map[frame]*entry
}

// entry is what a frame allows on its own: the tokens that end inside it
// (frames it pushes included) and the trie nodes where it can be complete,
// from which the frames below it take over.
type entry struct {
	mask  []uint32
	exits []exit
}

type exit struct {
	t int32 // trie node: the bytes to it are inside the frame
	f frame // the frame, complete there
}

// maxCache bounds a grammar's cached masks (each ⌈vocab/32⌉ words: 19 KiB
// on a 150k-token vocabulary).
const maxCache = 512

func newGrammar(root *node, v *Vocab) *Grammar {
	seq := &node{kind: kSeq, seq: []*node{root}, leadWS: true}
	return &Grammar{root: seq, vocab: v, cache: map[frame]*entry{}}
}

// Matcher follows one generation through a Grammar: Mask gives the tokens
// allowed next, Advance takes the one chosen.
type Matcher struct {
	g *Grammar
	// configs are the stacks the bytes so far can have led to (usually
	// one; several while alternatives of an anyOf both fit).
	configs [][]frame
	done    bool
	w       walker
}

// NewMatcher starts a generation at the beginning of the value.
func (g *Grammar) NewMatcher() *Matcher {
	m := &Matcher{g: g, configs: [][]frame{{fresh(g.root)}}}
	m.w.g = g
	return m
}

// ErrRejected is returned by Advance for a token the mask did not allow.
var ErrRejected = errors.New("grammar: token not allowed here")

// Done reports whether an end-of-sequence token was accepted.
func (m *Matcher) Done() bool { return m.done }

// Accepting reports whether the value so far is complete, so an
// end-of-sequence token is allowed.
func (m *Matcher) Accepting() bool {
	for _, c := range m.configs {
		if accepting(c) {
			return true
		}
	}
	return false
}

func accepting(stack []frame) bool {
	s := slices.Clone(stack)
	for {
		top := s[len(s)-1]
		if !top.canPop() {
			return false
		}
		if len(s) == 1 {
			return true
		}
		s = s[:len(s)-1]
		s[len(s)-1].resume(&top)
	}
}

// Advance moves past token id, which must be one Mask allowed.
func (m *Matcher) Advance(id int32) error {
	if m.done {
		return fmt.Errorf("%w: the sequence has ended", ErrRejected)
	}
	v := m.g.vocab
	if v.Stop(id) {
		if !m.Accepting() {
			return fmt.Errorf("%w: the end of the sequence before the value is complete", ErrRejected)
		}
		m.done = true
		return nil
	}
	if id < 0 || int(id) >= len(v.bytes) || v.bytes[id] == nil {
		return fmt.Errorf("%w: token %d is not text", ErrRejected, id)
	}
	b := v.bytes[id]
	var next [][]frame
	w := &m.w
	for _, c := range m.configs {
		w.reset(c)
		w.bytes, w.out = b, &next
		w.cont(0)
	}
	w.bytes, w.out = nil, nil
	if len(next) == 0 {
		return fmt.Errorf("%w: token %d (%q)", ErrRejected, id, b)
	}
	m.configs = dedupe(next)
	return nil
}

func dedupe(cs [][]frame) [][]frame {
	out := cs[:0]
	for _, c := range cs {
		if !slices.ContainsFunc(out, func(o []frame) bool { return slices.Equal(o, c) }) {
			out = append(out, c)
		}
	}
	return out
}

// Mask writes the allowed tokens to dst (Vocab.Words words; bit i%32 of
// word i/32 is token i) and reports how many are allowed. The
// end-of-sequence ids are allowed exactly when the value is complete.
func (m *Matcher) Mask(dst []uint32) int {
	clear(dst)
	if m.done {
		return 0
	}
	for _, c := range m.configs {
		m.maskOf(c, dst)
	}
	if m.Accepting() {
		for _, id := range m.g.vocab.stop {
			dst[id/32] |= 1 << (id % 32)
		}
	}
	n := 0
	for _, x := range dst {
		n += popcount(x)
	}
	return n
}

func popcount(x uint32) int {
	n := 0
	for ; x != 0; x &= x - 1 {
		n++
	}
	return n
}

// maskOf ORs into dst what stack allows: the top frame's cached entry, and
// from each of its exits a walk of the rest of the token with the frames
// below.
func (m *Matcher) maskOf(stack []frame, dst []uint32) {
	top := stack[len(stack)-1]
	e := m.g.entry(top)
	for i, x := range e.mask {
		dst[i] |= x
	}
	if len(stack) == 1 {
		return // the root is complete at an exit: nothing may follow
	}
	// Exits with the same complete frame share the stack below.
	var below []frame
	var last frame
	for i, x := range e.exits {
		if i == 0 || x.f != last {
			below = append(below[:0], stack[:len(stack)-1]...)
			f := x.f
			below[len(below)-1].resume(&f)
			last = x.f
		}
		if x.t == 0 {
			// Complete before any byte: the frames below see the whole token.
			m.maskOf(slices.Clone(below), dst)
			continue
		}
		w := &m.w
		w.reset(below)
		w.mask = dst
		w.children(x.t)
		w.mask = nil
	}
}

// entry returns (computing once) what frame f allows on its own.
func (g *Grammar) entry(f frame) *entry {
	g.mu.Lock()
	e, ok := g.cache[f]
	g.mu.Unlock()
	if ok {
		return e
	}
	w := walker{g: g, within: true}
	e = &entry{mask: make([]uint32, g.vocab.Words())}
	w.reset([]frame{f})
	w.mask, w.entry = e.mask, e
	w.walk(0)
	g.mu.Lock()
	if len(g.cache) < maxCache {
		g.cache[f] = e
	}
	g.mu.Unlock()
	return e
}

// walker runs the automaton over bytes with one mutable stack and an undo
// log: over the vocabulary trie (mask) or over one token's bytes
// (Advance). Alternatives (an anyOf, a frame that may end or go on) are
// explored depth first, each undone before the next.
type walker struct {
	g      *Grammar
	stack  []frame
	undo   []undoRec
	within bool   // the bottom frame's pop is an exit, not a completion
	entry  *entry // within: where exits go
	mask   []uint32
	bytes  []byte     // Advance: the token
	out    *[][]frame // Advance: the stacks after the token
}

// undoRec restores stack[i] (or the stack's length when i < 0).
type undoRec struct {
	i int32
	n int32
	f frame
}

func (w *walker) reset(stack []frame) {
	w.stack = append(w.stack[:0], stack...)
	w.undo = w.undo[:0]
}

func (w *walker) set(i int, f frame) {
	w.undo = append(w.undo, undoRec{i: int32(i), f: w.stack[i]})
	w.stack[i] = f
}

func (w *walker) push(f frame) {
	w.undo = append(w.undo, undoRec{i: -1, n: int32(len(w.stack))})
	w.stack = append(w.stack, f)
}

func (w *walker) pop() {
	// Undone in reverse: the length comes back, then the frame.
	w.undo = append(w.undo, undoRec{i: int32(len(w.stack) - 1), f: w.stack[len(w.stack)-1]})
	w.undo = append(w.undo, undoRec{i: -1, n: int32(len(w.stack))})
	w.stack = w.stack[:len(w.stack)-1]
}

func (w *walker) undoTo(mark int) {
	for len(w.undo) > mark {
		u := w.undo[len(w.undo)-1]
		w.undo = w.undo[:len(w.undo)-1]
		if u.i < 0 {
			for len(w.stack) < int(u.n) {
				w.stack = append(w.stack, frame{})
			}
			w.stack = w.stack[:u.n]
		} else {
			w.stack[u.i] = u.f
		}
	}
}

// walk visits trie node t with the stack as the bytes to t left it.
func (w *walker) walk(t int32) {
	v := w.g.vocab
	for _, id := range v.ids[v.tokFirst[t]:v.tokFirst[t+1]] {
		w.mask[id/32] |= 1 << (id % 32)
	}
	if w.within && len(w.stack) == 1 && w.stack[0].canPop() {
		w.entry.exits = append(w.entry.exits, exit{t: t, f: w.stack[0]})
	}
	w.children(t)
}

func (w *walker) children(t int32) {
	v := w.g.vocab
	for _, e := range v.edges[v.first[t]:v.first[t+1]] {
		w.feed(e.b, e.child)
	}
}

// cont goes on after a byte: in the trie at node pos, or in the token at
// byte pos.
func (w *walker) cont(pos int32) {
	if w.out == nil {
		w.walk(pos)
		return
	}
	if int(pos) == len(w.bytes) {
		*w.out = append(*w.out, slices.Clone(w.stack))
		return
	}
	w.feed(w.bytes[pos], pos+1)
}

// maxDepth bounds the stack, so that no schema nests without end.
const maxDepth = 64

// feed gives byte c to the stack, then goes on at pos for every way it
// was taken.
func (w *walker) feed(c byte, pos int32) {
	top := len(w.stack) - 1
	f := w.stack[top]
	if f.n.kind == kAny {
		for _, a := range f.n.alts {
			mark := len(w.undo)
			w.set(top, fresh(a))
			w.feed(c, pos)
			w.undoTo(mark)
		}
		return
	}
	g := f
	switch out, child := g.step(c); out {
	case consumed:
		mark := len(w.undo)
		w.set(top, g)
		w.cont(pos)
		w.undoTo(mark)
	case pushed:
		if len(w.stack) < maxDepth {
			mark := len(w.undo)
			w.set(top, g)
			cf := fresh(child)
			if child == f.n.key {
				cf.v = f.v // the key may not repeat a property given before
			}
			w.push(cf)
			w.feed(c, pos)
			w.undoTo(mark)
		}
	}
	// A complete frame may also end here and leave c to its parent.
	if top > 0 && f.canPop() {
		mark := len(w.undo)
		w.pop()
		p := w.stack[top-1]
		p.resume(&f)
		w.set(top-1, p)
		w.feed(c, pos)
		w.undoTo(mark)
	}
}
