package grammar

import (
	"fmt"
	"regexp/syntax"
	"slices"
	"sort"
	"unicode"
	"unicode/utf8"
)

// dfa is a deterministic automaton over the decoded characters (runes) of
// a string: a pattern, an enum of strings, or an object's property names.
// Every state can still reach an accepting one (dead states are pruned),
// so a prefix the automaton keeps can always be completed.
type dfa struct {
	trans  [][]rtrans // per state, sorted disjoint rune ranges
	accept []bool
	// tag is, per accepting state, the index of the name it spells (tries),
	// or -1 (any other string).
	tag []int32
	// dist is the fewest runes from the state to an accepting one.
	dist []int32
	// reach is, for tries, the bitmask of the names reachable from each
	// state (bit otherBit: any other string); nil for patterns.
	reach []uint64
}

// otherBit marks, in a trie's reach, that strings other than the names are
// accepted from the state.
const otherBit = 63

type rtrans struct {
	lo, hi rune
	to     int32
}

// next is the state after r, or -1.
func (d *dfa) next(s int32, r rune) int32 {
	ts := d.trans[s]
	i := sort.Search(len(ts), func(i int) bool { return ts[i].hi >= r })
	if i < len(ts) && ts[i].lo <= r {
		return ts[i].to
	}
	return -1
}

// anyIn reports whether some rune in [lo, hi] leads from s to a live state:
// an accept at most room runes away (room < 0: no limit) and, for tries, a
// name not in taken reachable.
func (d *dfa) anyIn(s int32, lo, hi rune, room int32, taken uint64) bool {
	ts := d.trans[s]
	i := sort.Search(len(ts), func(i int) bool { return ts[i].hi >= lo })
	for ; i < len(ts) && ts[i].lo <= hi; i++ {
		if d.live(ts[i].to, room-1, taken) {
			return true
		}
	}
	return false
}

// live reports whether state s can still finish within room runes (room <
// 0: no limit) on a name not in taken.
func (d *dfa) live(s int32, room int32, taken uint64) bool {
	if room >= 0 && d.dist[s] > room {
		return false
	}
	return d.reach == nil || d.reach[s]&^taken != 0
}

// maxDFAStates bounds a pattern's automaton.
const maxDFAStates = 2000

// maxRune is the largest code point; surrogates are never produced.
const maxRune = unicode.MaxRune

// prune computes dist and drops transitions into states that cannot accept.
// It fails when the start state itself cannot.
func (d *dfa) prune() error {
	n := len(d.trans)
	d.dist = make([]int32, n)
	rev := make([][]int32, n)
	for s, ts := range d.trans {
		for _, t := range ts {
			rev[t.to] = append(rev[t.to], int32(s))
		}
	}
	queue := []int32{}
	for s := range d.dist {
		d.dist[s] = -1
		if d.accept[s] {
			d.dist[s] = 0
			queue = append(queue, int32(s))
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for _, p := range rev[s] {
			if d.dist[p] < 0 {
				d.dist[p] = d.dist[s] + 1
				queue = append(queue, p)
			}
		}
	}
	if d.dist[0] < 0 {
		return fmt.Errorf("no string matches")
	}
	for s, ts := range d.trans {
		d.trans[s] = slices.DeleteFunc(ts, func(t rtrans) bool { return d.dist[t.to] < 0 })
	}
	return nil
}

// trieDFA accepts exactly names (as decoded strings); with other set it
// also accepts every other string, tagged -1.
func trieDFA(names []string, other bool) *dfa {
	d := &dfa{}
	add := func() int32 {
		d.trans = append(d.trans, nil)
		d.accept = append(d.accept, other)
		d.tag = append(d.tag, -1)
		return int32(len(d.trans) - 1)
	}
	add() // start
	children := []map[rune]int32{{}}
	for k, name := range names {
		s := int32(0)
		for _, r := range name {
			c, ok := children[s][r]
			if !ok {
				c = add()
				children = append(children, map[rune]int32{})
				children[s][r] = c
			}
			s = c
		}
		d.accept[s] = true
		if d.tag[s] < 0 {
			d.tag[s] = int32(k)
		}
	}
	sink := int32(-1)
	if other {
		sink = add()
		d.trans[sink] = []rtrans{{0, maxRune, sink}}
		children = append(children, nil)
	}
	for s, kids := range children {
		if int32(s) == sink {
			continue
		}
		rs := make([]rune, 0, len(kids))
		for r := range kids {
			rs = append(rs, r)
		}
		slices.Sort(rs)
		var ts []rtrans
		lo := rune(0)
		for _, r := range rs {
			if sink >= 0 && r > lo {
				ts = append(ts, rtrans{lo, r - 1, sink})
			}
			ts = append(ts, rtrans{r, r, kids[r]})
			lo = r + 1
		}
		if sink >= 0 && lo <= maxRune {
			ts = append(ts, rtrans{lo, maxRune, sink})
		}
		d.trans[s] = ts
	}
	// reach: the names below each state; dist: runes to the nearest accept.
	d.reach = make([]uint64, len(d.trans))
	d.dist = make([]int32, len(d.trans))
	var fill func(s int32) (uint64, int32)
	fill = func(s int32) (uint64, int32) {
		var r uint64
		dist := int32(1 << 30)
		if d.tag[s] >= 0 {
			r |= 1 << uint(d.tag[s])
		}
		if d.accept[s] {
			dist = 0
		}
		if other {
			r |= 1 << otherBit
		}
		if s != sink {
			for _, k := range children[s] {
				kr, kd := fill(k)
				r |= kr
				dist = min(dist, kd+1)
			}
		}
		if other {
			dist = 0
		}
		d.reach[s], d.dist[s] = r, dist
		return r, dist
	}
	fill(0)
	if sink >= 0 {
		d.reach[sink], d.dist[sink] = 1<<otherBit, 0
	}
	return d
}

// patternDFA compiles a JSON Schema pattern (ECMA-262 semantics: a search,
// so unanchored unless it says ^ or $) to a character automaton. Go's RE2
// syntax parses it: lookarounds and backreferences are rejected there.
// Multi-line anchors and word boundaries are refused too.
func patternDFA(pattern string) (*dfa, error) {
	re, err := syntax.Parse(`(?s:.)*(?:`+pattern+`)(?s:.)*`, syntax.Perl)
	if err != nil {
		if _, inner := syntax.Parse(pattern, syntax.Perl); inner != nil {
			err = inner
		}
		return nil, fmt.Errorf("pattern %q: %v (lookarounds and backreferences cannot be enforced)", pattern, err)
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, fmt.Errorf("pattern %q: %v", pattern, err)
	}
	for _, in := range prog.Inst {
		if in.Op == syntax.InstEmptyWidth && syntax.EmptyOp(in.Arg)&^(syntax.EmptyBeginText|syntax.EmptyEndText) != 0 {
			return nil, fmt.Errorf("pattern %q: multi-line anchors and word boundaries cannot be enforced", pattern)
		}
	}
	b := &dfaBuilder{prog: prog, index: map[string]int32{}, d: &dfa{}}
	start := b.closure([]uint32{uint32(prog.Start)}, true)
	if _, err := b.state(start); err != nil {
		return nil, fmt.Errorf("pattern %q: %v", pattern, err)
	}
	for s := 0; s < len(b.sets); s++ {
		ts, err := b.transitions(b.sets[s])
		if err != nil {
			return nil, fmt.Errorf("pattern %q: %v", pattern, err)
		}
		b.d.trans[s] = ts
	}
	b.d.tag = make([]int32, len(b.d.trans))
	for i := range b.d.tag {
		b.d.tag[i] = -1
	}
	if err := b.d.prune(); err != nil {
		return nil, fmt.Errorf("pattern %q: %v", pattern, err)
	}
	return b.d.minimize(), nil
}

// minimize merges equivalent states (Moore's partition refinement), so
// that a frame's state, which keys the mask cache, repeats as often as the
// language allows. State 0 stays the start.
func (d *dfa) minimize() *dfa {
	n := len(d.trans)
	class := make([]int32, n)
	for s := range class {
		if d.accept[s] {
			class[s] = 1
		}
	}
	sig := func(s int) string {
		var b []byte
		b = fmt.Appendf(b, "%d|", class[s])
		var prev rtrans
		first := true
		for _, t := range d.trans[s] {
			c := class[t.to]
			if !first && prev.to == c && prev.hi+1 == t.lo {
				prev.hi = t.hi
				continue
			}
			if !first {
				b = fmt.Appendf(b, "%d-%d:%d,", prev.lo, prev.hi, prev.to)
			}
			prev, first = rtrans{t.lo, t.hi, c}, false
		}
		if !first {
			b = fmt.Appendf(b, "%d-%d:%d,", prev.lo, prev.hi, prev.to)
		}
		return string(b)
	}
	count := -1
	for {
		ids := map[string]int32{}
		next := make([]int32, n)
		// The start state's class is numbered first, so it becomes 0.
		order := append([]int{0}, make([]int, 0, n)...)
		for s := 1; s < n; s++ {
			order = append(order, s)
		}
		for _, s := range order {
			k := sig(s)
			id, ok := ids[k]
			if !ok {
				id = int32(len(ids))
				ids[k] = id
			}
			next[s] = id
		}
		class = next
		if len(ids) == count {
			break
		}
		count = len(ids)
	}
	m := &dfa{trans: make([][]rtrans, count), accept: make([]bool, count), tag: make([]int32, count), dist: make([]int32, count)}
	for s := range n {
		c := class[s]
		if m.trans[c] != nil || (len(d.trans[s]) == 0 && m.accept[c]) {
			continue
		}
		m.accept[c], m.tag[c], m.dist[c] = d.accept[s], -1, d.dist[s]
		ts := []rtrans{}
		for _, t := range d.trans[s] {
			to := class[t.to]
			if k := len(ts); k > 0 && ts[k-1].to == to && ts[k-1].hi+1 == t.lo {
				ts[k-1].hi = t.hi
			} else {
				ts = append(ts, rtrans{t.lo, t.hi, to})
			}
		}
		m.trans[c] = ts
	}
	return m
}

type dfaBuilder struct {
	prog  *syntax.Prog
	sets  [][]uint32
	index map[string]int32
	d     *dfa
}

// closure follows empty transitions from pcs; ^ holds only at the start.
func (b *dfaBuilder) closure(pcs []uint32, atStart bool) []uint32 {
	seen := map[uint32]bool{}
	var out []uint32
	var visit func(pc uint32)
	visit = func(pc uint32) {
		if seen[pc] {
			return
		}
		seen[pc] = true
		in := &b.prog.Inst[pc]
		switch in.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			visit(in.Out)
			visit(in.Arg)
		case syntax.InstCapture, syntax.InstNop:
			visit(in.Out)
		case syntax.InstEmptyWidth:
			if syntax.EmptyOp(in.Arg)&syntax.EmptyBeginText != 0 && !atStart {
				return
			}
			if syntax.EmptyOp(in.Arg)&syntax.EmptyEndText != 0 {
				out = append(out, pc) // holds only at the end: see accepting
				return
			}
			visit(in.Out)
		case syntax.InstFail:
		default:
			out = append(out, pc)
		}
	}
	for _, pc := range pcs {
		visit(pc)
	}
	slices.Sort(out)
	return out
}

// accepting reports whether the set matches at the end of the text.
func (b *dfaBuilder) accepting(set []uint32) bool {
	for _, pc := range set {
		in := &b.prog.Inst[pc]
		switch in.Op {
		case syntax.InstMatch:
			return true
		case syntax.InstEmptyWidth:
			// $ then more empty steps: end-of-text holds for all of them.
			for _, q := range b.endClosure(in.Out) {
				if b.prog.Inst[q].Op == syntax.InstMatch {
					return true
				}
			}
		}
	}
	return false
}

func (b *dfaBuilder) endClosure(pc uint32) []uint32 {
	var out []uint32
	seen := map[uint32]bool{}
	var visit func(pc uint32)
	visit = func(pc uint32) {
		if seen[pc] {
			return
		}
		seen[pc] = true
		in := &b.prog.Inst[pc]
		switch in.Op {
		case syntax.InstAlt, syntax.InstAltMatch:
			visit(in.Out)
			visit(in.Arg)
		case syntax.InstCapture, syntax.InstNop, syntax.InstEmptyWidth:
			if in.Op == syntax.InstEmptyWidth && syntax.EmptyOp(in.Arg)&syntax.EmptyBeginText != 0 {
				return
			}
			visit(in.Out)
		default:
			out = append(out, pc)
		}
	}
	visit(pc)
	return out
}

func (b *dfaBuilder) state(set []uint32) (int32, error) {
	key := fmt.Sprint(set)
	if s, ok := b.index[key]; ok {
		return s, nil
	}
	if len(b.sets) >= maxDFAStates {
		return 0, fmt.Errorf("more than %d automaton states; the pattern is too complex to enforce", maxDFAStates)
	}
	s := int32(len(b.sets))
	b.index[key] = s
	b.sets = append(b.sets, set)
	b.d.trans = append(b.d.trans, nil)
	b.d.accept = append(b.d.accept, b.accepting(set))
	return s, nil
}

// ranges is the rune set an instruction matches, as sorted [lo, hi] pairs.
func ranges(in *syntax.Inst) []rune {
	switch in.Op {
	case syntax.InstRuneAny:
		return []rune{0, maxRune}
	case syntax.InstRuneAnyNotNL:
		return []rune{0, '\n' - 1, '\n' + 1, maxRune}
	case syntax.InstRune1:
		return foldRanges([]rune{in.Rune[0], in.Rune[0]}, false)
	case syntax.InstRune:
		if len(in.Rune) == 1 {
			return foldRanges([]rune{in.Rune[0], in.Rune[0]}, syntax.Flags(in.Arg)&syntax.FoldCase != 0)
		}
		return foldRanges(in.Rune, syntax.Flags(in.Arg)&syntax.FoldCase != 0)
	}
	return nil
}

// foldRanges adds the simple case folds of every rune when fold is set.
func foldRanges(rs []rune, fold bool) []rune {
	if !fold {
		return rs
	}
	var all []rune
	for i := 0; i+1 < len(rs); i += 2 {
		all = append(all, rs[i], rs[i+1])
		if rs[i+1]-rs[i] > 5000 {
			continue // wide ranges fold mostly into themselves
		}
		for r := rs[i]; r <= rs[i+1]; r++ {
			for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
				all = append(all, f, f)
			}
		}
	}
	return all
}

func (b *dfaBuilder) transitions(set []uint32) ([]rtrans, error) {
	// The boundaries of every range split the runes into classes on which
	// every instruction of the set agrees.
	cuts := []rune{0, maxRune + 1}
	rs := make([][]rune, len(set))
	for i, pc := range set {
		rs[i] = ranges(&b.prog.Inst[pc])
		for j := 0; j+1 < len(rs[i]); j += 2 {
			cuts = append(cuts, rs[i][j], rs[i][j+1]+1)
		}
	}
	slices.Sort(cuts)
	cuts = slices.Compact(cuts)
	in := func(r rune, list []rune) bool {
		for j := 0; j+1 < len(list); j += 2 {
			if list[j] <= r && r <= list[j+1] {
				return true
			}
		}
		return false
	}
	var out []rtrans
	for k := 0; k+1 < len(cuts); k++ {
		lo, hi := cuts[k], cuts[k+1]-1
		if lo > maxRune {
			break
		}
		var next []uint32
		for i, pc := range set {
			if in(lo, rs[i]) {
				next = append(next, b.prog.Inst[pc].Out)
			}
		}
		if len(next) == 0 {
			continue
		}
		to, err := b.state(b.closure(next, false))
		if err != nil {
			return nil, err
		}
		if n := len(out); n > 0 && out[n-1].to == to && out[n-1].hi+1 == lo {
			out[n-1].hi = hi
		} else {
			out = append(out, rtrans{lo, hi, to})
		}
	}
	return out, nil
}

// validRune reports whether r can appear in decoded JSON text.
func validRune(r rune) bool { return utf8.ValidRune(r) }
