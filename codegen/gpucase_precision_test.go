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
			{"_wg_fk", flushHalvesKern(gemmKernWGMMA("gemm", float64(c.k), 512, 3, kernels.GEMMTileColsWide)), "the wgmma tile of 256 columns, flush_k half the columns at a time"},
			{"_wg128", gemmKernWGMMA("gemm", float64(c.k), 512, 3, kernels.GEMMTileCols), "the wgmma tile of 128 columns, no flush"},
			{"_wg128_fk", flushKern(gemmKernWGMMA("gemm", float64(c.k), 512, 3, kernels.GEMMTileCols)), "the wgmma tile of 128 columns, flush_k: 12 truncating MMAs a k-tile, RN across the k-tiles"},
			{"_wg128_fk16", flush16Kern(gemmKernWGMMA("gemm", float64(c.k), 512, 3, kernels.GEMMTileCols)), "the wgmma tile of 128 columns, flush_k16: 3 truncating MMAs a slice, RN across the slices"},
			{"_mma", gemmKern("gemm", float64(c.k), 512, 3), "the mma tile of 128 columns, no flush"},
			{"_mma_fk", flushKern(gemmKern("gemm", float64(c.k), 512, 3)), "the mma tile of 128 columns, flush_k: 3 truncating MMAs a slice, RN across the slices"},
		} {
			writeSibling(t, out, base+v.suffix, v.k, rows, base, 0, fmt.Sprintf("%s, on %s's files (RN f32 sum: maxerr %.3g)", v.note, base, seqMax))
		}
	}
}

// gdnState64 is kernels.GatedDeltaState in float64 on the same f32 inputs:
// out and state are updated in place.
func gdnState64(out, state []float64, w, qw, kd, u, gc []float32, n, hv, dk, dv, chunk int) {
	vnew := make([]float64, chunk*dv)
	for j := range hv {
		s := state[j*dk*dv:][:dk*dv]
		for t0 := 0; t0 < n; t0 += chunk {
			L := min(chunk, n-t0)
			at := func(r int) int { return (t0+r)*hv + j }
			for r := range L {
				vr, o := vnew[r*dv:][:dv], out[at(r)*dv:][:dv]
				for c := range vr {
					vr[c] = float64(u[at(r)*dv+c])
				}
				for a := range dk {
					row := s[a*dv:][:dv]
					wa, qa := float64(w[at(r)*dk+a]), float64(qw[at(r)*dk+a])
					for c, x := range row {
						vr[c] -= wa * x
						o[c] += qa * x
					}
				}
			}
			decay := math.Exp(float64(gc[at(L-1)]))
			for a := range dk {
				row := s[a*dv:][:dv]
				for c := range row {
					row[c] *= decay
				}
				for r := range L {
					ka := float64(kd[at(r)*dk+a])
					for c, x := range vnew[r*dv:][:dv] {
						row[c] += ka * x
					}
				}
			}
		}
	}
}

// TestWriteGPUCasesPrecisionGDN writes the precision cases of the chunked
// GDN's state across chunks (docs/prefill-gdn.md, "Sums across chunks"):
// gated_delta_state over 8192 tokens (128 chunks) of one key head and two
// value heads at the model's dims, slow decays (|g| ≤ 0.02 a token: the
// state carries far), split tf32 products, with and without flush_k, on
// the same files; out and the final state compared with the float64
// recurrence on the same inputs. Without -gpucases: 256 tokens.
func TestWriteGPUCasesPrecisionGDN(t *testing.T) {
	out, n := *gpuCases, 8192
	if out == "" {
		out, n = t.TempDir(), 256
	}
	k := gdnStateAsync(1, 2, 128, 128, 64, 128, 32, true, true)
	a := gdnArgs(k, n, n+2, 7100, 0.02, false)
	f64 := func(name string, rows int) []float64 {
		v := a.F32(name)
		if rows > 0 {
			v = v[:rows]
		}
		o := make([]float64, len(v))
		for i, x := range v {
			o[i] = float64(x)
		}
		return o
	}
	p := k.Params
	hv, dv := p.Int("v_heads"), p.Int("v_dim")
	out64, state64 := f64("out", n*hv*dv), f64("state", 0)
	gdnState64(out64, state64, a.F32("w"), a.F32("qw"), a.F32("kd"), a.F32("u"), a.F32("gc"), n, hv, p.Int("k_dim"), dv, p.Int("chunk"))
	mem := map[string][]byte{}
	for i, o := range a.Family.Operands {
		mem[o.Name] = a.Mem[i]
	}
	base := "prec_gdn_state_8k"
	writeTensorCase(t, filepath.Join(out, base), tensorCase{name: base, k: k, rows: n, mem: mem,
		want64: map[string][]float64{"out": out64, "state": state64},
		note:   fmt.Sprintf("%d tokens, slow decays, split tf32, no flush: 24 truncating MMAs a chunk onto the carried state", n)})
	writeSibling(t, out, base+"_fk", gdnFlush(k), n, base, 0, "flush_k: each chunk's kdᵀ·Vnew from zero, added to the decayed state rounded to nearest, on "+base+"'s files")
}
