package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
)

// headCase is one LM head: n rows of width k and one activation row.
type headCase struct {
	name string
	n, k int
	x    []float32
	w    []uint16
	lim  int // vocabulary limit (0: none)
}

// certified runs the four families' references as a greedy decode step
// does and returns the token, the candidates and the fallback flag.
func certified(t *testing.T, c headCase, group, blocks, cap int) (id, cands, fallback int32) {
	t.Helper()
	q, scale := make([]int8, c.n*c.k), make([]float32, c.n)
	kernels.QuantizeRowsInt8(q, scale, c.w, c.n, c.k)
	upper, bounds := make([]float32, c.n), make([]float32, 2*ir.Ceil(c.n, group))
	lim := c.n
	if c.lim > 0 && c.lim < c.n {
		lim = c.lim
	}
	kernels.LMHeadInt8(upper, bounds, c.x, q, scale, c.n, c.k, group, lim)
	bestV, bestI := make([]float32, blocks), make([]int32, 3*blocks)
	logits := make([]float32, c.n)
	kernels.MatMul(logits, c.x, c.w, 1, c.k, c.n)
	kernels.LMHeadCertify(bestV, bestI, upper, bounds, c.n, group, lim, blocks, kernels.LMHeadWarps, cap, func(j int) float32 { return logits[j] })
	tokens, out := make([]int32, 1), make([]int32, 4)
	kernels.LMHeadPick(tokens, out, bestV, bestI, blocks)
	if tokens[0] != out[0] || !math.IsNaN(float64(math.Float32frombits(uint32(out[1])))) {
		t.Errorf("%s: tokens %d, out %v: want the id twice and a NaN logprob", c.name, tokens[0], out)
	}
	return out[0], out[2], out[3]
}

// greedy is the BF16 head's token: MatMul's logits, Sample's greedy.
func greedy(c headCase) int32 {
	logits := make([]float32, c.n)
	kernels.MatMul(logits, c.x, c.w, 1, c.k, c.n)
	id, _ := kernels.SampleToken(logits, kernels.SampleParams{VocabLimit: int32(c.lim)})
	return id
}

func randomHead(name string, rng *rand.Rand, n, k int, std float64) headCase {
	c := headCase{name: name, n: n, k: k, x: make([]float32, k), w: make([]uint16, n*k)}
	for i := range c.x {
		c.x[i] = float32(rng.NormFloat64())
	}
	for i := range c.w {
		c.w[i] = bf16.FromFloat32(float32(rng.NormFloat64() * std))
	}
	return c
}

// headCases are the adversarial heads: exact ties (duplicate rows, the
// lower id must win), near-ties one BF16 step apart in one weight, rows
// whose int8 images are equal but whose BF16 logits differ, a winner past
// the vocabulary limit, a NaN activation, non-finite and zero weights, and
// a head where every row is a candidate (the fallback).
func headCases() []headCase {
	rng := rand.New(rand.NewPCG(5, 9))
	var cs []headCase
	cs = append(cs, randomHead("random_512x64", rng, 512, 64, 0.1), randomHead("random_odd_k", rng, 301, 37, 0.2),
		randomHead("random_4096x256", rng, 4096, 256, 0.05))

	// Duplicates of the best row at later and earlier ids: a tie, broken to the lowest.
	tie := randomHead("exact_ties", rng, 777, 64, 0.1)
	best := greedy(tie)
	for _, j := range []int{3, 500, 776} {
		copy(tie.w[j*tie.k:][:tie.k], tie.w[int(best)*tie.k:][:tie.k])
	}
	cs = append(cs, tie)

	// Near-ties: copies of the best row, each with one weight a BF16 step up or down.
	near := randomHead("near_ties", rng, 1000, 128, 0.1)
	best = greedy(near)
	for i, j := range []int{10, 20, 30, 40, 999} {
		row := near.w[j*near.k:][:near.k]
		copy(row, near.w[int(best)*near.k:][:near.k])
		e := (7 * i) % near.k
		if i%2 == 0 {
			row[e]++
		} else {
			row[e]--
		}
	}
	cs = append(cs, near)

	// Rows that quantize alike: the winner and runner-up differ below the int8 step.
	sameQ := headCase{name: "same_int8_image", n: 64, k: 32, x: make([]float32, 32), w: make([]uint16, 64*32)}
	for i := range sameQ.x {
		sameQ.x[i] = 1
	}
	for j := 0; j < sameQ.n; j++ {
		for i := 0; i < sameQ.k; i++ {
			v := float32(1 + i%3)
			if i == 5 && j%7 == 3 {
				v += float32(j) / 1024 // j = 59 is the largest
			}
			sameQ.w[j*sameQ.k+i] = bf16.FromFloat32(v)
		}
	}
	cs = append(cs, sameQ)

	limited := randomHead("vocab_limit", rng, 600, 64, 0.1)
	limited.lim = int(greedy(limited)) // the unlimited winner is masked out
	if limited.lim == 0 {
		limited.lim = 1
	}
	cs = append(cs, limited)

	nanX := randomHead("nan_activation", rng, 300, 64, 0.1)
	nanX.x[17] = float32(math.NaN())
	cs = append(cs, nanX)

	infW := randomHead("inf_and_zero_rows", rng, 300, 64, 0.1)
	infW.w[40*64+3] = bf16.FromFloat32(float32(math.Inf(1)))
	infW.w[41*64+9] = bf16.FromFloat32(float32(math.NaN()))
	clear(infW.w[42*64 : 43*64])
	cs = append(cs, infW)

	// Every row equal up to one weight: every group is a candidate.
	flat := headCase{name: "all_candidates", n: 10000, k: 64, x: make([]float32, 64), w: make([]uint16, 10000*64)}
	for i := range flat.x {
		flat.x[i] = float32(rng.NormFloat64())
	}
	for j := 0; j < flat.n; j++ {
		for i := 0; i < flat.k; i++ {
			flat.w[j*flat.k+i] = bf16.FromFloat32(0.5)
		}
		flat.w[j*flat.k+j%flat.k] = bf16.FromFloat32(0.5 + float32(rng.IntN(3))/512)
	}
	cs = append(cs, flat)
	return cs
}

// TestLMHeadCertifiedGreedy: the certified head's token is the BF16 head's
// greedy token on every adversarial head, for several group and block
// shapes and caps (a cap of one group makes most heads fall back).
func TestLMHeadCertifiedGreedy(t *testing.T) {
	for _, c := range headCases() {
		want := greedy(c)
		for _, shape := range []struct{ group, blocks, cap int }{{32, 132, kernels.LMHeadCap}, {8, 40, kernels.LMHeadCap}, {32, 3, 1}, {1, 7, 1000}} {
			t.Run(fmt.Sprintf("%s/g%d_b%d_cap%d", c.name, shape.group, shape.blocks, shape.cap), func(t *testing.T) {
				id, cands, fb := certified(t, c, shape.group, shape.blocks, shape.cap)
				if id != want {
					t.Errorf("certified token %d, the BF16 head's %d (candidates %d, fallback %d)", id, want, cands, fb)
				}
				if cands < 1 {
					t.Errorf("%d candidates: the winner is always one", cands)
				}
			})
		}
	}
}

// TestLMHeadCandidates pins what the certificate does on the heads whose
// answer is known: no fallback and few candidates on random heads, the
// tied rows all candidates, every row a candidate where the activation is
// NaN (no bound is finite), the fallback where more groups are than the cap.
func TestLMHeadCandidates(t *testing.T) {
	got := map[string][2]int32{}
	for _, c := range headCases() {
		_, cands, fb := certified(t, c, 32, 132, kernels.LMHeadCap)
		got[c.name] = [2]int32{cands, fb}
	}
	for name, c := range got {
		switch name {
		case "nan_activation":
			if c[0] != 300 {
				t.Errorf("%s: %d candidates, want every row", name, c[0])
			}
		case "all_candidates":
			if c[1] != 1 {
				t.Errorf("%s: candidates %d without the fallback", name, c[0])
			}
		case "exact_ties", "near_ties":
			if c[1] != 0 || c[0] < 4 {
				t.Errorf("%s: %d candidates, fallback %d: want every tied row and no fallback", name, c[0], c[1])
			}
		default:
			if c[1] != 0 {
				t.Errorf("%s: fell back (%d candidates)", name, c[0])
			}
		}
	}
	t.Logf("candidates, fallback: %v", got)
}

// TestLMHeadBoundHolds: every row's bounds enclose the BF16 head's float
// logit, on random heads at several scales and the adversarial ones.
func TestLMHeadBoundHolds(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 3))
	cs := headCases()
	for _, std := range []float64{1e-30, 1e-3, 1, 1e20} {
		cs = append(cs, randomHead(fmt.Sprintf("scale_%g", std), rng, 500, 200, std))
	}
	for _, c := range cs {
		q, scale := make([]int8, c.n*c.k), make([]float32, c.n)
		kernels.QuantizeRowsInt8(q, scale, c.w, c.n, c.k)
		upper, bounds := make([]float32, c.n), make([]float32, 2*c.n)
		kernels.LMHeadInt8(upper, bounds, c.x, q, scale, c.n, c.k, 1, c.n)
		logits := make([]float32, c.n)
		kernels.MatMul(logits, c.x, c.w, 1, c.k, c.n)
		bad := 0
		for j, l := range logits {
			if l != l {
				continue
			}
			if lo, hi := bounds[2*j], bounds[2*j+1]; !(lo <= l && l <= hi) || hi != upper[j] {
				if bad++; bad < 4 {
					t.Errorf("%s row %d: logit %g outside [%g, %g] (upper %g)", c.name, j, l, lo, hi, upper[j])
				}
			}
		}
	}
}

// TestQuantizeRowsInt8 pins the derivation on rows whose answer is known.
func TestQuantizeRowsInt8(t *testing.T) {
	f := func(v ...float32) []uint16 {
		out := make([]uint16, len(v))
		for i, x := range v {
			out[i] = bf16.FromFloat32(x)
		}
		return out
	}
	w := append(append(append(f(127, -63.5, 0.5, 1.5), f(-2.54, 1.27, 0, 0)...), f(0, 0, 0, 0)...), f(1, float32(math.Inf(-1)), 2, 3)...)
	q, scale := make([]int8, 16), make([]float32, 4)
	kernels.QuantizeRowsInt8(q, scale, w, 4, 4)
	wantQ := []int8{127, -64, 0, 2, -127, 64, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}
	s1 := bf16.ToFloat32(bf16.FromFloat32(-2.54))
	wantS := []float32{1, -s1 / 127, 0x1p-100, float32(math.Inf(1))}
	if diff := cmp.Diff(wantQ, q); diff != "" {
		t.Errorf("q (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantS, scale); diff != "" {
		t.Errorf("scale (-want +got):\n%s", diff)
	}
}

// TestLMHeadParamsRefused: launch parameters the kernels cannot serve are
// refused with an error naming them.
func TestLMHeadParamsRefused(t *testing.T) {
	int8p := func(group, rpw, unroll int64) ir.Params {
		return ir.Params{Ints: map[string]int64{"k": 64, "n": 100, "group": group, "rows_per_warp": rpw, "unroll": unroll}}
	}
	certp := func(blocks, cap, split int64) ir.Params {
		return ir.Params{Ints: map[string]int64{"k": 64, "n": 100, "group": 8, "blocks": blocks, "cap": cap, "split_k": split, "unroll": 1}}
	}
	for _, tt := range []struct {
		kind ir.Kind
		p    ir.Params
		want string
	}{
		{ir.LMHeadInt8, int8p(16, 1, 1), "group 16"},
		{ir.LMHeadInt8, int8p(160, 20, 1), "loads"},
		{ir.LMHeadInt8, int8p(32, 4, 8), "loads"},
		{ir.LMHeadCertify, certp(0, 4, 1), "blocks"},
		{ir.LMHeadCertify, certp(2000, 4, 1), "blocks 2000"},
		{ir.LMHeadCertify, certp(4, 4, 3), "split_k 3"},
	} {
		err := kernels.Families[tt.kind].CheckParams(tt.p)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s %v: %v, want an error naming %q", tt.kind, tt.p.Ints, err, tt.want)
		}
	}
}

// runFamily runs family kind's reference on fresh memory for its operands
// (one row, the block's vocabulary limit lim), with set filling the inputs
// first; it returns the run to read the outputs from.
func runFamily(t *testing.T, kind ir.Kind, p ir.Params, lim int, set func(a *ir.Args)) *ir.Args {
	t.Helper()
	f := kernels.Families[kind]
	if err := f.CheckParams(p); err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	a := &ir.Args{Family: f, Params: p, N: 1, Block: &[ir.ParamSlots]int32{}, Mem: make([][]byte, len(f.Operands))}
	a.Block[ir.ParamVocabLimit] = int32(lim)
	for i, o := range f.Operands {
		a.Mem[i] = make([]byte, o.Extent(p, 1)*int64(o.DType.Size()))
	}
	set(a)
	if err := f.Reference(a); err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	return a
}

// TestRMSNormLMHeadCertifiedGreedy: with the final norm folded into the
// certified head (rmsnorm_lm_head_int8, rmsnorm_lm_head_certify), the
// token is the greedy token of rmsnorm_gemv, the BF16 head it certifies,
// on the adversarial heads (the activation taken as the residual row), and
// the int8 head writes rmsnorm_gemv's normed row.
func TestRMSNormLMHeadCertifiedGreedy(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 4))
	for _, c := range headCases() {
		for _, onePlus := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/one_plus_%v", c.name, onePlus), func(t *testing.T) {
				normW := make([]float32, c.k)
				for i := range normW {
					normW[i] = float32(rng.NormFloat64() * 0.3)
				}
				const eps = 1e-6
				norm := func(p ir.Params) ir.Params {
					p.SetReal("eps", eps)
					p.SetFlag("one_plus", onePlus)
					return p
				}
				lim := c.n
				if c.lim > 0 && c.lim < c.n {
					lim = c.lim
				}
				// The BF16 head: rmsnorm_gemv's reference, then Sample's greedy.
				gp := norm(ir.Params{Ints: map[string]int64{"k": int64(c.k), "n": int64(c.n), "split_k": 1, "rows_per_warp": 1, "unroll": 1},
					Flags: map[string]bool{"early": false, "staged": false, "l2_prefetch": false}})
				head := runFamily(t, ir.RMSNormGEMV, gp, lim, func(a *ir.Args) {
					copy(a.F32("x"), c.x)
					copy(a.F32("norm_w"), normW)
					copy(a.BF16("w"), c.w)
				})
				want, _ := kernels.SampleToken(head.F32("y"), kernels.SampleParams{VocabLimit: int32(c.lim)})

				q, scale := make([]int8, c.n*c.k), make([]float32, c.n)
				kernels.QuantizeRowsInt8(q, scale, c.w, c.n, c.k)
				const group, blocks = 32, 7
				ip := norm(ir.Params{Ints: map[string]int64{"k": int64(c.k), "n": int64(c.n), "group": group, "rows_per_warp": 4, "unroll": 1}})
				i8 := runFamily(t, ir.RMSNormLMHeadInt8, ip, lim, func(a *ir.Args) {
					copy(a.F32("x"), c.x)
					copy(a.F32("norm_w"), normW)
					copy(a.I8("q"), q)
					copy(a.F32("scale"), scale)
				})
				if diff := cmp.Diff(head.F32("xn"), i8.F32("xn"), cmp.Comparer(func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) })); diff != "" {
					t.Errorf("normed row (-rmsnorm_gemv +int8 head):\n%s", diff)
				}
				cp := norm(ir.Params{Ints: map[string]int64{"k": int64(c.k), "n": int64(c.n), "group": group, "blocks": blocks, "cap": kernels.LMHeadCap, "split_k": 1, "unroll": 1}})
				cert := runFamily(t, ir.RMSNormLMHeadCertify, cp, lim, func(a *ir.Args) {
					copy(a.F32("upper"), i8.F32("upper"))
					copy(a.F32("bounds"), i8.F32("bounds"))
					copy(a.F32("x"), c.x)
					copy(a.F32("norm_w"), normW)
					copy(a.BF16("w"), c.w)
				})
				tokens, out := make([]int32, 1), make([]int32, 4)
				kernels.LMHeadPick(tokens, out, cert.F32("best_v"), cert.I32("best_i"), blocks)
				if out[0] != want || tokens[0] != want {
					t.Errorf("certified token %d (tokens %d), rmsnorm_gemv's greedy %d (candidates %d, fallback %d)", out[0], tokens[0], want, out[2], out[3])
				}
			})
		}
	}
}
