package kernels

// Embedding gathers rows: x[t,:] = table[ids[t],:] for t < n. Error-free: caller validated ids.
// It is the token embedding lookup x0 = embed_tokens[ids] of SPEC §2.1.
func Embedding(x []float32, table []uint16, ids []int32, n, hidden int) {
	for t := range n {
		row := table[int(ids[t])*hidden:][:hidden]
		dst := x[t*hidden:][:hidden]
		for i, h := range row {
			dst[i] = widen(h)
		}
	}
}

// SiLUMul: out[i] = silu(gate[i]) * up[i] for i < count.
// It is the activation of the routed and shared experts (SPEC §4 steps 2–3).
func SiLUMul(out, gate, up []float32, count int) {
	out, gate, up = out[:count], gate[:count], up[:count]
	for i := range out {
		out[i] = silu(gate[i]) * up[i]
	}
}

// Add: x[i] += y[i] for i < count (residual).
// It is the residual connection of the decoder layer (SPEC §2.1).
func Add(x, y []float32, count int) {
	x, y = x[:count], y[:count]
	for i := range x {
		x[i] += y[i]
	}
}

// SharedExpertCombine (SPEC §4 steps 3–4): x[t] += routed[t] + sigmoid(gateLogit[t]) * shared[t] for t < n (rows of width hidden; gateLogit [n]).
// It adds the MoE output, routed plus the sigmoid-gated shared expert, to the residual.
func SharedExpertCombine(x, routed, shared, gateLogit []float32, n, hidden int) {
	for t := range n {
		gate := sigmoid(gateLogit[t])
		xs := x[t*hidden:][:hidden]
		rs := routed[t*hidden:][:hidden]
		ss := shared[t*hidden:][:hidden]
		for i := range xs {
			xs[i] += rs[i] + gate*ss[i]
		}
	}
}

// AttnOutputGate (SPEC §2.3 step 6): o[t][h*d+i] *= sigmoid(qg[t][h*2d + d + i]) — the gate is the second half of each head's 2d slice
// of the q_proj output qg [n][hq*2d].
// It applies the per-element output gate of gated full attention.
func AttnOutputGate(o, qg []float32, n, heads, d int) {
	for t := range n {
		for h := range heads {
			os := o[(t*heads+h)*d:][:d]
			gs := qg[(t*heads+h)*2*d+d:][:d]
			for i := range os {
				os[i] *= sigmoid(gs[i])
			}
		}
	}
}
