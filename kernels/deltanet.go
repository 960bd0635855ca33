package kernels

// GDNGates (SPEC §3 step 4): beta = sigmoid(b), g = -exp(aLog[h]) * softplus(a + dtBias[h]) (softplus as torch: x>20 → x). b, a: [n][heads].
// beta is the delta rule's write strength, g ≤ 0 its per-token log decay.
func GDNGates(beta, g, b, a, aLog, dtBias []float32, n, heads int) {
	for t := range n {
		for h := range heads {
			i := t*heads + h
			beta[i] = sigmoid(b[i])
			g[i] = -expf(aLog[h]) * softplus(a[i]+dtBias[h])
		}
	}
}

// GatedDeltaRecurrent (SPEC §3 step 7) token by token. q and k: key heads hk of width dk; v: value heads hv of width dv; q, k and v are slices
// whose row t starts at t*rowStride (q, k, v are typically sub-slices of one conv-output buffer at column offsets 0, hk*dk, 2*hk*dk);
// value head j uses key head j / (hv/hk). beta, g: [n][hv]; state: [hv][dk][dv] updated in place; out: [n][hv][dv].
// This is the decode path and the oracle of GatedDeltaChunked:
// S ← e^g·S; u = β(v − Sᵀk); S ← S + k⊗u; o = Sᵀq.
func GatedDeltaRecurrent(out, q, k, v []float32, rowStride int, beta, g, state []float32, n, hk, hv, dk, dv int) {
	if n <= 0 {
		return
	}
	group := hv / hk
	parallelFor(hv, 4*n*dk*dv, func(lo, hi int) {
		kv := make([]float32, dv)
		for j := lo; j < hi; j++ {
			kh := j / group
			s := state[j*dk*dv:][:dk*dv]
			for t := range n {
				qt := q[t*rowStride+kh*dk:][:dk]
				kt := k[t*rowStride+kh*dk:][:dk]
				vt := v[t*rowStride+j*dv:][:dv]
				decay := expf(g[t*hv+j])
				b := beta[t*hv+j]
				// Decay the state and read it with the key: kv = Sᵀk.
				clear(kv)
				for a := range dk {
					row := s[a*dv:][:dv]
					scaleVec(row, decay)
					axpy(kv, kt[a], row)
				}
				// The delta: what the state should add to return v for k.
				for i := range kv {
					kv[i] = b * (vt[i] - kv[i])
				}
				// Write k ⊗ u, then read the output with the query.
				o := out[(t*hv+j)*dv:][:dv]
				clear(o)
				for a := range dk {
					row := s[a*dv:][:dv]
					axpy(row, kt[a], kv)
					axpy(o, qt[a], row)
				}
			}
		}
	})
}

// GatedDeltaChunked: the chunked (WY/UT) form of SPEC §3.1 with chunk size `chunk` (64 in the model); the same results as the
// recurrence (the test oracle), for any n (not a multiple of chunk: handle the partial last chunk without padding tokens
// touching the state).
// It is the prefill path: per chunk it solves the unit-lower-triangular UT system, then applies the whole chunk to the state at once.
func GatedDeltaChunked(out, q, k, v []float32, rowStride int, beta, g, state []float32, n, hk, hv, dk, dv, chunk int) {
	if n <= 0 {
		return
	}
	if chunk <= 0 {
		panic("kernels: GatedDeltaChunked needs a positive chunk size")
	}
	group := hv / hk
	c := min(chunk, n)
	parallelFor(hv, n*(3*dk*dv+2*c*(dk+dv)), func(lo, hi int) {
		ws := &chunkWork{
			cum:      make([]float32, c),
			tailExp:  make([]float32, c),
			u:        make([]float32, c*dv),
			w:        make([]float32, c*dk),
			tmp:      make([]float32, dv),
			decayMat: make([]float32, c*c),
		}
		for j := lo; j < hi; j++ {
			kh := j / group
			s := state[j*dk*dv:][:dk*dv]
			for t0 := 0; t0 < n; t0 += chunk {
				ws.run(out, q, k, v, rowStride, beta, g, s, t0, min(chunk, n-t0), j, kh, hv, dk, dv)
			}
		}
	})
}

// chunkWork is one goroutine's scratch for GatedDeltaChunked.
type chunkWork struct {
	cum      []float32 // G_r: cumulative log decay within the chunk
	tailExp  []float32 // exp(G_last − G_r)
	u        []float32 // U, then Vnew = U − W·S: [L][dv]
	w        []float32 // W = (I+L)⁻¹ (Kβ ⊙ e^G): [L][dk]
	tmp      []float32 // one row of W·S
	decayMat []float32 // D_rs = exp(G_r − G_s), s ≤ r: [L][L]
}

// run applies tokens t0..t0+L-1 of value head j (key head kh) to the state
// st [dk][dv] and writes their outputs (SPEC §3.1 steps 1–5 for one chunk).
func (ws *chunkWork) run(out, q, k, v []float32, rowStride int, beta, g, st []float32, t0, L, j, kh, hv, dk, dv int) {
	qRow := func(r int) []float32 { return q[(t0+r)*rowStride+kh*dk:][:dk] }
	kRow := func(r int) []float32 { return k[(t0+r)*rowStride+kh*dk:][:dk] }
	vRow := func(r int) []float32 { return v[(t0+r)*rowStride+j*dv:][:dv] }
	D := func(r, c int) float32 { return ws.decayMat[r*L+c] }

	// Step 1–2: cumulative decay G and pairwise decays D.
	var acc float32
	for r := range L {
		acc += g[(t0+r)*hv+j]
		ws.cum[r] = acc
	}
	for r := range L {
		for s := 0; s <= r; s++ {
			ws.decayMat[r*L+s] = expf(ws.cum[r] - ws.cum[s])
		}
		ws.tailExp[r] = expf(ws.cum[L-1] - ws.cum[r])
	}

	// Step 3: forward substitution with the strictly lower A_rs = β_r (k_r·k_s) D_rs:
	// U_r = β_r v_r − Σ_{s<r} A_rs U_s,  W_r = β_r e^{G_r} k_r − Σ_{s<r} A_rs W_s.
	for r := range L {
		b := beta[(t0+r)*hv+j]
		ur := ws.u[r*dv:][:dv]
		wr := ws.w[r*dk:][:dk]
		for i, x := range vRow(r) {
			ur[i] = b * x
		}
		eg := expf(ws.cum[r])
		for i, x := range kRow(r) {
			wr[i] = b * x * eg
		}
		kr := kRow(r)
		for s := range r {
			a := b * dot(kr, kRow(s)) * D(r, s)
			axpy(ur, -a, ws.u[s*dv:][:dv])
			axpy(wr, -a, ws.w[s*dk:][:dk])
		}
	}

	// Step 5a: Vnew = U − W·S (the part of U the state does not predict yet).
	for r := range L {
		clear(ws.tmp)
		wr := ws.w[r*dk:][:dk]
		for a := range dk {
			axpy(ws.tmp, wr[a], st[a*dv:][:dv])
		}
		ur := ws.u[r*dv:][:dv]
		for i := range ur {
			ur[i] -= ws.tmp[i]
		}
	}

	// Step 4 + 5b: O_r = e^{G_r} (Sᵀ q_r) + Σ_{s≤r} (q_r·k_s) D_rs Vnew_s.
	for r := range L {
		o := out[((t0+r)*hv+j)*dv:][:dv]
		clear(o)
		qr := qRow(r)
		for a := range dk {
			axpy(o, qr[a], st[a*dv:][:dv])
		}
		scaleVec(o, expf(ws.cum[r]))
		for s := 0; s <= r; s++ {
			axpy(o, dot(qr, kRow(s))*D(r, s), ws.u[s*dv:][:dv])
		}
	}

	// Step 5c: S ← e^{G_last} S + Σ_r (e^{G_last − G_r} k_r) ⊗ Vnew_r.
	last := expf(ws.cum[L-1])
	for a := range dk {
		row := st[a*dv:][:dv]
		scaleVec(row, last)
		for r := range L {
			axpy(row, kRow(r)[a]*ws.tailExp[r], ws.u[r*dv:][:dv])
		}
	}
}
