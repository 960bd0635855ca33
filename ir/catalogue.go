package ir

import (
	"fmt"
	"math"
)

// Kind names an operation of the model (SPEC §2–§5) at kernel granularity.
type Kind string

const (
	Embedding           Kind = "embedding"             // token rows of embed_tokens
	RMSNorm             Kind = "rmsnorm"               // SPEC §2.2, 1+w or plain w
	MatMul              Kind = "matmul"                // x · Wᵀ with BF16 weights
	CausalConv1dSiLU    Kind = "causal_conv1d_silu"    // SPEC §3 step 2
	GDNGates            Kind = "gdn_gates"             // SPEC §3 step 4
	L2NormHeads         Kind = "l2norm_heads"          // SPEC §3 step 5
	GatedDeltaChunked   Kind = "gated_delta_chunked"   // SPEC §3.1, prefill
	GatedDeltaRecurrent Kind = "gated_delta_recurrent" // SPEC §3 step 7, decode
	GatedRMSNorm        Kind = "gated_rmsnorm"         // SPEC §2.2, linear_attn.norm
	RoPE                Kind = "rope"                  // SPEC §2.4
	KVAppend            Kind = "kv_append"             // SPEC §2.3 step 4
	Attention           Kind = "attention"             // SPEC §2.3 step 5
	AttnOutputGate      Kind = "attn_output_gate"      // SPEC §2.3 step 6
	RouterTopK          Kind = "router_topk"           // SPEC §4 step 1
	MoEGateUp           Kind = "moe_gate_up"           // SPEC §4 step 2: silu(gate)·up of each routed expert
	MoEDown             Kind = "moe_down"              // SPEC §4 step 2: down projections, weighted sum
	SiLUMul             Kind = "silu_mul"              // shared expert activation
	Add                 Kind = "add"                   // residual
	SharedExpertCombine Kind = "shared_expert_combine" // SPEC §4 steps 3–4
)

// Weight generation: no step's graph uses it; every plan lists one kernel
// per weight dtype and runtime.SyntheticWeights launches them.
const (
	FillUniform Kind = "fill_uniform" // counter-based uniform values (kernels.FillUniform)
)

// Sampling on the device: no step's graph uses it; every plan has a phase
// "sample" whose one launch draws the next token from the logits and writes
// it into the tokens input buffer, where the next decode step reads it.
const (
	Sample Kind = "sample" // next token and its logprob (kernels.Sample)
)

// Access says how an op touches an operand.
type Access string

const (
	Read      Access = "r"
	Write     Access = "w"
	ReadWrite Access = "rw"
)

// AnyFloat in a signature accepts f32 or bf16: the KV cache is f32 unless a
// GPU plan asks for bf16. The kernel's flag (kv_bf16, or bf16) says which,
// since one compiled kernel handles one element type (AnyFloatIsBF16).
const AnyFloat DType = "float"

// AnyFloatIsBF16 reports whether a kernel with these parameters takes its
// AnyFloat operands as bf16.
func AnyFloatIsBF16(params map[string]float64) bool {
	return params["kv_bf16"] == 1 || params["bf16"] == 1
}

// OperandSpec is one argument of an op kind.
type OperandSpec struct {
	Name   string
	DType  DType
	Access Access
	// Extent is the number of elements the op may touch from the operand's
	// start, given the op's parameters and row count.
	Extent func(p map[string]float64, rows int64) int64
}

// Signature describes an op kind: operands, required parameters and the
// dynamic scalars it reads besides its row count.
type Signature struct {
	Operands []OperandSpec
	Params   []string
	Dyn      []string
	// Check enforces relations between parameters (nil: none).
	Check func(p map[string]float64) error
}

func perRow(keys ...string) func(map[string]float64, int64) int64 {
	return func(p map[string]float64, rows int64) int64 {
		n := rows
		for _, k := range keys {
			n *= int64(p[k])
		}
		return n
	}
}

func fixed(keys ...string) func(map[string]float64, int64) int64 {
	return func(p map[string]float64, _ int64) int64 { return perRow(keys...)(p, 1) }
}

// strided is the extent of rows laid out with a row stride: the last row
// starts at (rows-1)·stride and spans width.
func strided(stride, width string) func(map[string]float64, int64) int64 {
	return func(p map[string]float64, rows int64) int64 {
		if rows == 0 {
			return 0
		}
		return (rows-1)*int64(p[stride]) + int64(p[width])
	}
}

// cache is the extent of a KV cache: its full capacity.
func cache(p map[string]float64, _ int64) int64 { return int64(p["capacity"] * p["width"]) }

// Catalogue lists every op kind's signature; the verifier, the planner and
// every backend agree through it.
var Catalogue = map[Kind]Signature{
	Embedding: {
		Operands: []OperandSpec{
			{"x", F32, Write, perRow("hidden")},
			{"table", BF16, Read, fixed("vocab", "hidden")},
			{"ids", I32, Read, perRow()},
		},
		Params: []string{"hidden", "vocab"},
	},
	RMSNorm: {
		// rows = tokens × heads_per_row vectors of width; x and y strided.
		Operands: []OperandSpec{
			{"y", F32, Write, func(p map[string]float64, rows int64) int64 {
				return strided("y_stride", "width")(p, rows*int64(p["heads"]))
			}},
			{"x", F32, Read, func(p map[string]float64, rows int64) int64 {
				return strided("x_stride", "width")(p, rows*int64(p["heads"]))
			}},
			{"w", F32, Read, fixed("width")},
		},
		Params: []string{"width", "heads", "x_stride", "y_stride", "eps", "one_plus"},
	},
	MatMul: {
		Operands: []OperandSpec{
			{"y", F32, Write, perRow("n")},
			{"x", F32, Read, perRow("k")},
			{"w", BF16, Read, fixed("n", "k")},
		},
		Params: []string{"k", "n"},
	},
	CausalConv1dSiLU: {
		Operands: []OperandSpec{
			{"out", F32, Write, perRow("channels")},
			{"in", F32, Read, perRow("channels")},
			{"w", F32, Read, fixed("channels", "kernel")},
			{"state", F32, ReadWrite, func(p map[string]float64, _ int64) int64 {
				return int64(p["channels"] * (p["kernel"] - 1))
			}},
		},
		Params: []string{"channels", "kernel"},
	},
	GDNGates: {
		Operands: []OperandSpec{
			{"beta", F32, Write, perRow("heads")},
			{"g", F32, Write, perRow("heads")},
			{"b", F32, Read, perRow("heads")},
			{"a", F32, Read, perRow("heads")},
			{"a_log", F32, Read, fixed("heads")},
			{"dt_bias", F32, Read, fixed("heads")},
		},
		Params: []string{"heads"},
	},
	L2NormHeads: {
		Operands: []OperandSpec{
			{"x", F32, ReadWrite, func(p map[string]float64, rows int64) int64 {
				return strided("row_stride", "span")(map[string]float64{
					"row_stride": p["row_stride"], "span": p["heads"] * p["dim"]}, rows)
			}},
		},
		Params: []string{"row_stride", "heads", "dim", "eps", "scale"},
	},
	GatedDeltaChunked:   deltaSignature(true),
	GatedDeltaRecurrent: deltaSignature(false),
	GatedRMSNorm: {
		Operands: []OperandSpec{
			{"y", F32, Write, perRow("heads", "dim")},
			{"o", F32, Read, perRow("heads", "dim")},
			{"z", F32, Read, perRow("heads", "dim")},
			{"w", F32, Read, fixed("dim")},
		},
		Params: []string{"heads", "dim", "eps"},
	},
	RoPE: {
		Operands: []OperandSpec{
			{"x", F32, ReadWrite, func(p map[string]float64, rows int64) int64 {
				return strided("row_stride", "span")(map[string]float64{
					"row_stride": p["row_stride"], "span": p["heads"] * p["head_dim"]}, rows)
			}},
		},
		Params: []string{"row_stride", "heads", "head_dim", "rot_dim", "theta"},
		Dyn:    []string{"pos"},
		Check: func(p map[string]float64) error {
			if p["rot_dim"] > p["head_dim"] || int(p["rot_dim"])%2 != 0 {
				return fmt.Errorf("rot_dim %g must be even and at most head_dim %g", p["rot_dim"], p["head_dim"])
			}
			return nil
		},
	},
	KVAppend: {
		Operands: []OperandSpec{
			{"k_cache", AnyFloat, ReadWrite, cache},
			{"v_cache", AnyFloat, ReadWrite, cache},
			{"k", F32, Read, perRow("width")},
			{"v", F32, Read, perRow("width")},
		},
		Params: []string{"width", "capacity", "kv_bf16"},
		Dyn:    []string{"pos"},
	},
	Attention: {
		Operands: []OperandSpec{
			{"out", F32, Write, perRow("q_heads", "head_dim")},
			{"q", F32, Read, perRow("q_heads", "head_dim")},
			{"k_cache", AnyFloat, Read, cache},
			{"v_cache", AnyFloat, Read, cache},
		},
		Params: []string{"q_heads", "kv_heads", "head_dim", "scale", "capacity", "width", "kv_bf16"},
		Dyn:    []string{"pos"},
		Check: func(p map[string]float64) error {
			if int(p["q_heads"])%int(p["kv_heads"]) != 0 {
				return fmt.Errorf("q_heads %g is not a multiple of kv_heads %g", p["q_heads"], p["kv_heads"])
			}
			if p["width"] != p["kv_heads"]*p["head_dim"] {
				return fmt.Errorf("width %g is not kv_heads × head_dim", p["width"])
			}
			return nil
		},
	},
	AttnOutputGate: {
		Operands: []OperandSpec{
			{"o", F32, ReadWrite, perRow("heads", "head_dim")},
			{"qg", F32, Read, func(p map[string]float64, rows int64) int64 { return rows * 2 * int64(p["heads"]*p["head_dim"]) }},
		},
		Params: []string{"heads", "head_dim"},
	},
	RouterTopK: {
		Operands: []OperandSpec{
			{"ids", I32, Write, perRow("k")},
			{"weights", F32, Write, perRow("k")},
			{"logits", F32, Read, perRow("experts")},
		},
		Params: []string{"experts", "k"},
		Check:  topK,
	},
	// The routed experts run as two launches so that both spread over many
	// blocks: act[t][s] = silu(gate_e·x[t]) ⊙ up_e·x[t] for e = ids[t][s],
	// then y[t] = Σ_s weights[t][s]·down_e·act[t][s] (slots in order). An
	// expert id outside [0, experts) contributes zeros.
	MoEGateUp: {
		Operands: []OperandSpec{
			{"act", F32, Write, perRow("k", "inter")},
			{"x", F32, Read, perRow("hidden")},
			{"ids", I32, Read, perRow("k")},
			{"gate_up", BF16, Read, func(p map[string]float64, _ int64) int64 { return int64(p["experts"] * 2 * p["inter"] * p["hidden"]) }},
		},
		Params: []string{"experts", "hidden", "inter", "k"},
		Check:  topK,
	},
	MoEDown: {
		Operands: []OperandSpec{
			{"y", F32, Write, perRow("hidden")},
			{"act", F32, Read, perRow("k", "inter")},
			{"ids", I32, Read, perRow("k")},
			{"weights", F32, Read, perRow("k")},
			{"down", BF16, Read, fixed("experts", "hidden", "inter")},
		},
		Params: []string{"experts", "hidden", "inter", "k"},
		Check:  topK,
	},
	SiLUMul: {
		Operands: []OperandSpec{
			{"out", F32, Write, perRow("width")},
			{"gate", F32, Read, perRow("width")},
			{"up", F32, Read, perRow("width")},
		},
		Params: []string{"width"},
	},
	Add: {
		Operands: []OperandSpec{
			{"x", F32, ReadWrite, perRow("width")},
			{"y", F32, Read, perRow("width")},
		},
		Params: []string{"width"},
	},
	SharedExpertCombine: {
		Operands: []OperandSpec{
			{"x", F32, ReadWrite, perRow("hidden")},
			{"routed", F32, Read, perRow("hidden")},
			{"shared", F32, Read, perRow("hidden")},
			{"gate", F32, Read, perRow()},
		},
		Params: []string{"hidden"},
	},

	// fill_uniform: out[i] = kernels.FillUniform(seed, key, i, lo, scale)
	// for i < rows (the element count), stored as bf16 (round to nearest
	// even) when the bf16 flag is 1, as f32 otherwise. Seed, key, lo and
	// scale are dynamic: the fill slots of the parameter block (the CPU
	// backend takes them from dyn under the same names).
	FillUniform: {
		Operands: []OperandSpec{
			{"out", AnyFloat, Write, perRow()},
		},
		Params: []string{"bf16"},
		Dyn:    []string{"fill_seed_lo", "fill_seed_hi", "fill_key_lo", "fill_key_hi", "fill_lo", "fill_scale"},
	},

	// sample: one row of vocab logits in; the chosen id out to tokens[0]
	// (the next decode step's input) and to out[0], its log-probability
	// under softmax(logits) over ids below the vocabulary limit (as float
	// bits) to out[1]. Greedy when the temperature is 0, else a Gumbel-max
	// draw restricted by top_k, top_p and min_p (kernels.Sample). The
	// sampling values are dynamic: the sampling slots of the parameter block
	// (the CPU backend takes them from dyn under the same names).
	Sample: {
		Operands: []OperandSpec{
			{"logits", F32, Read, fixed("vocab")},
			{"tokens", I32, Write, func(map[string]float64, int64) int64 { return 1 }},
			{"out", I32, Write, func(map[string]float64, int64) int64 { return 2 }},
		},
		Params: []string{"vocab"},
		Dyn:    []string{"seed_lo", "seed_hi", "step", "temperature_bits", "top_p_bits", "min_p_bits", "top_k", "vocab_limit"},
	},
}

func topK(p map[string]float64) error {
	if p["k"] > p["experts"] {
		return fmt.Errorf("k %g exceeds experts %g", p["k"], p["experts"])
	}
	return nil
}

// realParams are the parameters that are not integer extents.
var realParams = map[string]bool{"eps": true, "scale": true, "theta": true}

// flagParams are 0/1 switches of a kernel variant.
var flagParams = map[string]bool{"one_plus": true, "kv_bf16": true, "bf16": true}

// checkParams requires extents to be integers ≥ 1 (flags 0 or 1) and
// real parameters finite and positive, then the kind's own relations.
func (s Signature) checkParams(p map[string]float64) error {
	for _, name := range s.Params {
		v := p[name]
		switch {
		case math.IsNaN(v) || math.IsInf(v, 0):
			return fmt.Errorf("parameter %s is %g", name, v)
		case realParams[name]:
			if v <= 0 {
				return fmt.Errorf("parameter %s is %g, want > 0", name, v)
			}
		case flagParams[name]:
			if v != 0 && v != 1 {
				return fmt.Errorf("parameter %s is %g, want 0 or 1", name, v)
			}
		default:
			if v != math.Trunc(v) || v < 1 || v > 1<<31 {
				return fmt.Errorf("parameter %s is %g, want an integer from 1 to 2^31", name, v)
			}
		}
	}
	if r, ok := p["rows"]; ok && (r != math.Trunc(r) || r < 1 || r > 1<<31) {
		return fmt.Errorf("parameter rows is %g, want an integer from 1 to 2^31", r)
	}
	if s.Check != nil {
		return s.Check(p)
	}
	return nil
}

func deltaSignature(chunked bool) Signature {
	qkv := func(p map[string]float64, rows int64) int64 {
		return strided("row_stride", "span")(map[string]float64{
			"row_stride": p["row_stride"], "span": p["v_heads"] * p["v_dim"]}, rows)
	}
	qk := func(p map[string]float64, rows int64) int64 {
		return strided("row_stride", "span")(map[string]float64{
			"row_stride": p["row_stride"], "span": p["k_heads"] * p["k_dim"]}, rows)
	}
	s := Signature{
		Operands: []OperandSpec{
			{"out", F32, Write, perRow("v_heads", "v_dim")},
			{"q", F32, Read, qk},
			{"k", F32, Read, qk},
			{"v", F32, Read, qkv},
			{"beta", F32, Read, perRow("v_heads")},
			{"g", F32, Read, perRow("v_heads")},
			{"state", F32, ReadWrite, fixed("v_heads", "k_dim", "v_dim")},
		},
		Params: []string{"row_stride", "k_heads", "v_heads", "k_dim", "v_dim"},
		Check: func(p map[string]float64) error {
			if int(p["v_heads"])%int(p["k_heads"]) != 0 {
				return fmt.Errorf("v_heads %g is not a multiple of k_heads %g", p["v_heads"], p["k_heads"])
			}
			return nil
		},
	}
	if chunked {
		s.Params = append(s.Params, "chunk")
	}
	return s
}

// The device-resident parameter block: int32 slots that GPU kernels read at
// run time instead of taking the values as launch arguments, so a captured
// decode graph stays valid while they change. Floats are stored as their
// IEEE-754 bits. Every GPU kernel takes a pointer to the block as its last
// argument (codegen's ABI); families read the slots their signature's Dyn
// names, and the sampling kernels read the sampling slots.
const (
	ParamPos = 0 // "pos": absolute position of the launch's row 0
	// The sampling slots, read by sample (kernels.Sample; the dynamic
	// scalar names in quotes are the ones the CPU backend reads from dyn).
	ParamSeedLo      = 1 // "seed_lo": sampling seed, low 32 bits
	ParamSeedHi      = 2 // "seed_hi": sampling seed, high 32 bits
	ParamStep        = 3 // "step": sampling step: draws differ per step under one seed
	ParamTemperature = 4 // "temperature_bits": float bits; 0 means greedy
	ParamTopP        = 5 // "top_p_bits": float bits; a nucleus cut when in (0, 1)
	ParamMinP        = 6 // "min_p_bits": float bits; a cut when in (0, 1]
	ParamTopK        = 7 // "top_k": 0 means no top-k limit
	// The fill slots, read by fill_uniform (runtime.SyntheticWeights sets
	// them before each weight buffer's fill): value i of the buffer is
	// kernels.FillUniform(seed, key, i, lo, scale).
	ParamFillSeedLo = 8  // "fill_seed_lo": generator seed, low 32 bits
	ParamFillSeedHi = 9  // "fill_seed_hi": generator seed, high 32 bits
	ParamFillKeyLo  = 10 // "fill_key_lo": buffer key (kernels.FillKey), low 32 bits
	ParamFillKeyHi  = 11 // "fill_key_hi": buffer key, high 32 bits
	ParamFillLo     = 12 // "fill_lo": float bits of the lower bound
	ParamFillScale  = 13 // "fill_scale": float bits of hi - lo
	// ParamVocabLimit ("vocab_limit", read by sample): ids at or above it
	// are never sampled nor counted in the logprob (the vocabulary's
	// padding rows); 0 means no limit.
	ParamVocabLimit = 14
	ParamSlots      = 16
)

// ParamSlot maps a dynamic scalar read by kernels to its slot.
var ParamSlot = map[string]int{
	"pos":          ParamPos,
	"fill_seed_lo": ParamFillSeedLo,
	"fill_seed_hi": ParamFillSeedHi,
	"fill_key_lo":  ParamFillKeyLo,
	"fill_key_hi":  ParamFillKeyHi,
	"fill_lo":      ParamFillLo,
	"fill_scale":   ParamFillScale,

	"seed_lo":          ParamSeedLo,
	"seed_hi":          ParamSeedHi,
	"step":             ParamStep,
	"temperature_bits": ParamTemperature,
	"top_p_bits":       ParamTopP,
	"min_p_bits":       ParamMinP,
	"top_k":            ParamTopK,
	"vocab_limit":      ParamVocabLimit,
}
