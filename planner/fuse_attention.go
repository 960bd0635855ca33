package planner

import (
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
)

// qkChain is the attention layer's chain between the projections and the
// attention in the lowering's order (SPEC §2.3 steps 2–4): the q heads'
// norm out of [q | gate], the k heads' norm in place, RoPE of q and of k,
// the KV append.
var qkChain = []ir.Kind{ir.RMSNorm, ir.RMSNorm, ir.RoPE, ir.RoPE, ir.KVAppend}

// fuseQKNormRoPE rewrites each qkChain of g (five consecutive ops of one
// layer over the same rows) into one qk_norm_rope_append when it is the
// lowering's dataflow: the q norm reads the first half of every head's
// 2·head_dim slice of qg and writes q densely, the k norm rewrites k in
// place, both norms share eps and their 1+w form, the ropes rotate exactly
// q and k with one rot_dim and theta, the append stores that k and v; q,
// k, qg and v are plain operands; k is an activation nothing reads after
// the append (the fused kernel never writes it back). Anything else keeps
// the chain. It returns the number of rewrites.
func fuseQKNormRoPE(g *ir.Graph) int {
	u := indexUses(g)
	drop := map[int]bool{}
	n := 0
	for i := 0; i+len(qkChain) <= len(g.Ops); i++ {
		op, ok := qkMatch(g, u, i)
		if !ok {
			continue
		}
		g.Ops[i] = op
		for j := 1; j < len(qkChain); j++ {
			drop[i+j] = true
		}
		i += len(qkChain) - 1
		n++
	}
	dropOps(g, drop)
	return n
}

// qkMatch is the fused op of the chain starting at op i, if it fuses.
func qkMatch(g *ir.Graph, u uses, i int) (*ir.Op, bool) {
	ops := g.Ops[i : i+len(qkChain)]
	for j, op := range ops {
		if op.Kind != qkChain[j] || op.Rows == nil || *op.Rows != *ops[0].Rows || op.Layer != ops[0].Layer {
			return nil, false
		}
	}
	qn, kn, rq, rk, app := ops[0], ops[1], ops[2], ops[3], ops[4]
	d := qn.Params.Int("width")
	hq, hkv := qn.Params.Int("heads"), kn.Params.Int("heads")
	q, qg, k := qn.Operands[0], qn.Operands[1], kn.Operands[0]
	kc, vc, v := app.Operands[0], app.Operands[1], app.Operands[3]
	for _, o := range []ir.Operand{q, qg, k, v, qn.Operands[2], kn.Operands[2]} {
		if !plain(o) {
			return nil, false
		}
	}
	norms := func(op *ir.Op, heads, xs int) bool {
		p := op.Params
		return p.Int("width") == d && p.Int("heads") == heads && p.Int("x_stride") == xs && p.Int("y_stride") == d &&
			p.Real("eps") == qn.Params.Real("eps") && p.Flag("one_plus") == qn.Params.Flag("one_plus")
	}
	ropes := func(op *ir.Op, x ir.Operand, heads int) bool {
		p := op.Params
		return op.Operands[0] == x && p.Int("row_stride") == heads*d && p.Int("heads") == heads && p.Int("head_dim") == d &&
			p.Int("rot_dim") == rq.Params.Int("rot_dim") && p.Real("theta") == rq.Params.Real("theta")
	}
	switch {
	case !norms(qn, hq, 2*d) || !norms(kn, hkv, d) || kn.Operands[1] != k:
		return nil, false
	case !ropes(rq, q, hq) || !ropes(rk, k, hkv):
		return nil, false
	case app.Operands[2] != k || app.Params.Int("width") != hkv*d:
		return nil, false
	case g.Tensors[k.Tensor].Role != ir.Activation || !u.deadAfter(k.Tensor, i+len(qkChain)-1):
		return nil, false
	}
	seen := map[int]bool{}
	for _, t := range []int{q.Tensor, kc.Tensor, vc.Tensor, qg.Tensor, k.Tensor, v.Tensor} {
		if seen[t] {
			return nil, false
		}
		seen[t] = true
	}
	p := ir.Params{Ints: map[string]int64{"q_heads": int64(hq), "kv_heads": int64(hkv), "head_dim": int64(d),
		"rot_dim": int64(rq.Params.Int("rot_dim")), "capacity": int64(app.Params.Int("capacity")), "width": int64(hkv * d)}}
	p.SetReal("eps", qn.Params.Real("eps"))
	p.SetReal("theta", rq.Params.Real("theta"))
	p.SetFlag("one_plus", qn.Params.Flag("one_plus"))
	p.SetFlag("kv_bf16", app.Params.Flag("kv_bf16"))
	if kernels.Families[ir.QKNormRoPEAppend].CheckParams(p) != nil {
		return nil, false
	}
	// q, k_cache, v_cache, qg, k, v, q_norm, k_norm.
	return &ir.Op{Kind: ir.QKNormRoPEAppend, Layer: qn.Layer, Rows: qn.Rows, Params: p,
		Operands: []ir.Operand{q, kc, vc, qg, k, v, qn.Operands[2], kn.Operands[2]}}, true
}

// foldQKNorm folds each qk_norm_rope_append of g into the split attention
// right after it (attention_decode_split or attention_decode_mma, of the
// same layer and rows) as attention_decode_split_qk or
// attention_decode_mma_qk, when the split reads exactly the q it writes
// and the caches it appends to, nothing else reads that q, the heads
// agree, and the folded kernel serves the shape on target launch
// configuration c (its new rows, g.Tokens of them, within its shared
// memory). The q tensor goes (the fold never writes it). It returns the
// number of folds.
func foldQKNorm(g *ir.Graph, c ir.LaunchConfig) int {
	u := indexUses(g)
	drop := map[int]bool{}
	n := 0
	for i := 0; i+1 < len(g.Ops); i++ {
		qk, at := g.Ops[i], g.Ops[i+1]
		op, ok := qkFoldMatch(g, u, i, qk, at, c)
		if !ok {
			continue
		}
		g.Ops[i+1] = op
		drop[i] = true
		i++
		n++
	}
	dropOps(g, drop)
	return n
}

// qkFolds maps the split kinds that take the fold to their folded kinds.
var qkFolds = map[ir.Kind]ir.Kind{ir.AttentionDecodeSplit: ir.AttentionDecodeSplitQK, ir.AttentionDecodeMMA: ir.AttentionDecodeMMAQK}

// qkFoldMatch is the folded op of qk_norm_rope_append qk (op i) and the
// split at after it, if they fold.
func qkFoldMatch(g *ir.Graph, u uses, i int, qk, at *ir.Op, c ir.LaunchConfig) (*ir.Op, bool) {
	kind, ok := qkFolds[at.Kind]
	switch {
	case !ok || qk.Kind != ir.QKNormRoPEAppend || qk.Layer != at.Layer:
		return nil, false
	case (qk.Rows == nil) != (at.Rows == nil) || (qk.Rows != nil && *qk.Rows != *at.Rows):
		return nil, false
	}
	// qk: q, k_cache, v_cache, qg, k, v, q_norm, k_norm; the split:
	// partial, q, k_cache, v_cache.
	q := qk.Operands[0]
	if at.Operands[1] != q || at.Operands[2] != qk.Operands[1] || at.Operands[3] != qk.Operands[2] {
		return nil, false
	}
	if g.Tensors[q.Tensor].Role != ir.Activation || !u.deadAfter(q.Tensor, i+1) {
		return nil, false
	}
	qp, sp := qk.Params, at.Params
	for _, k := range []string{"q_heads", "kv_heads", "head_dim", "capacity", "width"} {
		if qp.Int(k) != sp.Int(k) {
			return nil, false
		}
	}
	if qp.Flag("kv_bf16") != sp.Flag("kv_bf16") {
		return nil, false
	}
	p := sp.Clone()
	p.SetInt("rot_dim", int64(qp.Int("rot_dim")))
	p.SetInt("new_rows", int64(g.Tokens))
	p.SetReal("eps", qp.Real("eps"))
	p.SetReal("theta", qp.Real("theta"))
	p.SetFlag("one_plus", qp.Flag("one_plus"))
	f := kernels.Families[kind]
	if f.CheckParams(p) != nil || f.Launch(p, g.Tokens, c).SharedBytes > c.MaxSharedBytes {
		return nil, false
	}
	// partial, qg, k_cache, v_cache, k, v, q_norm, k_norm.
	o := qk.Operands
	return &ir.Op{Kind: kind, Layer: at.Layer, Rows: at.Rows, Params: p,
		Operands: []ir.Operand{at.Operands[0], o[3], o[1], o[2], o[4], o[5], o[6], o[7]}}, true
}
