package planner

import (
	"fmt"
	"maps"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// gdnOutResident is the blocks of gdn_decode_out a target's multiprocessor
// holds at once (one: a staged block's 128 KiB slice of out_proj); the
// grid waits at one barrier, so the rule fuses only while the value heads'
// tiles fit the device at that, and the runtime checks it again on the
// device it loads on (runtime.Residency, the pair as the fallback).
var gdnOutResident = map[plan.Target]int{plan.SM90: 1, plan.GFX1151: 1}

// fuseGDNOut rewrites each decode GDN step (gdn_decode_split) followed by
// the layer's output projection and residual add (matmul_add reading the
// split's output y) into one gdn_decode_out (docs/gdn-decode.md), which
// writes y as the split does, when y is an activation, the projection's
// k is the heads' width, its matrix is a weight, its residual is none of
// the split's operands, and the launch's blocks fit the target at once.
// The split and the projection, streamed as the stream pass would stream
// it (gemv_add), stay as the launch's fallback. It returns the number of
// rewrites.
func fuseGDNOut(g *ir.Graph, target plan.Target, tune streamTuning, stage string) int {
	per, ok := gdnOutResident[target]
	if !ok {
		return 0
	}
	drop := map[int]bool{}
	n := 0
	for i := 0; i+1 < len(g.Ops); i++ {
		sp, mm := g.Ops[i], g.Ops[i+1]
		if sp.Kind != ir.GDNDecodeSplit || mm.Kind != ir.MatMulAdd || sp.Layer != mm.Layer ||
			sp.Rows == nil || mm.Rows == nil || *sp.Rows != *mm.Rows {
			continue
		}
		p := sp.Params
		y, h, x, w := sp.Operands[0], mm.Operands[0], mm.Operands[1], mm.Operands[2]
		width := p.Int("v_heads") * p.Int("v_dim")
		if x != y || !plain(y) || !plain(h) || g.Tensors[y.Tensor].Role != ir.Activation ||
			mm.Params.Int("k") != width || g.Tensors[w.Tensor].Role != ir.Weight || p.Flag("early_state") || p.Flag("late_trigger") {
			continue
		}
		clash := false
		for _, o := range sp.Operands {
			clash = clash || o.Tensor == h.Tensor
		}
		if clash {
			continue
		}
		q := p.Clone()
		q.SetInt("hidden", int64(mm.Params.Int("n")))
		c := target.Launch()
		staged := q.Clone()
		staged.SetFlag("stage", true)
		q.SetFlag("stage", stage != "off" && kernels.GDNOutVectorized(q) && target.Programmatic() && kernels.GDNDecodeOutFits(staged, c) == nil)
		// The stage mode's own flag (early is the staged kernel without one).
		if mode := map[string]string{"late": "stage_late", "bulk": "stage_bulk", "mid": "stage_mid"}[stage]; mode != "" && q.Flag("stage") {
			q.SetFlag(mode, true)
		}
		if kernels.GDNDecodeOutFits(q, c) != nil || kernels.Families[ir.GDNDecodeOut].CheckParams(q) != nil ||
			kernels.GDNOutBlocks(q) > per*c.Multiprocessors {
			continue
		}
		// The split's operands (y, partial, mixed, conv_w, conv_state, b,
		// a, a_log, dt_bias, z, norm_w, state, arrivals) after h and the
		// partial rows, then the projection's weight and the barrier.
		blocks := int64(kernels.GDNOutBlocks(q))
		part := g.Tensor("gdn_out_part")
		if part == nil {
			part = g.AddTensor(ir.Tensor{Name: "gdn_out_part", Role: ir.Activation, DType: ir.F32,
				Shape: []int64{int64(g.Tokens), blocks * int64(q.Int("hidden"))}})
		} else if s := blocks * int64(q.Int("hidden")); part.Shape[1] < s {
			part.Shape[1] = s
		}
		bar := g.Tensor(fmt.Sprintf("state.%d.gdn_out_barrier", sp.Layer))
		if bar == nil {
			bar = g.AddTensor(ir.Tensor{Name: fmt.Sprintf("state.%d.gdn_out_barrier", sp.Layer), Role: ir.State, DType: ir.I32, Shape: []int64{1}})
		}
		operands := append([]ir.Operand{h, y, {Tensor: part.ID}}, sp.Operands[1:]...)
		operands = append(operands, w, ir.Operand{Tensor: bar.ID})
		// The fallback's projection streams as the stream pass would make
		// it (that pass runs after this one and sees only the fused op).
		fp := mm.Params.Clone()
		fkind := mm.Kind
		if _, ok := streamTable[target]; ok {
			maps.Copy(fp.Ints, gemvParams(fp.Int("n"), fp.Int("k"), target, tune))
			setPrefetch(&fp, g, w, target, tune)
			fkind = ir.GEMVAdd
		}
		fallback := []*ir.Op{sp, {Kind: fkind, Layer: mm.Layer, Rows: mm.Rows, Params: fp, Operands: mm.Operands}}
		g.Ops[i] = &ir.Op{Kind: ir.GDNDecodeOut, Layer: sp.Layer, Rows: sp.Rows, Params: q, Operands: operands, Fallback: fallback}
		drop[i+1] = true
		i++
		n++
	}
	dropOps(g, drop)
	return n
}
