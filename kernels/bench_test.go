package kernels

import (
	"fmt"
	"testing"
)

// BenchmarkMatMul reports throughput for decode (1 row) and prefill-like
// (64 rows) shapes of a 2048×2048 BF16 weight.
func BenchmarkMatMul(b *testing.B) {
	const k, n = 2048, 2048
	r := newRand(1)
	w := randBF16(r, n*k, 0.02)
	for _, rows := range []int{1, 64} {
		b.Run(fmt.Sprintf("rows=%d/k=%d/n=%d", rows, k, n), func(b *testing.B) {
			x := randVec(r, rows*k, 1)
			y := make([]float32, rows*n)
			b.SetBytes(int64(2 * n * k)) // weight bytes streamed per call
			for b.Loop() {
				MatMul(y, x, w, rows, k, n)
			}
			b.ReportMetric(float64(2*rows*k*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkGatedDelta compares the recurrent and chunked delta rule on one
// 64-token chunk with the model's head sizes (16 key heads, 32 value heads, 128×128).
func BenchmarkGatedDelta(b *testing.B) {
	c := newDeltaCase(1, 64, 0, 16, 32, 128, 128)
	out := make([]float32, c.n*c.hv*c.dv)
	state := make([]float32, len(c.state))
	for _, chunk := range []int{0, 64} {
		name := "recurrent"
		if chunk > 0 {
			name = "chunked"
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				copy(state, c.state)
				c.run(out, state, 0, c.n, chunk)
			}
		})
	}
}

// BenchmarkMoEExpertsDecode runs one token through 8 of the model's experts
// (hidden 2048, intermediate 512).
func BenchmarkMoEExpertsDecode(b *testing.B) {
	const experts, hidden, inter, k = 8, 2048, 512, 8
	r := newRand(2)
	gateUp := randBF16(r, experts*2*inter*hidden, 0.02)
	down := randBF16(r, experts*hidden*inter, 0.02)
	x := randVec(r, hidden, 1)
	ids := []int32{0, 1, 2, 3, 4, 5, 6, 7}
	w := []float32{.2, .2, .1, .1, .1, .1, .1, .1}
	y := make([]float32, hidden)
	b.SetBytes(int64(2 * experts * 3 * inter * hidden))
	for b.Loop() {
		MoEExperts(y, x, ids, w, gateUp, down, 1, hidden, inter, k)
	}
}
