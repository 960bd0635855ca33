package codegen

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// precisionCase is a dense gemm of rows × k → n on data like the model's:
// x ~ N(0, 1)·scale in f32, W bf16 ~ N(0, 0.02). Beside the family's f32
// reference (the usual check) it carries y's float64 reference over the
// unstaged x, against which the runner reports the error relative to its
// rms; seqMax and seqMean are those figures of a sequential round-to-
// nearest f32 sum of the staged x (what the f32 engine's own sums give).
func precisionCase(name string, kk plan.Kernel, rows int, scale float64, seed uint64) (c tensorCase, seqMax, seqMean float64) {
	rng := rand.New(rand.NewPCG(seed, 23))
	f := filler{rng}
	k, n := kk.Params.Int("k"), kk.Params.Int("n")
	phys := rows + 2
	xb := aligned(int64(4 * phys * k))
	x := f32View(xb)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * scale)
	}
	wb := aligned(int64(2 * n * k))
	w := bf16View(wb)
	for i := range w {
		w[i] = bf16.FromFloat32(float32(rng.NormFloat64() * 0.02))
	}
	staged := kernels.StageA(x[:rows*k], kernels.ATerms(kk.Params))
	wf := make([]float32, len(w))
	for i, v := range w {
		wf[i] = bf16.ToFloat32(v)
	}
	y64 := make([]float64, rows*n)
	seq := make([]float64, rows*n)
	for r := range rows {
		xr, sr := x[r*k:(r+1)*k], staged[r*k:(r+1)*k]
		for j := range n {
			wj := wf[j*k : (j+1)*k]
			var s float64
			var s32 float32
			for i, v := range xr {
				s += float64(v) * float64(wj[i])
				s32 += float32(float64(sr[i]) * float64(wj[i])) // the product exact in f64, rounded once, then an RN add
			}
			y64[r*n+j], seq[r*n+j] = s, float64(s32)
		}
	}
	var ss float64
	for _, v := range y64 {
		ss += v * v
	}
	rms := math.Sqrt(ss / float64(len(y64)))
	for i, v := range y64 {
		e := math.Abs(seq[i]-v) / rms
		seqMax, seqMean = max(seqMax, e), seqMean+e
	}
	seqMean /= float64(len(y64))
	c = tensorCase{name: name, k: kk, rows: rows, mem: map[string][]byte{"y": f.poison(int64(phys * n)), "x": xb, "w": wb},
		want64: map[string][]float64{"y": y64}}
	return c, seqMax, seqMean
}

// TestWriteGPUCasesPrecision writes the precision cases of the tiled
// GEMMs' sums over K (docs/prefill-gemm.md, "Sums over K"): 256 rows × K →
// 512 at K = 512, 2048 and 4096 (the grouped down's, the projections' and
// o_proj's), x as three bf16 terms, on the wgmma tile of 256 columns (the
// plans' today), of 128 with and without flush_k, and the mma tile of 128
// with and without it — the same files, each compared with the float64
// product: the runner prints the largest and the mean error relative to
// its rms. Without -gpucases: 32 rows, to a temporary directory.
func TestWriteGPUCasesPrecision(t *testing.T) {
	out, rows := *gpuCases, 256
	if out == "" {
		out, rows = t.TempDir(), 32
	}
	for i, c := range []struct {
		k     int
		scale float64
	}{{512, 0.1}, {2048, 1}, {4096, 0.3}} {
		base := fmt.Sprintf("prec_gemm_k%d", c.k)
		kk := gemmKernWGMMA("gemm", float64(c.k), 512, 3, kernels.GEMMTileColsWide)
		tc, seqMax, seqMean := precisionCase(base, kk, rows, c.scale, uint64(700+i))
		tc.note = fmt.Sprintf("x ~ N(0,1)·%g, W ~ N(0,0.02), K = %d: the wgmma tile of 256 columns, no flush (%d truncating MMAs a sum); a sequential RN f32 sum: maxerr %.3g meanerr %.3g (rel)",
			c.scale, c.k, 3*c.k/16, seqMax, seqMean)
		writeTensorCase(t, filepath.Join(out, base), tc)
		for _, v := range []struct {
			suffix string
			k      plan.Kernel
			note   string
		}{
			{"_wg128", gemmKernWGMMA("gemm", float64(c.k), 512, 3, kernels.GEMMTileCols), "the wgmma tile of 128 columns, no flush"},
			{"_wg128_fk", flushKern(gemmKernWGMMA("gemm", float64(c.k), 512, 3, kernels.GEMMTileCols)), "the wgmma tile of 128 columns, flush_k: 12 truncating MMAs a k-tile, RN across the k-tiles"},
			{"_mma", gemmKern("gemm", float64(c.k), 512, 3), "the mma tile of 128 columns, no flush"},
			{"_mma_fk", flushKern(gemmKern("gemm", float64(c.k), 512, 3)), "the mma tile of 128 columns, flush_k: 3 truncating MMAs a slice, RN across the slices"},
		} {
			writeSibling(t, out, base+v.suffix, v.k, rows, base, 0, fmt.Sprintf("%s, on %s's files (RN f32 sum: maxerr %.3g)", v.note, base, seqMax))
		}
	}
}
