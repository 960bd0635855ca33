package runtime

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// SyntheticWeights fills every weight buffer of the plan with deterministic
// pseudo-random values instead of reading a checkpoint, so the engine runs
// (and can be benchmarked) without the weights' files. The same seed gives
// the same weights; each buffer's values depend only on the seed and its
// name.
//
// The values are generated where the weights live: each buffer is allocated
// and filled by the plan's fill_uniform kernel (one per weight dtype),
// launched through the backend like any other kernel with the seed, the
// buffer's key (kernels.FillKey of its name) and its bounds in the
// parameter block. Nothing is generated on the host nor uploaded, and the
// generator is counter-based (kernels.FillUniform), so the CPU backend and
// every GPU backend produce the same bytes.
func SyntheticWeights(seed uint64) Weights { return synthWeights{seed} }

type synthWeights struct{ seed uint64 }

func (w synthWeights) bind(e *Engine) error {
	fills := e.fillKernels()
	for _, b := range e.plan.Buffers {
		if b.Role != ir.Weight || b.Derive != nil {
			continue // derived weights are made from the filled ones (deriveWeights)
		}
		m, err := e.be.Alloc(b.Bytes)
		if err != nil {
			return fmt.Errorf("weight %s: allocate %d bytes: %w", b.Name, b.Bytes, err)
		}
		e.globals[b.Name] = m
		e.weights = append(e.weights, m)
		// Each checkpoint tensor is filled under its own name, so that a
		// concatenated weight holds the values its parts hold unfused.
		rowElems := b.Bytes / int64(max(1, b.DType.Size())) / b.Rows()
		for _, src := range b.Sources() {
			lo, hi := synthRange(src.Tensor, partShape(&b, src))
			if err := e.fillRows(fills, b.DType, src.Tensor, m, src.Rows[0]*rowElems, (src.Rows[1]-src.Rows[0])*rowElems, w.seed, lo, hi); err != nil {
				return fmt.Errorf("weight %s: %s: %w", b.Name, src.Tensor, err)
			}
		}
	}
	return e.be.Sync()
}

// fillKernels are the plan's fill_uniform kernels by the dtype they write.
func (e *Engine) fillKernels() map[ir.DType]*plan.Kernel {
	fills := map[ir.DType]*plan.Kernel{}
	for i := range e.plan.Kernels {
		k := &e.plan.Kernels[i]
		if ir.Kind(k.Family) != ir.FillUniform {
			continue
		}
		dt := ir.F32
		if k.Params.Flag("bf16") {
			dt = ir.BF16
		}
		fills[dt] = k
	}
	return fills
}

// fill launches the fill kernel of b's dtype over all of m: uniform values
// in [lo, hi] keyed by b's name under seed.
func (e *Engine) fill(fills map[ir.DType]*plan.Kernel, b plan.Buffer, m Mem, seed uint64, lo, hi float64) error {
	size := int64(b.DType.Size())
	if size == 0 {
		return fmt.Errorf("the plan has no fill_uniform kernel for %s buffers", b.DType)
	}
	return e.fillRows(fills, b.DType, b.Name, m, 0, b.Bytes/size, seed, lo, hi)
}

// fillRows fills count elements of dtype dt of m from element off with the
// values keyed by name: element i of them is the generator's i-th, wherever
// it lies (a concatenated weight's part holds what its tensor would alone).
func (e *Engine) fillRows(fills map[ir.DType]*plan.Kernel, dt ir.DType, name string, m Mem, off, count int64, seed uint64, lo, hi float64) error {
	k := fills[dt]
	size := int64(dt.Size())
	if k == nil || size == 0 {
		return fmt.Errorf("the plan has no fill_uniform kernel for %s buffers", dt)
	}
	if count > math.MaxInt32 {
		return fmt.Errorf("%d elements exceed a kernel's row count", count)
	}
	prm := fillParams(seed, kernels.FillKey(name), float32(lo), float32(hi-lo))
	if err := e.be.SetParams(&prm); err != nil {
		return err
	}
	l := &plan.Launch{Kernel: k.Name, Layer: -1}
	if e.plan.Target.GPU() {
		s := kernels.Families[ir.FillUniform].Launch(k.Params, int(count), e.plan.Target.Launch())
		l.Grid, l.Block, l.SharedBytes = s.Grid[:], s.Block[:], s.SharedBytes
	}
	if err := e.be.Launch(k, l, []Ref{{Mem: m, Offset: off * size}}, int(count), &prm); err != nil {
		return fmt.Errorf("fill: %w", err)
	}
	return nil
}

// Synthetic context bounds: keys and values of unit scale, GDN recurrent
// and conv state small, so that attention and the delta rule stay finite.
const (
	synthKV    = 1.0
	synthState = 0.05
)

// SyntheticContext starts a sequence at position n without a prefill, for
// speed measurement only: the KV cache and the GDN states are filled on the
// device with seeded uniform values (the plan's fill_uniform kernels, as
// SyntheticWeights fills weights) and the position is set to n. A decode
// step then reads and writes exactly what it would after an n-token prompt
// — the KV rows of n tokens, the states — but its output means nothing:
// figures measured this way say so. The device holds no logits afterwards;
// decode from a token of the caller's choosing.
func (e *Engine) SyntheticContext(seed uint64, n int) error {
	_, end, err := e.begin(context.Background())
	if err != nil {
		return err
	}
	defer end()
	if n < 1 || n > e.plan.ContextTokens {
		return fmt.Errorf("synthetic context of %d tokens: want 1 to the plan's %d", n, e.plan.ContextTokens)
	}
	fills := e.fillKernels()
	e.broken, e.held = true, nil // until every buffer is filled
	for _, b := range e.plan.Buffers {
		bound := 0.0
		switch b.Role {
		case ir.KV:
			bound = synthKV
		case ir.State:
			bound = synthState
		default:
			continue
		}
		if b.DType == ir.I32 {
			continue // integer state (gdn_decode_split's arrival counters, gdn_decode_peer's tags) is as Reset leaves it: zero, equal within a key head
		}
		if err := e.fill(fills, b, e.globals[b.Name], seed, -bound, bound); err != nil {
			return fmt.Errorf("synthetic context: %s: %w", b.Name, err)
		}
	}
	if err := e.be.Sync(); err != nil {
		return err
	}
	e.pos, e.broken, e.sampler.fed = n, false, false
	return nil
}

// fillParams is a fill's parameter block (the ir.ParamFill* slots), which
// every backend's fill kernel reads.
func fillParams(seed, key uint64, lo, scale float32) Params {
	var p Params
	p[ir.ParamFillSeedLo] = int32(uint32(seed))
	p[ir.ParamFillSeedHi] = int32(uint32(seed >> 32))
	p[ir.ParamFillKeyLo] = int32(uint32(key))
	p[ir.ParamFillKeyHi] = int32(uint32(key >> 32))
	p[ir.ParamFillLo] = int32(math.Float32bits(lo))
	p[ir.ParamFillScale] = int32(math.Float32bits(scale))
	return p
}

// synthRange picks the uniform bounds [lo, hi] of a weight's values, ones
// that keep the forward pass numerically healthy: matrices with std
// 1/sqrt(fan_in), unit-std embeddings, small zero-centred norm weights
// (they are used as 1+w), the gated norm around 1, small dt_bias.
//
// A_log is uniform in [0, ln 16], so that A = exp(A_log) is log-uniform in
// [1, 16]: every weight is then one uniform fill, and the device never
// evaluates a logarithm (whose last bit would differ between backends).
func synthRange(name string, shape []int64) (lo, hi float64) {
	switch {
	case strings.HasSuffix(name, "linear_attn.norm.weight"):
		return 0.8, 1.2
	case strings.HasSuffix(name, "norm.weight"):
		return -0.1, 0.1
	case strings.HasSuffix(name, "A_log"):
		return 0, math.Log(16)
	case strings.HasSuffix(name, "dt_bias"):
		return -0.5, 0.5
	case strings.HasSuffix(name, "conv1d.weight"):
		return -0.8, 0.8
	case strings.HasSuffix(name, "embed_tokens.weight"):
		return -math.Sqrt(3), math.Sqrt(3)
	}
	fanIn := float64(shape[len(shape)-1])
	a := math.Sqrt(3 / fanIn)
	return -a, a
}

// partShape is the shape of a weight buffer's checkpoint tensor src: the
// buffer's, with src's rows.
func partShape(b *plan.Buffer, src plan.Part) []int64 {
	if len(b.Shape) == 0 {
		return nil
	}
	return append([]int64{src.Rows[1] - src.Rows[0]}, b.Shape[1:]...)
}
