package grammar

import "math"

// kind is what a grammar node matches.
type kind uint8

const (
	kAny     kind = iota // one of alts, chosen by the bytes that follow
	kObject              // a JSON object: declared properties, required ones, maybe others
	kArray               // a JSON array of items
	kString              // a JSON string: its characters through a dfa, a length range
	kNumber              // a JSON number or integer, maybe bounded
	kLiteral             // fixed bytes
	kSeq                 // children in order, optionally after whitespace
	kRaw                 // a tool-call string value: raw text up to "\n</parameter>"
	kParams              // a tool call's <parameter=…> blocks and its </function>
)

// node is one piece of a compiled grammar. Nodes are immutable once
// compiled; a frame holds a node and its progress.
type node struct {
	kind kind
	alts []*node // kAny

	// kObject: key reads property names (a kString over a trie of them,
	// tagged by index); props[i] is property i's value; extra the value of
	// other keys (nil: none). kParams: tags is the trie of the
	// "<parameter=NAME>\n" tags (index i) and "</function>\n" (index
	// len(props)); props[i] the value after tag i.
	key      *node
	tags     *dfa
	props    []*node
	required uint64
	extra    *node

	// kArray
	items              *node
	minItems, maxItems int32 // maxItems < 0: no limit

	// kString, kRaw: chars (nil: any); the length in characters.
	chars          *dfa
	minLen, maxLen int32 // maxLen < 0: no limit
	counted        bool  // a length bound applies, so the frame counts

	// kNumber
	num *numRange

	// kLiteral
	lit []byte

	// kSeq
	seq    []*node
	leadWS bool
}

// numRange is what a number node allows. Integer values x are allowed when
// lo ≤ x ≤ hi; a fraction is allowed after integer part m only when every
// value it can spell lies within the bounds. Magnitudes are kept per sign
// (0: positive, 1: negative) as closed intervals, infinite when unbounded.
type numRange struct {
	integer        bool // no fraction, no exponent
	bounded        bool // no exponent; the integer part is tracked
	intLo, intHi   [2]float64
	fracLo, fracHi [2]float64
	// fracNZ is the magnitude at an exclusive integer bound (-1: none):
	// after it a fraction is allowed only once a digit of it is non-zero.
	fracNZ [2]float64
}

// newNumRange derives the intervals from the schema's bounds (±Inf: none).
func newNumRange(integer bool, lo float64, loExcl bool, hi float64, hiExcl bool) *numRange {
	L, H := math.Ceil(lo), math.Floor(hi)
	if loExcl && L == lo {
		L++
	}
	if hiExcl && H == hi {
		H--
	}
	r := &numRange{integer: integer, bounded: !math.IsInf(lo, 0) || !math.IsInf(hi, 0)}
	r.intLo[0], r.intHi[0] = math.Max(L, 0), H
	r.intLo[1], r.intHi[1] = math.Max(-H, 0), -L
	r.fracLo[0], r.fracHi[0] = math.Max(L, 0), math.Floor(hi)-1
	r.fracLo[1], r.fracHi[1] = math.Max(-H, 0), math.Floor(-lo)-1
	r.fracNZ = [2]float64{-1, -1}
	if loExcl && lo == math.Trunc(lo) && lo >= 0 && lo+1 <= hi {
		r.fracNZ[0] = lo // (lo, lo+1): lo.0 itself is out
	}
	if hiExcl && hi == math.Trunc(hi) && hi <= 0 && hi-1 >= lo {
		r.fracNZ[1] = -hi // (hi-1, hi): -|hi|.0 itself is out
	}
	if integer {
		r.fracLo, r.fracHi = [2]float64{1, 1}, [2]float64{0, 0}
		r.fracNZ = [2]float64{-1, -1}
	}
	return r
}

// fracNonZero reports whether a fraction may follow integer part (neg, m)
// provided one of its digits is non-zero.
func (r *numRange) fracNonZero(neg bool, m uint64) bool {
	return r.fracNZ[side(neg)] == float64(m)
}

// empty reports whether no value is allowed.
func (r *numRange) empty() bool {
	for s := range 2 {
		if r.intLo[s] <= r.intHi[s] || r.fracLo[s] <= r.fracHi[s] || r.fracNZ[s] >= 0 {
			return false
		}
	}
	return true
}

// maxDigits bounds a tracked integer part, so it fits in a uint64.
const maxDigits = 18

func side(neg bool) int {
	if neg {
		return 1
	}
	return 0
}

// okInt reports whether the integer value (neg, m) is allowed.
func (r *numRange) okInt(neg bool, m uint64) bool {
	s, x := side(neg), float64(m)
	return r.intLo[s] <= x && x <= r.intHi[s]
}

// okFrac reports whether a fraction may follow integer part (neg, m).
func (r *numRange) okFrac(neg bool, m uint64) bool {
	s, x := side(neg), float64(m)
	return r.fracLo[s] <= x && x <= r.fracHi[s]
}

// live reports whether some completion of the integer-part prefix (neg, m)
// of d digits is allowed.
func (r *numRange) live(neg bool, m uint64, d int) bool {
	if m == 0 {
		return r.okInt(neg, 0) || r.okFrac(neg, 0) || r.fracNonZero(neg, 0)
	}
	s := side(neg)
	span := uint64(1)
	for k := 0; d+k <= maxDigits; k++ {
		lo, hi := float64(m*span), float64(m*span+span-1)
		if (lo <= r.intHi[s] && hi >= r.intLo[s]) || (lo <= r.fracHi[s] && hi >= r.fracLo[s]) || (lo <= r.fracNZ[s] && r.fracNZ[s] <= hi) {
			return true
		}
		span *= 10
	}
	return false
}

// signOK reports whether any value of this sign is allowed.
func (r *numRange) signOK(neg bool) bool {
	s := side(neg)
	return r.intLo[s] <= r.intHi[s] || r.fracLo[s] <= r.fracHi[s] || r.fracNZ[s] >= 0
}
