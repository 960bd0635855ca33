package runtime

import (
	"encoding/binary"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/aimaproject/aimac/bf16"
)

// SyntheticWeights fills every weight buffer of the plan with deterministic
// pseudo-random values instead of reading a checkpoint, so the engine runs
// (and can be benchmarked) without the weights' files. The same seed gives
// the same weights; each buffer's values depend only on the seed and its
// name.
func SyntheticWeights(seed uint64) Weights { return synthWeights{seed} }

type synthWeights struct{ seed uint64 }

func (w synthWeights) bind(e *Engine) error {
	for _, b := range e.plan.Buffers {
		if b.Role != "weight" {
			continue
		}
		h := fnv.New64a()
		h.Write([]byte(b.Name))
		rng := rand.New(rand.NewPCG(w.seed, h.Sum64()))
		draw := synthDistribution(b.Tensor, b.Shape)
		n := b.Bytes
		data := make([]byte, n)
		switch b.DType {
		case "bf16":
			for i := int64(0); i < n; i += 2 {
				binary.LittleEndian.PutUint16(data[i:], bf16.FromFloat32(draw(rng)))
			}
		default:
			for i := int64(0); i < n; i += 4 {
				binary.LittleEndian.PutUint32(data[i:], math.Float32bits(draw(rng)))
			}
		}
		m, err := e.upload(data)
		if err != nil {
			return err
		}
		e.globals[b.Name] = m
		e.weights = append(e.weights, m)
	}
	return nil
}

// synthDistribution picks values that keep the forward pass numerically
// healthy: matrices with std 1/sqrt(fan_in), unit-std embeddings, small
// zero-centred norm weights (they are used as 1+w), the gated norm around
// 1, A_log = log U[1,16] and small dt_bias.
func synthDistribution(name string, shape []int64) func(*rand.Rand) float32 {
	uniform := func(lo, hi float64) func(*rand.Rand) float32 {
		return func(r *rand.Rand) float32 { return float32(lo + (hi-lo)*r.Float64()) }
	}
	switch {
	case strings.HasSuffix(name, "linear_attn.norm.weight"):
		return uniform(0.8, 1.2)
	case strings.HasSuffix(name, "norm.weight"):
		return uniform(-0.1, 0.1)
	case strings.HasSuffix(name, "A_log"):
		return func(r *rand.Rand) float32 { return float32(math.Log(1 + 15*r.Float64())) }
	case strings.HasSuffix(name, "dt_bias"):
		return uniform(-0.5, 0.5)
	case strings.HasSuffix(name, "conv1d.weight"):
		return uniform(-0.8, 0.8)
	case strings.HasSuffix(name, "embed_tokens.weight"):
		return uniform(-math.Sqrt(3), math.Sqrt(3))
	}
	fanIn := float64(shape[len(shape)-1])
	a := math.Sqrt(3 / fanIn)
	return uniform(-a, a)
}
