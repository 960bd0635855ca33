package codegen

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/plan"
)

// gdnWY is a gated_delta_wy case kernel for key and value heads hk, hv of
// dims dk, dv (q, k and v rows as the conv output lays them out), chunk 64,
// named for its shape so that compiled variants do not share a name.
func gdnWY(hk, hv, dk, dv, chunk, slice int, split bool) plan.Kernel {
	k := kern("gated_delta_wy", map[string]float64{"row_stride": float64(2*hk*dk + hv*dv), "k_heads": float64(hk), "v_heads": float64(hv),
		"k_dim": float64(dk), "v_dim": float64(dv), "chunk": float64(chunk), "slice": float64(slice), "split": b2f(split), "int_tf32": 0})
	k.Name = fmt.Sprintf("gated_delta_wy_%d_%d_%d_%d_c%d_s%d%s", hk, hv, dk, dv, chunk, slice, map[bool]string{true: "_split", false: ""}[split])
	return k
}

// gdnState is a gated_delta_state case kernel with column tile cols, its
// staging asynchronous (sm_90's, when slice is the whole k_dim) with async.
func gdnState(hk, hv, dk, dv, chunk, slice, cols int, split bool) plan.Kernel {
	return gdnStateAsync(hk, hv, dk, dv, chunk, slice, cols, split, false)
}

func gdnStateAsync(hk, hv, dk, dv, chunk, slice, cols int, split, async bool) plan.Kernel {
	k := kern("gated_delta_state", map[string]float64{"k_heads": float64(hk), "v_heads": float64(hv), "k_dim": float64(dk), "v_dim": float64(dv),
		"chunk": float64(chunk), "slice": float64(slice), "cols": float64(cols), "split": b2f(split), "async": b2f(async), "int_tf32": 0, "lo_acc": 0, "pre_split": 0})
	k.Name = fmt.Sprintf("gated_delta_state_%d_%d_%d_%d_c%d_s%d_n%d%s%s", hk, hv, dk, dv, chunk, slice, cols,
		map[bool]string{true: "_split", false: ""}[split], map[bool]string{true: "_async", false: ""}[async])
	return k
}

// gdnInt is k (gated_delta_wy or gated_delta_state) with its tf32
// operands rounded by integer arithmetic, named apart.
func gdnInt(k plan.Kernel) plan.Kernel {
	k.Params = k.Params.Clone()
	k.Params.SetFlag("int_tf32", true)
	k.Name += "_int"
	return k
}

// gdnLoAcc is gated_delta_state kernel k with the split's corrections
// summed apart, named apart.
func gdnLoAcc(k plan.Kernel) plan.Kernel {
	k.Params = k.Params.Clone()
	k.Params.SetFlag("lo_acc", true)
	k.Name += "_lo"
	return k
}

// gdnPre is split, asynchronous gated_delta_state kernel k with its B
// operands split once by their producers, named apart.
func gdnPre(k plan.Kernel) plan.Kernel {
	k.Params = k.Params.Clone()
	k.Params.SetFlag("pre_split", true)
	k.Name += "_pre"
	return k
}

// gdnFlush is a gated_delta_state case kernel k with flush_k: each chunk's
// kdᵀ·Vnew summed from zero and added to the decayed state rounded to
// nearest.
func gdnFlush(k plan.Kernel) plan.Kernel {
	k.Params = k.Params.Clone()
	k.Params.SetFlag("flush_k", true)
	k.Name += "_fk"
	return k
}

// gdnConv is a causal_conv1d_silu_rows case kernel.
func gdnConv(channels, kernel, rows int) plan.Kernel {
	k := kern("causal_conv1d_silu_rows", map[string]float64{"channels": float64(channels), "kernel": float64(kernel), "rows_per_thread": float64(rows)})
	k.Name = fmt.Sprintf("causal_conv1d_silu_rows_%d_%d_r%d", channels, kernel, rows)
	return k
}

func b2f(x bool) float64 {
	if x {
		return 1
	}
	return 0
}

// gdnChunkKernels are the shapes the compile check renders: the model's
// (16 key heads, 32 value heads, dims 128) at the planner's sm_90 and
// gfx1151 tiles, plain and split, and the tiny fixtures' (2, 4, 16).
func gdnChunkKernels() []plan.Kernel {
	return []plan.Kernel{
		gdnWY(16, 32, 128, 128, 64, 64, true),
		gdnWY(16, 32, 128, 128, 64, 64, false),
		gdnWY(16, 32, 128, 128, 64, 32, true),
		gdnWY(2, 4, 16, 16, 64, 16, true),
		gdnState(16, 32, 128, 128, 64, 128, 32, true),
		gdnStateAsync(16, 32, 128, 128, 64, 128, 32, true, true),
		gdnState(16, 32, 128, 128, 64, 128, 32, false),
		gdnState(16, 32, 128, 128, 64, 32, 32, true),
		gdnState(16, 32, 128, 128, 64, 128, 16, true),
		gdnState(2, 4, 16, 16, 64, 16, 8, true),
		gdnInt(gdnWY(16, 32, 128, 128, 64, 64, true)),
		gdnInt(gdnWY(16, 32, 128, 128, 64, 32, false)),
		gdnInt(gdnWY(2, 4, 16, 16, 64, 16, true)),
		gdnInt(gdnStateAsync(16, 32, 128, 128, 64, 128, 32, true, true)),
		gdnInt(gdnStateAsync(16, 32, 128, 128, 64, 128, 32, false, true)),
		gdnInt(gdnState(16, 32, 128, 128, 64, 32, 32, true)),
		gdnInt(gdnState(2, 4, 16, 16, 64, 16, 8, true)),
		gdnLoAcc(gdnInt(gdnStateAsync(16, 32, 128, 128, 64, 128, 32, true, true))),
		gdnLoAcc(gdnStateAsync(16, 32, 128, 128, 64, 128, 32, true, true)),
		gdnLoAcc(gdnInt(gdnState(16, 32, 128, 128, 64, 32, 32, true))),
		gdnPre(gdnStateAsync(16, 32, 128, 128, 64, 128, 32, true, true)),
		gdnPre(gdnInt(gdnStateAsync(16, 32, 128, 128, 64, 128, 32, true, true))),
		gdnPre(gdnLoAcc(gdnInt(gdnStateAsync(16, 32, 128, 128, 64, 128, 32, true, true)))),
		gdnPre(gdnInt(gdnStateAsync(2, 4, 16, 16, 64, 16, 16, true, true))),
		gdnFlush(gdnStateAsync(16, 32, 128, 128, 64, 128, 32, true, true)),
		gdnFlush(gdnState(16, 32, 128, 128, 64, 32, 32, true)),
		gdnFlush(gdnState(2, 4, 16, 16, 64, 16, 8, true)),
		gdnConv(8192, 4, 8),
		gdnConv(8192, 4, 4),
		gdnConv(300, 4, 3),
	}
}

// TestCompileGDNChunk compiles the chunked GDN families for gfx1151 (no
// scratch, within the VGPR and LDS budgets; its tiles: slice 32) and to PTX
// for sm_90.
func TestCompileGDNChunk(t *testing.T) {
	c := clang(t)
	for _, target := range []plan.Target{plan.GFX1151, plan.SM90} {
		var srcs []hipcc.Source
		for _, k := range gdnChunkKernels() {
			if target == plan.GFX1151 && (k.Params.Int("slice") > 32) {
				continue // sm_90's tiles: more than the 64 KiB of LDS
			}
			if target == plan.GFX1151 && k.Params.Flag("pre_split") {
				continue // sm_90's only: the planner sets it with the asynchronous staging
			}
			s, err := Render(target, k)
			if err != nil {
				t.Fatalf("%s: %v", k.Name, err)
			}
			srcs = append(srcs, hipcc.Source{Name: k.Name, Code: s.Code})
		}
		var results []hipcc.Result
		var err error
		if target == plan.SM90 {
			results, err = c.SyntaxCheckCUDA(context.Background(), srcs, hipcc.Options{})
		} else {
			results, err = c.Compile(context.Background(), hipcc.GFX1151, srcs, hipcc.Options{})
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range results {
			if r.Object == nil || strings.Contains(r.Log, "warning") {
				t.Errorf("%s %s: %s", target, r.Name, r.Log)
				continue
			}
			if target == plan.SM90 {
				// The tensor-core products and the asynchronous copies made it into the PTX.
				ptx := string(r.Object)
				if strings.HasPrefix(r.Name, "gated_delta_") && !strings.Contains(ptx, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32") {
					t.Errorf("%s: no tf32 mma.sync in the PTX", r.Name)
				}
				if strings.Contains(r.Name, "_async") && !strings.Contains(ptx, "cp.async.cg.shared.global") {
					t.Errorf("%s: no cp.async in the PTX", r.Name)
				}
				// int_tf32 rounds on the integer pipes: no conversion left.
				if cvt := strings.Contains(ptx, "cvt.rna.tf32.f32"); strings.HasPrefix(r.Name, "gated_delta_") && strings.Contains(r.Name, "_int") == cvt {
					t.Errorf("%s: cvt.rna.tf32.f32 in the PTX %v, int_tf32 %v", r.Name, cvt, strings.Contains(r.Name, "_int"))
				}
				continue
			}
			res := r.Resources
			if why := res.Spills(); why != "" || res.ScratchBytes != 0 || res.VGPRs > maxVGPRs || res.LDSBytes > maxLDS {
				t.Errorf("%s: scratch %q (%d bytes), %d VGPRs, LDS %d", r.Name, why, res.ScratchBytes, res.VGPRs, res.LDSBytes)
			}
			t.Logf("%s: %d VGPRs, %d LDS bytes", r.Name, res.VGPRs, res.LDSBytes)
		}
	}
}
