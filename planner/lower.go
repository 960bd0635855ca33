package planner

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// Step describes the graph to lower: a phase kind and its physical rows.
type Step struct {
	Kind   plan.PhaseKind
	Tokens int
	// MaxTokens is the largest bucket: the height of the persistent hidden rows.
	MaxTokens     int
	ContextTokens int
	KVDType       ir.DType
	Chunk         int // GDN chunk size for prefill
}

// lowering builds one graph; helper methods add tensors and ops by name.
type lowering struct {
	m    *Model
	c    *arch.Config
	s    Step
	g    *ir.Graph
	byID map[string]*ir.Tensor
}

// Lower lowers one step of the model to a verified IR graph.
func Lower(m *Model, s Step) (*ir.Graph, error) {
	l := &lowering{m: m, c: m.Config, s: s, byID: map[string]*ir.Tensor{},
		g: &ir.Graph{Name: fmt.Sprintf("%s_%d", s.Kind, s.Tokens), Tokens: s.Tokens}}
	switch s.Kind {
	case plan.Prefill, plan.DecodeStep, plan.DecodeGreedy:
		l.g.Dyn = []ir.Slot{ir.ParamN, ir.ParamPos, ir.ParamLast}
		switch s.Kind {
		case plan.DecodeStep:
			l.g.Name = "decode"
		case plan.DecodeGreedy:
			l.g.Name = "decode_greedy"
			l.g.Dyn = append(l.g.Dyn, ir.ParamVocabLimit)
		}
		l.step()
	case plan.Logits:
		l.g.Name = "logits"
		l.g.Dyn = []ir.Slot{ir.ParamN, ir.ParamRow0}
		l.g.DynMax = map[ir.Slot]int64{ir.ParamRow0: int64(s.MaxTokens - s.Tokens)}
		l.logits()
	case plan.Sample:
		l.g.Name = "sample"
		l.g.Dyn = slices.Clone(kernels.Families[ir.Sample].Slots)
		l.sample()
	default:
		return nil, fmt.Errorf("unknown step kind %q", s.Kind)
	}
	if err := l.g.Verify(kernels.Families); err != nil {
		return nil, fmt.Errorf("lowering %s: %w", l.g.Name, err)
	}
	return l.g, nil
}

// tensor returns the tensor called name, creating it on first use.
func (l *lowering) tensor(name string, role ir.Role, dt ir.DType, shape ...int64) *ir.Tensor {
	if t, ok := l.byID[name]; ok {
		return t
	}
	t := l.g.AddTensor(ir.Tensor{Name: name, Role: role, DType: dt, Shape: shape})
	l.byID[name] = t
	return t
}

// act is an activation of the step: B rows of width.
func (l *lowering) act(name string, dt ir.DType, width int) *ir.Tensor {
	return l.tensor(name, ir.Activation, dt, int64(l.s.Tokens), int64(width))
}

// weight binds a checkpoint tensor. Matrices stay BF16; small parameters
// (norms, conv, A_log, dt_bias) are widened to f32 on the device.
func (l *lowering) weight(rel string) *ir.Tensor {
	if t, ok := l.byID[rel]; ok {
		return t
	}
	var shape []int64
	for _, spec := range l.c.Tensors("") {
		if spec.Name == rel {
			shape = spec.Shape
		}
	}
	if shape == nil {
		panic("planner: no tensor " + rel) // lowering names only tensors of the table
	}
	src := l.m.DTypes[rel]
	t := &ir.Tensor{Name: rel, Role: ir.Weight, Source: rel, Shape: shape}
	if smallParam(rel) {
		t.DType = ir.F32
		t.SourceDType = string(src)
	} else {
		t.DType = ir.BF16
	}
	t = l.g.AddTensor(*t)
	l.byID[rel] = t
	return t
}

// smallParam reports the per-channel parameters the device keeps in f32.
func smallParam(rel string) bool {
	for _, suffix := range []string{"norm.weight", "conv1d.weight", "A_log", "dt_bias"} {
		if strings.HasSuffix(rel, suffix) {
			return true
		}
	}
	return false
}

// op appends an op whose rows are the logical length n.
func (l *lowering) op(kind ir.Kind, layer int, params ir.Params, operands ...ir.Operand) {
	l.g.Ops = append(l.g.Ops, &ir.Op{Kind: kind, Layer: layer, Operands: operands, Params: params, Rows: ir.SlotRef(ir.ParamN)})
}

// ints, reals and flags are the parameters of one kind, for building an
// op's Params; with sets a parameter of any kind by its Go type.
type ints = map[string]int64

func params(i ints, more ...any) ir.Params {
	p := ir.Params{Ints: i}
	for j := 0; j+1 < len(more); j += 2 {
		name := more[j].(string)
		switch v := more[j+1].(type) {
		case float64:
			p.SetReal(name, v)
		case bool:
			p.SetFlag(name, v)
		default:
			panic(fmt.Sprintf("planner: parameter %s of type %T", name, v))
		}
	}
	return p
}

func at(t *ir.Tensor, offset int) ir.Operand { return ir.Operand{Tensor: t.ID, Offset: int64(offset)} }
func of(t *ir.Tensor) ir.Operand             { return ir.Operand{Tensor: t.ID} }

// matmul is y = x · Wᵀ for a weight [N, K].
func (l *lowering) matmul(layer int, y, x, w *ir.Tensor) {
	l.op(ir.MatMul, layer, params(ints{"k": w.Shape[1], "n": w.Shape[0]}), of(y), of(x), of(w))
}

// rmsnorm is the zero-centred (1+w) norm over rows of the hidden size.
func (l *lowering) rmsnorm(layer int, y, x *ir.Tensor, w string) {
	H := int64(l.c.HiddenSize)
	l.op(ir.RMSNorm, layer, params(ints{"width": H, "heads": 1, "x_stride": H, "y_stride": H},
		"eps", l.c.RMSNormEps, "one_plus", true), of(y), of(x), of(l.weight(w)))
}

// hidden is the persistent [MaxTokens, H] buffer of final-normed rows.
func (l *lowering) hidden() *ir.Tensor {
	return l.tensor("hidden", ir.Output, ir.F32, int64(l.s.MaxTokens), int64(l.c.HiddenSize))
}

// step lowers a prefill bucket or the decode step (SPEC §2.1).
func (l *lowering) step() {
	c := l.c
	ids := l.tensor("tokens", ir.Input, ir.I32, int64(l.s.MaxTokens))
	x := l.act("x", ir.F32, c.HiddenSize)
	l.op(ir.Embedding, -1, params(ints{"hidden": int64(c.HiddenSize), "vocab": int64(c.VocabSize)}),
		of(x), of(l.weight("embed_tokens.weight")), of(ids))
	for i := 0; i < c.NumHiddenLayers; i++ {
		p := fmt.Sprintf("layers.%d.", i)
		xn := l.act("xn", ir.F32, c.HiddenSize)
		l.rmsnorm(i, xn, x, p+"input_layernorm.weight")
		if c.IsFullAttention(i) {
			l.attention(i, x, xn)
		} else {
			l.gatedDeltaNet(i, x, xn)
		}
		l.rmsnorm(i, xn, x, p+"post_attention_layernorm.weight")
		l.moe(i, x, xn)
	}
	h := l.hidden()
	l.rmsnorm(-1, h, x, "norm.weight")
	w := l.weight(l.m.lmHead())
	if l.s.Kind == plan.DecodeGreedy {
		l.certifiedHead(h, w)
		return
	}
	// LM head of the last logical row only: the next token's distribution.
	V := int64(c.VocabSize)
	logits := l.tensor("logits", ir.Output, ir.F32, 1, V)
	l.g.Ops = append(l.g.Ops, &ir.Op{Kind: ir.MatMul, Layer: -1, Params: params(ints{"k": int64(c.HiddenSize), "n": V, ir.RowsParam: 1}),
		Operands: []ir.Operand{of(logits), {Tensor: h.ID, Dyn: ir.SlotRef(ir.ParamLast), DynStride: int64(c.HiddenSize)}, of(w)}})
}

// logits lowers the teacher-forcing pass: the LM head over n stored hidden rows from row0.
func (l *lowering) logits() {
	c := l.c
	h := l.hidden()
	y := l.tensor("logits_rows", ir.Output, ir.F32, int64(l.s.Tokens), int64(c.VocabSize))
	w := l.weight(l.m.lmHead())
	l.g.Ops = append(l.g.Ops, &ir.Op{Kind: ir.MatMul, Layer: -1, Rows: ir.SlotRef(ir.ParamN),
		Params:   params(ints{"k": int64(c.HiddenSize), "n": int64(c.VocabSize)}),
		Operands: []ir.Operand{of(y), {Tensor: h.ID, Dyn: ir.SlotRef(ir.ParamRow0), DynStride: int64(c.HiddenSize)}, of(w)}})
}

// gatedDeltaNet lowers a linear-attention mixer and its residual (SPEC §3).
func (l *lowering) gatedDeltaNet(i int, x, xn *ir.Tensor) {
	c := l.c
	p := fmt.Sprintf("layers.%d.linear_attn.", i)
	HK, HV, DK, DV := c.LinearNumKeyHeads, c.LinearNumValueHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim
	QKV, VD, K := c.LinearQKVDim(), c.LinearValueDim(), c.LinearConvKernelDim

	mixed := l.act("gdn_mixed", ir.F32, QKV)
	z := l.act("gdn_z", ir.F32, VD)
	b := l.act("gdn_b", ir.F32, HV)
	a := l.act("gdn_a", ir.F32, HV)
	l.matmul(i, mixed, xn, l.weight(p+"in_proj_qkv.weight"))
	l.matmul(i, z, xn, l.weight(p+"in_proj_z.weight"))
	l.matmul(i, b, xn, l.weight(p+"in_proj_b.weight"))
	l.matmul(i, a, xn, l.weight(p+"in_proj_a.weight"))

	conv := l.tensor(fmt.Sprintf("state.%d.conv", i), ir.State, ir.F32, int64(K-1), int64(QKV))
	cv := l.act("gdn_conv", ir.F32, QKV)
	l.op(ir.CausalConv1dSiLU, i, params(ints{"channels": int64(QKV), "kernel": int64(K)}),
		of(cv), of(mixed), of(l.weight(p+"conv1d.weight")), of(conv))

	beta := l.act("gdn_beta", ir.F32, HV)
	g := l.act("gdn_g", ir.F32, HV)
	l.op(ir.GDNGates, i, params(ints{"heads": int64(HV)}),
		of(beta), of(g), of(b), of(a), of(l.weight(p+"A_log")), of(l.weight(p+"dt_bias")))

	// q and k are l2-normalized per head; q also takes the 1/sqrt(d_k) scale.
	l2 := ints{"row_stride": int64(QKV), "heads": int64(HK), "dim": int64(DK)}
	l.op(ir.L2NormHeads, i, params(l2, "eps", 1e-6, "scale", 1/math.Sqrt(float64(DK))), at(cv, 0))
	l.op(ir.L2NormHeads, i, params(maps.Clone(l2), "eps", 1e-6, "scale", 1.0), at(cv, HK*DK))

	state := l.tensor(fmt.Sprintf("state.%d.gdn", i), ir.State, ir.F32, int64(HV), int64(DK), int64(DV))
	o := l.act("gdn_o", ir.F32, VD)
	delta := params(ints{"row_stride": int64(QKV), "k_heads": int64(HK), "v_heads": int64(HV),
		"k_dim": int64(DK), "v_dim": int64(DV)})
	kind := ir.GatedDeltaRecurrent
	if l.s.Kind == plan.Prefill {
		kind = ir.GatedDeltaChunked
		delta.SetInt("chunk", int64(l.s.Chunk))
	}
	l.op(kind, i, delta, of(o), at(cv, 0), at(cv, HK*DK), at(cv, 2*HK*DK), of(beta), of(g), of(state))

	on := l.act("gdn_normed", ir.F32, VD)
	l.op(ir.GatedRMSNorm, i, params(ints{"heads": int64(HV), "dim": int64(DV)}, "eps", c.RMSNormEps),
		of(on), of(o), of(z), of(l.weight(p+"norm.weight")))
	m := l.act("mixer_out", ir.F32, c.HiddenSize)
	l.matmul(i, m, on, l.weight(p+"out_proj.weight"))
	l.op(ir.Add, i, params(ints{"width": int64(c.HiddenSize)}), of(x), of(m))
}

// attention lowers a gated full-attention mixer and its residual (SPEC §2.3).
func (l *lowering) attention(i int, x, xn *ir.Tensor) {
	c := l.c
	p := fmt.Sprintf("layers.%d.self_attn.", i)
	HQ, HKV, D := c.NumAttentionHeads, c.NumKeyValueHeads, c.HeadDim

	qg := l.act("attn_qg", ir.F32, 2*HQ*D)
	k := l.act("attn_k", ir.F32, HKV*D)
	v := l.act("attn_v", ir.F32, HKV*D)
	l.matmul(i, qg, xn, l.weight(p+"q_proj.weight"))
	l.matmul(i, k, xn, l.weight(p+"k_proj.weight"))
	l.matmul(i, v, xn, l.weight(p+"v_proj.weight"))

	// Per-head 1+w norms: q from the first half of each head's [q | gate] slice.
	q := l.act("attn_q", ir.F32, HQ*D)
	iD := int64(D)
	l.op(ir.RMSNorm, i, params(ints{"width": iD, "heads": int64(HQ), "x_stride": 2 * iD, "y_stride": iD},
		"eps", c.RMSNormEps, "one_plus", true), of(q), of(qg), of(l.weight(p+"q_norm.weight")))
	l.op(ir.RMSNorm, i, params(ints{"width": iD, "heads": int64(HKV), "x_stride": iD, "y_stride": iD},
		"eps", c.RMSNormEps, "one_plus", true), of(k), of(k), of(l.weight(p+"k_norm.weight")))

	rot := int64(c.RotaryDim())
	l.op(ir.RoPE, i, params(ints{"row_stride": int64(HQ * D), "heads": int64(HQ), "head_dim": iD,
		"rot_dim": rot}, "theta", c.RopeTheta), of(q))
	l.op(ir.RoPE, i, params(ints{"row_stride": int64(HKV * D), "heads": int64(HKV), "head_dim": iD,
		"rot_dim": rot}, "theta", c.RopeTheta), of(k))

	capacity := int64(l.s.ContextTokens)
	kc := l.tensor(fmt.Sprintf("kv.%d.k", i), ir.KV, l.s.KVDType, capacity, int64(HKV), int64(D))
	vc := l.tensor(fmt.Sprintf("kv.%d.v", i), ir.KV, l.s.KVDType, capacity, int64(HKV), int64(D))
	width := int64(HKV * D)
	kvBF16 := l.s.KVDType == ir.BF16
	l.op(ir.KVAppend, i, params(ints{"width": width, "capacity": capacity}, "kv_bf16", kvBF16), of(kc), of(vc), of(k), of(v))

	o := l.act("attn_o", ir.F32, HQ*D)
	l.op(ir.Attention, i, params(ints{"q_heads": int64(HQ), "kv_heads": int64(HKV), "head_dim": iD,
		"capacity": capacity, "width": width}, "scale", 1/math.Sqrt(float64(D)), "kv_bf16", kvBF16), of(o), of(q), of(kc), of(vc))
	l.op(ir.AttnOutputGate, i, params(ints{"heads": int64(HQ), "head_dim": iD}), of(o), of(qg))
	m := l.act("mixer_out", ir.F32, c.HiddenSize)
	l.matmul(i, m, o, l.weight(p+"o_proj.weight"))
	l.op(ir.Add, i, params(ints{"width": int64(c.HiddenSize)}), of(x), of(m))
}

// moe lowers the sparse MoE block with its shared expert and residual (SPEC §4).
func (l *lowering) moe(i int, x, xn *ir.Tensor) {
	c := l.c
	p := fmt.Sprintf("layers.%d.mlp.", i)
	E, TopK, H, S := c.NumExperts, c.NumExpertsPerTok, c.HiddenSize, c.SharedExpertIntermediateSize

	rl := l.act("router_logits", ir.F32, E)
	l.matmul(i, rl, xn, l.weight(p+"gate.weight"))
	ids := l.act("router_ids", ir.I32, TopK)
	w := l.act("router_weights", ir.F32, TopK)
	l.op(ir.RouterTopK, i, params(ints{"experts": int64(E), "k": int64(TopK)}), of(ids), of(w), of(rl))

	moe := ints{"experts": int64(E), "hidden": int64(H), "inter": int64(c.MoeIntermediateSize), "k": int64(TopK)}
	act := l.act("moe_act", ir.F32, TopK*c.MoeIntermediateSize)
	l.op(ir.MoEGateUp, i, params(moe), of(act), of(xn), of(ids), of(l.weight(p+"experts.gate_up_proj")))
	routed := l.act("moe_routed", ir.F32, H)
	l.op(ir.MoEDown, i, params(maps.Clone(moe)), of(routed), of(act), of(ids), of(w), of(l.weight(p+"experts.down_proj")))

	sg := l.act("shared_gate", ir.F32, S)
	su := l.act("shared_up", ir.F32, S)
	l.matmul(i, sg, xn, l.weight(p+"shared_expert.gate_proj.weight"))
	l.matmul(i, su, xn, l.weight(p+"shared_expert.up_proj.weight"))
	sa := l.act("shared_act", ir.F32, S)
	l.op(ir.SiLUMul, i, params(ints{"width": int64(S)}), of(sa), of(sg), of(su))
	sd := l.act("shared_out", ir.F32, H)
	l.matmul(i, sd, sa, l.weight(p+"shared_expert.down_proj.weight"))
	gl := l.act("shared_gate_logit", ir.F32, 1)
	l.matmul(i, gl, xn, l.weight(p+"shared_expert_gate.weight"))
	l.op(ir.SharedExpertCombine, i, params(ints{"hidden": int64(H)}), of(x), of(routed), of(sd), of(gl))
}
