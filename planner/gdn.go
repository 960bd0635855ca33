package planner

import (
	"fmt"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// The gdn pass: on GPU targets by default (PrefillGDNWY, PrefillGDNTF32 on
// any target when asked), each prefill step's gated_delta_chunked
// (the exact recurrence token by token, a block per value head) becomes
// the chunked form on tensor cores — gated_delta_wy for every chunk at
// once, then gated_delta_state walking the chunks with a block per value
// head and column tile of the state — and causal_conv1d_silu (a thread per
// channel over every row) causal_conv1d_silu_rows (a thread per channel and
// row tile), docs/prefill-gdn.md. The old families stay the oracle and the
// cpu plan's (PrefillGDNChunked keeps them on any target); a shape the
// tiles do not serve, or whose shared memory the target cannot give, keeps
// them.

// PrefillGDN says which families run the prefill steps' gated delta rule
// and conv.
type PrefillGDN string

const (
	// PrefillGDNDefault is the target's: gdnDefault on GPU targets, the
	// old families on the cpu (its plan is the oracle).
	PrefillGDNDefault PrefillGDN = ""
	PrefillGDNWY      PrefillGDN = "wy" // gated_delta_wy + gated_delta_state (split tf32 products), conv rows, on every target (the cpu runs their references)
	// PrefillGDNTF32 is the chunked form with plain tf32 products (10-bit
	// operands instead of the split's ≈ 21 bits): faster, less exact.
	PrefillGDNTF32    PrefillGDN = "wy-tf32"
	PrefillGDNChunked PrefillGDN = "chunked" // gated_delta_chunked and causal_conv1d_silu, the serial families
)

// gdnDefault is a GPU target's default: split tf32 products on sm_90
// (docs/prefill-gdn.md has the measured choice), gfx1151's products are f32
// either way.
const gdnDefault = PrefillGDNWY

// gdnMode is the mode the options resolve to on their target.
func (o *Options) gdnMode() PrefillGDN {
	if o.PrefillGDN == PrefillGDNDefault {
		if o.Target.GPU() {
			return gdnDefault
		}
		return PrefillGDNChunked
	}
	return o.PrefillGDN
}

func (o *Options) chunksGDN() bool {
	m := o.gdnMode()
	return m == PrefillGDNWY || m == PrefillGDNTF32
}

// gdnTiles are a target's tiles: gated_delta_wy's slices of k_dim and
// v_dim, gated_delta_state's slices of k_dim and its state columns a
// block, each list best first; the first that divides the head dims and
// whose shared memory fits is taken. sm_90, measured on the H200 at 8K:
// gated_delta_wy split on slices of 64 (1,063 µs against 1,192 at 32, no
// spill), plain on slices of 32 (737 µs, three blocks an SM, against 783
// at 64); the whole k_dim of 128 in one slice for the state pass (1,079 µs
// against 1,979 at 64), 32 columns (32 value heads × 4 = 128 blocks on 132
// SMs: 1,540 µs at 16, 1,697 at 64); gfx1151 slices of 32 within its
// 64 KiB of LDS. The cpu runs the references: sm_90's. With async (sm_90)
// a state pass whose one slice is the whole k_dim stages its tiles by
// asynchronous copies ahead. With intTF32 (sm_90 only: the other targets'
// products are f32 or references) both launches round their tensor-core
// operands to tf32 by integer arithmetic instead of cvt.rna.tf32.f32: the
// same bits, measured on the H200 at 8K the state pass 1,068 → 968 µs
// (−9 %; 128K: 17,149 → 15,221), gated_delta_wy split 1,053 → 933 µs
// (−11 %); plain gated_delta_wy (wy-tf32's, slices of 32) keeps cvt (740
// against 728 µs: 107 registers, 2 blocks an SM instead of 3); with loAcc the split state pass
// sums its corrections apart from hi·hi (a shorter chain of dependent
// products), with preSplit it splits its B operands (S, Vnew) once, by
// the lane that produces each element, instead of in every warp that reads
// them (docs/prefill-gdn.md, "Third version").
type gdnTile struct {
	wySlices, wyPlainSlices, stateSlices, cols []int
	async, intTF32, loAcc, preSplit            bool
}

var gdnTiles = map[plan.Target]gdnTile{
	plan.SM90:    {[]int{64, 32, 16}, []int{32, 16}, []int{128, 64, 32, 16}, []int{32, 16, 8}, true, true, false, true},
	plan.GFX1151: {[]int{32, 16}, []int{32, 16}, []int{32, 16}, []int{32, 16, 8}, false, false, false, false},
	plan.CPU:     {[]int{64, 32, 16}, []int{32, 16}, []int{128, 64, 32, 16}, []int{32, 16, 8}, true, false, false, false},
}

func gdnPass(c *compilation) error {
	tiles, ok := gdnTiles[c.o.Target]
	if !ok || !c.o.chunksGDN() {
		return nil
	}
	limits := c.o.Target.Launch()
	if !c.o.Target.GPU() {
		limits = plan.SM90.Launch()
	}
	split := c.o.gdnMode() != PrefillGDNTF32
	for i, g := range c.graphs {
		if c.steps[i].Kind != plan.Prefill {
			continue
		}
		if chunkGDN(g, tiles, split, c.o.flushAll(), limits) == 0 {
			continue
		}
		if err := g.Verify(kernels.Families); err != nil {
			return fmt.Errorf("%s: %w", g.Name, err)
		}
	}
	return nil
}

// gdnParams are the two launches' parameters for a gated_delta_chunked op
// of parameters p: the first tiles that divide and fit; ok is false when
// none does. With flush the state pass takes flush_k (each chunk's update
// added to the decayed state rounded to nearest).
func gdnParams(p ir.Params, t gdnTile, split, flush bool, c ir.LaunchConfig) (wy, st ir.Params, ok bool) {
	base := func(slice int) ir.Params {
		q := p.Clone()
		q.SetInt("slice", int64(slice))
		q.SetFlag("split", split)
		q.SetFlag("int_tf32", t.intTF32)
		return q
	}
	fits := func(kind ir.Kind, q ir.Params, bytes func(ir.Params) int) bool {
		return kernels.Families[kind].CheckParams(q) == nil && bytes(q) <= c.MaxSharedBytes
	}
	found := false
	slices := t.wySlices
	if !split {
		slices = t.wyPlainSlices
	}
	for _, s := range slices {
		wy = base(s)
		wy.SetFlag("int_tf32", t.intTF32 && split) // plain: cvt (fewer registers, 3 blocks an SM)
		if fits(ir.GatedDeltaWY, wy, kernels.GDNWYSharedBytes) {
			found = true
			break
		}
	}
	if !found {
		return ir.Params{}, ir.Params{}, false
	}
	for _, s := range t.stateSlices {
		for _, n := range t.cols {
			st = base(s)
			delete(st.Ints, "row_stride")
			st.SetInt("cols", int64(n))
			st.SetFlag("async", t.async && s == st.Int("k_dim"))
			st.SetFlag("lo_acc", t.loAcc && split)
			st.SetFlag("pre_split", t.preSplit && split && st.Flag("async") && !flush) // flush_k reads the decayed state from shared memory
			setFlush(&st, flush, false)
			if fits(ir.GatedDeltaState, st, kernels.GDNStateSharedBytes) {
				return wy, st, true
			}
		}
	}
	return ir.Params{}, ir.Params{}, false
}

// chunkGDN rewrites every gated_delta_chunked of g into gated_delta_wy and
// gated_delta_state over activations shared by the layers (w, qw, kd, u,
// gc), and every causal_conv1d_silu into causal_conv1d_silu_rows. It
// returns the number of rewrites.
func chunkGDN(g *ir.Graph, t gdnTile, split, flush bool, c ir.LaunchConfig) int {
	var out []*ir.Op
	n := 0
	for _, op := range g.Ops {
		switch {
		case op.Kind == ir.CausalConv1dSiLU && op.Rows != nil:
			p := op.Params.Clone()
			// 8 rows a thread: 164 µs at 8K on the H200 against 180 at 4 (more
			// of the window reused per load; 16: 153).
			p.SetInt("rows_per_thread", int64(max(8, p.Int("kernel")-1)))
			if kernels.Families[ir.CausalConv1dSiLURows].CheckParams(p) == nil {
				out = append(out, &ir.Op{Kind: ir.CausalConv1dSiLURows, Layer: op.Layer, Rows: op.Rows, Params: p, Operands: op.Operands})
				n++
				continue
			}
		case op.Kind == ir.GatedDeltaChunked && op.Rows != nil:
			wp, sp, ok := gdnParams(op.Params, t, split, flush, c)
			if !ok {
				break
			}
			hv, dk, dv := int64(wp.Int("v_heads")), int64(wp.Int("k_dim")), int64(wp.Int("v_dim"))
			rows := int64(g.Tokens)
			w := tileTensor(g, "gdn_w", ir.F32, rows, hv*dk)
			qw := tileTensor(g, "gdn_qw", ir.F32, rows, hv*dk)
			kd := tileTensor(g, "gdn_kd", ir.F32, rows, hv*dk)
			u := tileTensor(g, "gdn_u", ir.F32, rows, hv*dv)
			gc := tileTensor(g, "gdn_gc", ir.F32, rows, hv)
			if w.Shape[1] != hv*dk || u.Shape[1] != hv*dv || gc.Shape[1] != hv {
				break // another layer's shape took the names: keep the serial family
			}
			// gated_delta_chunked: out, q, k, v, beta, g, state.
			o := op.Operands
			rowsOps := []ir.Operand{of(w), of(qw), of(kd), of(u), of(gc)}
			out = append(out,
				&ir.Op{Kind: ir.GatedDeltaWY, Layer: op.Layer, Rows: op.Rows, Params: wp,
					Operands: append(append([]ir.Operand{}, rowsOps...), o[0], o[1], o[2], o[3], o[4], o[5])},
				&ir.Op{Kind: ir.GatedDeltaState, Layer: op.Layer, Rows: op.Rows, Params: sp,
					Operands: append([]ir.Operand{o[0], o[6]}, rowsOps...)})
			n++
			continue
		}
		out = append(out, op)
	}
	g.Ops = out
	return n
}
