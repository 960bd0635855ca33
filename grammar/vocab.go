package grammar

import (
	"bytes"
	"fmt"
	"slices"
)

// Tokens is what the grammar needs of a tokenizer: every id's bytes, and
// which ids are special (dropped from the decoded text, so never text the
// grammar can place).
type Tokens interface {
	Size() int
	TokenBytes(id int32) []byte
	Special(id int32) bool
}

// Vocab is a tokenizer's vocabulary laid out for mask computation: a trie
// of every text token's bytes, so a walk visits a prefix shared by many
// tokens once.
type Vocab struct {
	width int     // mask width in ids: the logits row, padding included
	stop  []int32 // end-of-sequence ids, allowed only when the value is complete
	// Node n's children are edges[first[n]:first[n+1]] sorted by byte; the
	// tokens ending at n are ids[tokFirst[n]:tokFirst[n+1]].
	first    []int32
	edges    []edge
	tokFirst []int32
	ids      []int32
	bytes    [][]byte // per id; nil for ids the grammar never allows
}

type edge struct {
	b     byte
	child int32
}

// NewVocab builds the trie of t's text tokens for a logits row of width ids
// (at least t.Size()); stop are the end-of-sequence ids.
func NewVocab(t Tokens, width int, stop []int32) (*Vocab, error) {
	if width < t.Size() {
		return nil, fmt.Errorf("grammar: logits width %d is below the vocabulary's %d ids", width, t.Size())
	}
	v := &Vocab{width: width, bytes: make([][]byte, t.Size())}
	for _, id := range stop {
		if id < 0 || int(id) >= width {
			return nil, fmt.Errorf("grammar: stop id %d outside the vocabulary [0, %d)", id, width)
		}
		v.stop = append(v.stop, id)
	}
	var order []int32
	for id := int32(0); int(id) < t.Size(); id++ {
		b := t.TokenBytes(id)
		if len(b) == 0 || t.Special(id) || slices.Contains(v.stop, id) {
			continue
		}
		v.bytes[id] = b
		order = append(order, id)
	}
	slices.SortFunc(order, func(a, b int32) int { return bytes.Compare(v.bytes[a], v.bytes[b]) })
	// Ranges of the sorted ids that share a prefix are one node's subtree.
	var kids [][]edge
	var toks [][]int32
	newNode := func() int32 {
		kids = append(kids, nil)
		toks = append(toks, nil)
		return int32(len(kids) - 1)
	}
	var build func(n int32, lo, hi, depth int)
	build = func(n int32, lo, hi, depth int) {
		for lo < hi && len(v.bytes[order[lo]]) == depth {
			toks[n] = append(toks[n], order[lo])
			lo++
		}
		for lo < hi {
			b := v.bytes[order[lo]][depth]
			end := lo + 1
			for end < hi && v.bytes[order[end]][depth] == b {
				end++
			}
			c := newNode()
			kids[n] = append(kids[n], edge{b, c})
			build(c, lo, end, depth+1)
			lo = end
		}
	}
	build(newNode(), 0, len(order), 0)
	v.first = make([]int32, len(kids)+1)
	v.tokFirst = make([]int32, len(kids)+1)
	for n := range kids {
		v.edges = append(v.edges, kids[n]...)
		v.ids = append(v.ids, toks[n]...)
		v.first[n+1] = int32(len(v.edges))
		v.tokFirst[n+1] = int32(len(v.ids))
	}
	return v, nil
}

// Width is the number of ids a mask covers.
func (v *Vocab) Width() int { return v.width }

// Words is the length of a mask: ⌈Width/32⌉.
func (v *Vocab) Words() int { return (v.width + 31) / 32 }

// Nodes is the trie's size (the most a mask walk can visit).
func (v *Vocab) Nodes() int { return len(v.first) - 1 }

// Stop reports whether id ends the sequence.
func (v *Vocab) Stop(id int32) bool { return slices.Contains(v.stop, id) }
