package planner

import (
	"fmt"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// The certified int8 LM head (docs/lm-head.md): the greedy decode step's
// head. The plan keeps both heads: decode (BF16 logits, for sampling,
// logprobs and penalties) and decode_greedy, whose LM head streams the
// int8 rows the load step derives from the BF16 weights, recomputes the
// exact BF16 logits of the rows its bound cannot rule out, and writes the
// greedy token to tokens and sampled. The BF16 head stays resident: the
// candidates and the fallback read it.

// Tensor names of the derived int8 head.
const (
	lmHeadInt8  = "lm_head.int8"       // int8 rows [vocab, hidden]
	lmHeadScale = "lm_head.int8_scale" // f32 scale per row [vocab]
)

// certifiedHead lowers the greedy head over the last row of h with the
// BF16 head w. The launch parameters are placeholders the certify pass
// sets per target; the tensors are sized for any of them (groups of at
// least 8 rows, at most kernels.LMHeadMaxBlocks certify blocks).
func (l *lowering) certifiedHead(h, w *ir.Tensor) {
	V, K := int64(l.c.VocabSize), int64(l.c.HiddenSize)
	quant := &ir.Op{Kind: ir.QuantizeRowsInt8, Layer: -1, Params: params(ints{"k": K, "n": V})}
	derived := func(name, operand string, dt ir.DType, shape ...int64) *ir.Tensor {
		t := l.g.AddTensor(ir.Tensor{Name: name, Role: ir.Weight, DType: dt, Shape: shape, Source: w.Source,
			Derive: &ir.Derivation{Op: quant, From: w.Name, Operand: operand}})
		l.byID[name] = t
		return t
	}
	q := derived(lmHeadInt8, "q", ir.I8, V, K)
	scale := derived(lmHeadScale, "scale", ir.F32, V)
	upper := l.act("lm_head_upper", ir.F32, int(V))
	bounds := l.tensor("lm_head_bounds", ir.Activation, ir.F32, 2*int64(ir.Ceil(int(V), kernels.LMHeadWarps)))
	bestV := l.tensor("lm_head_best_v", ir.Activation, ir.F32, kernels.LMHeadMaxBlocks)
	bestI := l.tensor("lm_head_best_i", ir.Activation, ir.I32, 3*kernels.LMHeadMaxBlocks)
	tokens := l.tensor("tokens", ir.Input, ir.I32, int64(l.s.MaxTokens))
	out := l.sampled()
	x := ir.Operand{Tensor: h.ID, Dyn: ir.SlotRef(ir.ParamLast), DynStride: K}
	one := func(kind ir.Kind, i ints, operands ...ir.Operand) {
		i[ir.RowsParam] = 1
		l.g.Ops = append(l.g.Ops, &ir.Op{Kind: kind, Layer: -1, Params: params(i), Operands: operands})
	}
	group := int64(kernels.LMHeadWarps)
	one(ir.LMHeadInt8, ints{"k": K, "n": V, "group": group, "rows_per_warp": 1, "unroll": 1},
		of(upper), of(bounds), x, of(q), of(scale))
	one(ir.LMHeadCertify, ints{"k": K, "n": V, "group": group, "blocks": 1, "cap": kernels.LMHeadCap, "split_k": 1, "unroll": 1},
		of(bestV), of(bestI), of(upper), of(bounds), x, of(w))
	one(ir.LMHeadPick, ints{"blocks": 1}, of(tokens), of(out), of(bestV), of(bestI))
}

// certifyPass sets the certified head's launch parameters. The exact
// logits must be the decode step's LM head's bit for bit, so certify takes
// the split and unroll of that op (gemv on a GPU target; matmul's one row,
// dotBF16, on the cpu, where the references run); any other family there
// is refused. On a GPU target lm_head_int8 takes the streaming table's
// rows per warp for its rows (16-byte chunks of 16 int8 weights) and
// certify a block per multiprocessor.
func certifyPass(c *compilation) error {
	var head *ir.Op // the decode step's LM head
	for i, g := range c.graphs {
		if c.steps[i].Kind != plan.DecodeStep {
			continue
		}
		for _, op := range g.Ops {
			if len(op.Operands) > 0 && g.Tensors[op.Operands[0].Tensor].Name == "logits" {
				head = op
			}
		}
	}
	t := c.o.Target
	for _, g := range c.graphs {
		for _, op := range g.Ops {
			switch op.Kind {
			case ir.LMHeadInt8, ir.LMHeadCertify, ir.LMHeadPick:
			default:
				continue
			}
			if head == nil || (head.Kind != ir.GEMV && head.Kind != ir.MatMul) {
				return fmt.Errorf("%s: the certified head recomputes the decode step's LM head, which is not gemv or matmul", g.Name)
			}
			n, k := op.Params.Int("n"), op.Params.Int("k")
			rpw, u, split, hu, blocks := 1, 1, 1, 1, 1
			if tune, ok := streamTable[t]; ok {
				rpw = rowsPerWarp(n, 1, tune)
				chunks16 := k
				if k%16 == 0 {
					chunks16 = k / 16
				}
				u = unroll(chunks16, t.Launch().Warp, rpw, tune)
				blocks = min(t.Launch().Multiprocessors, kernels.LMHeadMaxBlocks)
			}
			if head.Kind == ir.GEMV {
				split, hu = head.Params.Int("split_k"), head.Params.Int("unroll")
			}
			p := op.Params.Clone()
			switch op.Kind {
			case ir.LMHeadInt8:
				p.SetInt("rows_per_warp", int64(rpw))
				p.SetInt("unroll", int64(u))
				p.SetInt("group", int64(kernels.LMHeadWarps*rpw))
			case ir.LMHeadCertify:
				p.SetInt("group", int64(kernels.LMHeadWarps*rpw))
				p.SetInt("split_k", int64(split))
				p.SetInt("unroll", int64(hu))
				p.SetInt("blocks", int64(blocks))
			case ir.LMHeadPick:
				p.SetInt("blocks", int64(blocks))
			}
			op.Params = p
		}
		if err := g.Verify(kernels.Families); err != nil {
			return fmt.Errorf("certify %s: %w", g.Name, err)
		}
	}
	return nil
}
