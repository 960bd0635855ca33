package planner

import (
	"errors"
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
// dotBF16, on the cpu, where the references run); where that head is
// rmsnorm_gemv (the final norm folded in, fusion on) the greedy step folds
// the norm the same way (foldFinalNorm) and certify repeats rmsnorm_gemv's
// arithmetic. Any other family there is refused. On a GPU target
// lm_head_int8 takes the streaming table's rows per warp for its rows
// (16-byte chunks of 16 int8 weights) and certify a block per
// multiprocessor.
func certifyPass(c *compilation) error {
	var head *ir.Op // the decode step's LM head, in graph decode
	var decode *ir.Graph
	for i, g := range c.graphs {
		if c.steps[i].Kind != plan.DecodeStep {
			continue
		}
		for _, op := range g.Ops {
			if len(op.Operands) > 0 && g.Tensors[op.Operands[0].Tensor].Name == "logits" {
				head, decode = op, g
			}
		}
	}
	t := c.o.Target
	for i, g := range c.graphs {
		if head != nil && head.Kind == ir.RMSNormGEMV && c.steps[i].Kind == plan.DecodeGreedy {
			if err := foldFinalNorm(g, decode, head); err != nil {
				return fmt.Errorf("certify %s: %w", g.Name, err)
			}
		}
		for _, op := range g.Ops {
			switch op.Kind {
			case ir.LMHeadInt8, ir.LMHeadCertify, ir.LMHeadPick, ir.RMSNormLMHeadInt8, ir.RMSNormLMHeadCertify:
			default:
				continue
			}
			if head == nil || (head.Kind != ir.GEMV && head.Kind != ir.MatMul && head.Kind != ir.RMSNormGEMV) {
				return fmt.Errorf("%s: the certified head recomputes the decode step's LM head, which is not gemv, rmsnorm_gemv or matmul", g.Name)
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
			if head.Kind != ir.MatMul {
				split, hu = head.Params.Int("split_k"), head.Params.Int("unroll")
			}
			p := op.Params.Clone()
			switch op.Kind {
			case ir.LMHeadInt8, ir.RMSNormLMHeadInt8:
				p.SetInt("rows_per_warp", int64(rpw))
				p.SetInt("unroll", int64(u))
				p.SetInt("group", int64(kernels.LMHeadWarps*rpw))
			case ir.LMHeadCertify, ir.RMSNormLMHeadCertify:
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

// foldFinalNorm folds the greedy step's final norm into its certified
// head, as the fusion pass folded the decode step's into head (an
// rmsnorm_gemv): lm_head_int8 becomes rmsnorm_lm_head_int8 (reading the
// residual row and the norm weights, writing the normed row the norm
// wrote: hidden) and lm_head_certify rmsnorm_lm_head_certify, whose
// logits are then rmsnorm_gemv's; the norm goes.
func foldFinalNorm(g, decode *ir.Graph, head *ir.Op) error {
	var int8, cert *ir.Op
	for _, op := range g.Ops {
		switch op.Kind {
		case ir.LMHeadInt8:
			int8 = op
		case ir.LMHeadCertify:
			cert = op
		}
	}
	if int8 == nil || cert == nil {
		return errors.New("no lm_head_int8 and lm_head_certify to fold the final norm into")
	}
	h := int8.Operands[2].Tensor
	norm := -1
	for i, op := range g.Ops {
		if op.Kind == ir.RMSNorm && op.Layer == -1 && op.Operands[0].Tensor == h {
			norm = i
		}
	}
	if norm < 0 {
		return errors.New("no final norm writes the certified head's input")
	}
	nm := g.Ops[norm]
	k := int64(nm.Params.Int("width"))
	// rmsnorm_gemv's operands: y, x, norm_w, w, xn.
	hx, hw := decode.Tensors[head.Operands[1].Tensor].Name, decode.Tensors[head.Operands[2].Tensor].Name
	if nm.Params.Int("heads") != 1 || k != int64(int8.Params.Int("k")) || k != int64(head.Params.Int("k")) ||
		g.Tensors[nm.Operands[1].Tensor].Name != hx || g.Tensors[nm.Operands[2].Tensor].Name != hw ||
		nm.Params.Real("eps") != head.Params.Real("eps") || nm.Params.Flag("one_plus") != head.Params.Flag("one_plus") {
		return fmt.Errorf("the final norm %v does not match the decode step's LM head %v", nm.Params, head.Params)
	}
	y, x, w := nm.Operands[0], nm.Operands[1], nm.Operands[2]
	y.Dyn, y.DynStride = nil, 0 // row 0: the one row of the step
	withNorm := func(p ir.Params) ir.Params {
		p = p.Clone()
		p.SetReal("eps", nm.Params.Real("eps"))
		p.SetFlag("one_plus", nm.Params.Flag("one_plus"))
		return p
	}
	o := int8.Operands
	int8.Kind, int8.Params = ir.RMSNormLMHeadInt8, withNorm(int8.Params)
	int8.Operands = []ir.Operand{o[0], o[1], x, w, o[3], o[4], y}
	o = cert.Operands
	cert.Kind, cert.Params = ir.RMSNormLMHeadCertify, withNorm(cert.Params)
	cert.Operands = []ir.Operand{o[0], o[1], o[2], o[3], x, w, o[5]}
	g.Ops = append(g.Ops[:norm], g.Ops[norm+1:]...)
	return nil
}
