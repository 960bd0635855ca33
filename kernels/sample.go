package kernels

import (
	"math"
	"slices"
)

// Sampling on the device: the next token is drawn where the logits are, so
// only its id and logprob cross to the host. sample.tmpl and Sample here
// are one algorithm; for the same logits and parameters they choose the
// same id, barring float ties at a decision (exp and log may differ in
// the last place between the device and math.Exp/math.Log).
//
// The active ids are those below the vocabulary limit with a finite logit;
// M is their maximum. The sorted order ranks ids by logit, largest first,
// ties to the lower id (as a stable sort, like the host sampler): every
// cut below keeps a prefix of that order.
//
//   - Greedy (temperature 0, or the temperature too small to invert, or no
//     finite logit, or a +Inf one): the first id of the largest non-NaN
//     logit, like runtime.Argmax.
//   - Otherwise z_i = (l_i − M)·(1/T) in float32 and w_i = exp(z_i) ∈ [0, 1],
//     held as the integer q_i = ⌊w_i·2^40⌋ so that every mass is an exact
//     integer sum whatever its order (the device sums in whatever order its
//     threads meet the ids; the thresholds cannot depend on it).
//   - top_k (0 < k < active): the first k ids of the sorted order.
//   - top_p (0 < p < 1): with Z the mass Σq of the top_k set (all active
//     ids without top_k), the shortest prefix of the top_k set, min_p
//     applied, whose mass reaches W = ⌈p·Z⌉ (p·Z in float64); all of it if
//     none does. This is the host sampler's cut: top_p normalized over the
//     top_k set, min_p before it.
//   - min_p (> 0): keep z_i ≥ min(log(min_p), 0), a logit threshold.
//   - The draw: the kept id with the largest z_i + g_i (ties to the lower
//     id), g_i = −log(−log u_i) a Gumbel variate from a counter-based hash
//     of (seed, step, id): Gumbel-max, a sample of softmax(z) over the
//     kept ids. No state carries from one draw to the next.
//
// A token mask (constrained decoding: Mask set, ir.ParamMasked in the
// block) restricts the draw to the ids whose bit is set (bit i%32 of word
// i/32): a masked-out id is treated as a NaN logit by everything above —
// greedy, the cuts, the draw. The logprob is not masked: it is the model's
// own distribution, as the host sampler reports it.
//
// The logprob is log softmax(logits) at the chosen id over the ids below the
// vocabulary limit (NaN ones left out), at temperature 1 and before any cut,
// as OpenAI's logprobs: (l_c − M') − log Σ exp(l_i − M'), M' the largest
// non-NaN logit, the sum in float32 in the device's thread and reduction
// order (SampleThreads lanes, each over float4 groups of ids).
//
// The device finds the cuts without sorting: a bisection over the 32-bit
// order-preserving key of the logit (and then over the id among ties at
// the threshold) with block-wide integer counts and masses, moving the
// candidates into shared memory once few enough remain. The reference here
// sorts; both find the same prefix, the one the definitions above name.

// SampleParams are the sampling values of the parameter block
// (ir.ParamSeedLo … ir.ParamVocabLimit, ir.ParamMasked).
type SampleParams struct {
	Seed        uint64
	Step        uint32
	Temperature float32 // greedy unless > 0
	TopP        float32 // a nucleus cut when in (0, 1)
	MinP        float32 // a cut when > 0
	TopK        int32   // a limit when > 0
	VocabLimit  int32   // ids at or above it are masked when > 0
	// Mask, when not nil (the block's masked slot is 1), holds the ids
	// that may be drawn: ⌈vocab/32⌉ words, the sample op's mask operand.
	Mask []uint32
}

// MaskAllows reports whether mask (nil: every id) allows id.
func MaskAllows(mask []uint32, id int) bool {
	return mask == nil || (id/32 < len(mask) && mask[id/32]>>(uint(id)%32)&1 == 1)
}

// SampleThreads is the device kernel's block size, the lanes of the
// logprob's sum: every GPU target's block threads (plan.TargetSpec.Launch;
// codegen's tests check).
const SampleThreads = 256

// sampleGamma2 decorrelates the step from the seed in the draw's state.
const sampleGamma2 = 0xd1b54a32d192ed03

// SampleState is the per-draw start of the counter stream:
// mix(mix(seed + γ) ^ mix((step+1)·γ₂)).
func SampleState(seed uint64, step uint32) uint64 {
	return mix64(mix64(seed+fillGamma) ^ mix64((uint64(step)+1)*sampleGamma2))
}

// SampleUniform is id's uniform of the draw: r = the top 23 bits of
// mix(state + (id+1)·γ), u = (2r+1)·2^-24, exact in float32 and inside (0, 1).
func SampleUniform(state uint64, id int) float32 {
	r := mix64(state+uint64(id+1)*fillGamma) >> 41
	return float32(2*r+1) * 0x1p-24
}

// gumbel is −log(−log u) in float32 steps.
func gumbel(u float32) float32 { return -logf(-logf(u)) }

// gumbelMax bounds gumbel over every u SampleUniform makes (−log(−log(1−2^-24))
// ≈ 16.64): an id whose z is below the best score by more cannot win.
const gumbelMax = 17

func logf(x float32) float32 { return float32(math.Log(float64(x))) }

// sampleKey maps a float to a uint32 with the same order (−0 as +0).
func sampleKey(f float32) uint32 {
	u := math.Float32bits(f)
	if u&0x7fffffff == 0 {
		u = 0
	}
	if u&0x80000000 != 0 {
		return ^u
	}
	return u | 0x80000000
}

// sampleMass is q = ⌊exp(z)·2^40⌋.
func sampleMass(z float32) uint64 { return uint64(expf(z) * 0x1p40) }

// SampleTarget is W = ⌈p·z⌉ with p·z in float64 (at least 1 for p > 0).
func SampleTarget(p float32, z uint64) uint64 {
	x := float64(p) * float64(z)
	w := uint64(x)
	if float64(w) < x {
		w++
	}
	return w
}

// Sample writes the token SampleToken chooses from logits[:vocab] to
// tokens[0] and out[0], and its logprob's float bits to out[1]: the sample
// op, serving's rather than the model's.
func Sample(tokens, out []int32, logits []float32, vocab int, p SampleParams) {
	id, lp := SampleToken(logits[:vocab], p)
	tokens[0] = id
	out[0] = id
	out[1] = int32(math.Float32bits(lp))
}

// SampleToken chooses the next token from one row of logits (see the
// comment at the top of this file) and returns it with its logprob.
func SampleToken(logits []float32, p SampleParams) (int32, float32) {
	row := logits
	if v := int(p.VocabLimit); v > 0 && v < len(row) {
		row = row[:v]
	}
	// The logprob's maximum is over every id; the draw's over the allowed.
	top := -1
	for i, l := range row {
		if l == l && (top < 0 || l > row[top]) {
			top = i
		}
	}
	draw := row
	if p.Mask != nil {
		draw = make([]float32, len(row))
		for i, l := range row {
			if MaskAllows(p.Mask, i) {
				draw[i] = l
			} else {
				draw[i] = float32(math.NaN())
			}
		}
	}
	best := -1
	for i, l := range draw {
		if l == l && (best < 0 || l > draw[best]) {
			best = i
		}
	}
	if best < 0 {
		return 0, float32(math.NaN())
	}
	id := sampleDraw(draw, best, p)
	return int32(id), sampleLogprob(row, row[top], id)
}

// sampleDraw is the chosen id; best is the greedy one.
func sampleDraw(row []float32, best int, p SampleParams) int {
	m := row[best]
	invT := 1 / p.Temperature
	if !(p.Temperature > 0) || math.IsInf(float64(m), 0) || math.IsInf(float64(invT), 0) {
		return best
	}
	z := func(i int) float32 { return float32((row[i] - m) * invT) }
	active := func(i int) bool { l := row[i]; return l == l && !math.IsInf(float64(l), 0) }
	lnMin := float32(math.Inf(-1))
	if p.MinP > 0 {
		lnMin = min(logf(p.MinP), 0)
	}
	keepMin := func(i int) bool { return z(i) >= lnMin }
	nact := 0
	for i := range row {
		if active(i) {
			nact++
		}
	}
	useK := p.TopK > 0 && int(p.TopK) < nact
	useP := p.TopP > 0 && p.TopP < 1
	var keep []bool // nil: every active id
	if useK || useP {
		// The sorted order: key descending, then id ascending.
		order := make([]uint64, 0, nact)
		for i := range row {
			if active(i) {
				order = append(order, uint64(sampleKey(row[i]))<<32|uint64(^uint32(i)))
			}
		}
		slices.Sort(order)
		slices.Reverse(order)
		idOf := func(e uint64) int { return int(^uint32(e)) }
		top := order
		if useK {
			top = top[:p.TopK]
		}
		if useP {
			var mass uint64
			for _, e := range top {
				mass += sampleMass(z(idOf(e)))
			}
			w := SampleTarget(p.TopP, mass)
			var cum uint64
			for j, e := range top {
				if i := idOf(e); keepMin(i) {
					if cum += sampleMass(z(i)); cum >= w {
						top = top[:j+1]
						break
					}
				}
			}
		}
		keep = make([]bool, len(row))
		for _, e := range top {
			keep[idOf(e)] = true
		}
	}
	state := SampleState(p.Seed, p.Step)
	chosen, bestScore := -1, float32(0)
	for i := range row {
		if !active(i) || (keep != nil && !keep[i]) || !keepMin(i) {
			continue
		}
		zi := z(i)
		if chosen >= 0 && zi+gumbelMax < bestScore {
			continue // cannot win; the device skips its hash too
		}
		if s := zi + gumbel(SampleUniform(state, i)); chosen < 0 || s > bestScore {
			chosen, bestScore = i, s
		}
	}
	if chosen < 0 {
		return best
	}
	return chosen
}

// sampleLogprob is (l_id − m) − log Σ exp(l_i − m) over the non-NaN ids of
// row, summed as the device does: lane t of SampleThreads takes the float4
// groups t, t+SampleThreads, …, then a butterfly within each 32-lane warp
// and again over the warps' sums.
func sampleLogprob(row []float32, m float32, id int) float32 {
	var lanes [SampleThreads]float32
	groups := (len(row) + 3) / 4
	for t := range lanes {
		var s float32
		for g := t; g < groups; g += SampleThreads {
			for i := 4 * g; i < min(4*g+4, len(row)); i++ {
				if l := row[i]; l == l {
					s += expf(l - m)
				}
			}
		}
		lanes[t] = s
	}
	butterfly := func(v []float32) {
		for mask := 16; mask > 0; mask >>= 1 {
			var next [32]float32
			for l := range next {
				next[l] = v[l] + v[l^mask]
			}
			copy(v, next[:])
		}
	}
	var warps [32]float32
	for w := 0; w < SampleThreads/32; w++ {
		butterfly(lanes[32*w : 32*w+32])
		warps[w] = lanes[32*w]
	}
	butterfly(warps[:])
	return (row[id] - m) - logf(warps[0])
}
