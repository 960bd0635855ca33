package codegen

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// gemv is a gemv case kernel: the matmul shape and the launch parameters
// (the stream waits at the kernel's entry; early moves its first loads
// above the wait).
func gemv(k, n, rpw, split, unroll float64) plan.Kernel {
	return kern("gemv", map[string]float64{"k": k, "n": n, "rows_per_warp": rpw, "split_k": split, "unroll": unroll, "early": 0, "staged": 0, "l2_prefetch": 0})
}

// early is k with its first weight loads before PDL_WAIT() (the early
// flag of the gemv families), named for it.
func early(k plan.Kernel) plan.Kernel {
	k.Params = k.Params.Clone()
	k.Params.SetFlag("early", true)
	k.Name = k.Family + "_early_case"
	return k
}

// staged is k with its blocks' weight rows copied to shared memory before
// PDL_WAIT() (the staged flag of the gemv families), named for it.
func staged(k plan.Kernel) plan.Kernel {
	k.Params = k.Params.Clone()
	k.Params.SetFlag("staged", true)
	k.Name = k.Family + "_staged_case"
	return k
}

// l2pf is k with its first weight bytes asked of the L2 before PDL_WAIT()
// (the l2_prefetch flag of the gemv families and moe_decode_gate_up),
// named for it.
func l2pf(k plan.Kernel) plan.Kernel {
	k.Params = k.Params.Clone()
	k.Params.SetFlag("l2_prefetch", true)
	k.Name = k.Family + "_l2pf_case"
	return k
}

// gemvAdd is a gemv_add case kernel, as gemv.
func gemvAdd(k, n, rpw, split, unroll float64) plan.Kernel {
	return kern("gemv_add", map[string]float64{"k": k, "n": n, "rows_per_warp": rpw, "split_k": split, "unroll": unroll, "early": 0, "staged": 0, "l2_prefetch": 0})
}

// normGEMV is an rmsnorm_gemv case kernel: the matmul shape, the launch
// parameters and the norm's 1+w (eps as the model's).
func normGEMV(k, n, rpw, split, unroll float64, onePlus bool) plan.Kernel {
	flag := 0.0
	if onePlus {
		flag = 1
	}
	return kern("rmsnorm_gemv", map[string]float64{"k": k, "n": n, "rows_per_warp": rpw, "split_k": split, "unroll": unroll,
		"eps": 1e-6, "one_plus": flag, "early": 0, "staged": 0, "l2_prefetch": 0})
}

func moeStream(family string, experts, hidden, inter, k, rpw, unroll float64) plan.Kernel {
	return kern(family, map[string]float64{"experts": experts, "hidden": hidden, "inter": inter, "k": k, "rows_per_warp": rpw, "unroll": unroll})
}

// TestWriteGPUCasesGEMV writes the correctness cases of the streaming
// families: odd N and K, N below the rows of a block, K with a remainder
// past the unrolled passes (and K % 8 ≠ 0, the one-element path), every
// split, the tiny fixtures' shapes (hidden 64, 16 experts, top-4, inter
// 32), the real model's narrow outputs, and a second row (the kernels are
// right for any rows, the planner launches them with one).
func TestWriteGPUCasesGEMV(t *testing.T) {
	out := *gpuCases
	if out == "" {
		out = t.TempDir()
	}
	for i, c := range gemvCases {
		dir := filepath.Join(out, c.name)
		writeCase(t, dir, c, uint64(100+i))
		if entries, err := os.ReadDir(dir); err != nil || len(entries) < 4 {
			t.Errorf("case %s: wrote %d files (%v)", c.name, len(entries), err)
		}
	}
}

// TestCompileGEMVCases compiles every correctness case's kernel for
// gfx1151 (the one-element paths, the splits and the odd shapes are in no
// frozen plan): no scratch, LDS within budget; and to PTX through clang's
// CUDA front end without a warning.
func TestCompileGEMVCases(t *testing.T) { compileCases(t, gemvCases) }

// compileCases compiles every case's kernel for gfx1151: no scratch, LDS
// within budget; and to PTX through clang's CUDA front end without a
// warning.
func compileCases(t *testing.T, cases []gpuCase) {
	c := clang(t)
	render := func(tg plan.Target) []hipcc.Source {
		var srcs []hipcc.Source
		for _, gc := range cases {
			k := gc.k
			k.Name = gc.name
			s, err := Render(tg, k)
			if err != nil {
				t.Fatal(err)
			}
			srcs = append(srcs, hipcc.Source{Name: k.Name, Code: s.Code})
		}
		return srcs
	}
	ptx, err := c.SyntaxCheckCUDA(context.Background(), render(plan.SM90), hipcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ptx {
		if !bytes.Contains(r.Object, []byte(".entry "+r.Name)) || strings.Contains(r.Log, "warning") {
			t.Errorf("%s: no .entry in the PTX, or warnings:\n%s", r.Name, r.Log)
		}
	}
	srcs := render(plan.GFX1151)
	results, err := c.Compile(context.Background(), hipcc.GFX1151, srcs, hipcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Object == nil {
			t.Errorf("%s: no code object\n%s", r.Name, r.Log)
			continue
		}
		if why := r.Resources.Spills(); why != "" || r.Resources.ScratchBytes != 0 || r.Resources.LDSBytes > maxLDS {
			t.Errorf("%s: scratch %q (%d bytes), LDS %d", r.Name, why, r.Resources.ScratchBytes, r.Resources.LDSBytes)
		}
	}
}

// gemvCases are the streaming families' correctness cases.
var gemvCases = []gpuCase{
	{"gemv_45", gemv(2048, 45, 2, 1, 4), 1, 0},
	{"gemv_rows2", gemv(2048, 45, 4, 1, 4), 2, 0},
	{"gemv_odd", gemv(20, 7, 2, 2, 4), 2, 0},
	{"gemv_krem", gemv(2056, 33, 4, 1, 4), 1, 0},
	{"gemv_kodd_split", gemv(2051, 5, 1, 8, 1), 1, 0},
	{"gemv_split_rem", gemv(1000, 19, 2, 4, 2), 1, 0},
	{"gemv_n1", gemv(2048, 1, 1, 8, 1), 1, 0},
	{"gemv_n32", gemv(2048, 32, 1, 8, 1), 1, 0},
	{"gemv_router", gemv(2048, 256, 1, 8, 1), 1, 0},
	{"gemv_out", gemv(4096, 300, 1, 2, 4), 1, 0},
	{"gemv_tiny_qkv", gemv(64, 192, 1, 1, 1), 1, 0},
	{"gemv_tiny_b", gemv(64, 4, 1, 1, 1), 1, 0},
	{"gemv_tiny_head", gemv(64, 512, 1, 1, 1), 1, 0},
	{"gemv_tiny_down", gemv(32, 64, 1, 1, 1), 1, 0},
	// rmsnorm_gemv: the same shapes as gemv's plus the fused projections of
	// the real model (GDN qkvzba N = 8192+4096+32+32, attention q|k|v N =
	// 8192+512+512, the router, the LM head's block shape) and of the tiny
	// fixture (hidden 64: qkvzba 128+64+4+4, q|k|v 256+64+64, router 16).
	{"norm_gemv_45", normGEMV(2048, 45, 2, 1, 4, true), 1, 0},
	{"norm_gemv_rows2", normGEMV(2048, 45, 4, 1, 4, true), 2, 0},
	{"norm_gemv_odd", normGEMV(20, 7, 2, 2, 4, true), 2, 0},
	{"norm_gemv_krem", normGEMV(2056, 33, 4, 1, 4, true), 1, 0},
	{"norm_gemv_kodd_split", normGEMV(2051, 5, 1, 8, 1, true), 1, 0},
	{"norm_gemv_plain_w", normGEMV(1000, 19, 2, 4, 2, false), 1, 0},
	{"norm_gemv_qkvzba", normGEMV(2048, 12352, 4, 1, 4, true), 1, 0},
	{"norm_gemv_qkv", normGEMV(2048, 9216, 4, 1, 4, true), 1, 0},
	{"norm_gemv_router", normGEMV(2048, 256, 1, 8, 1, true), 1, 0},
	{"norm_gemv_head", normGEMV(2048, 4133, 4, 1, 4, true), 1, 0},
	{"norm_gemv_tiny_qkvzba", normGEMV(64, 200, 1, 1, 1, true), 1, 0},
	{"norm_gemv_tiny_qkv", normGEMV(64, 384, 1, 1, 1, true), 1, 0},
	{"norm_gemv_tiny_router", normGEMV(64, 16, 1, 2, 1, true), 1, 0},
	// The early stream (first loads before PDL_WAIT(); launched here
	// without programmatic serialization, so the wait returns at once):
	// slices shorter than a lane's early chunks (the guards), longer ones
	// (the stream and its tail after them), K % 8 ≠ 0 (no early loads),
	// every family, the tiny fixture's shapes (hidden 64; its GDN out_proj
	// 64 → 64), two rows.
	{"gemv_early_45", early(gemv(2048, 45, 2, 1, 4)), 1, 0},
	{"gemv_early_rows2", early(gemv(2048, 45, 4, 1, 4)), 2, 0},
	{"gemv_early_odd", early(gemv(20, 7, 2, 2, 4)), 2, 0},
	{"gemv_early_krem", early(gemv(2056, 33, 4, 1, 4)), 1, 0},
	{"gemv_early_split_rem", early(gemv(1000, 19, 2, 4, 2)), 1, 0},
	{"gemv_early_n1", early(gemv(2048, 1, 1, 8, 1)), 1, 0},
	{"gemv_early_tiny_qkv", early(gemv(64, 192, 1, 1, 1)), 1, 0},
	{"gemv_early_tiny_down", early(gemv(32, 64, 1, 1, 1)), 1, 0},
	{"gemv_add_out", gemvAdd(4096, 300, 1, 2, 4), 1, 0},
	{"gemv_add_early_out", early(gemvAdd(4096, 300, 1, 2, 4)), 1, 0},
	{"gemv_add_early_rows2", early(gemvAdd(4096, 45, 2, 2, 4)), 2, 0},
	{"gemv_add_early_long", early(gemvAdd(8200, 37, 1, 1, 4)), 1, 0},
	{"gemv_add_early_split_rem", early(gemvAdd(1000, 19, 2, 4, 2)), 1, 0},
	{"gemv_add_early_odd", early(gemvAdd(20, 7, 2, 2, 4)), 2, 0},
	{"gemv_add_early_tiny", early(gemvAdd(64, 64, 1, 1, 1)), 1, 0},
	// The staged stream (a block's rows in shared memory): rows past N, a
	// split with a short last slice, K % 8 ≠ 0 (not staged), every family,
	// the tiny fixture's shapes, two rows.
	{"gemv_staged_45", staged(gemv(2048, 45, 1, 2, 4)), 1, 0},
	{"gemv_staged_split_rem", staged(gemv(1000, 19, 2, 4, 2)), 2, 0},
	{"gemv_staged_odd", staged(gemv(20, 7, 2, 2, 4)), 2, 0},
	{"gemv_staged_tiny_qkv", staged(gemv(64, 192, 1, 1, 1)), 1, 0},
	{"gemv_add_staged_out", staged(gemvAdd(4096, 300, 1, 2, 4)), 1, 0},
	{"gemv_add_staged_rows2", staged(gemvAdd(4096, 45, 1, 2, 4)), 2, 0},
	{"gemv_add_staged_rem", staged(gemvAdd(2056, 37, 1, 1, 4)), 1, 0},
	{"gemv_add_staged_tiny", staged(gemvAdd(64, 64, 1, 1, 1)), 1, 0},
	{"norm_gemv_staged_router", staged(normGEMV(2048, 256, 1, 8, 1, true)), 1, 0},
	{"norm_gemv_staged_odd", staged(normGEMV(20, 7, 2, 2, 4, true)), 2, 0},
	{"norm_gemv_staged_tiny_router", staged(normGEMV(64, 16, 1, 2, 1, true)), 1, 0},
	{"norm_gemv_early_45", early(normGEMV(2048, 45, 2, 1, 4, true)), 1, 0},
	{"norm_gemv_early_rows2", early(normGEMV(2048, 45, 4, 1, 4, true)), 2, 0},
	{"norm_gemv_early_odd", early(normGEMV(20, 7, 2, 2, 4, true)), 2, 0},
	{"norm_gemv_early_krem", early(normGEMV(2056, 33, 4, 1, 4, true)), 1, 0},
	{"norm_gemv_early_kodd_split", early(normGEMV(2051, 5, 1, 8, 1, true)), 1, 0},
	{"norm_gemv_early_plain_w", early(normGEMV(1000, 19, 2, 4, 2, false)), 1, 0},
	{"norm_gemv_early_qkvzba", early(normGEMV(2048, 12352, 4, 1, 4, true)), 1, 0},
	{"norm_gemv_early_router", early(normGEMV(2048, 256, 1, 8, 1, true)), 1, 0},
	{"norm_gemv_early_tiny_qkvzba", early(normGEMV(64, 200, 1, 1, 1, true)), 1, 0},
	{"norm_gemv_early_tiny_router", early(normGEMV(64, 16, 1, 2, 1, true)), 1, 0},
	// The L2 prefetch before the wait (launched without programmatic
	// serialization: the prefetch, then the loads): rows past N (no
	// prefetch for them), a split whose last slice is short, K % 8 ≠ 0 (no
	// prefetch), slices prefetched whole (matrices within the budget) and
	// in part (the real qkv|z|b|a, 50.6 MB: a third of every slice), every
	// family, the tiny fixture's shapes, two rows.
	{"gemv_l2pf_45", l2pf(gemv(2048, 45, 2, 1, 4)), 1, 0},
	{"gemv_l2pf_rows2", l2pf(gemv(2048, 45, 4, 1, 4)), 2, 0},
	{"gemv_l2pf_odd", l2pf(gemv(20, 7, 2, 2, 4)), 2, 0},
	{"gemv_l2pf_split_rem", l2pf(gemv(1000, 19, 2, 4, 2)), 1, 0},
	{"gemv_l2pf_kodd_split", l2pf(gemv(2051, 5, 1, 8, 1)), 1, 0},
	{"gemv_l2pf_n1", l2pf(gemv(2048, 1, 1, 8, 1)), 1, 0},
	{"gemv_l2pf_tiny_qkv", l2pf(gemv(64, 192, 1, 1, 1)), 1, 0},
	{"gemv_l2pf_tiny_down", l2pf(gemv(32, 64, 1, 1, 1)), 1, 0},
	{"gemv_add_l2pf_out", l2pf(gemvAdd(4096, 300, 1, 2, 4)), 1, 0},
	{"gemv_add_l2pf_real", l2pf(gemvAdd(4096, 2048, 1, 2, 4)), 1, 0},
	{"gemv_add_l2pf_rows2", l2pf(gemvAdd(4096, 45, 2, 2, 4)), 2, 0},
	{"gemv_add_l2pf_split_rem", l2pf(gemvAdd(1000, 19, 2, 4, 2)), 1, 0},
	{"gemv_add_l2pf_odd", l2pf(gemvAdd(20, 7, 2, 2, 4)), 2, 0},
	{"gemv_add_l2pf_tiny", l2pf(gemvAdd(64, 64, 1, 1, 1)), 1, 0},
	{"norm_gemv_l2pf_45", l2pf(normGEMV(2048, 45, 2, 1, 4, true)), 1, 0},
	{"norm_gemv_l2pf_rows2", l2pf(normGEMV(2048, 45, 4, 1, 4, true)), 2, 0},
	{"norm_gemv_l2pf_odd", l2pf(normGEMV(20, 7, 2, 2, 4, true)), 2, 0},
	{"norm_gemv_l2pf_kodd_split", l2pf(normGEMV(2051, 5, 1, 8, 1, true)), 1, 0},
	{"norm_gemv_l2pf_plain_w", l2pf(normGEMV(1000, 19, 2, 4, 2, false)), 1, 0},
	{"norm_gemv_l2pf_qkvzba", l2pf(normGEMV(2048, 12352, 4, 1, 4, true)), 1, 0},
	{"norm_gemv_l2pf_qkv", l2pf(normGEMV(2048, 9216, 4, 1, 4, true)), 1, 0},
	{"norm_gemv_l2pf_router", l2pf(normGEMV(2048, 256, 1, 8, 1, true)), 1, 0},
	{"norm_gemv_l2pf_tiny_qkvzba", l2pf(normGEMV(64, 200, 1, 1, 1, true)), 1, 0},
	{"norm_gemv_l2pf_tiny_router", l2pf(normGEMV(64, 16, 1, 2, 1, true)), 1, 0},
	{"moe_gu_gemv", moeStream("moe_gate_up_gemv", 16, 256, 64, 4, 1, 1), 1, 0},
	{"moe_gu_gemv_wide", moeStream("moe_gate_up_gemv", 8, 2048, 72, 8, 2, 4), 1, 0},
	{"moe_gu_gemv_rows2", moeStream("moe_gate_up_gemv", 8, 2048, 72, 8, 1, 4), 2, 0},
	{"moe_gu_gemv_odd", moeStream("moe_gate_up_gemv", 5, 20, 6, 3, 2, 1), 1, 0},
	{"moe_gu_gemv_tiny", moeStream("moe_gate_up_gemv", 16, 64, 32, 4, 1, 1), 1, 0},
	{"moe_dn_gemv", moeStream("moe_down_gemv", 16, 256, 64, 4, 1, 1), 1, 0},
	{"moe_dn_gemv_wide", moeStream("moe_down_gemv", 8, 1024, 512, 8, 1, 2), 1, 0},
	{"moe_dn_gemv_rows2", moeStream("moe_down_gemv", 8, 1030, 512, 8, 2, 1), 2, 0},
	{"moe_dn_gemv_odd", moeStream("moe_down_gemv", 5, 13, 10, 3, 2, 1), 1, 0},
	{"moe_dn_gemv_tiny", moeStream("moe_down_gemv", 16, 64, 32, 4, 1, 2), 1, 0},
}

// streamCase is a timed case of one decode row: the kernel, what one
// launch must move, and where its inputs live (a case of the old family
// shares the new one's files through "inputs_from", so both are timed on
// the same bytes in one run).
type streamCase struct {
	name   string
	k      plan.Kernel
	bytes  int64
	from   string // "": this case writes the inputs
	note   string
	stored map[string]int64 // elements of an operand written to its file; the rest is zeros on the device
}

// streamMeta is caseMeta with the timing fields gpucheck reads.
type streamMeta struct {
	caseMeta
	TimeReps   int    `json:"time_reps"`
	Bytes      int64  `json:"bytes"`
	InputsFrom string `json:"inputs_from,omitempty"`
	Note       string `json:"note"`
}

// TestWriteGPUCasesGEMVSpeed writes the speed cases of the streaming
// families beside the families they replace, at the real model's widths:
// K = 2048 with N = 65536 (256 MB of weights, past the 50 MB L2: the
// stream of the decode step's projections), the GDN layer's fused input
// projection with its norm (N = 12352, and 6× the rows past the L2) and the MoE expert tensors at
// real size (256 experts) with one token routed to 8 of them. Without
// -gpucases the same cases are written to a temporary directory at a
// sixty-fourth of N and a sixteenth of the experts (the real inputs are
// 300 MB), so the writer and its references run in every test run.
func TestWriteGPUCasesGEMVSpeed(t *testing.T) {
	out, N, E := *gpuCases, 65536.0, 256.0
	if out == "" {
		out, N, E = t.TempDir(), 1024, 16
	}
	const K = 2048
	const H, I, top = 2048, 512, 8
	wBytes := int64(N) * K * 2
	guBytes := int64(top) * 2 * I * H * 2
	dnBytes := int64(top) * H * I * 2
	l2 := "the 8 experts' weights (32 MB gate_up, 16 MB down) fit in the 50 MB L2, so repeated launches read them from L2: the full-model bench is the HBM figure"
	hbm := "256 MB of weights, past the L2: every launch streams them from HBM"
	// The real qkvzba (50 MB) barely fits the 50 MB L2: timed launch after launch it is partly
	// read from L2, which flatters it; the ×6 case (6·12352 rows, 303 MB) streams from HBM.
	Q := 12352.0
	if *gpuCases == "" {
		Q = 193
	}
	qkvzbaL2 := "GDN in_proj qkv|z|b|a, real size (50 MB): about the size of the 50 MB L2, so repeated launches partly hit L2; the _x6 case is the HBM figure"
	qkvzbaHBM := "GDN in_proj qkv|z|b|a shape at 6× the rows (303 MB, past the L2): streams from HBM"
	moeStored := func(name string, per int64) map[string]int64 { return map[string]int64{name: top * per} }
	cases := []streamCase{
		{"speed_gemv_65536", gemv(K, N, 4, 1, 4), wBytes + K*4 + int64(N)*4, "", hbm, nil},
		// The early stream on the same bytes, launched without programmatic serialization: it
		// must not be slower (an L2-prefetch variant was: 64 → 88 µs).
		{"speed_gemv_65536_early", early(gemv(K, N, 4, 1, 4)), wBytes + K*4 + int64(N)*4, "speed_gemv_65536", hbm + "; first loads before the wait (no attribute: the wait returns at once)", nil},
		{"speed_gemv_65536_staged", staged(gemv(K, N, 1, 2, 4)), wBytes + K*4 + int64(N)*4, "speed_gemv_65536", hbm + "; each block's 4 rows staged in shared memory (what staging costs on a long stream)", nil},
		// The L2 prefetch on the same bytes without the attribute: the prefetch of a sixteenth
		// of every slice, then the loads at once. What the prefetch instructions cost a stream.
		{"speed_gemv_65536_l2pf", l2pf(gemv(K, N, 4, 1, 4)), wBytes + K*4 + int64(N)*4, "speed_gemv_65536", hbm + "; the first sixteenth of every slice asked of the L2 first (no attribute: the loads follow at once)", nil},
		{"speed_matmul_65536", kern("matmul", map[string]float64{"k": K, "n": N}), wBytes + K*4 + int64(N)*4, "speed_gemv_65536", hbm + " (the family gemv replaces)", nil},
		{"speed_gemv_out", gemv(4096, 2048, 1, 2, 4), 2048*4096*2 + 4096*4 + 2048*4, "", "out_proj / o_proj shape; 16 MB: L2-favoured", nil},
		{"speed_gemv_out_l2pf", l2pf(gemv(4096, 2048, 1, 2, 4)), 2048*4096*2 + 4096*4 + 2048*4, "speed_gemv_out", "out_proj / o_proj shape; 16 MB: L2-favoured; its whole slices asked of the L2 first", nil},
		{"speed_matmul_out", kern("matmul", map[string]float64{"k": 4096, "n": 2048}), 2048*4096*2 + 4096*4 + 2048*4, "speed_gemv_out", "out_proj / o_proj shape; 16 MB: L2-favoured", nil},
		{"speed_gemv_router", gemv(K, 256, 1, 8, 1), 256*K*2 + K*4 + 256*4, "", "router shape; 1 MB: latency-bound", nil},
		{"speed_matmul_router", kern("matmul", map[string]float64{"k": K, "n": 256}), 256*K*2 + K*4 + 256*4, "speed_gemv_router", "router shape; 1 MB: latency-bound", nil},
		{"speed_gemv_n32", gemv(K, 32, 1, 8, 1), 32*K*2 + K*4 + 32*4, "", "GDN b/a shape: latency-bound", nil},
		{"speed_matmul_n32", kern("matmul", map[string]float64{"k": K, "n": 32}), 32*K*2 + K*4 + 32*4, "speed_gemv_n32", "GDN b/a shape: latency-bound", nil},
		{"speed_gemv_n1", gemv(K, 1, 1, 8, 1), K*2 + K*4 + 4, "", "shared-expert gate shape: latency-bound", nil},
		{"speed_matmul_n1", kern("matmul", map[string]float64{"k": K, "n": 1}), K*2 + K*4 + 4, "speed_gemv_n1", "shared-expert gate shape: latency-bound", nil},
		// The input projections of a GDN layer as one launch (qkv|z|b|a, N = 12352) with the layer's
		// norm folded in, beside the same rows without the norm (gemv): the norm's cost per launch.
		{"speed_norm_gemv_qkvzba", normGEMV(K, Q, 4, 1, 4, true), int64(Q)*K*2 + K*4*3 + int64(Q)*4, "", qkvzbaL2, nil},
		{"speed_gemv_qkvzba", gemv(K, Q, 4, 1, 4), int64(Q)*K*2 + K*4 + int64(Q)*4, "", qkvzbaL2 + " (without the norm: what the fold costs)", nil},
		{"speed_norm_gemv_qkvzba_x6", normGEMV(K, 6*Q, 4, 1, 4, true), 6*int64(Q)*K*2 + K*4*3 + 6*int64(Q)*4, "", qkvzbaHBM + "; speed_gemv_65536 is gemv's HBM figure", nil},
		{"speed_norm_gemv_qkvzba_x6_early", early(normGEMV(K, 6*Q, 4, 1, 4, true)), 6*int64(Q)*K*2 + K*4*3 + 6*int64(Q)*4, "speed_norm_gemv_qkvzba_x6", qkvzbaHBM + "; first loads before the wait (no attribute)", nil},
		{"speed_norm_gemv_router", normGEMV(K, 256, 1, 8, 1, true), 256*K*2 + K*4*3 + 256*4, "", "router with the post-attention norm folded in; 1 MB: latency-bound", nil},
		{"speed_moe_gu_gemv", moeStream("moe_gate_up_gemv", E, H, I, top, 1, 4), guBytes + H*4 + top*I*4, "", l2, moeStored("gate_up", 2*I*H)},
		{"speed_moe_gu", kern("moe_gate_up", map[string]float64{"experts": E, "hidden": H, "inter": I, "k": top}), guBytes + H*4 + top*I*4, "speed_moe_gu_gemv", l2, moeStored("gate_up", 2*I*H)},
		{"speed_moe_dn_gemv", moeStream("moe_down_gemv", E, H, I, top, 1, 2), dnBytes + top*I*4 + H*4, "", l2, moeStored("down", H*I)},
		{"speed_moe_dn", kern("moe_down", map[string]float64{"experts": E, "hidden": H, "inter": I, "k": top}), dnBytes + top*I*4 + H*4, "speed_moe_dn_gemv", l2, moeStored("down", H*I)},
	}
	for i, c := range cases {
		writeStreamCase(t, filepath.Join(out, c.name), c, uint64(200+i))
	}
}

// writeStreamCase writes one speed case for a single row: random inputs
// (the experts' ids a permutation of the first 8, whose weights are the
// stored part of the tensor), the reference outputs, the rendered kernel
// and the timing meta. A case with inputs_from writes only its kernel and
// meta.
func writeStreamCase(t *testing.T, dir string, c streamCase, seed uint64) {
	writeStreamCaseRows(t, dir, c, seed, 1, nil)
}

// writeStreamCaseRows is writeStreamCase for a launch of rows rows, with
// prep, when set, adjusting the random inputs before the reference runs.
func writeStreamCaseRows(t *testing.T, dir string, c streamCase, seed uint64, rows int, prep func(*ir.Args)) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := kernels.Families[ir.Kind(c.k.Family)]
	if err := f.CheckParams(c.k.Params); err != nil {
		t.Fatalf("case %s: %v", c.name, err)
	}
	var block [ir.ParamSlots]int32
	meta := streamMeta{caseMeta: caseMeta{Kernel: c.k.Name, Grid: caseGrid(c.k, rows), Block: caseBlock(), N: rows, Params: block},
		TimeReps: 200, Bytes: c.bytes, InputsFrom: c.from, Note: c.note}
	for _, o := range f.Operands {
		meta.Args = append(meta.Args, caseArg{File: o.Name + ".in", DType: string(o.DType), Out: o.Access != ir.Read, Elements: o.Extent(c.k.Params, int64(rows))})
	}
	if c.from == "" {
		rng := rand.New(rand.NewPCG(seed, 13))
		a := &ir.Args{Family: f, Params: c.k.Params, N: rows, Block: &block, Mem: make([][]byte, len(f.Operands))}
		for i, o := range f.Operands {
			a.Mem[i] = aligned(o.Extent(c.k.Params, int64(rows)) * int64(o.DType.Size()))
		}
		for _, o := range f.Operands {
			stored := o.Extent(c.k.Params, int64(rows))
			if s, ok := c.stored[o.Name]; ok {
				stored = s
			}
			switch o.DType {
			case ir.BF16:
				w := a.BF16(o.Name)[:stored]
				for j := range w {
					w[j] = bf16.FromFloat32(float32(rng.NormFloat64() * 0.05))
				}
			case ir.I32:
				ids := a.I32(o.Name)
				for j, e := range rng.Perm(len(ids)) {
					ids[j] = int32(e)
				}
			case ir.F32:
				v := a.F32(o.Name)
				for j := range v {
					if o.Access == ir.Write {
						v[j] = 7
					} else {
						v[j] = float32(rng.Float64()*2 - 1)
					}
				}
				if o.Name == "weights" {
					var s float32
					for _, x := range v {
						s += x + 1
					}
					for j := range v {
						v[j] = (v[j] + 1) / s
					}
				}
			}
		}
		if prep != nil {
			prep(a)
		}
		write := func(name string, i int) {
			b := a.Mem[i]
			if s, ok := c.stored[f.Operands[i].Name]; ok {
				b = b[:s*int64(f.Operands[i].DType.Size())]
			}
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for i, o := range f.Operands {
			write(o.Name+".in", i)
		}
		if err := f.Reference(a); err != nil {
			t.Fatalf("case %s: reference: %v", c.name, err)
		}
		for i, o := range f.Operands {
			if o.Access != ir.Read {
				write(o.Name+".want", i)
			}
		}
	}
	src, err := Render(plan.SM90, c.k)
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := json.MarshalIndent(meta, "", " ")
	if err := os.WriteFile(filepath.Join(dir, "meta.json"), mb, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kernel.cu"), []byte(src.Code), 0o644); err != nil {
		t.Fatal(err)
	}
}
