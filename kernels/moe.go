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

// moeScratchFloats bounds MoEExperts' per-call buffer of per-expert outputs
// (it processes that many token×slot×hidden values at a time). A variable
// only so that tests can force several token blocks.
var moeScratchFloats = 1 << 22

// MoEExperts (SPEC §4 step 2): y[t] = Σ_j weights[t][j] * down[e](silu(h[0:I]) * h[I:2I]) with h = gateUp[e] · x[t], e = ids[t][j];
// gateUp: BF16 [E][2I][hidden], down: BF16 [E][hidden][I]. y: [n][hidden] (overwritten).
// Tokens are grouped by expert so each expert's weights are read once per block of tokens; the weighted sum runs in slot order.
func MoEExperts(y, x []float32, ids []int32, weights []float32, gateUp, down []uint16, n, hidden, inter, k int) {
	if n <= 0 {
		return
	}
	block := min(n, max(1, moeScratchFloats/(k*hidden)))
	expertOut := make([]float32, block*k*hidden) // [token in block][slot][hidden]
	assign := make([]int, 0, block*k)            // token-in-block*k + slot, grouped by expert
	for t0 := 0; t0 < n; t0 += block {
		nb := min(block, n-t0)
		blockIDs := ids[t0*k:][:nb*k]
		assign = assign[:0]
		for i := range nb * k {
			assign = append(assign, i)
		}
		slices.SortStableFunc(assign, func(a, b int) int { return int(blockIDs[a]) - int(blockIDs[b]) })
		// runs[r]..runs[r+1] is the range of assign that one expert serves.
		runs := []int{0}
		for i := 1; i < len(assign); i++ {
			if blockIDs[assign[i]] != blockIDs[assign[i-1]] {
				runs = append(runs, i)
			}
		}
		runs = append(runs, len(assign))

		parallelFor(len(runs)-1, 3*2*inter*hidden, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				group := assign[runs[r]:runs[r+1]]
				e := int(blockIDs[group[0]])
				cnt := len(group)
				xs := make([]float32, cnt*hidden)
				for i, a := range group {
					copy(xs[i*hidden:][:hidden], x[(t0+a/k)*hidden:][:hidden])
				}
				h := make([]float32, cnt*2*inter)
				matmulTile(h, xs, gateUp[e*2*inter*hidden:][:2*inter*hidden], 0, cnt, 0, 2*inter, hidden, 2*inter)
				act := make([]float32, cnt*inter)
				for i := range cnt {
					hRow := h[i*2*inter:][:2*inter]
					SiLUMul(act[i*inter:], hRow[:inter], hRow[inter:], inter)
				}
				ys := make([]float32, cnt*hidden)
				matmulTile(ys, act, down[e*hidden*inter:][:hidden*inter], 0, cnt, 0, hidden, inter, hidden)
				for i, a := range group {
					copy(expertOut[a*hidden:][:hidden], ys[i*hidden:][:hidden])
				}
			}
		})

		for tb := range nb {
			t := t0 + tb
			yt := y[t*hidden:][:hidden]
			clear(yt)
			for slot := range k {
				axpy(yt, weights[t*k+slot], expertOut[(tb*k+slot)*hidden:][:hidden])
			}
		}
	}
}
