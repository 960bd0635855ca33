package kernels

import (
	"fmt"
	"math"

	"github.com/aimaproject/aimac/ir"
)

// The certified int8 LM head (docs/lm-head.md). Greedy decoding needs only
// the argmax of the logits ℓ_j = Σ_k x_k w_jk, and the BF16 head (1 GB at
// the real model's 248320 × 2048) is the largest read of the decode step.
// The load step derives int8 rows q_j with a scale s_j = max_k |w_jk| / 127
// per row (QuantizeRowsInt8); the greedy step then
//
//  1. streams the int8 rows (half the bytes) for approximate logits
//     a_j = s_j · Σ x_k q_jk and a bound e_j with |a_j − ℓ_j| ≤ e_j, where
//     ℓ_j is the BF16 head's own float result, rounding included
//     (LMHeadBound): upper_j = a_j + e_j, and per group of rows the best
//     lower bound a_j − e_j and the best upper bound (lm_head_int8);
//  2. takes L, the best lower bound of all rows: the true argmax j* has
//     upper_{j*} ≥ ℓ_{j*} ≥ ℓ_m ≥ L, where m is the row of L, and so does
//     every row tied with it. Every row with upper_j ≥ L is a candidate;
//     its exact ℓ_j is recomputed with the BF16 head's arithmetic (the
//     gemv kernel's lanes and sum order on a GPU, dotBF16 on the CPU), and
//     the best candidate (largest ℓ, ties to the lower id, NaN skipped) is
//     the BF16 head's greedy token (lm_head_certify, lm_head_pick);
//  3. when the candidates' groups exceed the cap, or any bound is not
//     finite, every row below the vocabulary limit is a candidate: the
//     full BF16 head for that token. The certificate is never skipped.

// LMHeadCap is the most candidate groups the certify pass takes before it
// falls back to every row (the full BF16 head).
const LMHeadCap = 256

// LMHeadMaxBlocks bounds the certify pass's blocks (the blocks' bests are
// an activation of this many entries).
const LMHeadMaxBlocks = 1024

// lmHeadMaxMine bounds the groups of one certify block flagged in shared
// memory (a byte each); a block with more reads their bounds again.
const lmHeadMaxMine = 16384

// LMHeadWarps is the warps of a block on every GPU target (256 threads,
// 32 lanes): the certify pass's fallback gives each warp a row.
const LMHeadWarps = 8

// LMHeadBound returns the constants of the per-row error bound for rows of
// width k: e_j = (s_j·(S·C + D) + A)·r + A, with S the float sum of |x_k|
// and r the folded norm's rsqrt (1 without one). Its derivation
// (docs/lm-head.md): with u = 2^-24 and γ = n·u/(1−n·u), n = k + 16, in
// the space of the activations the dots are summed over (x, or with the
// norm folded x·(1+w), the rsqrt applied after the sum),
//
//   - quantization: |Σ x_k (w_k − s·q_k)| ≤ s·(1/2 + 256u)·Σ|x_k| (q is the
//     rounded f32 quotient w/s: half a step plus the quotient's rounding);
//   - the int8 dot's float sum, any order: γ·Σ|x_k q_k| ≤ 127γ·s·Σ|x_k|;
//     the product s·d and the final a ± e: 4 roundings of at most
//     u·127·s·Σ|x_k| each;
//   - the BF16 head's own float sum (what ℓ_j is): γ·max|w|·Σ|x_k| ≤
//     127γ(1+u)·s·Σ|x_k|;
//   - the folded norm: both heads scale their sum by r (a rounding each),
//     and each may form its products' activation x·(1+w) with up to two
//     roundings of its own: 4 more roundings of at most u·127·s·Σ|x_k|;
//   - S underestimates Σ|x_k| by at most a factor 1 − γ, and computing e
//     (with its scaling by r) rounds five times: C divides by
//     (1−γ)(1−u)^8 and takes a margin;
//   - flushed subnormals: D = 2^-100 (relative to s: an input flushed to
//     zero loses at most 2^-126 · 127s per element, k ≤ 2^19) and
//     A = 2^-90 (absolute: products and partial sums flushed, at most 2^-126
//     each, fewer than 2^21 operations), added again after the scaling by
//     r, whose products may flush too.
func LMHeadBound(k int) (c, d, abs float32) {
	const u = 0x1p-24
	n := float64(k + 16)
	gamma := n * u / (1 - n*u)
	exact := 0.5 + 256*u + 127*(2*gamma+2*gamma*u+8*u)
	v := exact / ((1 - gamma) * math.Pow(1-u, 8)) * (1 + 0x1p-16)
	c = float32(v)
	if float64(c) < v {
		c = math.Nextafter32(c, float32(math.Inf(1)))
	}
	return c, 0x1p-100, 0x1p-90
}

// lmHeadRowBounds is a row's upper and lower bounds from its scale, its
// int8 dot d = Σ x_k q_k, S = Σ|x_k| and the folded norm's rsqrt inv (1
// without one; f32, each operation rounded as the device rounds it): ±Inf
// where the bound is not finite or too large for the BF16 sum to be free
// of overflow (the row is then a candidate).
func lmHeadRowBounds(s, d, sumAbs, inv, c, dd, abs float32) (upper, lower float32) {
	a := float32(s * float32(d*inv))
	e := float32(float32(float32(s*float32(float32(sumAbs*c)+dd))+abs)*inv) + abs
	if !(e < 0x1p100) || a != a {
		return float32(math.Inf(1)), float32(math.Inf(-1))
	}
	return float32(a + e), float32(a - e)
}

// QuantizeRowsInt8 derives the int8 rows of an n × k BF16 matrix: per row
// s = max(max|w|/127, 2^-100) (the floor keeps s a normal float, so a
// device that flushes subnormals quantizes the same), q = round(w/s) to the
// nearest integer, ties to even, clamped to ±127; a
// row with a non-finite weight gets s = +Inf and q = 0, which makes it a
// candidate at every step.
func QuantizeRowsInt8(q []int8, scale []float32, w []uint16, n, k int) {
	parallelFor(n, k, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			row := w[j*k:][:k]
			var m float32
			finite := true
			for _, h := range row {
				v := widen(h)
				if math.IsInf(float64(v), 0) || v != v {
					finite = false
				}
				m = max(m, float32(math.Abs(float64(v))))
			}
			qr := q[j*k:][:k]
			if !finite {
				scale[j] = float32(math.Inf(1))
				clear(qr)
				continue
			}
			s := max(m/127, 0x1p-100)
			scale[j] = s
			for i, h := range row {
				r := math.RoundToEven(float64(widen(h) / s))
				qr[i] = int8(max(-127, min(127, r)))
			}
		}
	})
}

// LMHeadInt8 is lm_head_int8's math for one row x: upper[j] for every row
// below n (−Inf at or past the vocabulary limit lim), and per group of
// group rows bounds[2g] = the best lower bound, bounds[2g+1] = the best
// upper bound (−Inf for none). The int8 dot and S sum in order; the device
// sums in its lanes' order, which the bound covers.
func LMHeadInt8(upper, bounds, x []float32, q []int8, scale []float32, n, k, group, lim int) {
	c, d, abs := LMHeadBound(k)
	var sumAbs float32
	for _, v := range x[:k] {
		sumAbs += float32(math.Abs(float64(v)))
	}
	lower := make([]float32, n)
	parallelFor(n, k, func(lo, hi int) {
		for j := lo; j < hi; j++ {
			if j >= lim {
				upper[j], lower[j] = float32(math.Inf(-1)), float32(math.Inf(-1))
				continue
			}
			var dot float32
			for i, v := range q[j*k:][:k] {
				dot += float32(x[i] * float32(v))
			}
			upper[j], lower[j] = lmHeadRowBounds(scale[j], dot, sumAbs, 1, c, d, abs)
		}
	})
	for g := 0; g < ir.Ceil(n, group); g++ {
		lo, hi := float32(math.Inf(-1)), float32(math.Inf(-1))
		for j := g * group; j < min(n, (g+1)*group); j++ {
			lo, hi = max(lo, lower[j]), max(hi, upper[j])
		}
		bounds[2*g], bounds[2*g+1] = lo, hi
	}
}

// LMHeadCertify is lm_head_certify's math: with L the best lower bound of
// the groups, the candidate groups are those whose best upper bound is not
// below L; when more than capGroups are, every row below lim is a
// candidate (the fallback), else the rows of candidate groups whose upper
// bound is not below L. Block b of blocks takes the candidate groups
// g ≡ b (mod blocks) (on fallback, the rows j with ⌊j/warps⌋ ≡ b), computes
// each candidate's exact logit with logit(j) and leaves its best (value,
// id; NO id: −1), its candidates and the fallback flag: bestV[b] and
// bestI[3b..3b+3).
func LMHeadCertify(bestV []float32, bestI []int32, upper, bounds []float32, n, group, lim, blocks, warps, capGroups int, logit func(j int) float32) {
	groups := ir.Ceil(n, group)
	L := float32(math.Inf(-1))
	for g := 0; g < groups; g++ {
		L = max(L, bounds[2*g])
	}
	cand := 0
	for g := 0; g < groups; g++ {
		if !(bounds[2*g+1] < L) {
			cand++
		}
	}
	fallback := cand > capGroups
	for b := 0; b < blocks; b++ {
		bv, bi, count := float32(0), int32(-1), int32(0)
		take := func(j int) {
			count++
			v := logit(j)
			if v == v && (bi < 0 || v > bv) {
				bv, bi = v, int32(j)
			}
		}
		if fallback {
			for j := b * warps; j < lim; j += blocks * warps {
				for r := j; r < min(j+warps, lim); r++ {
					take(r)
				}
			}
		} else {
			for g := b; g < groups; g += blocks {
				if bounds[2*g+1] < L {
					continue
				}
				for j := g * group; j < min(n, lim, (g+1)*group); j++ {
					if !(upper[j] < L) {
						take(j)
					}
				}
			}
		}
		bestV[b] = bv
		bestI[3*b], bestI[3*b+1], bestI[3*b+2] = bi, count, 0
		if fallback {
			bestI[3*b+2] = 1
		}
	}
}

// LMHeadPick is lm_head_pick's math: the best of the blocks' bests (larger
// value, then lower id; a block without one skipped) to tokens[0] and
// out[0] (0 when no block has one, as Sample's all-NaN row), NaN logprob
// bits to out[1] (greedy without logits has no normalizer), and to out[2]
// and out[3] the candidates counted and whether the step fell back to
// every row.
func LMHeadPick(tokens, out []int32, bestV []float32, bestI []int32, blocks int) {
	v, id := float32(0), int32(-1)
	var count, fallback int32
	for b := 0; b < blocks; b++ {
		bv, bi := bestV[b], bestI[3*b]
		if bi >= 0 && (id < 0 || bv > v || (bv == v && bi < id)) {
			v, id = bv, bi
		}
		count += bestI[3*b+1]
		fallback = max(fallback, bestI[3*b+2])
	}
	id = max(id, 0)
	tokens[0], out[0] = id, id
	out[1] = int32(math.Float32bits(float32(math.NaN())))
	out[2], out[3] = count, fallback
}

// lmHeadFamilies declares the certified head's families: the four, and
// lm_head_int8 and lm_head_certify with the final norm folded in.
func lmHeadFamilies() []*ir.Family {
	fs := lmHeadBase()
	return append(fs, rmsnormLMHeadInt8(fs[1]), rmsnormLMHeadCertify(fs[2]))
}

func lmHeadGroups(p ir.Params) int64 { return int64(ir.Ceil(p.Int("n"), p.Int("group"))) }

// lmHeadBase declares quantize_rows_int8, lm_head_int8, lm_head_certify
// and lm_head_pick, in that order.
func lmHeadBase() []*ir.Family {
	groups := lmHeadGroups
	return []*ir.Family{
		{
			// quantize_rows_int8: one warp per row of w, n × k.
			Kind: ir.QuantizeRowsInt8,
			Operands: []ir.OperandSpec{
				{Name: "q", DType: ir.I8, Access: ir.Write, Extent: ir.Fixed("n", "k")},
				{Name: "scale", DType: ir.F32, Access: ir.Write, Extent: ir.Fixed("n")},
				{Name: "w", DType: ir.BF16, Access: ir.Read, Extent: ir.Fixed("n", "k")},
			},
			Params: ir.Ints("k", "n"),
			Launch: func(p ir.Params, _ int, c ir.LaunchConfig) ir.LaunchShape {
				return c.Blocks(ir.Ceil(p.Int("n"), c.Warps()), 1, 1)
			},
			Reference: func(a *ir.Args) error {
				QuantizeRowsInt8(a.I8("q"), a.F32("scale"), a.BF16("w"), a.Int("n"), a.Int("k"))
				return nil
			},
		},
		{
			// lm_head_int8: one row x; group = rows of a block (the
			// block's warps × rows_per_warp).
			Kind: ir.LMHeadInt8,
			Operands: []ir.OperandSpec{
				{Name: "upper", DType: ir.F32, Access: ir.Write, Extent: ir.Fixed("n")},
				{Name: "bounds", DType: ir.F32, Access: ir.Write, Extent: func(p ir.Params, _ int64) int64 { return 2 * groups(p) }},
				{Name: "x", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("k")},
				{Name: "q", DType: ir.I8, Access: ir.Read, Extent: ir.Fixed("n", "k")},
				{Name: "scale", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("n")},
			},
			Params: cat(ir.Ints("k", "n", "group"), streamParams()),
			Slots:  []ir.Slot{ir.ParamVocabLimit},
			Check: func(p ir.Params) error {
				if g, r := p.Int("group"), p.Int("rows_per_warp"); r < 1 || g != LMHeadWarps*r {
					return fmt.Errorf("group %d: want a block's %d warps × rows_per_warp %d", g, LMHeadWarps, r)
				}
				return checkStream(p, p.Int("rows_per_warp"))
			},
			Launch: func(p ir.Params, _ int, c ir.LaunchConfig) ir.LaunchShape {
				return c.Blocks(int(groups(p)), 1, 1)
			},
			TemplateData: func(p ir.Params) map[string]any {
				c, d, abs := LMHeadBound(p.Int("k"))
				return map[string]any{"bound_c": []float32{c}, "bound_d": []float32{d}, "bound_a": []float32{abs}, "norm": false}
			},
			Reference: func(a *ir.Args) error {
				n := a.Int("n")
				LMHeadInt8(a.F32("upper"), a.F32("bounds"), a.F32("x"), a.I8("q"), a.F32("scale"), n, a.Int("k"), a.Int("group"), vocabLimit(a, n))
				return nil
			},
		},
		{
			// lm_head_certify: blocks blocks; the exact logits are the
			// gemv kernel's for split_k (a GPU's BF16 head) or dotBF16's
			// (MatMul's one row: the CPU's).
			Kind: ir.LMHeadCertify,
			Operands: []ir.OperandSpec{
				{Name: "best_v", DType: ir.F32, Access: ir.Write, Extent: ir.Fixed("blocks")},
				{Name: "best_i", DType: ir.I32, Access: ir.Write, Extent: func(p ir.Params, _ int64) int64 { return 3 * int64(p.Int("blocks")) }},
				{Name: "upper", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("n")},
				{Name: "bounds", DType: ir.F32, Access: ir.Read, Extent: func(p ir.Params, _ int64) int64 { return 2 * groups(p) }},
				{Name: "x", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("k")},
				{Name: "w", DType: ir.BF16, Access: ir.Read, Extent: ir.Fixed("n", "k")},
			},
			Params: ir.Ints("k", "n", "group", "blocks", "cap", "split_k", "unroll"),
			Slots:  []ir.Slot{ir.ParamVocabLimit},
			Check: func(p ir.Params) error {
				if s := p.Int("split_k"); s < 1 || s&(s-1) != 0 || s > GEMVMaxSplitK {
					return fmt.Errorf("split_k %d: want the BF16 head's, a power of two up to %d", s, GEMVMaxSplitK)
				}
				if b := p.Int("blocks"); b < 1 || b > LMHeadMaxBlocks {
					return fmt.Errorf("blocks %d: want 1 to %d", b, LMHeadMaxBlocks)
				}
				if c := p.Int("cap"); c < 1 {
					return fmt.Errorf("cap %d: want at least one group", c)
				}
				if g := p.Int("group"); g < 1 {
					return fmt.Errorf("group %d: want at least one row", g)
				}
				if u := p.Int("unroll"); u < 1 || u > 8 {
					return fmt.Errorf("unroll %d: want 1 to 8", u)
				}
				return nil
			},
			Launch: func(p ir.Params, _ int, c ir.LaunchConfig) ir.LaunchShape {
				return c.Blocks(p.Int("blocks"), 1, 1)
			},
			TemplateData: func(ir.Params) map[string]any {
				return map[string]any{"warps": LMHeadWarps, "max_mine": lmHeadMaxMine, "norm": false}
			},
			Reference: func(a *ir.Args) error {
				n, k := a.Int("n"), a.Int("k")
				x, w := a.F32("x")[:k], a.BF16("w")
				LMHeadCertify(a.F32("best_v"), a.I32("best_i"), a.F32("upper"), a.F32("bounds"), n, a.Int("group"),
					vocabLimit(a, n), a.Int("blocks"), LMHeadWarps, a.Int("cap"), func(j int) float32 { return dotBF16(x, w[j*k:][:k]) })
				return nil
			},
		},
		{
			Kind: ir.LMHeadPick,
			Operands: []ir.OperandSpec{
				{Name: "tokens", DType: ir.I32, Access: ir.Write, Extent: ir.Const(1)},
				{Name: "out", DType: ir.I32, Access: ir.Write, Extent: ir.Const(4)},
				{Name: "best_v", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("blocks")},
				{Name: "best_i", DType: ir.I32, Access: ir.Read, Extent: func(p ir.Params, _ int64) int64 { return 3 * int64(p.Int("blocks")) }},
			},
			Params: ir.Ints("blocks"),
			Launch: func(_ ir.Params, _ int, c ir.LaunchConfig) ir.LaunchShape { return c.Blocks(1, 1, 1) },
			Reference: func(a *ir.Args) error {
				LMHeadPick(a.I32("tokens"), a.I32("out"), a.F32("best_v"), a.I32("best_i"), a.Int("blocks"))
				return nil
			},
		},
	}
}

// rmsnormLMHeadInt8 is lm_head_int8 (base) with the final norm folded in,
// as rmsnorm_gemv folds it into the BF16 head: x is the residual row, the
// int8 dots run on x·(1+norm_w) (or x·norm_w) and the sums, S included,
// are scaled by the row's rsqrt(mean(x²)+eps) at the end; block 0 writes
// the normed row to xn (the hidden row the logits phase reads), as
// rmsnorm_gemv does. Its reference is the pair's: rmsnorm into xn, then
// lm_head_int8 from it (the bound covers either arithmetic).
func rmsnormLMHeadInt8(base *ir.Family) *ir.Family {
	f := *base
	f.Kind, f.Template = ir.RMSNormLMHeadInt8, "lm_head_int8.tmpl"
	f.Operands = []ir.OperandSpec{
		base.Operands[0], base.Operands[1], base.Operands[2],
		{Name: "norm_w", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("k")},
		base.Operands[3], base.Operands[4],
		{Name: "xn", DType: ir.F32, Access: ir.Write, Extent: ir.Fixed("k")},
	}
	f.Params = cat(base.Params, ir.Reals("eps"), ir.Flags("one_plus"))
	f.TemplateData = func(p ir.Params) map[string]any {
		d := base.TemplateData(p)
		d["norm"] = true
		return d
	}
	f.Reference = func(a *ir.Args) error {
		n, k := a.Int("n"), a.Int("k")
		xn := a.F32("xn")[:k]
		RMSNorm(xn, k, a.F32("x"), k, a.F32("norm_w"), 1, k, a.Real32("eps"), a.Flag("one_plus"))
		LMHeadInt8(a.F32("upper"), a.F32("bounds"), xn, a.I8("q"), a.F32("scale"), n, k, a.Int("group"), vocabLimit(a, n))
		return nil
	}
	return &f
}

// rmsnormLMHeadCertify is lm_head_certify (base) for a BF16 head that is
// rmsnorm_gemv: x is the residual row, and a candidate's logit is
// rmsnorm_gemv's for split_k and unroll, bit for bit (the dots on
// x·(1+norm_w), the sum scaled by the row's rsqrt). Its reference is
// rmsnorm_gemv's: rmsnorm, then dotBF16 of the normed row.
func rmsnormLMHeadCertify(base *ir.Family) *ir.Family {
	f := *base
	f.Kind, f.Template = ir.RMSNormLMHeadCertify, "lm_head_certify.tmpl"
	f.Operands = []ir.OperandSpec{
		base.Operands[0], base.Operands[1], base.Operands[2], base.Operands[3], base.Operands[4],
		{Name: "norm_w", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("k")},
		base.Operands[5],
	}
	f.Params = cat(base.Params, ir.Reals("eps"), ir.Flags("one_plus"))
	f.TemplateData = func(p ir.Params) map[string]any {
		d := base.TemplateData(p)
		d["norm"] = true
		return d
	}
	f.Reference = func(a *ir.Args) error {
		n, k := a.Int("n"), a.Int("k")
		xn, w := make([]float32, k), a.BF16("w")
		RMSNorm(xn, k, a.F32("x"), k, a.F32("norm_w"), 1, k, a.Real32("eps"), a.Flag("one_plus"))
		LMHeadCertify(a.F32("best_v"), a.I32("best_i"), a.F32("upper"), a.F32("bounds"), n, a.Int("group"),
			vocabLimit(a, n), a.Int("blocks"), LMHeadWarps, a.Int("cap"), func(j int) float32 { return dotBF16(xn, w[j*k:][:k]) })
		return nil
	}
	return &f
}

// vocabLimit is the rows a launch of n rows may pick: the block's
// vocabulary limit when it is in (0, n), else n.
func vocabLimit(a *ir.Args, n int) int {
	if v := int(a.Slot(ir.ParamVocabLimit)); v > 0 && v < n {
		return v
	}
	return n
}
