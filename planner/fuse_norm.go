package planner

import (
	"maps"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// fuseNormGEMV folds, in a step of one physical row (the decode step), each
// layer norm (rmsnorm of one vector of width k per row) into the matmul
// that next reads its output, as one rmsnorm_gemv: each layer's input norm
// into its (concatenated) input projection, the post-attention norm into
// the router, the final norm into the LM head. The fused op still writes
// the normed row, which the norm's other readers (the experts, the shared
// expert, the logits phase's hidden rows) read after it. It fuses when the
// matmul reads the norm's output from its start with k columns, writes
// none of the norm's tensors, and no op between them writes the norm's
// input. Per-head norms (q and k) are not layer norms and stay. It returns the number of rewrites.
func fuseNormGEMV(g *ir.Graph, target plan.Target, tune streamTuning) int {
	if g.Tokens != 1 {
		return 0 // a norm of several rows feeds matmuls of several rows: no one-row projection to fold into
	}
	u := indexUses(g)
	drop := map[int]bool{}
	n := 0
	for i, nm := range g.Ops {
		op, j, ok := normMatch(g, u, i, nm, target, tune)
		if !ok {
			continue
		}
		g.Ops[j] = op
		drop[i] = true
		n++
	}
	dropOps(g, drop)
	return n
}

// normMatch is the rmsnorm_gemv of norm op i and the matmul j that reads
// its output, if they fuse.
func normMatch(g *ir.Graph, u uses, i int, nm *ir.Op, target plan.Target, tune streamTuning) (*ir.Op, int, bool) {
	if nm.Kind != ir.RMSNorm || nm.Rows == nil {
		return nil, 0, false
	}
	p := nm.Params
	k := p.Int("width")
	if p.Int("heads") != 1 || p.Int("x_stride") != k || p.Int("y_stride") != k {
		return nil, 0, false
	}
	y, x, w := nm.Operands[0], nm.Operands[1], nm.Operands[2]
	if !plain(y) || !plain(x) || !plain(w) || y.Tensor == x.Tensor {
		return nil, 0, false
	}
	j := u.next(y.Tensor, i)
	if j < 0 {
		return nil, 0, false
	}
	mm := g.Ops[j]
	if mm.Kind != ir.MatMul || mm.Layer != nm.Layer || mm.Params.Int("k") != k {
		return nil, 0, false
	}
	// The matmul reads the normed row: from the start (a dynamic row offset,
	// the LM head's last row, is row 0 in a step of one row).
	if r := mm.Operands[1]; r.Tensor != y.Tensor || r.Offset != 0 {
		return nil, 0, false
	}
	my, mw := mm.Operands[0], mm.Operands[2]
	for _, t := range []int{x.Tensor, y.Tensor, w.Tensor} {
		if my.Tensor == t || mw.Tensor == t {
			return nil, 0, false
		}
	}
	for _, k := range u.by[x.Tensor] {
		if k > i && k < j && writes(g, k, x.Tensor) {
			return nil, 0, false
		}
	}
	fp := params(ints{"k": int64(k), "n": int64(mm.Params.Int("n"))}, "eps", p.Real("eps"), "one_plus", p.Flag("one_plus"))
	maps.Copy(fp.Ints, gemvParams(mm.Params.Int("n"), k, target, tune))
	setPrefetch(&fp, g, mw, target, tune)
	return &ir.Op{Kind: ir.RMSNormGEMV, Layer: mm.Layer, Rows: nm.Rows, Params: fp,
		Operands: []ir.Operand{my, x, w, mw, y}}, j, true
}

// writes reports whether op k writes tensor t.
func writes(g *ir.Graph, k, t int) bool {
	f := kernels.Families[g.Ops[k].Kind]
	for j, o := range g.Ops[k].Operands {
		if o.Tensor == t && f.Operands[j].Access != ir.Read {
			return true
		}
	}
	return false
}
