package planner

import (
	"fmt"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// gdnChain is the decode step's Gated DeltaNet chain after the input
// projections, in the lowering's order (SPEC §3 steps 2–8).
var gdnChain = []ir.Kind{ir.CausalConv1dSiLU, ir.GDNGates, ir.L2NormHeads, ir.L2NormHeads, ir.GatedDeltaRecurrent, ir.GatedRMSNorm}

// fuseGDNDecode rewrites each GDN chain of the decode step (gdnChain, six
// consecutive ops of one layer over the same rows) into one gdn_decode_step
// when the chain is the lowering's dataflow: the conv output's q, k and v
// columns feed the l2 norms and the recurrence at the layout's offsets, the
// gates feed the recurrence, the recurrence's output feeds the gated norm;
// the intermediates (conv rows, beta, g, the output rows) are activations
// that nothing reads after the chain; the fused op's own operands are
// distinct tensors, none of them an intermediate; and, on a GPU target, the
// shapes fit the template (kernels.GDNDecodeStepFits). Anything else keeps
// the chain. Where a column-tiled family runs (the column tile colTile:
// Options.GDNColumnTile), it takes the chain's place instead:
// gdn_decode_split, or, when peer asks for it (Options.GDNPeer) and its
// blocks fit one wave, gdn_decode_peer. It returns the number of rewrites.
func fuseGDNDecode(g *ir.Graph, target plan.Target, colTile int, peer bool) int {
	u := indexUses(g)
	drop := map[int]bool{}
	n := 0
	for i := 0; i+len(gdnChain) <= len(g.Ops); i++ {
		op, ok := gdnMatch(g, u, i, target, colTile, peer)
		if !ok {
			continue
		}
		g.Ops[i] = op
		for j := 1; j < len(gdnChain); j++ {
			drop[i+j] = true
		}
		i += len(gdnChain) - 1
		n++
	}
	dropOps(g, drop)
	return n
}

// gdnMatch is the fused op of the chain starting at op i, if it fuses.
func gdnMatch(g *ir.Graph, u uses, i int, target plan.Target, colTile int, peer bool) (*ir.Op, bool) {
	ops := g.Ops[i : i+len(gdnChain)]
	for j, op := range ops {
		if op.Kind != gdnChain[j] || op.Rows == nil || *op.Rows != *ops[0].Rows || op.Layer != ops[0].Layer {
			return nil, false
		}
	}
	conv, gates, l2q, l2k, rec, norm := ops[0], ops[1], ops[2], ops[3], ops[4], ops[5]
	rp := rec.Params
	hk, hv, dk, dv := rp.Int("k_heads"), rp.Int("v_heads"), rp.Int("k_dim"), rp.Int("v_dim")
	channels := conv.Params.Int("channels")
	cv := conv.Operands[0]
	at := func(off int) ir.Operand { return ir.Operand{Tensor: cv.Tensor, Offset: int64(off)} }
	l2 := func(op *ir.Op, off int) bool {
		p := op.Params
		return op.Operands[0] == at(off) && p.Int("row_stride") == channels && p.Int("heads") == hk && p.Int("dim") == dk &&
			p.Real("eps") == l2q.Params.Real("eps")
	}
	beta, gt, o := gates.Operands[0], gates.Operands[1], rec.Operands[0]
	switch {
	case !plain(cv) || !plain(beta) || !plain(gt) || !plain(o):
		return nil, false
	case channels != 2*hk*dk+hv*dv || rp.Int("row_stride") != channels || gates.Params.Int("heads") != hv:
		return nil, false
	case !l2(l2q, 0) || !l2(l2k, hk*dk):
		return nil, false
	case rec.Operands[1] != at(0) || rec.Operands[2] != at(hk*dk) || rec.Operands[3] != at(2*hk*dk) ||
		rec.Operands[4] != beta || rec.Operands[5] != gt:
		return nil, false
	case norm.Params.Int("heads") != hv || norm.Params.Int("dim") != dv || norm.Operands[1] != o:
		return nil, false
	}
	last := i + len(gdnChain) - 1
	inter := map[int]bool{}
	for _, t := range []int{cv.Tensor, beta.Tensor, gt.Tensor, o.Tensor} {
		if g.Tensors[t].Role != ir.Activation || !u.deadAfter(t, last) || inter[t] {
			return nil, false
		}
		inter[t] = true
	}
	p := ir.Params{Ints: map[string]int64{"k_heads": int64(hk), "v_heads": int64(hv), "k_dim": int64(dk), "v_dim": int64(dv),
		"kernel": int64(conv.Params.Int("kernel"))}}
	p.SetReal("l2_eps", l2q.Params.Real("eps"))
	p.SetReal("q_scale", l2q.Params.Real("scale"))
	p.SetReal("k_scale", l2k.Params.Real("scale"))
	p.SetReal("eps", norm.Params.Real("eps"))
	tile, kind := 0, ir.GDNDecodeSplit
	if peer {
		kind = ir.GDNDecodePeer
	}
	fits := func(fits func(ir.Params, ir.LaunchConfig) error, tile int) bool {
		q := p.Clone()
		q.SetInt("col_tile", int64(tile))
		return fits(q, target.Launch()) == nil
	}
	switch {
	case colTile > 0 && dv%colTile == 0 && !target.GPU():
		tile = colTile // the references run any tile
	case colTile > 0 && target.GPU():
		switch {
		case peer && fits(kernels.GDNDecodePeerFits, colTile):
			tile = colTile
		case fits(kernels.GDNDecodeSplitFits, colTile):
			tile, kind = colTile, ir.GDNDecodeSplit
		}
	case colTile == 0 && target.GPU():
		if peer {
			tile = gdnPeerTile(p, target.Launch())
		}
		if tile == 0 {
			tile, kind = gdnSplitTile(p, target.Launch()), ir.GDNDecodeSplit
		}
	}
	if tile == 0 && target.GPU() && kernels.GDNDecodeStepFits(p, target.Launch()) != nil {
		return nil, false
	}
	// y, mixed, conv_w, conv_state, b, a, a_log, dt_bias, z, norm_w, state.
	operands := []ir.Operand{norm.Operands[0], conv.Operands[1], conv.Operands[2], conv.Operands[3],
		gates.Operands[2], gates.Operands[3], gates.Operands[4], gates.Operands[5],
		norm.Operands[2], norm.Operands[3], rec.Operands[6]}
	seen := map[int]bool{}
	for _, x := range operands {
		if inter[x.Tensor] || seen[x.Tensor] {
			return nil, false
		}
		seen[x.Tensor] = true
	}
	if tile == 0 {
		return &ir.Op{Kind: ir.GDNDecodeStep, Layer: conv.Layer, Rows: conv.Rows, Params: p, Operands: operands}, true
	}
	p.SetInt("col_tile", int64(tile))
	width := int64(hv * kernels.GDNSplitTiles(p))
	if kind == ir.GDNDecodePeer {
		// gdn_decode_peer: the layer's slots last (state: two (tag, Σo²)
		// pairs a block, as Reset leaves them zero).
		slots := g.AddTensor(ir.Tensor{Name: fmt.Sprintf("state.%d.gdn_slots", conv.Layer), Role: ir.State, DType: ir.I32,
			Shape: []int64{2, width, 2}})
		operands = append(operands, ir.Operand{Tensor: slots.ID})
		return &ir.Op{Kind: kind, Layer: conv.Layer, Rows: conv.Rows, Params: p, Operands: operands}, true
	}
	// gdn_decode_split: the partial sums (an activation of the step, shared
	// by the layers) after y, and the layer's arrival counters (state: zero
	// between launches) last.
	partial := g.Tensor("gdn_partial")
	if partial == nil {
		partial = g.AddTensor(ir.Tensor{Name: "gdn_partial", Role: ir.Activation, DType: ir.F32, Shape: []int64{int64(g.Tokens), width}})
	} else if partial.Shape[1] < width {
		partial.Shape[1] = width
	}
	arrivals := g.AddTensor(ir.Tensor{Name: fmt.Sprintf("state.%d.gdn_arrivals", conv.Layer), Role: ir.State, DType: ir.I32, Shape: []int64{int64(hk)}})
	operands = append([]ir.Operand{operands[0], {Tensor: partial.ID}}, append(operands[1:], ir.Operand{Tensor: arrivals.ID})...)
	return &ir.Op{Kind: kind, Layer: conv.Layer, Rows: conv.Rows, Params: p, Operands: operands}, true
}

// gdnPeerTile is the column tile of gdn_decode_peer for a GDN step on a
// GPU with launch configuration c, or 0 when none fits: the narrowest tile
// whose blocks still fit one wave (kernels.GDNDecodePeerFits: no more
// blocks than multiprocessors, no more blocks a key head than lanes) —
// on the H200 32 columns, 128 blocks; on gfx1151 128, a block per value
// head. More blocks mean a shorter state stream per block; the wave is
// what the peers' waiting needs.
func gdnPeerTile(p ir.Params, c ir.LaunchConfig) int {
	dv := p.Int("v_dim")
	for tile := 1; tile <= dv; tile++ {
		if dv%tile != 0 {
			continue
		}
		q := p.Clone()
		q.SetInt("col_tile", int64(tile))
		if kernels.GDNDecodePeerFits(q, c) == nil {
			return tile
		}
	}
	return 0
}

// gdnSplitTile is the column tile of gdn_decode_split for a GDN step on a
// GPU with launch configuration c, or 0 when no tile fits (the step keeps
// gdn_decode_step or the chain): the widest tile that still gives about
// every multiprocessor a block (7/8 of them: on the H200 32 columns, 128
// blocks, measured faster than 16 columns' 256 blocks — each block's
// prologue, q and k recomputed, and its arrival cost more than its state
// stream), else the narrowest that fits.
func gdnSplitTile(p ir.Params, c ir.LaunchConfig) int {
	hv, dv := p.Int("v_heads"), p.Int("v_dim")
	narrowest := 0
	for tile := dv; tile >= 1; tile-- {
		if dv%tile != 0 {
			continue
		}
		q := p.Clone()
		q.SetInt("col_tile", int64(tile))
		if kernels.GDNDecodeSplitFits(q, c) != nil {
			continue
		}
		if 8*hv*(dv/tile) >= 7*c.Multiprocessors {
			return tile
		}
		narrowest = tile
	}
	return narrowest
}
