package planner

import (
	"fmt"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
)

// fuseMoERank moves, in the decode step, each MoE block's top-k from its
// moe_decode_gate_up (every routed block ranking the 256 logits before its
// first routed load) into the router's launch: the router's rmsnorm_gemv
// becomes rmsnorm_router_topk (its last block to arrive ranks once and
// writes ids and weights, on a per-layer count state.L.moe_rank), gate_up
// becomes moe_decode_gate_up_ranked (reads the 8 ids), and the
// moe_decode_down right after it (warp per slot) reads the ids before its
// programmatic wait and asks the L2 for its experts' rows (early_ids): the
// ids are then written two launches before it, which programmatic launch
// lets it read before its wait (docs/pdl.md). The three ops must be
// consecutive, so that nothing else stands between the ids' writer and
// their early reader. When on (Options.MoERank, or the target's
// streamTable row's RankOnce), where the parameters pass the families'
// checks. It returns the number of rewrites.
func fuseMoERank(g *ir.Graph, on bool) int {
	if !on {
		return 0
	}
	n := 0
	for i := 0; i+2 < len(g.Ops); i++ {
		nm, gu, dn := g.Ops[i], g.Ops[i+1], g.Ops[i+2]
		router, gateUp, ok := moeRankMatch(g, nm, gu, dn)
		if !ok {
			continue
		}
		g.Ops[i], g.Ops[i+1] = router, gateUp
		p := dn.Params.Clone()
		p.SetFlag("early_ids", true)
		dn.Params = p
		i += 2
		n++
	}
	return n
}

// moeRankMatch is the ranking router and the ranked gate_up of router nm,
// gate_up gu and down dn, if they fit the rule.
func moeRankMatch(g *ir.Graph, nm, gu, dn *ir.Op) (router, gateUp *ir.Op, ok bool) {
	if nm.Kind != ir.RMSNormGEMV || gu.Kind != ir.MoEDecodeGateUp || dn.Kind != ir.MoEDecodeDown ||
		nm.Layer != gu.Layer || gu.Layer != dn.Layer || nm.Rows == nil || gu.Rows == nil || dn.Rows == nil ||
		*nm.Rows != *gu.Rows || *gu.Rows != *dn.Rows || !dn.Params.Flag("warp_per_slot") {
		return nil, nil, false
	}
	logits, xn := nm.Operands[0], nm.Operands[4]
	act, ids, w, gx, gl := gu.Operands[0], gu.Operands[1], gu.Operands[2], gu.Operands[3], gu.Operands[4]
	gp := gu.Params
	if gx != xn || gl != logits || nm.Params.Int("n") != gp.Int("experts") || nm.Params.Int("k") != gp.Int("hidden") ||
		dn.Operands[2] != ids || dn.Operands[3] != w || dn.Operands[1] != act || !plain(ids) || !plain(w) {
		return nil, nil, false
	}
	rp := nm.Params.Clone()
	rp.SetInt("top_k", int64(gp.Int("k")))
	if kernels.Families[ir.RMSNormRouterTopK].CheckParams(rp) != nil || kernels.Families[ir.MoEDecodeGateUpRanked].CheckParams(gp) != nil {
		return nil, nil, false
	}
	name := fmt.Sprintf("state.%d.moe_rank", nm.Layer)
	count := g.Tensor(name)
	if count == nil {
		count = g.AddTensor(ir.Tensor{Name: name, Role: ir.State, DType: ir.I32, Shape: []int64{1}})
	}
	router = &ir.Op{Kind: ir.RMSNormRouterTopK, Layer: nm.Layer, Rows: nm.Rows, Params: rp,
		Operands: append(append([]ir.Operand(nil), nm.Operands...), ids, w, ir.Operand{Tensor: count.ID})}
	gateUp = &ir.Op{Kind: ir.MoEDecodeGateUpRanked, Layer: gu.Layer, Rows: gu.Rows, Params: gp.Clone(),
		Operands: []ir.Operand{act, ids, gx, gu.Operands[5], gu.Operands[6], gu.Operands[7]}}
	return router, gateUp, true
}
