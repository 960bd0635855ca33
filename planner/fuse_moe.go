package planner

import (
	"fmt"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// moeChain is the decode step's MoE block after the router projection, in
// the lowering's order (SPEC §4): top-k, the routed experts' two launches,
// the shared expert's gate, up, activation and down, its gate's projection,
// and the combine into the residual.
var moeChain = []ir.Kind{ir.RouterTopK, ir.MoEGateUp, ir.MoEDown, ir.MatMul, ir.MatMul, ir.SiLUMul, ir.MatMul, ir.MatMul,
	ir.SharedExpertCombine}

// moeBlockAct is the fused block's activations: a row of k routed experts'
// and the shared expert's silu(gate)·up (kernels.MoEDecodeActWidth).
const moeBlockAct = "moe_block_act"

// moeDownWarpPerSlot is the moe_decode_down layout the plans use: on, a
// block owns its output rows and a warp streams one expert's (measured on
// the H200: 6.1 µs for 18.9 MB at one token, 2.87 TB/s past the L2); off,
// a warp streams its output rows of all k experts (7.2 µs, 1.98 TB/s;
// docs/moe-decode.md).
const moeDownWarpPerSlot = true

// fuseMoEDecode rewrites each MoE chain of the decode step (moeChain, nine
// consecutive ops of one layer over the same rows) into moe_decode_gate_up
// and moe_decode_down when the chain is the lowering's dataflow: top-k of
// the router logits feeds both expert launches, the normed row x feeds the
// routed and shared projections and the shared expert's gate, the shared
// gate and up feed silu_mul, its output the shared down, and the routed
// sum, the shared output and the gate logit the combine into the residual;
// the intermediates (act, routed, the shared rows, the gate logit) are
// activations nothing reads after the chain; and the fused parameters pass
// the families' checks (top-k ≤ 8, experts ≤ 512). The router projection
// before the chain stays (the stream pass makes it a gemv); ids and
// weights stay, written by the gate_up launch for the down launch.
// Anything else keeps the chain. It returns the number of rewrites.
func fuseMoEDecode(g *ir.Graph) int {
	u := indexUses(g)
	drop := map[int]bool{}
	n := 0
	for i := 0; i+len(moeChain) <= len(g.Ops); i++ {
		gu, dn, ok := moeMatch(g, u, i)
		if !ok {
			continue
		}
		g.Ops[i], g.Ops[i+1] = gu, dn
		for j := 2; j < len(moeChain); j++ {
			drop[i+j] = true
		}
		i += len(moeChain) - 1
		n++
	}
	dropOps(g, drop)
	return n
}

// moeMatch is the fused pair of the chain starting at op i, if it fuses.
func moeMatch(g *ir.Graph, u uses, i int) (gateUp, down *ir.Op, ok bool) {
	ops := g.Ops[i : i+len(moeChain)]
	for j, op := range ops {
		if op.Kind != moeChain[j] || op.Rows == nil || *op.Rows != *ops[0].Rows || op.Layer != ops[0].Layer {
			return nil, nil, false
		}
	}
	topk, mgu, mdn, sg, su, silu, sd, sgl, comb := ops[0], ops[1], ops[2], ops[3], ops[4], ops[5], ops[6], ops[7], ops[8]
	mp := mgu.Params
	E, H, I, K := mp.Int("experts"), mp.Int("hidden"), mp.Int("inter"), mp.Int("k")
	S := silu.Params.Int("width")
	ids, w, logits := topk.Operands[0], topk.Operands[1], topk.Operands[2]
	act, xn := mgu.Operands[0], mgu.Operands[1]
	routed := mdn.Operands[0]
	mm := func(op *ir.Op, y, x ir.Operand, k, n int) bool {
		return op.Operands[0] == y && op.Operands[1] == x && op.Params.Int("k") == k && op.Params.Int("n") == n
	}
	sGate, sUp, sAct, sOut, gLogit := sg.Operands[0], su.Operands[0], silu.Operands[0], sd.Operands[0], sgl.Operands[0]
	switch {
	case topk.Params.Int("experts") != E || topk.Params.Int("k") != K:
		return nil, nil, false
	case mgu.Operands[2] != ids || mdn.Operands[1] != act || mdn.Operands[2] != ids || mdn.Operands[3] != w:
		return nil, nil, false
	case mdn.Params.Int("experts") != E || mdn.Params.Int("hidden") != H || mdn.Params.Int("inter") != I || mdn.Params.Int("k") != K:
		return nil, nil, false
	case !mm(sg, sGate, xn, H, S) || !mm(su, sUp, xn, H, S) || !mm(sd, sOut, sAct, S, H) || !mm(sgl, gLogit, xn, H, 1):
		return nil, nil, false
	case silu.Operands[1] != sGate || silu.Operands[2] != sUp:
		return nil, nil, false
	case comb.Params.Int("hidden") != H || comb.Operands[1] != routed || comb.Operands[2] != sOut || comb.Operands[3] != gLogit:
		return nil, nil, false
	}
	last := i + len(moeChain) - 1
	inter := map[int]bool{}
	for _, o := range []ir.Operand{act, routed, sGate, sUp, sAct, sOut, gLogit} {
		if !plain(o) || g.Tensors[o.Tensor].Role != ir.Activation || !u.deadAfter(o.Tensor, last) || inter[o.Tensor] {
			return nil, nil, false
		}
		inter[o.Tensor] = true
	}
	// What the fused ops keep: the residual, x, the logits, ids, weights and
	// the five weights, distinct tensors none of which is an intermediate.
	res := comb.Operands[0]
	kept := []ir.Operand{res, xn, logits, ids, w, mgu.Operands[3], mdn.Operands[4], sg.Operands[2], su.Operands[2],
		sd.Operands[2], sgl.Operands[2]}
	seen := map[int]bool{}
	for _, o := range kept {
		if inter[o.Tensor] || seen[o.Tensor] {
			return nil, nil, false
		}
		seen[o.Tensor] = true
	}
	if !plain(ids) || !plain(w) {
		return nil, nil, false
	}
	// rows_per_warp and unroll are placeholders the stream pass tunes on a
	// GPU target (the CPU's references ignore them).
	p := ir.Params{Ints: map[string]int64{"experts": int64(E), "hidden": int64(H), "inter": int64(I), "k": int64(K),
		"shared_inter": int64(S), "rows_per_warp": 1, "unroll": 1}}
	pd := p.Clone()
	pd.SetFlag("warp_per_slot", moeDownWarpPerSlot)
	pd.SetFlag("early_ids", false)  // the ranking rule sets it where the router ranks (fuseMoERanked)
	p.SetFlag("l2_prefetch", false) // the stream pass sets it per target
	if kernels.Families[ir.MoEDecodeGateUp].CheckParams(p) != nil || kernels.Families[ir.MoEDecodeDown].CheckParams(pd) != nil {
		return nil, nil, false
	}
	ba := blockAct(g, g.Tensors[act.Tensor].Shape[0], kernels.MoEDecodeActWidth(p))
	if ba == nil {
		return nil, nil, false
	}
	a := ir.Operand{Tensor: ba.ID}
	gateUp = &ir.Op{Kind: ir.MoEDecodeGateUp, Layer: topk.Layer, Rows: topk.Rows, Params: p,
		Operands: []ir.Operand{a, ids, w, xn, logits, mgu.Operands[3], sg.Operands[2], su.Operands[2]}}
	down = &ir.Op{Kind: ir.MoEDecodeDown, Layer: topk.Layer, Rows: topk.Rows, Params: pd,
		Operands: []ir.Operand{res, a, ids, w, xn, mdn.Operands[4], sd.Operands[2], sgl.Operands[2]}}
	return gateUp, down, true
}

// blockAct is the graph's moe_block_act activation of rows × width (made on
// first use, shared by every layer as the lowering shares its activations),
// or nil when a tensor of that name has another shape.
func blockAct(g *ir.Graph, rows int64, width int) *ir.Tensor {
	if t := g.Tensor(moeBlockAct); t != nil {
		if t.Role != ir.Activation || t.DType != ir.F32 || len(t.Shape) != 2 || t.Shape[0] != rows || t.Shape[1] != int64(width) {
			return nil
		}
		return t
	}
	return g.AddTensor(ir.Tensor{Name: moeBlockAct, Role: ir.Activation, DType: ir.F32, Shape: []int64{rows, int64(width)}})
}

// moeRouteResident is the blocks of a grid-barrier family a target's
// multiprocessor is made to hold at once: sm_90 two (the template's launch
// bound caps a thread's registers for two 256-thread blocks an SM),
// gfx1151 one a CU (any register count fits). The engine checks the
// device's real occupancy at load (runtime.Residency) and runs the
// fallback where the grid does not fit.
var moeRouteResident = map[plan.Target]int{plan.SM90: 2, plan.GFX1151: 1}

// moeGateUpStream is the streaming parameters of moe_decode_gate_up (and of
// the fused router's routed stream) on target t: a gate and an up row per
// row of a warp, over the k routed experts' rows and the shared expert's.
func moeGateUpStream(p ir.Params, t plan.Target, tune streamTuning) (rpw, u int) {
	rpw = rowsPerWarp(kernels.MoEDecodeActWidth(p), 2, tune)
	return rpw, unroll(chunks(p.Int("hidden")), t.Launch().Warp, 2*rpw, tune)
}

// fuseMoERouter folds, in the decode step, each layer's router (the
// rmsnorm_gemv of the post-attention norm and the router projection, made
// by fuseNormGEMV) into the moe_decode_gate_up right after it that reads
// its logits and normed row: one moe_decode_route_gate_up, whose blocks
// publish their slices of the logits and meet at a grid barrier on a
// per-layer count (state.L.moe_barrier). The pair stays as the fused op's
// fallback, which the engine runs on a device that cannot hold the grid at
// once. On a GPU target the grid is the routed row groups, at most
// moeRouteResident blocks a multiprocessor; it fuses when the parameters
// pass the family's checks. It returns the number of rewrites.
func fuseMoERouter(g *ir.Graph, target plan.Target) int {
	drop := map[int]bool{}
	n := 0
	for i := 0; i+1 < len(g.Ops); i++ {
		op, ok := moeRouterMatch(g, g.Ops[i], g.Ops[i+1], target)
		if !ok {
			continue
		}
		g.Ops[i] = op
		drop[i+1] = true
		i++
		n++
	}
	dropOps(g, drop)
	return n
}

// moeRouterMatch is the fused op of router nm and gate_up gu, if they fuse.
func moeRouterMatch(g *ir.Graph, nm, gu *ir.Op, target plan.Target) (*ir.Op, bool) {
	if nm.Kind != ir.RMSNormGEMV || gu.Kind != ir.MoEDecodeGateUp || nm.Layer != gu.Layer ||
		nm.Rows == nil || gu.Rows == nil || *nm.Rows != *gu.Rows {
		return nil, false
	}
	logits, x, normW, router, xn := nm.Operands[0], nm.Operands[1], nm.Operands[2], nm.Operands[3], nm.Operands[4]
	act, ids, w, gx, gl := gu.Operands[0], gu.Operands[1], gu.Operands[2], gu.Operands[3], gu.Operands[4]
	gp := gu.Params
	if gx != xn || gl != logits || nm.Params.Int("n") != gp.Int("experts") || nm.Params.Int("k") != gp.Int("hidden") {
		return nil, false
	}
	operands := []ir.Operand{act, ids, w, logits, xn, x, normW, router, gu.Operands[5], gu.Operands[6], gu.Operands[7]}
	seen := map[int]bool{}
	for _, o := range operands {
		if !plain(o) || seen[o.Tensor] {
			return nil, false
		}
		seen[o.Tensor] = true
	}
	p := kernels.MoEDecodeRouteGateUpParams(gp)
	p.SetReal("eps", nm.Params.Real("eps"))
	p.SetFlag("one_plus", nm.Params.Flag("one_plus"))
	// One router row and one shared-expert row a block: a placeholder the
	// CPU's reference ignores, replaced below on a GPU target.
	p.SetInt("blocks", int64(max(p.Int("experts"), p.Int("shared_inter"))))
	if tune, ok := streamTable[target]; ok {
		rpw, u := moeGateUpStream(p, target, tune)
		p.SetInt("rows_per_warp", int64(rpw))
		p.SetInt("unroll", int64(u))
		groups := p.Int("k") * ir.Ceil(p.Int("inter"), target.Launch().Warps()*rpw)
		p.SetInt("blocks", int64(min(groups, moeRouteResident[target]*target.Launch().Multiprocessors)))
		// The fallback's moe_decode_gate_up streams as the stream pass
		// would make it (it runs after this pass and sees only the fused op).
		gp = gp.Clone()
		gp.SetInt("rows_per_warp", int64(rpw))
		gp.SetInt("unroll", int64(u))
	}
	if kernels.Families[ir.MoEDecodeRouteGateUp].CheckParams(p) != nil {
		return nil, false
	}
	bar := g.Tensor(fmt.Sprintf("state.%d.moe_barrier", nm.Layer))
	if bar == nil {
		bar = g.AddTensor(ir.Tensor{Name: fmt.Sprintf("state.%d.moe_barrier", nm.Layer), Role: ir.State, DType: ir.I32, Shape: []int64{1}})
	}
	fallback := []*ir.Op{nm, {Kind: gu.Kind, Layer: gu.Layer, Rows: gu.Rows, Params: gp, Operands: gu.Operands}}
	return &ir.Op{Kind: ir.MoEDecodeRouteGateUp, Layer: nm.Layer, Rows: nm.Rows, Params: p,
		Operands: append(operands, ir.Operand{Tensor: bar.ID}), Fallback: fallback}, true
}
