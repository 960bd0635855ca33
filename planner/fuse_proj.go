package planner

import (
	"fmt"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
)

// projGroup is a set of projections of one layer that read the same input
// (the layer's normed hidden row), which the fusion pass turns into one
// weight, the checkpoint tensors concatenated row after row, and, for one
// row, into one launch over it.
type projGroup struct {
	weight string   // the concatenated weight, relative to the layer's prefix
	out    string   // the one-row step's activation holding every output, in part order
	parts  []string // the checkpoint tensors in row order, relative to the layer's prefix
}

// projGroups: a GDN layer's in_proj qkv, z, b and a (SPEC §3 step 1), and
// full attention's q (with its gate), k and v (SPEC §2.3 step 1).
var projGroups = []projGroup{
	{"linear_attn.in_proj_qkvzba.weight", "gdn_in", []string{"linear_attn.in_proj_qkv.weight", "linear_attn.in_proj_z.weight",
		"linear_attn.in_proj_b.weight", "linear_attn.in_proj_a.weight"}},
	{"self_attn.in_proj_qkv.weight", "attn_in", []string{"self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"}},
}

// fuseProjections concatenates the weights of every projGroup: a run of
// matmuls of one layer over the same rows and the same input, one per part
// in order, each writing an activation of its own. Every step then reads
// the one concatenated weight (so no checkpoint tensor is held twice): a
// step of one physical row runs the run as one matmul into the group's
// activation, and every later reader of a part's output (up to the op that
// next overwrites it) reads its slice there instead; a step of more rows
// keeps the matmuls, each reading its rows of the concatenated weight at an
// offset, their outputs unchanged. The decision depends only on the shapes
// (every offset a multiple of plan.ArgAlign bytes), so all steps agree. It
// returns the number of groups rewritten.
func fuseProjections(g *ir.Graph) int {
	u := indexUses(g)
	drop := map[int]bool{}
	n := 0
	for i := range g.Ops {
		for _, pg := range projGroups {
			if projMatch(g, i, pg) {
				fuseProjGroup(g, u, i, pg, drop)
				n++
			}
		}
	}
	dropOps(g, drop)
	return n
}

// projMatch reports whether the ops from i are the group's run of matmuls.
func projMatch(g *ir.Graph, i int, pg projGroup) bool {
	if i+len(pg.parts) > len(g.Ops) {
		return false
	}
	first := g.Ops[i]
	prefix := fmt.Sprintf("layers.%d.", first.Layer)
	outs := map[int]bool{}
	row := int64(0)
	for j, part := range pg.parts {
		op := g.Ops[i+j]
		if op.Kind != ir.MatMul || op.Layer != first.Layer || op.Rows == nil || first.Rows == nil || *op.Rows != *first.Rows {
			return false
		}
		y, x, w := op.Operands[0], op.Operands[1], op.Operands[2]
		wt := g.Tensors[w.Tensor]
		if x != first.Operands[1] || !plain(y) || !plain(w) || wt.Source != prefix+part || wt.DType != ir.BF16 ||
			op.Params.Int("k") != first.Params.Int("k") {
			return false
		}
		if g.Tensors[y.Tensor].Role != ir.Activation || outs[y.Tensor] || y.Tensor == x.Tensor {
			return false
		}
		outs[y.Tensor] = true
		// The part's rows of the weight and its columns of the output start
		// on the kernels' argument alignment.
		if (row*int64(op.Params.Int("k"))*2)%plan.ArgAlign != 0 || (row*4)%plan.ArgAlign != 0 {
			return false
		}
		row += int64(op.Params.Int("n"))
	}
	return true
}

// fuseProjGroup rewrites the run of pg's matmuls starting at op i.
func fuseProjGroup(g *ir.Graph, u uses, i int, pg projGroup, drop map[int]bool) {
	first := g.Ops[i]
	k := int64(first.Params.Int("k"))
	prefix := fmt.Sprintf("layers.%d.", first.Layer)
	var parts []ir.Part
	row := int64(0)
	for j, part := range pg.parts {
		rows := int64(g.Ops[i+j].Params.Int("n"))
		parts = append(parts, ir.Part{Source: prefix + part, Rows: [2]int64{row, row + rows}})
		row += rows
	}
	w := g.AddTensor(ir.Tensor{Name: prefix + pg.weight, Role: ir.Weight, DType: ir.BF16, Shape: []int64{row, k}, Parts: parts})
	if g.Tokens != 1 {
		for j, p := range parts {
			g.Ops[i+j].Operands[2] = ir.Operand{Tensor: w.ID, Offset: p.Rows[0] * k}
		}
		return
	}
	out := g.Tensor(pg.out)
	if out == nil || out.Shape[1] != row {
		out = g.AddTensor(ir.Tensor{Name: pg.out, Role: ir.Activation, DType: ir.F32, Shape: []int64{int64(g.Tokens), row}})
	}
	last := i + len(parts) - 1
	for j, p := range parts {
		redirect(g, u, g.Ops[i+j].Operands[0].Tensor, last, ir.Operand{Tensor: out.ID, Offset: p.Rows[0]})
		if j > 0 {
			drop[i+j] = true
		}
	}
	g.Ops[i] = &ir.Op{Kind: ir.MatMul, Layer: first.Layer, Rows: first.Rows,
		Params:   params(ints{"k": k, "n": row}),
		Operands: []ir.Operand{{Tensor: out.ID}, first.Operands[1], {Tensor: w.ID}}}
}

// redirect makes the readers of tensor t after op i, up to the op that next
// only overwrites it, read to instead (at to's offset plus theirs): the
// value of t that op i's run wrote now lies there. The one-row step's
// operands carry no dynamic offsets into a projection's output.
func redirect(g *ir.Graph, u uses, t, i int, to ir.Operand) {
	for _, k := range u.by[t] {
		if k <= i {
			continue
		}
		if u.overwrites(k, t) {
			return
		}
		for j, o := range g.Ops[k].Operands {
			if o.Tensor == t {
				g.Ops[k].Operands[j] = ir.Operand{Tensor: to.Tensor, Offset: to.Offset + o.Offset, Dyn: o.Dyn, DynStride: o.DynStride}
			}
		}
	}
}
