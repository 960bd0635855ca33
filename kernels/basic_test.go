package kernels

import (
	"fmt"
	"math"
	"testing"

	"github.com/aimaproject/aimac/bf16"
	"github.com/google/go-cmp/cmp"
)

func TestEmbedding(t *testing.T) {
	const hidden = 3
	table := []uint16{
		bf16.FromFloat32(1), bf16.FromFloat32(2), bf16.FromFloat32(3), // row 0
		bf16.FromFloat32(-1), bf16.FromFloat32(0.5), bf16.FromFloat32(0), // row 1
		bf16.FromFloat32(7), bf16.FromFloat32(8), bf16.FromFloat32(9), // row 2
	}
	ids := []int32{2, 0, 2, 99} // the last id is padding and must not be read
	x := make([]float32, 4*hidden)
	poison(x)
	Embedding(x, table, ids, 3, hidden)
	want := []float32{7, 8, 9, 1, 2, 3, 7, 8, 9}
	if diff := cmp.Diff(want, x[:3*hidden], exact); diff != "" {
		t.Errorf("Embedding (-want +got):\n%s", diff)
	}
	checkPoisoned(t, "Embedding", x[3*hidden:])
}

func TestElementwise(t *testing.T) {
	nan := poisonValue()
	s1 := float32(sigmoid64(1))
	tests := []struct {
		name string
		run  func() []float32
		want []float32
	}{
		{"SiLUMul", func() []float32 {
			out := []float32{nan, nan, nan, nan}
			SiLUMul(out, []float32{0, 1, -2, nan}, []float32{5, 2, 3, nan}, 3)
			return out
		}, []float32{0, float32(2 * silu64(1)), float32(3 * silu64(-2)), nan}},
		{"Add", func() []float32 {
			x := []float32{1, 2, nan}
			Add(x, []float32{0.5, -2, nan}, 2)
			return x
		}, []float32{1.5, 0, nan}},
		{"SharedExpertCombine", func() []float32 {
			// Two valid tokens of width 2, one padding token.
			x := []float32{1, 1, 2, 2, nan, nan}
			routed := []float32{0.5, -0.5, 1, 0, nan, nan}
			shared := []float32{2, 4, 10, -10, nan, nan}
			SharedExpertCombine(x, routed, shared, []float32{0, 1, nan}, 2, 2)
			return x
		}, []float32{1 + 0.5 + 0.5*2, 1 - 0.5 + 0.5*4, 2 + 1 + s1*10, 2 + 0 - s1*10, nan, nan}},
		{"AttnOutputGate", func() []float32 {
			// n=1 valid token (+1 padding), 2 heads of d=2; qg rows hold [q_h0 g_h0 q_h1 g_h1].
			o := []float32{1, 2, 3, 4, nan, nan, nan, nan}
			qg := []float32{9, 9, 0, 1, 9, 9, -1, 2, nan, nan, nan, nan, nan, nan, nan, nan}
			AttnOutputGate(o, qg, 1, 2, 2)
			return o
		}, []float32{1 * 0.5, 2 * s1, 3 * float32(sigmoid64(-1)), 4 * float32(sigmoid64(2)), nan, nan, nan, nan}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.run(), approx(0, 1e-6)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestHelpers(t *testing.T) {
	tests := []struct {
		name      string
		got, want float32
	}{
		{"sigmoid(0)", sigmoid(0), 0.5},
		{"silu(0)", silu(0), 0},
		{"silu(-100) does not NaN", silu(-100), 0},
		{"silu(100)", silu(100), 100},
		{"softplus(0)", softplus(0), float32(math.Ln2)},
		{"softplus(20) below the threshold", softplus(20), float32(softplus64(20))},
		{"softplus(20.5) is linear above the threshold", softplus(20.5), 20.5},
		{"softplus(-30)", softplus(-30), float32(softplus64(-30))},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.got, approx(0, 1e-7)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

// naiveRMSNorm is SPEC §2.2 in float64.
func naiveRMSNorm(x, w []float64, eps float64, onePlus bool) []float64 {
	var ss float64
	for _, v := range x {
		ss += v * v
	}
	inv := 1 / math.Sqrt(ss/float64(len(x))+eps)
	y := make([]float64, len(x))
	for i, v := range x {
		wi := w[i]
		if onePlus {
			wi++
		}
		y[i] = v * inv * wi
	}
	return y
}

func TestRMSNormHandComputed(t *testing.T) {
	// mean(x²) = 4, so rsqrt = 0.5 with eps = 0.
	x := []float32{2, -2, 2, -2}
	w := []float32{0, 1, -0.5, 2}
	y := make([]float32, 4)
	RMSNorm(y, 4, x, 4, w, 1, 4, 0, true)
	if diff := cmp.Diff([]float32{1, -2, 0.5, -3}, y, exact); diff != "" {
		t.Errorf("1+w (-want +got):\n%s", diff)
	}
	RMSNorm(y, 4, x, 4, w, 1, 4, 0, false)
	if diff := cmp.Diff([]float32{0, -1, -0.5, -2}, y, exact); diff != "" {
		t.Errorf("plain w (-want +got):\n%s", diff)
	}
}

func TestRMSNorm(t *testing.T) {
	tests := []struct {
		name                    string
		rows, width, xStr, yStr int
		onePlus, inPlace        bool
	}{
		{"layer norm", 5, 64, 64, 64, true, false},
		{"plain weight", 3, 33, 33, 33, false, false},
		{"q_norm over interleaved q/gate", 6, 16, 32, 16, true, false},
		{"k_norm in place", 4, 16, 16, 16, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRand(1)
			const pad = 2
			x := randVec(r, (tt.rows+pad)*tt.xStr, 3)
			poison(x[tt.rows*tt.xStr:])
			w := randVec(r, tt.width, 0.3)
			var want []float32
			for row := range tt.rows {
				want = append(want, f32(naiveRMSNorm(f64(x[row*tt.xStr:][:tt.width]), f64(w), 1e-6, tt.onePlus))...)
			}
			y := make([]float32, (tt.rows+pad)*tt.yStr)
			poison(y)
			if tt.inPlace {
				y = x
			}
			RMSNorm(y, tt.yStr, x, tt.xStr, w, tt.rows, tt.width, 1e-6, tt.onePlus)
			var got []float32
			for row := range tt.rows {
				got = append(got, y[row*tt.yStr:][:tt.width]...)
			}
			if diff := cmp.Diff(want, got, approx(1e-6, 1e-5)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			checkPoisoned(t, "rows ≥ n", y[tt.rows*tt.yStr:])
			if tt.xStr > tt.width && !tt.inPlace {
				// The gate half of each q/gate row is neither read nor changed.
				for row := range tt.rows {
					checkPoisoned(t, "output gaps", y[row*tt.yStr+tt.width:(row+1)*tt.yStr])
				}
			}
		})
	}
}

func TestGatedRMSNorm(t *testing.T) {
	r := newRand(2)
	const rows, d, pad = 6, 32, 2
	o := randVec(r, (rows+pad)*d, 2)
	z := randVec(r, (rows+pad)*d, 2)
	poison(o[rows*d:])
	poison(z[rows*d:])
	w := randUniform(r, d, 0.5, 1.5)
	var want []float32
	for row := range rows {
		n := naiveRMSNorm(f64(o[row*d:][:d]), f64(w), 1e-6, false)
		for i := range n {
			n[i] *= silu64(float64(z[row*d+i]))
		}
		want = append(want, f32(n)...)
	}
	y := make([]float32, (rows+pad)*d)
	poison(y)
	GatedRMSNorm(y, o, z, w, rows, d, 1e-6)
	if diff := cmp.Diff(want, y[:rows*d], approx(1e-6, 1e-5)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	checkPoisoned(t, "rows ≥ n", y[rows*d:])
}

func TestL2NormHeads(t *testing.T) {
	r := newRand(3)
	const n, heads, dim, pad = 3, 2, 8, 1
	const stride = 3*heads*dim + 5 // q ‖ k ‖ v ‖ extra columns, like the conv output
	x := randVec(r, (n+pad)*stride, 1)
	poison(x[n*stride:])
	orig := append([]float32(nil), x...)
	scale := float32(1 / math.Sqrt(dim))
	L2NormHeads(x, stride, n, heads, dim, 1e-6, scale)
	for tok := range n {
		for h := range heads {
			v := f64(orig[tok*stride+h*dim:][:dim])
			var ss float64
			for _, e := range v {
				ss += e * e
			}
			for i := range v {
				v[i] = v[i] / math.Sqrt(ss+1e-6) * float64(scale)
			}
			if diff := cmp.Diff(f32(v), x[tok*stride+h*dim:][:dim], approx(1e-7, 1e-6)); diff != "" {
				t.Errorf("token %d head %d (-want +got):\n%s", tok, h, diff)
			}
		}
		rest := tok*stride + heads*dim
		if diff := cmp.Diff(orig[rest:(tok+1)*stride], x[rest:(tok+1)*stride], exact); diff != "" {
			t.Errorf("token %d: columns past the heads changed:\n%s", tok, diff)
		}
	}
	checkPoisoned(t, "rows ≥ n", x[n*stride:])
}

// naiveMatMul is y = x·Wᵀ in float64.
func naiveMatMul(x []float32, w []uint16, rows, k, n int) []float32 {
	wd := wideBF16(w)
	y := make([]float64, rows*n)
	for r := range rows {
		for j := range n {
			var s float64
			for i := range k {
				s += float64(x[r*k+i]) * wd[j*k+i]
			}
			y[r*n+j] = s
		}
	}
	return f32(y)
}

func TestMatMul(t *testing.T) {
	tests := []struct{ rows, k, n int }{
		{1, 7, 5},     // decode, k not a multiple of 4
		{3, 64, 40},   // few rows: direct BF16 dot
		{4, 33, 9},    // widened weights
		{70, 48, 12},  // crosses the 64-row block; fewer columns than rows
		{130, 16, 1},  // a single output column (shared expert gate)
		{5, 256, 100}, // long reduction
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("rows=%d/k=%d/n=%d", tt.rows, tt.k, tt.n), func(t *testing.T) {
			r := newRand(4)
			const pad = 2
			x := randVec(r, (tt.rows+pad)*tt.k, 1)
			poison(x[tt.rows*tt.k:])
			w := randBF16(r, tt.n*tt.k, 0.2)
			want := naiveMatMul(x, w, tt.rows, tt.k, tt.n)
			y := make([]float32, (tt.rows+pad)*tt.n)
			poison(y)
			MatMul(y, x, w, tt.rows, tt.k, tt.n)
			if diff := cmp.Diff(want, y[:tt.rows*tt.n], approx(1e-5, 1e-5)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			checkPoisoned(t, "rows ≥ n", y[tt.rows*tt.n:])

			// The result does not depend on how the work is split.
			forceParallel(t)
			y2 := make([]float32, len(y))
			poison(y2)
			MatMul(y2, x, w, tt.rows, tt.k, tt.n)
			if diff := cmp.Diff(y, y2, exact); diff != "" {
				t.Errorf("parallel differs from serial:\n%s", diff)
			}
		})
	}
}
