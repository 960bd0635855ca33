package kernels

import (
	"hash/fnv"

	"github.com/aimaproject/aimac/bf16"
)

// The uniform fill is a counter-based generator: value i of a buffer is a
// pure function of (seed, key, i), so a GPU kernel (fill_uniform.tmpl)
// writes every element independently and reproduces these functions bit
// for bit, whatever its grid.
//
//	state = mix(mix(seed) ^ key)                   once per buffer
//	r     = mix(state + (i+1)·γ) >> 40             the top 24 bits
//	u     = r · 2^-24                              exact, in [0, 1)
//	value = float32(float64(lo) + float64(scale)·u)
//
// mix is splitmix64's finalizer and γ its odd increment (the golden
// ratio), so r is splitmix64's (i+1)-th output from state. The product
// scale·u multiplies two 24-bit mantissas and is exact in float64, so
// contracting the add into an FMA (either side may) cannot change the
// result; the one rounding of the add and the conversion to float32 (round
// to nearest even) are the same on every IEEE machine. BF16 buffers round
// that float32 to BF16, nearest even (bf16.FromFloat32).

// fillGamma is splitmix64's increment.
const fillGamma = 0x9e3779b97f4a7c15

// FillKey is the key of a buffer: FNV-1a (64-bit) of its name.
func FillKey(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// mix64 is splitmix64's finalizer, a bijection of 64-bit integers.
func mix64(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// fillState is the per-buffer start of the counter stream.
func fillState(seed, key uint64) uint64 { return mix64(mix64(seed) ^ key) }

// fillValue is element i of the stream as float32.
func fillValue(state uint64, i int64, lo, scale float64) float32 {
	r := mix64(state+uint64(i+1)*fillGamma) >> 40
	return float32(lo + scale*(float64(r)*0x1p-24))
}

// FillUniform returns element i of the buffer keyed key under seed:
// uniform in [lo, lo+scale] with 2^24 equally spaced levels, as float32.
func FillUniform(seed, key uint64, i int64, lo, scale float32) float32 {
	return fillValue(fillState(seed, key), i, float64(lo), float64(scale))
}

// FillUniformF32 writes out[i] = FillUniform(seed, key, i, lo, scale) for
// i < n.
func FillUniformF32(out []float32, n int, seed, key uint64, lo, scale float32) {
	state, l, s := fillState(seed, key), float64(lo), float64(scale)
	out = out[:n]
	parallelFor(n, 16, func(a, b int) {
		for i := a; i < b; i++ {
			out[i] = fillValue(state, int64(i), l, s)
		}
	})
}

// FillUniformBF16 writes FillUniform(seed, key, i, lo, scale) rounded to
// BF16 (nearest even) to out[i] for i < n.
func FillUniformBF16(out []uint16, n int, seed, key uint64, lo, scale float32) {
	state, l, s := fillState(seed, key), float64(lo), float64(scale)
	out = out[:n]
	parallelFor(n, 16, func(a, b int) {
		for i := a; i < b; i++ {
			out[i] = bf16.FromFloat32(fillValue(state, int64(i), l, s))
		}
	})
}
