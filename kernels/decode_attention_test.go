package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSplitRange covers the context exactly once, in order, with ranges of
// at most one aligned chunk, for contexts shorter than the splits, equal,
// longer and not a multiple of anything.
func TestSplitRange(t *testing.T) {
	for _, ctx := range []int{1, 2, 7, 31, 32, 33, 100, 1024, 8193} {
		for _, splits := range []int{1, 2, 3, 7, 32, 132} {
			for _, align := range []int{1, 4, 32} {
				next := 0
				chunk := (ctx + splits - 1) / splits
				chunk = (chunk + align - 1) / align * align
				for s := range splits {
					lo, hi := SplitRange(ctx, splits, align, s)
					if lo != next || hi < lo || hi-lo > chunk || (hi < ctx && hi-lo != chunk) {
						t.Fatalf("ctx %d, %d splits, align %d: split %d is [%d, %d) after %d", ctx, splits, align, s, lo, hi, next)
					}
					next = hi
				}
				if next != ctx {
					t.Fatalf("ctx %d, %d splits, align %d: covered %d", ctx, splits, align, next)
				}
			}
		}
	}
}

// TestSplitCombineEqualsAttention holds the split pair to attention, its
// oracle, on random inputs: sizes of the real model and of the tiny
// fixtures, GQA ratios 1 to 8, positions 0, below the splits, at and near
// the capacity, several rows, many split counts and alignments. The
// outputs agree within float32 rounding of the reordered sums, and only the
// written records change (the neutral ones keep their poisoned
// accumulators).
func TestSplitCombineEqualsAttention(t *testing.T) {
	type shape struct{ hq, hkv, d, capacity int }
	shapes := []shape{{16, 2, 256, 300}, {4, 2, 32, 96}, {2, 1, 8, 40}, {3, 3, 4, 17}, {8, 1, 16, 64}}
	r := newRand(10)
	for _, sh := range shapes {
		width := sh.hkv * sh.d
		kc := randVec(r, sh.capacity*width, 1)
		vc := randVec(r, sh.capacity*width, 1)
		for _, n := range []int{1, 3} {
			q := randVec(r, n*sh.hq*sh.d, 1)
			for _, pos := range []int{0, 1, 5, sh.capacity/2 + 1, sh.capacity - n - 1, sh.capacity - n} {
				for _, splits := range []int{1, 2, 7, 64, 132} {
					for _, align := range []int{1, 32} {
						name := fmt.Sprintf("%v n=%d pos=%d splits=%d align=%d", sh, n, pos, splits, align)
						scale := float32(1 / math.Sqrt(float64(sh.d)))
						want := make([]float32, n*sh.hq*sh.d)
						Attention(want, q, kc, vc, n, pos, sh.hq, sh.hkv, sh.d, scale)
						rec := PartialStride(sh.d)
						partial := make([]float32, n*sh.hq*splits*rec)
						poison(partial)
						AttentionDecodeSplit(partial, q, kc, vc, n, pos, sh.hq, sh.hkv, sh.d, scale, splits, align)
						for item := range n * sh.hq {
							ctx := pos + item/sh.hq + 1
							for s := range splits {
								r := partial[(item*splits+s)*rec:][:rec]
								lo, hi := SplitRange(ctx, splits, align, s)
								if lo == hi {
									checkPoisoned(t, name+" neutral accumulator", r[:sh.d])
									if r[sh.d] != 0 || r[sh.d+1] != 0 {
										t.Fatalf("%s: split %d has no positions, m, l = %v, %v", name, s, r[sh.d], r[sh.d+1])
									}
								} else if !(r[sh.d+1] >= 1) {
									t.Fatalf("%s: split %d of [%d, %d) has l = %v", name, s, lo, hi, r[sh.d+1])
								}
								checkPoisoned(t, name+" padding", r[sh.d+2:])
							}
						}
						got := make([]float32, len(want))
						poison(got)
						AttentionCombine(got, partial, n, sh.hq, sh.d, splits)
						if diff := cmp.Diff(want, got, approx(1e-6, 1e-5)); diff != "" {
							t.Fatalf("%s: combine(split) vs attention (-want +got):\n%s", name, diff)
						}
					}
				}
			}
		}
	}
}

// TestAttentionCombineWeights checks the merge on hand-computed partials:
// weights relative to the largest m, a neutral split (NaN accumulator)
// never read, and zeros when no split has positions.
func TestAttentionCombineWeights(t *testing.T) {
	// Two splits of one head of 4 dims: m = (0, 2·ln 2), l = (1, 2), acc
	// = (ones, threes): weights 1/4 and 1, so out = (1/4·1 + 3) / (1/4·1 + 2).
	d := 4
	rec := PartialStride(d)
	partial := make([]float32, 3*rec)
	for i := range d {
		partial[i] = 1
		partial[rec+i] = 3
		partial[2*rec+i] = float32(math.NaN()) // a neutral split: never read
	}
	partial[d], partial[d+1] = 0, 1
	partial[rec+d], partial[rec+d+1] = float32(2*math.Ln2), 2
	out := make([]float32, d)
	AttentionCombine(out, partial, 1, 1, d, 3)
	want := float32((0.25 + 3) / (0.25 + 2))
	for i, v := range out {
		if math.Abs(float64(v-want)) > 1e-6 {
			t.Fatalf("out[%d] = %v, want %v", i, v, want)
		}
	}
	// No split with positions: zeros, not NaN.
	clear(partial)
	AttentionCombine(out, partial, 1, 1, d, 3)
	if diff := cmp.Diff(make([]float32, d), out); diff != "" {
		t.Errorf("empty combine (-want +got):\n%s", diff)
	}
}

func TestBlockHeads(t *testing.T) {
	for _, c := range []struct{ group, d, want int }{{8, 256, 8}, {16, 256, 8}, {2, 32, 2}, {3, 256, 3}, {6, 512, 3}, {6, 1024, 2}, {5, 1024, 1}, {64, 32, 32}, {1, 4096, 1}} {
		if got := BlockHeads(c.group, c.d); got != c.want {
			t.Errorf("BlockHeads(%d, %d) = %d, want %d", c.group, c.d, got, c.want)
		}
	}
}
