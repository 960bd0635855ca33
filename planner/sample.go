package planner

import (
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
)

// sample lowers the sampling phase: one launch that draws the next token
// from the decode step's (or prefill's) logits and writes it to element 0
// of the tokens input, where the next decode step reads it, and with its
// logprob to the persistent "sampled" output (2 × i32: id, float bits), the
// only bytes the host needs to read back. The sample_mask input holds a
// constrained request's allowed ids.
func (l *lowering) sample() {
	V := int64(l.c.VocabSize)
	logits := l.tensor("logits", ir.Output, ir.F32, 1, V)
	tokens := l.tensor("tokens", ir.Input, ir.I32, int64(l.s.MaxTokens))
	out := l.sampled()
	// The constraint's mask, written by the host only for a constrained
	// draw (the masked slot says whether to read it).
	mask := l.tensor(string(plan.PortSampleMask), ir.Input, ir.I32, (V+31)/32)
	l.g.Ops = append(l.g.Ops, &ir.Op{Kind: ir.Sample, Layer: -1,
		Params:   params(ints{"vocab": V, ir.RowsParam: 1}),
		Operands: []ir.Operand{of(logits), of(tokens), of(out), of(mask)}})
}

// sampled is the persistent output the samplers leave for the host: the
// id, its logprob's float bits, and (lm_head_pick) the candidates and
// whether the step fell back to the full BF16 head.
func (l *lowering) sampled() *ir.Tensor { return l.tensor("sampled", ir.Output, ir.I32, 4) }
