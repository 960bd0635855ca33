package kernels

// CausalConv1dSiLU (SPEC §3 step 2): depthwise causal conv of width K over `channels` channels, then SiLU.
// in: [n][channels] (row stride = channels); w: [channels][K] (conv1d.weight [C,1,K] flattened); state: [K-1][channels], the previous K-1
// pre-conv inputs, oldest first (zeros at sequence start). out[t][c] = silu(Σ_m w[c][m] * in'[t-(K-1)+m][c]) where in' reads state for
// negative indices. Afterwards state holds the last K-1 inputs of (old state ‖ in[0:n]) — correct also for n < K-1.
func CausalConv1dSiLU(out, in, w, state []float32, n, channels, kernel int) {
	if n <= 0 {
		return
	}
	hist := kernel - 1
	// in' at sequence index p (p may be negative, down to -hist), channel c.
	input := func(p, c int) float32 {
		if p < 0 {
			return state[(hist+p)*channels+c]
		}
		return in[p*channels+c]
	}
	parallelFor(channels, 2*n*kernel, func(lo, hi int) {
		for t := range n {
			for c := lo; c < hi; c++ {
				wc := w[c*kernel:][:kernel]
				var acc float32
				for m, wm := range wc {
					acc += wm * input(t-hist+m, c)
				}
				out[t*channels+c] = silu(acc)
			}
		}
		// The new state is rows n..n+hist-1 of (old state ‖ in). Row i reads
		// old row n+i > i, which ascending i has not overwritten yet.
		for i := range hist {
			for c := lo; c < hi; c++ {
				state[i*channels+c] = input(n+i-hist, c)
			}
		}
	})
}
