package planner

import (
	"fmt"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// The split_kv pass: the decode step's attention, one block per query head
// over the whole context, becomes attention_decode_split (a block per
// split of the context and KV head's block of query heads) followed by
// attention_combine, with the partial softmaxes in a planned activation
// (attn_partial). Prefill keeps attention: its rows fill the device.

// splitBlocksPerSM is how many split blocks per multiprocessor the decode
// attention aims for: two, so that the blocks of one SM overlap each
// other's load latency where they fit side by side, while the partial
// records (8 KiB per split of a KV head's eight heads of 256 dims) stay a
// small share of what the split reads.
const splitBlocksPerSM = 2

// splitAlign is the granule of a split's range of positions: at short
// contexts the leading splits take splitAlign positions each (a warp step
// of every warp) and the rest write neutral partials.
const splitAlign = 32

// streamBlocksPerSM is the same for attention_decode_stream: its
// registers (two 128-float sets per lane) and its 48 KiB ring allow one
// block per SM, so the splits fill the GPU in one wave.
const streamBlocksPerSM = 1

// mmaBlocksPerSM is the same for attention_decode_mma: its rings (208
// KiB of shared memory at the real model's heads on sm_90) allow one block
// per SM, so the splits fill the GPU in one wave.
const mmaBlocksPerSM = 1

// DecodeMMA says whether the decode attention's split runs on tensor cores.
type DecodeMMA string

const (
	// DecodeMMADefault is on for sm_90 — every device case passed, the
	// full-width gate against transformers holds with 64 decode steps at
	// the end of every prompt, and a layer runs 13.4 / 24.3 / 69.6 µs at
	// 8K / 32K / 128K against the CUDA-core split's 28.0 / 64.8 / 212.6 —
	// and off on gfx1151, whose WMMA path has no asynchronous copies to
	// stream the cache with and has not run on a device
	// (docs/decode-attention.md).
	DecodeMMADefault DecodeMMA = ""
	DecodeMMAOn      DecodeMMA = "on"  // every GPU target where the kernel serves the attention
	DecodeMMAOff     DecodeMMA = "off" // never: attention_decode_split (or _stream)
	// DecodeMMAFused is DecodeMMAOn with the combine and the output gate
	// folded into the split's launch (attention_decode_mma_gate) where the
	// plan fuses.
	DecodeMMAFused DecodeMMA = "fused"
)

// mma reports whether the decode attention's split runs as
// attention_decode_mma where the kernel fits: asked for (DecodeMMAOn,
// DecodeMMAFused) on a GPU target.
func (o *Options) mma() bool {
	switch o.DecodeMMA {
	case DecodeMMAOn, DecodeMMAFused:
		return o.Target.GPU()
	case DecodeMMADefault:
		return o.Target == plan.SM90 && !o.DecodeStream // an asked-for stream keeps its kernel
	}
	return false
}

// streams reports whether the decode attention runs as
// attention_decode_stream: when the options ask for it (DecodeStream) and
// the target's dialect has asynchronous copies (cp.async, CUDA). Elsewhere
// the stream kernel's ring would be loads and stores through shared
// memory, and the split kernel stays.
func (o *Options) streams() bool {
	d, err := o.Target.Dialect()
	return o.DecodeStream && err == nil && d == plan.CUDA
}

// decodeSplits is the number of splits of the decode attention for the
// options (0: keep attention), perSM the blocks per multiprocessor the
// kernel aims for.
func (o *Options) decodeSplits(blocksPerSplit, perSM int) int {
	switch {
	case o.DecodeSplits == -1:
		return 0
	case o.DecodeSplits > 0:
		return o.DecodeSplits
	case !o.Target.GPU():
		return 0 // the cpu plan keeps attention, the oracle
	}
	return max(1, ir.Ceil(perSM*o.Target.Launch().Multiprocessors, blocksPerSplit))
}

func splitPass(c *compilation) error {
	for i, g := range c.graphs {
		if !c.steps[i].Kind.Decode() {
			continue
		}
		if splitDecodeAttention(g, &c.o) == 0 {
			continue
		}
		if c.o.fuses() && c.o.QKFold && foldQKNorm(g, c.o.Target.Launch()) > 0 {
			g.DropUnused() // the q the fold no longer writes
		}
		if err := g.Verify(kernels.Families); err != nil {
			return fmt.Errorf("%s: %w", g.Name, err)
		}
	}
	return nil
}

// splitDecodeAttention rewrites every attention op of g that a split
// kernel serves into the split and combine pair; it returns the number of
// rewrites. The split is attention_decode_mma where the options ask for
// tensor cores (mma) and it serves the op (mmaParams: a bf16 cache, head_dim
// a multiple of 16 up to 256); otherwise attention_decode_split where
// head_dim is a multiple of the 32 lanes of a warp, which its template is
// written for, up to kernels.MaxSplitHeadDim (else the op stays), or
// attention_decode_stream where the options stream (streams) and its ring
// fits. Where they fuse (GPU targets by default), the output gate that
// follows the attention (attn_output_gate on its output, over the same rows
// and heads) moves into the combine (attention_combine_gate).
func splitDecodeAttention(g *ir.Graph, o *Options) int {
	n := 0
	var ops []*ir.Op
	skip := map[*ir.Op]bool{}
	for i, op := range g.Ops {
		if skip[op] {
			continue
		}
		p := op.Params
		if op.Kind != ir.Attention {
			ops = append(ops, op)
			continue
		}
		heads, group := p.Int("q_heads"), p.Int("q_heads")/p.Int("kv_heads")
		blockHeads := kernels.BlockHeads(group, p.Int("head_dim"))
		sp := p.Clone()
		sp.SetInt("split_align", splitAlign)
		sp.SetInt("block_heads", int64(blockHeads))
		kind, perSM := ir.AttentionDecodeSplit, splitBlocksPerSM
		mp, mma := mmaParams(sp, o.Target.Launch())
		switch {
		case mma && o.mma():
			kind, perSM, sp, blockHeads = ir.AttentionDecodeMMA, mmaBlocksPerSM, mp, mp.Int("block_heads")
		case p.Int("head_dim")%32 != 0 || p.Int("head_dim") > kernels.MaxSplitHeadDim:
			ops = append(ops, op) // the CUDA-core kernels' lanes do not divide the head
			continue
		case o.streams() && kernels.DecodeStreamFits(sp) == nil:
			kind, perSM = ir.AttentionDecodeStream, streamBlocksPerSM
		}
		splits := min(o.decodeSplits(heads/blockHeads, perSM), kernels.MaxSplits) // the target's count may exceed it
		if splits == 0 {
			ops = append(ops, op)
			continue
		}
		sp.SetInt("splits", int64(splits))
		partial := g.Tensor("attn_partial")
		if partial == nil {
			width := int64(heads * splits * kernels.PartialStride(p.Int("head_dim")))
			partial = g.AddTensor(ir.Tensor{Name: "attn_partial", Role: ir.Activation, DType: ir.F32, Shape: []int64{int64(g.Tokens), width}})
		}
		part := ir.Operand{Tensor: partial.ID}
		cp := ir.Params{}
		for _, k := range []string{"q_heads", "head_dim"} {
			cp.SetInt(k, int64(p.Int(k)))
		}
		cp.SetInt("splits", int64(splits))
		combine := &ir.Op{Kind: ir.AttentionCombine, Layer: op.Layer, Rows: op.Rows, Params: cp,
			Operands: []ir.Operand{op.Operands[0], part}}
		gate := gateAfter(g, i)
		if o.fuses() && gate != nil {
			combine.Kind = ir.AttentionCombineGate
			combine.Operands = append(combine.Operands, gate.Operands[1])
			skip[gate] = true
		}
		if kind == ir.AttentionDecodeMMA && o.DecodeMMA == DecodeMMAFused && combine.Kind == ir.AttentionCombineGate {
			// One launch: the combine and the gate in the split's last blocks,
			// the layer's arrival counters a state tensor (zero between launches).
			arrivals := g.AddTensor(ir.Tensor{Name: fmt.Sprintf("state.%d.attn_arrivals", op.Layer), Role: ir.State, DType: ir.I32,
				Shape: []int64{int64(g.Tokens), int64(2 * heads / blockHeads)}})
			ops = append(ops, &ir.Op{Kind: ir.AttentionDecodeMMAGate, Layer: op.Layer, Rows: op.Rows, Params: sp,
				Operands: []ir.Operand{op.Operands[0], part, op.Operands[1], gate.Operands[1], op.Operands[2], op.Operands[3], {Tensor: arrivals.ID}}})
			n++
			continue
		}
		ops = append(ops,
			&ir.Op{Kind: kind, Layer: op.Layer, Rows: op.Rows, Params: sp,
				Operands: []ir.Operand{part, op.Operands[1], op.Operands[2], op.Operands[3]}},
			combine)
		n++
	}
	g.Ops = ops
	return n
}

// gateAfter is the attn_output_gate right after the attention op i when it
// gates exactly that op's output (the same tensor and offset, rows, heads
// and head_dim) and its gate tensor is not the output itself, or nil.
func gateAfter(g *ir.Graph, i int) *ir.Op {
	if i+1 >= len(g.Ops) {
		return nil
	}
	at, gate := g.Ops[i], g.Ops[i+1]
	p, gp := at.Params, gate.Params
	switch {
	case gate.Kind != ir.AttnOutputGate || gate.Layer != at.Layer:
		return nil
	case (gate.Rows == nil) != (at.Rows == nil) || (gate.Rows != nil && *gate.Rows != *at.Rows):
		return nil
	case gate.Operands[0] != at.Operands[0] || gate.Operands[1].Tensor == at.Operands[0].Tensor:
		return nil
	case gp.Int("heads") != p.Int("q_heads") || gp.Int("head_dim") != p.Int("head_dim"):
		return nil
	}
	return gate
}

// mmaParams are the parameters of attention_decode_mma for the split
// parameters sp on a target of launch configuration c (its block heads,
// warps and stages), and whether the kernel serves them.
func mmaParams(sp ir.Params, c ir.LaunchConfig) (ir.Params, bool) {
	warps, stages, ok := kernels.DecodeMMAGeometry(c, sp.Int("head_dim"))
	if !ok {
		return ir.Params{}, false
	}
	mp := sp.Clone()
	mp.SetInt("block_heads", int64(kernels.MMABlockHeads(sp.Int("q_heads")/sp.Int("kv_heads"))))
	mp.SetInt("warps", int64(warps))
	mp.SetInt("ring_stages", int64(stages))
	if kernels.DecodeMMAFits(mp) != nil || kernels.DecodeMMASharedBytes(mp) > c.MaxSharedBytes {
		return ir.Params{}, false
	}
	return mp, true
}
