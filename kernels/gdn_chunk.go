package kernels

import (
	"fmt"

	"github.com/aimaproject/aimac/ir"
)

// The chunked gated delta rule of a prefill on tensor cores
// (docs/prefill-gdn.md): gated_delta_chunked in two launches. Per chunk
// of `chunk` tokens and value head, gated_delta_wy computes what does not
// depend on the state — the UT transform T = (I + strict-lower(β·kkᵀ·decay))⁻¹,
// the recomputed w = T·(βe^G k) and u = T·(βv), the queries with the
// intra-chunk part taken out, qw = e^G q − P·w, the keys decayed to the
// chunk's end, kd = e^{G_last−G} k, and the intra-chunk output P·u (P the
// causal q·kᵀ with decays) — for every chunk at once; gated_delta_state
// then walks the chunks in order, one block per value head and column
// tile of the state (columns never mix), with
//
//	Vnew = u − w·S,  out += qw·S,  S ← e^{G_last}·S + kdᵀ·Vnew.
//
// gated_delta_recurrent, token by token, stays the oracle at every chunk
// edge (gdn_chunk_test.go), gated_delta_chunked the CPU's kernel.

// GDNChunkMax bounds the chunk: the UT solve keeps a quarter of a column of
// T per thread in registers (16 at 64).
const GDNChunkMax = 64

// gdnWYOperands and gdnStateOperands: the per-(token, value head) rows
// gated_delta_wy writes and gated_delta_state reads.
func gdnRows(access ir.Access) []ir.OperandSpec {
	return []ir.OperandSpec{
		{Name: "w", DType: ir.F32, Access: access, Extent: ir.PerRow("v_heads", "k_dim")},
		{Name: "qw", DType: ir.F32, Access: access, Extent: ir.PerRow("v_heads", "k_dim")},
		{Name: "kd", DType: ir.F32, Access: access, Extent: ir.PerRow("v_heads", "k_dim")},
		{Name: "u", DType: ir.F32, Access: access, Extent: ir.PerRow("v_heads", "v_dim")},
		{Name: "gc", DType: ir.F32, Access: access, Extent: ir.PerRow("v_heads")},
	}
}

// GDNWYSharedBytes is gated_delta_wy's dynamic shared memory: A (then T)
// and P, chunk × (chunk + 4) floats each; the k and q slices, chunk ×
// (slice + 4); the staged u or w slice, chunk × (slice + 8); β, G, e^G and
// e^{G_last − G} of the chunk. The pads put the rows a tensor-core fragment reads at once
// on distinct banks.
func GDNWYSharedBytes(p ir.Params) int {
	c, s := p.Int("chunk"), p.Int("slice")
	return 4 * (2*c*(c+4) + 2*c*(s+4) + c*(s+8) + 4*c)
}

// GDNStateSharedBytes is gated_delta_state's: the state tile, k_dim ×
// (cols + 8) floats; the w and qw slices, 2·chunk × (slice + 4), twice with
// async (the next chunk's copy lands in the second); the kd slice, chunk ×
// (slice + 8); Vnew, chunk × (cols + 8); with pre_split the lo terms of the
// state tile and of Vnew besides.
func GDNStateSharedBytes(p ir.Params) int {
	c, s, n := p.Int("chunk"), p.Int("slice"), p.Int("cols")
	wq := 1
	if p.Flag("async") {
		wq = 2
	}
	b := 4 * (p.Int("k_dim")*(n+8) + wq*2*c*(s+4) + c*(s+8) + c*(n+8))
	if p.Flag("pre_split") {
		b += 4 * (p.Int("k_dim") + c) * (n + 8) // the lo terms of S and Vnew
	}
	return b
}

// GDNChunkFLOPs is the matrix work of the two launches over n tokens
// (multiply-adds counted twice, the masked halves of the chunk's square
// products too, as the tensor cores run them): per chunk and value head
// gated_delta_wy's k·kᵀ and q·kᵀ (2·c²·dk each), T·[βv | βe^G k] and
// P·[u | w] (2·c²·(dk+dv) each), gated_delta_state's [w; qw]·S
// (4·c·dk·dv) and kdᵀ·Vnew (2·c·dk·dv).
func GDNChunkFLOPs(p ir.Params, n int) (wy, state int64) {
	c := int64(p.Int("chunk"))
	dk, dv, hv := int64(p.Int("k_dim")), int64(p.Int("v_dim")), int64(p.Int("v_heads"))
	chunks := int64(ir.Ceil(n, int(c)))
	wy = chunks * hv * (4*c*c*dk + 4*c*c*(dk+dv))
	state = chunks * hv * 6 * c * dk * dv
	return wy, state
}

// gdnChunkCheck checks what both launches need; the state pass slices
// k_dim only (vSliced false), gated_delta_wy v_dim too.
func gdnChunkCheck(p ir.Params, vSliced bool) error {
	c, s := p.Int("chunk"), p.Int("slice")
	switch {
	case p.Int("v_heads")%p.Int("k_heads") != 0:
		return fmt.Errorf("v_heads %d is not a multiple of k_heads %d", p.Int("v_heads"), p.Int("k_heads"))
	case c < 16 || c > GDNChunkMax || c%16 != 0:
		return fmt.Errorf("chunk %d is not a multiple of 16 up to %d (the tensor-core tiles, the UT solve's registers)", c, GDNChunkMax)
	case s < 16 || s%16 != 0:
		return fmt.Errorf("slice %d is not a positive multiple of 16", s)
	case p.Int("k_dim")%s != 0:
		return fmt.Errorf("slice %d does not divide k_dim %d", s, p.Int("k_dim"))
	case vSliced && p.Int("v_dim")%s != 0:
		return fmt.Errorf("slice %d does not divide v_dim %d", s, p.Int("v_dim"))
	}
	return nil
}

func gdnChunkFamilies() []*ir.Family {
	qk := ir.Strided("row_stride", ir.Product("k_heads", "k_dim"))
	return []*ir.Family{
		{
			Kind: ir.GatedDeltaWY,
			Operands: append(gdnRows(ir.Write),
				ir.OperandSpec{Name: "out", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("v_heads", "v_dim")},
				ir.OperandSpec{Name: "q", DType: ir.F32, Access: ir.Read, Extent: qk},
				ir.OperandSpec{Name: "k", DType: ir.F32, Access: ir.Read, Extent: qk},
				ir.OperandSpec{Name: "v", DType: ir.F32, Access: ir.Read, Extent: ir.Strided("row_stride", ir.Product("v_heads", "v_dim"))},
				ir.OperandSpec{Name: "beta", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("v_heads")},
				ir.OperandSpec{Name: "g", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("v_heads")},
			),
			Params: cat(ir.Ints("row_stride", "k_heads", "v_heads", "k_dim", "v_dim", "chunk", "slice"), ir.Flags("split", "int_tf32")),
			Check: func(p ir.Params) error {
				if err := gdnChunkCheck(p, true); err != nil {
					return err
				}
				if p.Int("row_stride")%4 != 0 {
					return fmt.Errorf("row_stride %d is not a multiple of 4 (16-byte loads)", p.Int("row_stride"))
				}
				return nil
			},
			// One block per (chunk, value head): every chunk at once.
			Launch: func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
				s := c.Blocks(ir.Ceil(max(rows, 1), p.Int("chunk")), p.Int("v_heads"), 1)
				s.SharedBytes = GDNWYSharedBytes(p)
				return s
			},
			Reference: func(a *ir.Args) error {
				GatedDeltaWY(a.F32("w"), a.F32("qw"), a.F32("kd"), a.F32("u"), a.F32("gc"), a.F32("out"),
					a.F32("q"), a.F32("k"), a.F32("v"), a.Int("row_stride"), a.F32("beta"), a.F32("g"),
					a.N, a.Int("k_heads"), a.Int("v_heads"), a.Int("k_dim"), a.Int("v_dim"), a.Int("chunk"))
				return nil
			},
		},
		{
			Kind: ir.GatedDeltaState,
			Operands: append([]ir.OperandSpec{
				{Name: "out", DType: ir.F32, Access: ir.ReadWrite, Extent: ir.PerRow("v_heads", "v_dim")},
				{Name: "state", DType: ir.F32, Access: ir.ReadWrite, Extent: ir.Fixed("v_heads", "k_dim", "v_dim")},
			}, gdnRows(ir.Read)...),
			Params: cat(ir.Ints("k_heads", "v_heads", "k_dim", "v_dim", "chunk", "slice", "cols"), ir.Flags("split", "async", "int_tf32", "lo_acc", "pre_split"), ir.OptionalFlags("flush_k")),
			Check: func(p ir.Params) error {
				if err := gdnChunkCheck(p, false); err != nil {
					return err
				}
				if n := p.Int("cols"); n < 8 || n%8 != 0 || p.Int("v_dim")%n != 0 {
					return fmt.Errorf("cols %d is not a multiple of 8 dividing v_dim %d", n, p.Int("v_dim"))
				}
				if p.Flag("async") && p.Int("slice") != p.Int("k_dim") {
					return fmt.Errorf("async stages whole rows: slice %d must be k_dim %d", p.Int("slice"), p.Int("k_dim"))
				}
				if p.Flag("pre_split") && !(p.Flag("split") && p.Flag("async")) {
					return fmt.Errorf("pre_split splits the B operands of the split, asynchronous pass: split %v, async %v", p.Flag("split"), p.Flag("async"))
				}
				return nil
			},
			// One block per (column tile, value head), walking the chunks in order.
			Launch: func(p ir.Params, _ int, c ir.LaunchConfig) ir.LaunchShape {
				s := c.Blocks(p.Int("v_dim")/p.Int("cols"), p.Int("v_heads"), 1)
				s.SharedBytes = GDNStateSharedBytes(p)
				return s
			},
			Reference: func(a *ir.Args) error {
				GatedDeltaState(a.F32("out"), a.F32("state"), a.F32("w"), a.F32("qw"), a.F32("kd"), a.F32("u"), a.F32("gc"),
					a.N, a.Int("v_heads"), a.Int("k_dim"), a.Int("v_dim"), a.Int("chunk"))
				return nil
			},
		},
		{
			Kind:     ir.CausalConv1dSiLURows,
			Operands: operandsOf(ir.CausalConv1dSiLU),
			Params:   ir.Ints("channels", "kernel", "rows_per_thread"),
			Check: func(p ir.Params) error {
				if r, k := p.Int("rows_per_thread"), p.Int("kernel"); r < k-1 || r < 1 {
					return fmt.Errorf("rows_per_thread %d is below the conv's history of %d rows (the first tile's thread updates the state)", r, k-1)
				}
				return nil
			},
			// One thread per (channel, tile of rows_per_thread rows).
			Launch: func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
				return c.Blocks(ir.Ceil(p.Int("channels"), c.Threads), ir.Ceil(max(rows, 1), p.Int("rows_per_thread")), 1)
			},
			Reference: func(a *ir.Args) error {
				CausalConv1dSiLU(a.F32("out"), a.F32("in"), a.F32("w"), a.F32("state"), a.N, a.Int("channels"), a.Int("kernel"))
				return nil
			},
		},
	}
}

// GatedDeltaWY is gated_delta_wy's reference: for each chunk of `chunk`
// tokens (the last one partial) and value head j (key head j / (hv/hk)),
// with G_r the cumulative log decay within the chunk and D_rs = e^{G_r−G_s}:
//
//	A_rs = β_r (k_r·k_s) D_rs (s < r),  T = (I + A)⁻¹ (forward substitution),
//	u = T·(βv),  w = T·(βe^G k),  P_rs = (q_r·k_s) D_rs (s ≤ r),
//	out = P·u,  qw = e^G q − P·w,  kd_r = e^{G_last−G_r} k_r,  gc_r = G_r.
//
// q, k and v rows start at t·rowStride (+ head offsets) as in
// GatedDeltaRecurrent; w, qw and kd are [n][hv][dk], u and out [n][hv][dv],
// gc [n][hv].
func GatedDeltaWY(w, qw, kd, u, gc, out, q, k, v []float32, rowStride int, beta, g []float32, n, hk, hv, dk, dv, chunk int) {
	if n <= 0 {
		return
	}
	group := hv / hk
	chunks := ir.Ceil(n, chunk)
	parallelFor(chunks*hv, chunk*chunk*(dk+dv)*4, func(lo, hi int) {
		c := min(chunk, n)
		a := make([]float32, c*c)
		tm := make([]float32, c*c)
		p := make([]float32, c*c)
		G := make([]float32, c)
		for job := lo; job < hi; job++ {
			t0, j := job/hv*chunk, job%hv
			kh := j / group
			L := min(chunk, n-t0)
			qRow := func(r int) []float32 { return q[(t0+r)*rowStride+kh*dk:][:dk] }
			kRow := func(r int) []float32 { return k[(t0+r)*rowStride+kh*dk:][:dk] }
			vRow := func(r int) []float32 { return v[(t0+r)*rowStride+j*dv:][:dv] }
			at := func(r int) int { return (t0+r)*hv + j }
			var acc float32
			for r := range L {
				acc += g[at(r)]
				G[r] = acc
				gc[at(r)] = acc
			}
			for r := range L {
				for s := range L {
					a[r*c+s], p[r*c+s] = 0, 0
					if s > r {
						continue
					}
					d := expf(G[r] - G[s])
					p[r*c+s] = dot(qRow(r), kRow(s)) * d
					if s < r {
						a[r*c+s] = beta[at(r)] * dot(kRow(r), kRow(s)) * d
					}
				}
			}
			// T row by row: T_r = e_r − Σ_{s<r} A_rs T_s.
			for r := range L {
				tr := tm[r*c:][:L]
				clear(tr)
				tr[r] = 1
				for s := range r {
					axpy(tr, -a[r*c+s], tm[s*c:][:L])
				}
			}
			for r := range L {
				ur := u[at(r)*dv:][:dv]
				wr := w[at(r)*dk:][:dk]
				clear(ur)
				clear(wr)
				for s := 0; s <= r; s++ {
					b := tm[r*c+s] * beta[at(s)]
					axpy(ur, b, vRow(s))
					axpy(wr, b*expf(G[s]), kRow(s))
				}
			}
			last := G[L-1]
			for r := range L {
				o := out[at(r)*dv:][:dv]
				qr := qw[at(r)*dk:][:dk]
				clear(o)
				for i, x := range qRow(r) {
					qr[i] = expf(G[r]) * x
				}
				for s := 0; s <= r; s++ {
					axpy(o, p[r*c+s], u[at(s)*dv:][:dv])
					axpy(qr, -p[r*c+s], w[at(s)*dk:][:dk])
				}
				kr := kd[at(r)*dk:][:dk]
				e := expf(last - G[r])
				for i, x := range kRow(r) {
					kr[i] = e * x
				}
			}
		}
	})
}

// GatedDeltaState is gated_delta_state's reference: per value head j, the
// chunks in order, S = state[j] [dk][dv]:
//
//	Vnew = u − w·S,  out += qw·S,  S ← e^{G_last}·S + kdᵀ·Vnew,
//
// G_last the gc of the chunk's last token.
func GatedDeltaState(out, state, w, qw, kd, u, gc []float32, n, hv, dk, dv, chunk int) {
	if n <= 0 {
		return
	}
	parallelFor(hv, n*dk*dv*6, func(lo, hi int) {
		vnew := make([]float32, min(chunk, n)*dv)
		for j := lo; j < hi; j++ {
			s := state[j*dk*dv:][:dk*dv]
			for t0 := 0; t0 < n; t0 += chunk {
				L := min(chunk, n-t0)
				at := func(r int) int { return (t0+r)*hv + j }
				for r := range L {
					vr := vnew[r*dv:][:dv]
					copy(vr, u[at(r)*dv:][:dv])
					o := out[at(r)*dv:][:dv]
					wr, qr := w[at(r)*dk:][:dk], qw[at(r)*dk:][:dk]
					for a := range dk {
						row := s[a*dv:][:dv]
						axpy(vr, -wr[a], row)
						axpy(o, qr[a], row)
					}
				}
				decay := expf(gc[at(L-1)])
				for a := range dk {
					row := s[a*dv:][:dv]
					scaleVec(row, decay)
					for r := range L {
						axpy(row, kd[at(r)*dk+a], vnew[r*dv:][:dv])
					}
				}
			}
		}
	})
}
