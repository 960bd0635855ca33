package kernels_test

import (
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

func init() {
	examples[ir.GEMV] = ir.Params{Ints: map[string]int64{"k": 8, "n": 3, "rows_per_warp": 2, "split_k": 2, "unroll": 4}, Flags: map[string]bool{"early": true, "staged": false, "l2_prefetch": false}}
	examples[ir.GEMVAdd] = ir.Params{Ints: map[string]int64{"k": 12, "n": 5, "rows_per_warp": 1, "split_k": 4, "unroll": 1}, Flags: map[string]bool{"early": false, "staged": false, "l2_prefetch": false}}
	examples[ir.RMSNormGEMV] = rmsnormGEMVParams(12, 5, 1, 2)
	examples[ir.MoEGateUpGEMV] = ir.Params{Ints: map[string]int64{"experts": 4, "hidden": 8, "inter": 4, "k": 2, "rows_per_warp": 2, "unroll": 4}}
	examples[ir.MoEDownGEMV] = ir.Params{Ints: map[string]int64{"experts": 4, "hidden": 8, "inter": 4, "k": 2, "rows_per_warp": 1, "unroll": 2}}
}

// TestGEMVChecks refuses launch parameters the templates cannot hold:
// a split that does not divide a block's warps, more loads in flight than
// a lane's registers keep without scratch, more slots than the down
// kernel streams at once.
func TestGEMVChecks(t *testing.T) {
	p := func(ints map[string]int64) ir.Params { return ir.Params{Ints: ints} }
	g := func(ints map[string]int64) ir.Params {
		return ir.Params{Ints: ints, Flags: map[string]bool{"early": true, "staged": false, "l2_prefetch": false}}
	}
	cases := []struct {
		name string
		kind ir.Kind
		p    ir.Params
		ok   bool
	}{
		{"gemv", ir.GEMV, g(map[string]int64{"k": 2048, "n": 8192, "rows_per_warp": 2, "split_k": 1, "unroll": 4}), true},
		{"split 3", ir.GEMV, g(map[string]int64{"k": 2048, "n": 1, "rows_per_warp": 1, "split_k": 3, "unroll": 4}), false},
		{"split 16", ir.GEMV, g(map[string]int64{"k": 2048, "n": 1, "rows_per_warp": 1, "split_k": 16, "unroll": 4}), false},
		{"too many loads", ir.GEMV, g(map[string]int64{"k": 2048, "n": 1, "rows_per_warp": 8, "split_k": 1, "unroll": 4}), false},
		{"unroll 9", ir.GEMV, g(map[string]int64{"k": 2048, "n": 1, "rows_per_warp": 1, "split_k": 1, "unroll": 9}), false},
		{"gate_up", ir.MoEGateUpGEMV, p(map[string]int64{"experts": 256, "hidden": 2048, "inter": 512, "k": 8, "rows_per_warp": 2, "unroll": 4}), true},
		{"gate_up loads", ir.MoEGateUpGEMV, p(map[string]int64{"experts": 256, "hidden": 2048, "inter": 512, "k": 8, "rows_per_warp": 4, "unroll": 4}), false},
		{"gate_up k > experts", ir.MoEGateUpGEMV, p(map[string]int64{"experts": 4, "hidden": 8, "inter": 4, "k": 5, "rows_per_warp": 1, "unroll": 1}), false},
		{"down", ir.MoEDownGEMV, p(map[string]int64{"experts": 256, "hidden": 2048, "inter": 512, "k": 8, "rows_per_warp": 1, "unroll": 2}), true},
		{"down slots", ir.MoEDownGEMV, p(map[string]int64{"experts": 256, "hidden": 2048, "inter": 512, "k": 9, "rows_per_warp": 1, "unroll": 1}), false},
		{"rmsnorm_gemv", ir.RMSNormGEMV, rmsnormGEMVParams(2048, 12352, 4, 1), true},
		{"rmsnorm_gemv split 3", ir.RMSNormGEMV, rmsnormGEMVParams(2048, 256, 1, 3), false},
		{"rmsnorm_gemv without eps", ir.RMSNormGEMV, ir.Params{Ints: rmsnormGEMVParams(2048, 256, 1, 8).Ints, Flags: map[string]bool{"one_plus": true, "early": true, "staged": false, "l2_prefetch": false}}, false},
		{"gemv without early", ir.GEMV, p(map[string]int64{"k": 2048, "n": 8192, "rows_per_warp": 2, "split_k": 1, "unroll": 4}), false},
		{"gemv_add late", ir.GEMVAdd, ir.Params{Ints: map[string]int64{"k": 4096, "n": 2048, "rows_per_warp": 1, "split_k": 2, "unroll": 4}, Flags: map[string]bool{"early": false, "staged": false, "l2_prefetch": false}}, true},
		{"gemv_add staged", ir.GEMVAdd, ir.Params{Ints: map[string]int64{"k": 4096, "n": 2048, "rows_per_warp": 1, "split_k": 2, "unroll": 4}, Flags: map[string]bool{"early": false, "staged": true, "l2_prefetch": false}}, true},
		{"staged and early", ir.GEMVAdd, ir.Params{Ints: map[string]int64{"k": 4096, "n": 2048, "rows_per_warp": 1, "split_k": 2, "unroll": 4}, Flags: map[string]bool{"early": true, "staged": true, "l2_prefetch": false}}, false},
		// 8 rows of 4096 (64 KiB) do not fit a staged block's 48 KiB.
		{"staged rows too wide", ir.GEMVAdd, ir.Params{Ints: map[string]int64{"k": 4096, "n": 2048, "rows_per_warp": 1, "split_k": 1, "unroll": 4}, Flags: map[string]bool{"early": false, "staged": true, "l2_prefetch": false}}, false},
		{"down loads", ir.MoEDownGEMV, p(map[string]int64{"experts": 256, "hidden": 2048, "inter": 512, "k": 8, "rows_per_warp": 2, "unroll": 4}), false},
	}
	for _, c := range cases {
		err := kernels.Families[c.kind].CheckParams(c.p)
		if (err == nil) != c.ok {
			t.Errorf("%s: CheckParams = %v, want ok %v", c.name, err, c.ok)
		}
	}
}

// TestGEMVLaunch covers every output row: the grid times the rows a block
// computes reaches n (and one block fewer would not), on every GPU target.
func TestGEMVLaunch(t *testing.T) {
	f := kernels.Families[ir.GEMV]
	for _, tg := range plan.GPUTargets() {
		c := tg.Launch()
		for _, n := range []int64{1, 7, 32, 33, 256, 8192, 248320} {
			for _, split := range []int64{1, 2, 8} {
				for _, rpw := range []int64{1, 2, 4} {
					p := ir.Params{Ints: map[string]int64{"k": 2048, "n": n, "rows_per_warp": rpw, "split_k": split, "unroll": 4}, Flags: map[string]bool{"early": true, "staged": false, "l2_prefetch": false}}
					s := f.Launch(p, 1, c)
					per := int64(c.Warps()) / split * rpw
					if got := int64(s.Grid[0]); got*per < n || (got-1)*per >= n {
						t.Errorf("%s n=%d split=%d rpw=%d: %d blocks of %d rows", tg, n, split, rpw, got, per)
					}
				}
			}
		}
	}
}

func rmsnormGEMVParams(k, n, rpw, split int64) ir.Params {
	p := ir.Params{Ints: map[string]int64{"k": k, "n": n, "rows_per_warp": rpw, "split_k": split, "unroll": 1}}
	p.SetReal("eps", 1e-6)
	p.SetFlag("one_plus", true)
	p.SetFlag("early", true)
	p.SetFlag("staged", false)
	p.SetFlag("l2_prefetch", false)
	return p
}

// TestRMSNormGEMVReference: rmsnorm_gemv's reference computes bit for bit
// what rmsnorm then matmul compute (the pair it replaces), for the normed
// rows it writes and the projection, at odd and real-model widths and
// over several rows; one_plus off takes w as is.
func TestRMSNormGEMVReference(t *testing.T) {
	cases := []struct {
		name       string
		k, n, rows int
		onePlus    bool
	}{
		{"tiny", 64, 4, 1, true},
		{"odd", 13, 7, 3, true},
		{"plain w", 20, 9, 2, false},
		{"qkvzba", 2048, 12352 / 16, 1, true},
	}
	for _, c := range cases {
		p := rmsnormGEMVParams(int64(c.k), int64(c.n), 1, 1)
		p.SetFlag("one_plus", c.onePlus)
		var block [ir.ParamSlots]int32
		f := kernels.Families[ir.RMSNormGEMV]
		a := bind(f, p, c.rows, &block)
		x := append([]float32(nil), a.F32("x")...)
		normW := append([]float32(nil), a.F32("norm_w")...)
		w := append([]uint16(nil), a.BF16("w")...)
		if err := f.Reference(a); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		xn := make([]float32, c.rows*c.k)
		kernels.RMSNorm(xn, c.k, x, c.k, normW, c.rows, c.k, 1e-6, c.onePlus)
		y := make([]float32, c.rows*c.n)
		kernels.MatMul(y, xn, w, c.rows, c.k, c.n)
		bits := func(v []float32) []uint32 {
			out := make([]uint32, len(v))
			for i, f := range v {
				out[i] = math.Float32bits(f)
			}
			return out
		}
		if d := cmp.Diff(bits(xn), bits(a.F32("xn"))); d != "" {
			t.Errorf("%s: xn differs from rmsnorm's (-want +got):\n%s", c.name, d)
		}
		if d := cmp.Diff(bits(y), bits(a.F32("y"))); d != "" {
			t.Errorf("%s: y differs from rmsnorm then matmul (-want +got):\n%s", c.name, d)
		}
	}
}
