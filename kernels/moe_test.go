package kernels

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestRouterTopK(t *testing.T) {
	ln := func(x float64) float32 { return float32(math.Log(x)) }
	tests := []struct {
		name        string
		logits      []float32 // one token
		k           int
		wantIDs     []int32
		wantWeights []float32
	}{
		{"distinct", []float32{ln(1), ln(4), ln(2), ln(3)}, 2, []int32{1, 3}, []float32{4.0 / 7, 3.0 / 7}},
		{"ties go to the lower index", []float32{1, 3, 3, 2, 3}, 2, []int32{1, 2}, []float32{0.5, 0.5}},
		{"tie across the cut", []float32{0, 5, 2, 2, 2}, 3, []int32{1, 2, 3}, nil},
		{"all equal", []float32{7, 7, 7, 7}, 4, []int32{0, 1, 2, 3}, []float32{0.25, 0.25, 0.25, 0.25}},
		{"k = 1 gets weight 1", []float32{-3, 0.5, 0.25}, 1, []int32{1}, []float32{1}},
		{"large logits do not overflow", []float32{1000, 999, -1000}, 2, []int32{0, 1}, []float32{float32(1 / (1 + math.Exp(-1))), float32(1 / (1 + math.Exp(1)))}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ids := make([]int32, tt.k)
			w := make([]float32, tt.k)
			RouterTopK(ids, w, tt.logits, 1, len(tt.logits), tt.k)
			if diff := cmp.Diff(tt.wantIDs, ids); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
			if tt.wantWeights != nil {
				if diff := cmp.Diff(tt.wantWeights, w, approx(0, 1e-6)); diff != "" {
					t.Errorf("weights (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestRouterTopKRandom(t *testing.T) {
	const n, experts, k, pad = 9, 64, 8, 2
	r := newRand(100)
	logits := randVec(r, (n+pad)*experts, 2)
	poison(logits[n*experts:])
	ids := make([]int32, (n+pad)*k)
	for i := range ids {
		ids[i] = -7
	}
	w := make([]float32, (n+pad)*k)
	poison(w)
	RouterTopK(ids, w, logits, n, experts, k)
	for tok := range n {
		row := logits[tok*experts:][:experts]
		// Reference: sort expert indices by descending logit (softmax is monotone).
		order := make([]int32, experts)
		for e := range order {
			order[e] = int32(e)
		}
		slices.SortStableFunc(order, func(a, b int32) int { return -cmpF(row[a], row[b]) })
		if diff := cmp.Diff(order[:k], ids[tok*k:][:k]); diff != "" {
			t.Errorf("token %d ids (-want +got):\n%s", tok, diff)
		}
		var maxL float64 = math.Inf(-1)
		for _, l := range row {
			maxL = math.Max(maxL, float64(l))
		}
		var z, top float64
		for e, l := range row {
			z += math.Exp(float64(l) - maxL)
			if slices.Contains(order[:k], int32(e)) {
				top += math.Exp(float64(l) - maxL)
			}
		}
		var sum float64
		for j, e := range order[:k] {
			want := math.Exp(float64(row[e])-maxL) / top
			if got := w[tok*k+j]; math.Abs(float64(got)-want) > 1e-6 {
				t.Errorf("token %d slot %d: weight %v, want %v", tok, j, got, want)
			}
			sum += float64(w[tok*k+j])
		}
		if math.Abs(sum-1) > 1e-6 {
			t.Errorf("token %d: weights sum to %v, want 1", tok, sum)
		}
	}
	checkPoisoned(t, "weights rows ≥ n", w[n*k:])
	for _, id := range ids[n*k:] {
		if id != -7 {
			t.Fatalf("ids rows ≥ n were written: %v", ids[n*k:])
		}
	}
}

func cmpF(a, b float32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// naiveMoE is SPEC §4 step 2 in float64.
func naiveMoE(x []float32, ids []int32, weights []float32, gateUp, down []uint16, n, hidden, inter, k int) []float32 {
	gu, dn := wideBF16(gateUp), wideBF16(down)
	y := make([]float64, n*hidden)
	for t := range n {
		for j := range k {
			e := int(ids[t*k+j])
			act := make([]float64, inter)
			for i := range inter {
				var g, u float64
				for c := range hidden {
					xc := float64(x[t*hidden+c])
					g += gu[(e*2*inter+i)*hidden+c] * xc
					u += gu[(e*2*inter+inter+i)*hidden+c] * xc
				}
				act[i] = silu64(g) * u
			}
			for o := range hidden {
				var s float64
				for i := range inter {
					s += dn[(e*hidden+o)*inter+i] * act[i]
				}
				y[t*hidden+o] += float64(weights[t*k+j]) * s
			}
		}
	}
	return f32(y)
}

func TestMoEExperts(t *testing.T) {
	const experts, hidden, inter, k, pad = 6, 16, 8, 3, 2
	for _, tt := range []struct {
		n, scratch int // scratch: moeScratchFloats (small values force several token blocks)
	}{
		{1, 1 << 22},
		{7, 1 << 22},
		{7, 2 * k * hidden}, // blocks of 2 tokens, the last one partial
		{20, 1},             // one token per block
	} {
		t.Run(fmt.Sprintf("n=%d/scratch=%d", tt.n, tt.scratch), func(t *testing.T) {
			old := moeScratchFloats
			moeScratchFloats = tt.scratch
			t.Cleanup(func() { moeScratchFloats = old })

			r := newRand(110)
			x := randVec(r, (tt.n+pad)*hidden, 1)
			poison(x[tt.n*hidden:])
			logits := randVec(r, tt.n*experts, 1)
			ids := make([]int32, (tt.n+pad)*k)
			w := make([]float32, (tt.n+pad)*k)
			RouterTopK(ids, w, logits, tt.n, experts, k)
			for i := tt.n * k; i < len(ids); i++ {
				ids[i] = 1 << 20 // padding ids would index out of range if read
			}
			poison(w[tt.n*k:])
			gateUp := randBF16(r, experts*2*inter*hidden, 0.3)
			down := randBF16(r, experts*hidden*inter, 0.3)
			want := naiveMoE(x, ids, w, gateUp, down, tt.n, hidden, inter, k)

			y := make([]float32, (tt.n+pad)*hidden)
			poison(y)
			MoEExperts(y, x, ids, w, gateUp, down, tt.n, hidden, inter, k)
			if diff := cmp.Diff(want, y[:tt.n*hidden], approx(1e-5, 1e-5)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			checkPoisoned(t, "rows ≥ n", y[tt.n*hidden:])

			forceParallel(t)
			y2 := make([]float32, len(y))
			poison(y2)
			MoEExperts(y2, x, ids, w, gateUp, down, tt.n, hidden, inter, k)
			if diff := cmp.Diff(y, y2, exact); diff != "" {
				t.Errorf("parallel (-serial +parallel):\n%s", diff)
			}
		})
	}
}

// TestMoEUnknownExpert: a slot whose expert id is outside [0, experts)
// contributes nothing: its activations are zero and the other slots' sum is
// what remains.
func TestMoEUnknownExpert(t *testing.T) {
	const experts, hidden, inter, k = 4, 16, 8, 2
	r := newRand(111)
	x := randVec(r, hidden, 1)
	gateUp := randBF16(r, experts*2*inter*hidden, 0.3)
	down := randBF16(r, experts*hidden*inter, 0.3)
	w := []float32{0.75, 0.25}
	for _, bad := range []int32{-1, experts, 1 << 20} {
		ids := []int32{2, bad}
		act := make([]float32, k*inter)
		poison(act)
		MoEGateUp(act, x, ids, gateUp, 1, hidden, inter, k, experts)
		if diff := cmp.Diff(make([]float32, inter), act[inter:], exact); diff != "" {
			t.Errorf("id %d: activations (-want +got):\n%s", bad, diff)
		}
		y := make([]float32, hidden)
		MoEDown(y, act, ids, w, down, 1, hidden, inter, k, experts)
		want := naiveMoE(x, []int32{2}, []float32{0.75}, gateUp, down, 1, hidden, inter, 1)
		if diff := cmp.Diff(want, y, approx(1e-6, 1e-6)); diff != "" {
			t.Errorf("id %d: y (-want +got):\n%s", bad, diff)
		}
	}
}
