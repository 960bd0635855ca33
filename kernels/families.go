package kernels

import (
	"fmt"
	"math"

	"github.com/aimaproject/aimac/ir"
)

// Families declares every kernel family once: operands, typed parameters
// and their relations, the parameter-block slots it reads, its launch rule
// on a GPU target, its Go reference (below, bound by operand name) and its
// template (<kind>.tmpl). The verifier, the planner, codegen and the CPU
// backend all read this table; adding a family is one entry here, one
// template and one reference.
var Families = ir.Catalogue{}

func init() {
	for _, f := range append(append(append(append(append(append(families(), gemvFamilies()...), gemmFamilies()...), moeDecodeFamilies()...), lmHeadFamilies()...), gdnChunkFamilies()...), moeDecodeRouteGateUp(), moeDecodeGateUpRanked(), gdnDecodeStep(), gdnDecodeSplit(), gdnDecodePeer(), gdnDecodeOut(), decodePersistent()) {
		if f.Template == "" {
			f.Template = string(f.Kind) + ".tmpl"
		}
		Families[f.Kind] = f
	}
}

// Per-row launches: one block per row (per row and head for the per-head
// families), one warp per output column for the matrix products. Kernels
// guard rows past the logical n.
func perRowLaunch(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
	return c.Blocks(rows, 1, 1)
}

func perHeadLaunch(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
	return c.Blocks(rows*p.Int("heads"), 1, 1)
}

// warpPerHeadLaunch: one warp per (row, head) vector, a block's warps on
// consecutive vectors.
func warpPerHeadLaunch(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
	return c.Blocks(ir.Ceil(max(rows*p.Int("heads"), 1), c.Warps()), 1, 1)
}

func matmulLaunch(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
	return c.Blocks(ir.Ceil(p.Int("n"), c.Warps()), rows, 1)
}

func families() []*ir.Family {
	return []*ir.Family{
		{
			Kind: ir.Embedding,
			Operands: []ir.OperandSpec{
				{Name: "x", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("hidden")},
				{Name: "table", DType: ir.BF16, Access: ir.Read, Extent: ir.Fixed("vocab", "hidden")},
				{Name: "ids", DType: ir.I32, Access: ir.Read, Extent: ir.PerRow()},
			},
			Params: ir.Ints("hidden", "vocab"),
			Launch: perRowLaunch,
			Reference: func(a *ir.Args) error {
				ids := a.I32("ids")[:a.N]
				for t, id := range ids {
					if id < 0 || int(id) >= a.Int("vocab") {
						return fmt.Errorf("token %d at row %d is outside the vocabulary of %d", id, t, a.Int("vocab"))
					}
				}
				Embedding(a.F32("x"), a.BF16("table"), ids, a.N, a.Int("hidden"))
				return nil
			},
		},
		{
			// rows = tokens × heads vectors of width; x and y strided.
			Kind: ir.RMSNorm,
			Operands: []ir.OperandSpec{
				{Name: "y", DType: ir.F32, Access: ir.Write, Extent: headRows("y_stride")},
				{Name: "x", DType: ir.F32, Access: ir.Read, Extent: headRows("x_stride")},
				{Name: "w", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("width")},
			},
			Params: cat(ir.Ints("width", "heads", "x_stride", "y_stride"), ir.Reals("eps"), ir.Flags("one_plus")),
			Launch: perHeadLaunch,
			Reference: func(a *ir.Args) error {
				RMSNorm(a.F32("y"), a.Int("y_stride"), a.F32("x"), a.Int("x_stride"), a.F32("w"), a.N*a.Int("heads"), a.Int("width"), a.Real32("eps"), a.Flag("one_plus"))
				return nil
			},
		},
		{
			Kind: ir.MatMul,
			Operands: []ir.OperandSpec{
				{Name: "y", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("n")},
				{Name: "x", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("k")},
				{Name: "w", DType: ir.BF16, Access: ir.Read, Extent: ir.Fixed("n", "k")},
			},
			Params: ir.Ints("k", "n"),
			Launch: matmulLaunch,
			Reference: func(a *ir.Args) error {
				MatMul(a.F32("y"), a.F32("x"), a.BF16("w"), a.N, a.Int("k"), a.Int("n"))
				return nil
			},
		},
		// matmul_add: a matmul whose output only feeds the residual add
		// that follows it (the fusion pass's rule), y += x·Wᵀ. Its
		// reference is the pair's: the matmul into a scratch row, then add.
		{
			Kind: ir.MatMulAdd,
			Operands: []ir.OperandSpec{
				{Name: "y", DType: ir.F32, Access: ir.ReadWrite, Extent: ir.PerRow("n")},
				{Name: "x", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("k")},
				{Name: "w", DType: ir.BF16, Access: ir.Read, Extent: ir.Fixed("n", "k")},
			},
			Params: ir.Ints("k", "n"),
			Launch: matmulLaunch,
			Reference: func(a *ir.Args) error {
				sum := make([]float32, a.N*a.Int("n"))
				MatMul(sum, a.F32("x"), a.BF16("w"), a.N, a.Int("k"), a.Int("n"))
				Add(a.F32("y"), sum, a.N*a.Int("n"))
				return nil
			},
		},
		{
			Kind: ir.CausalConv1dSiLU,
			Operands: []ir.OperandSpec{
				{Name: "out", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("channels")},
				{Name: "in", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("channels")},
				{Name: "w", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("channels", "kernel")},
				{Name: "state", DType: ir.F32, Access: ir.ReadWrite, Extent: func(p ir.Params, _ int64) int64 {
					return int64(p.Int("channels") * (p.Int("kernel") - 1))
				}},
			},
			Params: ir.Ints("channels", "kernel"),
			// One thread per channel.
			Launch: func(p ir.Params, _ int, c ir.LaunchConfig) ir.LaunchShape {
				return c.Blocks(ir.Ceil(p.Int("channels"), c.Threads), 1, 1)
			},
			Reference: func(a *ir.Args) error {
				CausalConv1dSiLU(a.F32("out"), a.F32("in"), a.F32("w"), a.F32("state"), a.N, a.Int("channels"), a.Int("kernel"))
				return nil
			},
		},
		{
			Kind: ir.GDNGates,
			Operands: []ir.OperandSpec{
				{Name: "beta", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("heads")},
				{Name: "g", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("heads")},
				{Name: "b", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("heads")},
				{Name: "a", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("heads")},
				{Name: "a_log", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("heads")},
				{Name: "dt_bias", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("heads")},
			},
			Params: ir.Ints("heads"),
			Launch: perRowLaunch,
			Reference: func(a *ir.Args) error {
				GDNGates(a.F32("beta"), a.F32("g"), a.F32("b"), a.F32("a"), a.F32("a_log"), a.F32("dt_bias"), a.N, a.Int("heads"))
				return nil
			},
		},
		{
			Kind: ir.L2NormHeads,
			Operands: []ir.OperandSpec{
				{Name: "x", DType: ir.F32, Access: ir.ReadWrite, Extent: ir.Strided("row_stride", ir.Product("heads", "dim"))},
			},
			Params: cat(ir.Ints("row_stride", "heads", "dim"), ir.Reals("eps", "scale")),
			Launch: perRowLaunch,
			Reference: func(a *ir.Args) error {
				L2NormHeads(a.F32("x"), a.Int("row_stride"), a.N, a.Int("heads"), a.Int("dim"), a.Real32("eps"), a.Real32("scale"))
				return nil
			},
		},
		deltaFamily(true),
		deltaFamily(false),
		{
			Kind: ir.GatedRMSNorm,
			Operands: []ir.OperandSpec{
				{Name: "y", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("heads", "dim")},
				{Name: "o", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("heads", "dim")},
				{Name: "z", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("heads", "dim")},
				{Name: "w", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("dim")},
			},
			Params: cat(ir.Ints("heads", "dim"), ir.Reals("eps")),
			// A warp per vector: a block per vector of 128 left half its
			// threads idle and paid a block reduction (0.37 ms at 8K tokens).
			Launch: warpPerHeadLaunch,
			Reference: func(a *ir.Args) error {
				GatedRMSNorm(a.F32("y"), a.F32("o"), a.F32("z"), a.F32("w"), a.N*a.Int("heads"), a.Int("dim"), a.Real32("eps"))
				return nil
			},
		},
		{
			Kind: ir.RoPE,
			Operands: []ir.OperandSpec{
				{Name: "x", DType: ir.F32, Access: ir.ReadWrite, Extent: ir.Strided("row_stride", ir.Product("heads", "head_dim"))},
			},
			Params: cat(ir.Ints("row_stride", "heads", "head_dim", "rot_dim"), ir.Reals("theta")),
			Slots:  []ir.Slot{ir.ParamPos},
			Check: func(p ir.Params) error {
				if p.Int("rot_dim") > p.Int("head_dim") || p.Int("rot_dim")%2 != 0 {
					return fmt.Errorf("rot_dim %d must be even and at most head_dim %d", p.Int("rot_dim"), p.Int("head_dim"))
				}
				return nil
			},
			Launch: perRowLaunch,
			Reference: func(a *ir.Args) error {
				RoPE(a.F32("x"), a.Int("row_stride"), a.N, a.Int("heads"), a.Int("head_dim"), a.Int("rot_dim"), int(a.Slot(ir.ParamPos)), a.Real("theta"))
				return nil
			},
			// The inverse frequencies are folded into the source, so the
			// device never evaluates pow.
			TemplateData: func(p ir.Params) map[string]any {
				return map[string]any{"inv_freq": ropeInvFreq(p.Int("rot_dim"), p.Real("theta"))}
			},
		},
		{
			Kind: ir.KVAppend,
			Operands: []ir.OperandSpec{
				{Name: "k_cache", DType: ir.AnyFloat, Access: ir.ReadWrite, Extent: ir.Fixed("capacity", "width")},
				{Name: "v_cache", DType: ir.AnyFloat, Access: ir.ReadWrite, Extent: ir.Fixed("capacity", "width")},
				{Name: "k", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("width")},
				{Name: "v", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("width")},
			},
			Params:       cat(ir.Ints("width", "capacity"), ir.Flags("kv_bf16")),
			AnyFloatFlag: "kv_bf16",
			Slots:        []ir.Slot{ir.ParamPos},
			Launch:       perRowLaunch,
			Reference: func(a *ir.Args) error {
				pos := int(a.Slot(ir.ParamPos))
				if pos < 0 || pos+a.N > a.Int("capacity") {
					return fmt.Errorf("KV cache full: %d + %d tokens exceed %d", pos, a.N, a.Int("capacity"))
				}
				KVAppend(a.F32("k_cache"), a.F32("v_cache"), a.F32("k"), a.F32("v"), a.N, pos, a.Int("width"))
				return nil
			},
		},
		{
			Kind: ir.Attention,
			Operands: []ir.OperandSpec{
				{Name: "out", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("q_heads", "head_dim")},
				{Name: "q", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("q_heads", "head_dim")},
				{Name: "k_cache", DType: ir.AnyFloat, Access: ir.Read, Extent: ir.Fixed("capacity", "width")},
				{Name: "v_cache", DType: ir.AnyFloat, Access: ir.Read, Extent: ir.Fixed("capacity", "width")},
			},
			Params:       cat(ir.Ints("q_heads", "kv_heads", "head_dim"), ir.Reals("scale"), ir.Ints("capacity", "width"), ir.Flags("kv_bf16")),
			AnyFloatFlag: "kv_bf16",
			Slots:        []ir.Slot{ir.ParamPos},
			Check: func(p ir.Params) error {
				if p.Int("q_heads")%p.Int("kv_heads") != 0 {
					return fmt.Errorf("q_heads %d is not a multiple of kv_heads %d", p.Int("q_heads"), p.Int("kv_heads"))
				}
				if p.Int("width") != p.Int("kv_heads")*p.Int("head_dim") {
					return fmt.Errorf("width %d is not kv_heads × head_dim", p.Int("width"))
				}
				return nil
			},
			// One block per query head and row.
			Launch: func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
				return c.Blocks(p.Int("q_heads"), rows, 1)
			},
			Reference: func(a *ir.Args) error {
				pos := int(a.Slot(ir.ParamPos))
				if pos < 0 || pos+a.N > a.Int("capacity") {
					return fmt.Errorf("attention past the KV cache: %d + %d tokens exceed %d", pos, a.N, a.Int("capacity"))
				}
				Attention(a.F32("out"), a.F32("q"), a.F32("k_cache"), a.F32("v_cache"), a.N, pos, a.Int("q_heads"), a.Int("kv_heads"), a.Int("head_dim"), a.Real32("scale"))
				return nil
			},
		},
		attentionDecodeSplit(),
		attentionCombine(),
		attentionDecodeStream(),
		attentionDecodeMMA(),
		attentionDecodeMMAGate(),
		attentionDecodeSplitQK(),
		attentionDecodeMMAQK(),
		attentionCombineGate(),
		qkNormRoPEAppend(),
		attentionPrefill(),
		attentionPrefillWG(),
		{
			Kind: ir.AttnOutputGate,
			Operands: []ir.OperandSpec{
				{Name: "o", DType: ir.F32, Access: ir.ReadWrite, Extent: ir.PerRow("heads", "head_dim")},
				{Name: "qg", DType: ir.F32, Access: ir.Read, Extent: func(p ir.Params, rows int64) int64 {
					return rows * 2 * int64(p.Int("heads")*p.Int("head_dim"))
				}},
			},
			Params: ir.Ints("heads", "head_dim"),
			Launch: perRowLaunch,
			Reference: func(a *ir.Args) error {
				AttnOutputGate(a.F32("o"), a.F32("qg"), a.N, a.Int("heads"), a.Int("head_dim"))
				return nil
			},
		},
		{
			Kind: ir.RouterTopK,
			Operands: []ir.OperandSpec{
				{Name: "ids", DType: ir.I32, Access: ir.Write, Extent: ir.PerRow("k")},
				{Name: "weights", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("k")},
				{Name: "logits", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("experts")},
			},
			Params: ir.Ints("experts", "k"),
			Check:  topK,
			Launch: perRowLaunch,
			Reference: func(a *ir.Args) error {
				RouterTopK(a.I32("ids"), a.F32("weights"), a.F32("logits"), a.N, a.Int("experts"), a.Int("k"))
				return nil
			},
		},
		// The routed experts run as two launches so that both spread over
		// many blocks: act[t][s] = silu(gate_e·x[t]) ⊙ up_e·x[t] for
		// e = ids[t][s], then y[t] = Σ_s weights[t][s]·down_e·act[t][s]
		// (slots in order). An expert id outside [0, experts) contributes
		// zeros.
		{
			Kind: ir.MoEGateUp,
			Operands: []ir.OperandSpec{
				{Name: "act", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("k", "inter")},
				{Name: "x", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("hidden")},
				{Name: "ids", DType: ir.I32, Access: ir.Read, Extent: ir.PerRow("k")},
				{Name: "gate_up", DType: ir.BF16, Access: ir.Read, Extent: func(p ir.Params, _ int64) int64 {
					return int64(p.Int("experts")) * 2 * int64(p.Int("inter")) * int64(p.Int("hidden"))
				}},
			},
			Params: ir.Ints("experts", "hidden", "inter", "k"),
			Check:  topK,
			// One warp per intermediate row, per (slot, token).
			Launch: func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
				return c.Blocks(ir.Ceil(p.Int("inter"), c.Warps()), p.Int("k"), rows)
			},
			Reference: func(a *ir.Args) error {
				MoEGateUp(a.F32("act"), a.F32("x"), a.I32("ids"), a.BF16("gate_up"), a.N, a.Int("hidden"), a.Int("inter"), a.Int("k"), a.Int("experts"))
				return nil
			},
		},
		{
			Kind: ir.MoEDown,
			Operands: []ir.OperandSpec{
				{Name: "y", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("hidden")},
				{Name: "act", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("k", "inter")},
				{Name: "ids", DType: ir.I32, Access: ir.Read, Extent: ir.PerRow("k")},
				{Name: "weights", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("k")},
				{Name: "down", DType: ir.BF16, Access: ir.Read, Extent: ir.Fixed("experts", "hidden", "inter")},
			},
			Params: ir.Ints("experts", "hidden", "inter", "k"),
			Check:  topK,
			// One warp per output column, per token.
			Launch: func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
				return c.Blocks(ir.Ceil(p.Int("hidden"), c.Warps()), rows, 1)
			},
			Reference: func(a *ir.Args) error {
				MoEDown(a.F32("y"), a.F32("act"), a.I32("ids"), a.F32("weights"), a.BF16("down"), a.N, a.Int("hidden"), a.Int("inter"), a.Int("k"), a.Int("experts"))
				return nil
			},
		},
		{
			Kind: ir.SiLUMul,
			Operands: []ir.OperandSpec{
				{Name: "out", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("width")},
				{Name: "gate", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("width")},
				{Name: "up", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("width")},
			},
			Params: ir.Ints("width"),
			Launch: perRowLaunch,
			Reference: func(a *ir.Args) error {
				SiLUMul(a.F32("out"), a.F32("gate"), a.F32("up"), a.N*a.Int("width"))
				return nil
			},
		},
		{
			Kind: ir.Add,
			Operands: []ir.OperandSpec{
				{Name: "x", DType: ir.F32, Access: ir.ReadWrite, Extent: ir.PerRow("width")},
				{Name: "y", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("width")},
			},
			Params: ir.Ints("width"),
			Launch: perRowLaunch,
			Reference: func(a *ir.Args) error {
				Add(a.F32("x"), a.F32("y"), a.N*a.Int("width"))
				return nil
			},
		},
		{
			Kind: ir.SharedExpertCombine,
			Operands: []ir.OperandSpec{
				{Name: "x", DType: ir.F32, Access: ir.ReadWrite, Extent: ir.PerRow("hidden")},
				{Name: "routed", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("hidden")},
				{Name: "shared", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("hidden")},
				{Name: "gate", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow()},
			},
			Params: ir.Ints("hidden"),
			Launch: perRowLaunch,
			Reference: func(a *ir.Args) error {
				SharedExpertCombine(a.F32("x"), a.F32("routed"), a.F32("shared"), a.F32("gate"), a.N, a.Int("hidden"))
				return nil
			},
		},
		// fill_uniform: out[i] = FillUniform(seed, key, i, lo, scale) for
		// i < rows (the element count), stored as bf16 (round to nearest
		// even) when the bf16 flag is set, as f32 otherwise. Seed, key, lo
		// and scale are the fill slots of the parameter block.
		{
			Kind: ir.FillUniform,
			Operands: []ir.OperandSpec{
				{Name: "out", DType: ir.AnyFloat, Access: ir.Write, Extent: ir.PerRow()},
			},
			Params:       ir.Flags("bf16"),
			AnyFloatFlag: "bf16",
			Slots: []ir.Slot{ir.ParamFillSeedLo, ir.ParamFillSeedHi, ir.ParamFillKeyLo, ir.ParamFillKeyHi,
				ir.ParamFillLo, ir.ParamFillScale},
			// One thread an element up to FillMaxBlocks blocks, then the
			// kernel's grid-stride loop (any grid gives the same values).
			Launch: func(_ ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
				return c.Blocks(max(1, min(ir.Ceil(rows, c.Threads), FillMaxBlocks)), 1, 1)
			},
			Reference: func(a *ir.Args) error {
				u64 := func(lo, hi ir.Slot) uint64 { return uint64(uint32(a.Slot(lo))) | uint64(uint32(a.Slot(hi)))<<32 }
				seed, key := u64(ir.ParamFillSeedLo, ir.ParamFillSeedHi), u64(ir.ParamFillKeyLo, ir.ParamFillKeyHi)
				lo, scale := math.Float32frombits(uint32(a.Slot(ir.ParamFillLo))), math.Float32frombits(uint32(a.Slot(ir.ParamFillScale)))
				if a.Flag("bf16") {
					FillUniformBF16(a.BF16("out"), a.N, seed, key, lo, scale)
				} else {
					FillUniformF32(a.F32("out"), a.N, seed, key, lo, scale)
				}
				return nil
			},
		},
		// sample: one row of vocab logits in; the chosen id out to
		// tokens[0] (the next decode step's input) and to out[0], its
		// log-probability under softmax(logits) over ids below the
		// vocabulary limit (as float bits) to out[1]. Greedy when the
		// temperature is 0, else a Gumbel-max draw restricted by top_k,
		// top_p and min_p (Sample). The sampling values are the sampling
		// slots of the parameter block. When the masked slot is 1, mask
		// (⌈vocab/32⌉ words) holds the ids that may be drawn.
		{
			Kind: ir.Sample,
			Operands: []ir.OperandSpec{
				{Name: "logits", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("vocab")},
				{Name: "tokens", DType: ir.I32, Access: ir.Write, Extent: ir.Const(1)},
				{Name: "out", DType: ir.I32, Access: ir.Write, Extent: ir.Const(2)},
				{Name: "mask", DType: ir.I32, Access: ir.Read, Extent: func(p ir.Params, _ int64) int64 { return int64(p.Int("vocab")+31) / 32 }},
			},
			Params: ir.Ints("vocab"),
			Slots: []ir.Slot{ir.ParamSeedLo, ir.ParamSeedHi, ir.ParamStep, ir.ParamTemperature, ir.ParamTopP,
				ir.ParamMinP, ir.ParamTopK, ir.ParamVocabLimit, ir.ParamMasked},
			// One block for the row.
			Launch: func(_ ir.Params, _ int, c ir.LaunchConfig) ir.LaunchShape { return c.Blocks(1, 1, 1) },
			Reference: func(a *ir.Args) error {
				p := SampleParamsOf(a)
				if a.Slot(ir.ParamMasked) != 0 {
					m := a.I32("mask")
					if len(m) < (a.Int("vocab")+31)/32 {
						return fmt.Errorf("sample: a mask of %d words for %d logits", len(m), a.Int("vocab"))
					}
					p.Mask = make([]uint32, (a.Int("vocab")+31)/32)
					for i := range p.Mask {
						p.Mask[i] = uint32(m[i])
					}
				}
				Sample(a.I32("tokens"), a.I32("out"), a.F32("logits"), a.Int("vocab"), p)
				return nil
			},
		},
	}
}

// SampleParamsOf reads the sampling slots of a sample launch.
func SampleParamsOf(a *ir.Args) SampleParams {
	u := func(s ir.Slot) uint32 { return uint32(a.Slot(s)) }
	return SampleParams{
		Seed:        uint64(u(ir.ParamSeedLo)) | uint64(u(ir.ParamSeedHi))<<32,
		Step:        u(ir.ParamStep),
		Temperature: math.Float32frombits(u(ir.ParamTemperature)),
		TopP:        math.Float32frombits(u(ir.ParamTopP)),
		MinP:        math.Float32frombits(u(ir.ParamMinP)),
		TopK:        int32(u(ir.ParamTopK)),
		VocabLimit:  int32(u(ir.ParamVocabLimit)),
	}
}

// FillMaxBlocks caps the grid of a fill launch: enough blocks to fill any
// GPU, after which the kernel's grid-stride loop takes over.
const FillMaxBlocks = 16384

func deltaFamily(chunked bool) *ir.Family {
	qk := ir.Strided("row_stride", ir.Product("k_heads", "k_dim"))
	f := &ir.Family{
		Kind: ir.GatedDeltaRecurrent,
		Operands: []ir.OperandSpec{
			{Name: "out", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("v_heads", "v_dim")},
			{Name: "q", DType: ir.F32, Access: ir.Read, Extent: qk},
			{Name: "k", DType: ir.F32, Access: ir.Read, Extent: qk},
			{Name: "v", DType: ir.F32, Access: ir.Read, Extent: ir.Strided("row_stride", ir.Product("v_heads", "v_dim"))},
			{Name: "beta", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("v_heads")},
			{Name: "g", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("v_heads")},
			{Name: "state", DType: ir.F32, Access: ir.ReadWrite, Extent: ir.Fixed("v_heads", "k_dim", "v_dim")},
		},
		Params: ir.Ints("row_stride", "k_heads", "v_heads", "k_dim", "v_dim"),
		Check: func(p ir.Params) error {
			if p.Int("v_heads")%p.Int("k_heads") != 0 {
				return fmt.Errorf("v_heads %d is not a multiple of k_heads %d", p.Int("v_heads"), p.Int("k_heads"))
			}
			return nil
		},
		// One block per value head, over every row in order.
		Launch: func(p ir.Params, _ int, c ir.LaunchConfig) ir.LaunchShape { return c.Blocks(p.Int("v_heads"), 1, 1) },
		Reference: func(a *ir.Args) error {
			GatedDeltaRecurrent(a.F32("out"), a.F32("q"), a.F32("k"), a.F32("v"), a.Int("row_stride"), a.F32("beta"), a.F32("g"), a.F32("state"),
				a.N, a.Int("k_heads"), a.Int("v_heads"), a.Int("k_dim"), a.Int("v_dim"))
			return nil
		},
	}
	if chunked {
		f.Kind = ir.GatedDeltaChunked
		f.Params = append(f.Params, ir.Ints("chunk")...)
		f.Reference = func(a *ir.Args) error {
			GatedDeltaChunked(a.F32("out"), a.F32("q"), a.F32("k"), a.F32("v"), a.Int("row_stride"), a.F32("beta"), a.F32("g"), a.F32("state"),
				a.N, a.Int("k_heads"), a.Int("v_heads"), a.Int("k_dim"), a.Int("v_dim"), a.Int("chunk"))
			return nil
		}
	}
	return f
}

// headRows is the extent of rows × heads vectors of width laid out with a
// row stride.
func headRows(stride string) func(ir.Params, int64) int64 {
	return func(p ir.Params, rows int64) int64 {
		return ir.Strided(stride, ir.Product("width"))(p, rows*int64(p.Int("heads")))
	}
}

func topK(p ir.Params) error {
	if p.Int("k") > p.Int("experts") {
		return fmt.Errorf("k %d exceeds experts %d", p.Int("k"), p.Int("experts"))
	}
	return nil
}

func cat(lists ...[]ir.ParamSpec) []ir.ParamSpec {
	var out []ir.ParamSpec
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}
