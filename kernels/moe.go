package kernels

import (
	"math"
	"slices"
)

// RouterTopK (SPEC §4 step 1): per token, softmax over `experts` logits in fp32, take the top k probabilities (largest first; ties → lower
// expert index first, as torch.topk does on CPU), renormalize them to sum 1. ids: [n][k] int32, weights: [n][k].
// It picks and weighs the routed experts of each token.
func RouterTopK(ids []int32, weights, logits []float32, n, experts, k int) {
	parallelFor(n, 4*experts+k*experts, func(lo, hi int) {
		probs := make([]float32, experts)
		taken := make([]bool, experts)
		for t := lo; t < hi; t++ {
			row := logits[t*experts:][:experts]
			maxLogit := float32(math.Inf(-1))
			for _, l := range row {
				maxLogit = max(maxLogit, l)
			}
			var sum float32
			for e, l := range row {
				probs[e] = expf(l - maxLogit)
				sum += probs[e]
			}
			for e := range probs {
				probs[e] /= sum
			}
			clear(taken)
			tIDs := ids[t*k:][:k]
			tW := weights[t*k:][:k]
			var topSum float32
			for slot := range k {
				best := -1
				for e, p := range probs {
					if !taken[e] && (best < 0 || p > probs[best]) {
						best = e
					}
				}
				taken[best] = true
				tIDs[slot] = int32(best)
				tW[slot] = probs[best]
				topSum += probs[best]
			}
			for slot := range tW {
				tW[slot] /= topSum
			}
		}
	})
}

// moeScratchFloats bounds MoEDown's per-call buffer of per-expert outputs
// (it processes that many token×slot×hidden values at a time). A variable
// only so that tests can force several token blocks.
var moeScratchFloats = 1 << 22

// MoEExperts (SPEC §4 step 2): y[t] = Σ_j weights[t][j] * down[e](silu(h[0:I]) * h[I:2I]) with h = gateUp[e] · x[t], e = ids[t][j];
// gateUp: BF16 [E][2I][hidden], down: BF16 [E][hidden][I]. y: [n][hidden] (overwritten).
// It is MoEGateUp followed by MoEDown, the two launches the plans make.
func MoEExperts(y, x []float32, ids []int32, weights []float32, gateUp, down []uint16, n, hidden, inter, k int) {
	if n <= 0 {
		return
	}
	experts := len(down) / (hidden * inter)
	act := make([]float32, n*k*inter)
	MoEGateUp(act, x, ids, gateUp, n, hidden, inter, k, experts)
	MoEDown(y, act, ids, weights, down, n, hidden, inter, k, experts)
}

// expertGroups orders the n×k (token, slot) assignments by expert and
// returns them with the run boundaries of each expert, skipping ids outside
// [0, experts) (they contribute nothing): tokens routed to one expert are
// computed together, reading its weights once.
func expertGroups(ids []int32, experts int) (assign, runs []int) {
	for i, e := range ids {
		if e >= 0 && int(e) < experts {
			assign = append(assign, i)
		}
	}
	slices.SortStableFunc(assign, func(a, b int) int { return int(ids[a]) - int(ids[b]) })
	runs = []int{0}
	for i := 1; i < len(assign); i++ {
		if ids[assign[i]] != ids[assign[i-1]] {
			runs = append(runs, i)
		}
	}
	if len(assign) > 0 {
		runs = append(runs, len(assign))
	} else {
		runs = runs[:0]
	}
	return assign, runs
}

// MoEGateUp (SPEC §4 step 2, first half): act[t][s] = silu(h[0:I]) ⊙ h[I:2I]
// with h = gateUp[e] · x[t], e = ids[t][s]; act: [n][k][I], zeros where the id
// is outside [0, experts).
func MoEGateUp(act, x []float32, ids []int32, gateUp []uint16, n, hidden, inter, k, experts int) {
	if n <= 0 {
		return
	}
	clear(act[:n*k*inter])
	assign, runs := expertGroups(ids[:n*k], experts)
	if len(runs) == 0 {
		return
	}
	parallelFor(len(runs)-1, 2*2*inter*hidden, func(lo, hi int) {
		for r := lo; r < hi; r++ {
			group := assign[runs[r]:runs[r+1]]
			e := int(ids[group[0]])
			cnt := len(group)
			xs := make([]float32, cnt*hidden)
			for i, a := range group {
				copy(xs[i*hidden:][:hidden], x[(a/k)*hidden:][:hidden])
			}
			h := make([]float32, cnt*2*inter)
			matmulTile(h, xs, gateUp[e*2*inter*hidden:][:2*inter*hidden], 0, cnt, 0, 2*inter, hidden, 2*inter)
			for i, a := range group {
				hRow := h[i*2*inter:][:2*inter]
				SiLUMul(act[a*inter:], hRow[:inter], hRow[inter:], inter)
			}
		}
	})
}

// MoEDown (SPEC §4 step 2, second half): y[t] = Σ_s weights[t][s] · down[e] ·
// act[t][s], slots summed in order from zero; ids outside [0, experts)
// contribute nothing. y: [n][hidden] (overwritten).
func MoEDown(y, act []float32, ids []int32, weights []float32, down []uint16, n, hidden, inter, k, experts int) {
	if n <= 0 {
		return
	}
	block := min(n, max(1, moeScratchFloats/(k*hidden)))
	expertOut := make([]float32, block*k*hidden) // [token in block][slot][hidden]
	for t0 := 0; t0 < n; t0 += block {
		nb := min(block, n-t0)
		blockIDs := ids[t0*k:][:nb*k]
		assign, runs := expertGroups(blockIDs, experts)
		clear(expertOut)
		if len(runs) > 0 {
			parallelFor(len(runs)-1, 2*inter*hidden, func(lo, hi int) {
				for r := lo; r < hi; r++ {
					group := assign[runs[r]:runs[r+1]]
					e := int(blockIDs[group[0]])
					cnt := len(group)
					as := make([]float32, cnt*inter)
					for i, a := range group {
						copy(as[i*inter:][:inter], act[(t0*k+a)*inter:][:inter])
					}
					ys := make([]float32, cnt*hidden)
					matmulTile(ys, as, down[e*hidden*inter:][:hidden*inter], 0, cnt, 0, hidden, inter, hidden)
					for i, a := range group {
						copy(expertOut[a*hidden:][:hidden], ys[i*hidden:][:hidden])
					}
				}
			})
		}
		for tb := range nb {
			t := t0 + tb
			yt := y[t*hidden:][:hidden]
			clear(yt)
			for slot := range k {
				if e := blockIDs[tb*k+slot]; e < 0 || int(e) >= experts {
					continue
				}
				axpy(yt, weights[t*k+slot], expertOut[(tb*k+slot)*hidden:][:hidden])
			}
		}
	}
}
