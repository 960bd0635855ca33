package arch

import "fmt"

// DType is a tensor element type, spelled as safetensors headers spell it.
type DType string

const (
	BF16 DType = "BF16"
	F16  DType = "F16"
	F32  DType = "F32"
	I32  DType = "I32"
	I64  DType = "I64"
)

// Size is the element size in bytes, 0 for an unknown dtype.
func (d DType) Size() int {
	switch d {
	case BF16, F16:
		return 2
	case F32, I32:
		return 4
	case I64:
		return 8
	}
	return 0
}

// Name prefixes of the text model's tensors. Qwen ships the multimodal
// layout (language model under model.language_model., lm_head at the root);
// a text-only export puts the language model under model.
const (
	NestedPrefix = "model.language_model."
	FlatPrefix   = "model."
	LMHead       = "lm_head.weight"
)

// IgnoredPrefixes name tensors the text model never reads (vision tower, MTP head).
var IgnoredPrefixes = []string{"model.visual.", "mtp.", "visual."}

// TensorSpec is one tensor the text model needs: its full name, the dtypes
// accepted for it (the first is the one Qwen ships and synth writes) and its shape.
type TensorSpec struct {
	Name   string
	DTypes []DType
	Shape  []int64
}

// Elements is the product of the shape.
func (t TensorSpec) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

var (
	weight = []DType{BF16}
	// Small per-channel parameters some recipes keep in fp32 (SPEC §8.2).
	param = []DType{BF16, F32}
)

// Tensors lists every tensor of the text model in load order, names under
// prefix (NestedPrefix or FlatPrefix); lm_head is at the root unless tied.
func (c *Config) Tensors(prefix string) []TensorSpec {
	H := int64(c.HiddenSize)
	var out []TensorSpec
	add := func(name string, dt []DType, shape ...int64) {
		out = append(out, TensorSpec{Name: name, DTypes: dt, Shape: shape})
	}
	add(prefix+"embed_tokens.weight", weight, int64(c.VocabSize), H)
	for i := 0; i < c.NumHiddenLayers; i++ {
		for _, t := range c.LayerTensors(i) {
			t.Name = prefix + t.Name
			out = append(out, t)
		}
	}
	add(prefix+"norm.weight", param, H)
	if !c.TieWordEmbeddings {
		add(LMHead, weight, int64(c.VocabSize), H)
	}
	return out
}

// LayerTensors lists layer i's tensors, names relative to the model prefix.
func (c *Config) LayerTensors(i int) []TensorSpec {
	H := int64(c.HiddenSize)
	p := fmt.Sprintf("layers.%d.", i)
	var out []TensorSpec
	add := func(name string, dt []DType, shape ...int64) {
		out = append(out, TensorSpec{Name: p + name, DTypes: dt, Shape: shape})
	}
	add("input_layernorm.weight", param, H)
	add("post_attention_layernorm.weight", param, H)
	if c.IsFullAttention(i) {
		// SPEC §2.3: q_proj carries query and gate interleaved per head.
		hd := int64(c.HeadDim)
		add("self_attn.q_proj.weight", weight, 2*int64(c.NumAttentionHeads)*hd, H)
		add("self_attn.k_proj.weight", weight, int64(c.NumKeyValueHeads)*hd, H)
		add("self_attn.v_proj.weight", weight, int64(c.NumKeyValueHeads)*hd, H)
		add("self_attn.o_proj.weight", weight, H, int64(c.NumAttentionHeads)*hd)
		add("self_attn.q_norm.weight", param, hd)
		add("self_attn.k_norm.weight", param, hd)
	} else {
		// SPEC §3.
		hv := int64(c.LinearNumValueHeads)
		add("linear_attn.in_proj_qkv.weight", weight, int64(c.LinearQKVDim()), H)
		add("linear_attn.in_proj_z.weight", weight, int64(c.LinearValueDim()), H)
		add("linear_attn.in_proj_b.weight", weight, hv, H)
		add("linear_attn.in_proj_a.weight", weight, hv, H)
		add("linear_attn.conv1d.weight", param, int64(c.LinearQKVDim()), 1, int64(c.LinearConvKernelDim))
		add("linear_attn.dt_bias", param, hv)
		add("linear_attn.A_log", param, hv)
		add("linear_attn.norm.weight", param, int64(c.LinearValueHeadDim))
		add("linear_attn.out_proj.weight", weight, H, int64(c.LinearValueDim()))
	}
	// SPEC §4: fused experts, gate half first in gate_up_proj.
	E, I, S := int64(c.NumExperts), int64(c.MoeIntermediateSize), int64(c.SharedExpertIntermediateSize)
	add("mlp.gate.weight", weight, E, H)
	add("mlp.experts.gate_up_proj", weight, E, 2*I, H)
	add("mlp.experts.down_proj", weight, E, H, I)
	add("mlp.shared_expert.gate_proj.weight", weight, S, H)
	add("mlp.shared_expert.up_proj.weight", weight, S, H)
	add("mlp.shared_expert.down_proj.weight", weight, H, S)
	add("mlp.shared_expert_gate.weight", weight, 1, H)
	return out
}

// Ignored reports whether a checkpoint tensor is outside the text model.
func Ignored(name string) bool {
	for _, p := range IgnoredPrefixes {
		if len(name) >= len(p) && name[:len(p)] == p {
			return true
		}
	}
	return false
}
