package synth

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"runtime"
	"strings"
	"sync"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/bf16"
)

// initKind names a value distribution.
type initKind int

const (
	uniformInit    initKind = iota // mean ± std·√3, uniform
	normalInit                     // N(mean, std²)
	logUniformInit                 // log(U[lo, hi])
)

// initSpec is how one tensor's values are drawn: for uniformInit and
// normalInit a = mean, b = std; for logUniformInit a = lo, b = hi.
type initSpec struct {
	kind initKind
	a, b float64
}

// tensorPlan is one tensor to write: name, dtype, shape and distribution.
type tensorPlan struct {
	name  string
	dtype arch.DType
	shape []int64
	init  initSpec
}

// elements is the product of the shape.
func (t tensorPlan) elements() int64 {
	n := int64(1)
	for _, d := range t.shape {
		n *= d
	}
	return n
}

// bytes is the tensor's size on disk.
func (t tensorPlan) bytes() int64 { return t.elements() * int64(t.dtype.Size()) }

// planTensors lists every tensor synth writes, in file order: the text
// model's tensors (cfg.Tensors) with the vision decoys after the embedding
// and the MTP decoys at the end, so loaders meet the ignored prefixes in the
// middle of the checkpoint as well as at its end.
func planTensors(cfg *arch.Config) ([]tensorPlan, error) {
	H := int64(cfg.HiddenSize)
	var out []tensorPlan
	for i, s := range cfg.Tensors(arch.NestedPrefix) {
		if len(s.DTypes) == 0 || s.DTypes[0] != arch.BF16 {
			return nil, fmt.Errorf("synth: tensor %s: first accepted dtype is %v, synth writes only BF16", s.Name, s.DTypes)
		}
		out = append(out, tensorPlan{name: s.Name, dtype: arch.BF16, shape: s.Shape, init: initFor(cfg, s.Name, s.Shape)})
		if i == 0 {
			out = append(out, visionDecoys(H)...)
		}
	}
	return append(out, mtpDecoys(cfg)...), nil
}

// visionDecoys are a few small model.visual.* tensors, shaped after the
// decoy vision_config, that text loaders must skip.
func visionDecoys(H int64) []tensorPlan {
	const vh, merged = visionHidden, visionHidden * visionMerge * visionMerge
	p := "model.visual."
	return []tensorPlan{
		decoy(p+"patch_embed.proj.weight", vh, 3, visionTPatch, visionPatch, visionPatch),
		decoy(p+"blocks.0.norm1.weight", vh),
		decoy(p+"blocks.0.attn.qkv.weight", 3*vh, vh),
		decoy(p+"blocks.0.attn.qkv.bias", 3*vh),
		decoy(p+"blocks.0.attn.proj.weight", vh, vh),
		decoy(p+"merger.linear_fc1.weight", merged, merged),
		decoy(p+"merger.linear_fc2.weight", H, merged),
	}
}

// mtpDecoys is part of the multi-token-prediction head the real checkpoint
// ships (mtp.*), which the text model ignores.
func mtpDecoys(cfg *arch.Config) []tensorPlan {
	H := int64(cfg.HiddenSize)
	out := []tensorPlan{
		{name: "mtp.fc.weight", dtype: arch.BF16, shape: []int64{H, 2 * H}},
		{name: "mtp.norm.weight", dtype: arch.BF16, shape: []int64{H}},
		{name: "mtp.pre_fc_norm_embedding.weight", dtype: arch.BF16, shape: []int64{H}},
		{name: "mtp.pre_fc_norm_hidden.weight", dtype: arch.BF16, shape: []int64{H}},
		{name: "mtp.layers.0.input_layernorm.weight", dtype: arch.BF16, shape: []int64{H}},
		{name: "mtp.layers.0.post_attention_layernorm.weight", dtype: arch.BF16, shape: []int64{H}},
	}
	for i := range out {
		out[i].init = initFor(cfg, out[i].name, out[i].shape)
	}
	return out
}

// decoy is a small BF16 tensor with weight-like values.
func decoy(name string, shape ...int64) tensorPlan {
	return tensorPlan{name: name, dtype: arch.BF16, shape: shape, init: initSpec{uniformInit, 0, 0.02}}
}

// initFor picks a tensor's distribution so the tiny model's forward pass
// stays in a healthy range: unit-variance embeddings, projections that keep
// activations near unit RMS (std 1/√fan_in), zero-centred "1+w" norm
// weights near 0, the gated DeltaNet norm near 1, DeltaNet decay parameters
// in the ranges Qwen initialises them to, and router and LM-head logits of
// std ≈ 2 so expert choice and the next token vary from token to token.
func initFor(cfg *arch.Config, name string, shape []int64) initSpec {
	H := float64(cfg.HiddenSize)
	switch {
	case name == arch.NestedPrefix+"embed_tokens.weight":
		return initSpec{uniformInit, 0, 1}
	case name == arch.LMHead:
		return initSpec{uniformInit, 0, 2 / math.Sqrt(H)}
	case strings.HasSuffix(name, ".linear_attn.norm.weight"):
		return initSpec{normalInit, 1, 0.1}
	case strings.HasSuffix(name, "norm.weight"): // input/post-attention/final/q/k/MTP norms: out = x̂·(1+w)
		return initSpec{normalInit, 0, 0.1}
	case strings.HasSuffix(name, ".linear_attn.A_log"):
		return initSpec{logUniformInit, 1, 16}
	case strings.HasSuffix(name, ".linear_attn.dt_bias"):
		return initSpec{normalInit, 0, 0.5}
	case strings.HasSuffix(name, ".linear_attn.conv1d.weight"):
		return initSpec{uniformInit, 0, 0.5}
	case strings.HasSuffix(name, ".mlp.gate.weight"):
		return initSpec{uniformInit, 0, 2 / math.Sqrt(H)}
	}
	if len(shape) >= 2 {
		// Every projection is stored [.., out, in]: the last dimension is fan-in.
		return initSpec{uniformInit, 0, 1 / math.Sqrt(float64(shape[len(shape)-1]))}
	}
	return initSpec{normalInit, 0, 0.02}
}

// chunkElems is the unit of parallel generation: each chunk of a tensor has
// its own random stream, so the values do not depend on the worker count.
const chunkElems = 1 << 20

// fillTensor writes t's values, little-endian BF16, into dst
// (len t.bytes()), spreading chunks over the available cores.
func fillTensor(dst []byte, seed uint64, t tensorPlan) {
	n := t.elements()
	chunks := (n + chunkElems - 1) / chunkElems
	tensorSeed := seed ^ nameHash(t.name)
	workers := min(int64(runtime.GOMAXPROCS(0)), chunks)
	if workers <= 1 {
		for c := int64(0); c < chunks; c++ {
			fillChunk(dst, tensorSeed, c, n, t.init)
		}
		return
	}
	var wg sync.WaitGroup
	next := make(chan int64)
	for w := int64(0); w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range next {
				fillChunk(dst, tensorSeed, c, n, t.init)
			}
		}()
	}
	for c := int64(0); c < chunks; c++ {
		next <- c
	}
	close(next)
	wg.Wait()
}

// nameHash separates the random streams of different tensors.
func nameHash(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// fillChunk generates elements [c·chunkElems, min((c+1)·chunkElems, n)).
func fillChunk(dst []byte, tensorSeed uint64, c, n int64, spec initSpec) {
	lo := c * chunkElems
	hi := min(lo+chunkElems, n)
	out := dst[2*lo : 2*hi]
	r := newXoshiro(splitmix64(tensorSeed) ^ splitmix64(uint64(c)+0x632be59bd9b4e019))
	put := func(i int, v float64) {
		binary.LittleEndian.PutUint16(out[2*i:], bf16.FromFloat32(float32(v)))
	}
	m := int(hi - lo)
	switch spec.kind {
	case uniformInit:
		// Two 24-bit uniforms per draw; mean ± half-width with half = std·√3.
		mean, half := float32(spec.a), float32(spec.b*math.Sqrt(3))
		const inv = 1.0 / (1 << 23)
		for i := 0; i < m; i += 2 {
			x := r.next()
			u0 := float32(x>>40)*inv - 1
			binary.LittleEndian.PutUint16(out[2*i:], bf16.FromFloat32(mean+half*u0))
			if i+1 < m {
				u1 := float32((x>>16)&0xffffff)*inv - 1
				binary.LittleEndian.PutUint16(out[2*i+2:], bf16.FromFloat32(mean+half*u1))
			}
		}
	case normalInit:
		// Box–Muller: two normals from two uniforms.
		for i := 0; i < m; i += 2 {
			u1 := (float64(r.next()>>11) + 1) / (1 << 53) // (0, 1]
			u2 := float64(r.next()>>11) / (1 << 53)
			rad := math.Sqrt(-2 * math.Log(u1))
			s, co := math.Sincos(2 * math.Pi * u2)
			put(i, spec.a+spec.b*rad*co)
			if i+1 < m {
				put(i+1, spec.a+spec.b*rad*s)
			}
		}
	case logUniformInit:
		for i := 0; i < m; i++ {
			u := float64(r.next()>>11) / (1 << 53)
			put(i, math.Log(spec.a+(spec.b-spec.a)*u))
		}
	}
}

// splitmix64 is Steele et al.'s mixer, used to spread seeds.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// xoshiro is xoshiro256** (Blackman & Vigna): fast, and its streams from
// distinct seeds do not overlap in practice.
type xoshiro struct{ s [4]uint64 }

// newXoshiro seeds the four state words through splitmix64 (never all zero).
func newXoshiro(seed uint64) *xoshiro {
	r := &xoshiro{}
	for i := range r.s {
		seed += 0x9e3779b97f4a7c15
		r.s[i] = splitmix64(seed)
	}
	return r
}

// next returns the next 64 random bits.
func (r *xoshiro) next() uint64 {
	s := &r.s
	out := bitsRotl(s[1]*5, 7) * 9
	t := s[1] << 17
	s[2] ^= s[0]
	s[3] ^= s[1]
	s[1] ^= s[2]
	s[0] ^= s[3]
	s[2] ^= t
	s[3] = bitsRotl(s[3], 45)
	return out
}

// bitsRotl rotates x left by k bits.
func bitsRotl(x uint64, k uint) uint64 { return x<<k | x>>(64-k) }

// shardPlan is one safetensors file and the tensors it holds.
type shardPlan struct {
	file    string
	tensors []tensorPlan
	bytes   int64
}

// planShards packs tensors, in order, into files of at most limit bytes (a
// tensor larger than limit gets a file of its own), named as transformers
// names them.
func planShards(ts []tensorPlan, limit int64) []shardPlan {
	var out []shardPlan
	for _, t := range ts {
		b := t.bytes()
		if len(out) == 0 || (out[len(out)-1].bytes > 0 && out[len(out)-1].bytes+b > limit) {
			out = append(out, shardPlan{})
		}
		s := &out[len(out)-1]
		s.tensors = append(s.tensors, t)
		s.bytes += b
	}
	for i := range out {
		out[i].file = fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(out))
	}
	return out
}
