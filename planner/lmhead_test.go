package planner

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// TestCertifiedHeadPhase: every target's plan has decode_greedy beside
// decode, the same launches but for the LM head, which is lm_head_int8,
// lm_head_certify (with the split and unroll of decode's LM head) and
// lm_head_pick writing tokens and sampled; the derived int8 rows and scales
// are weights the plan records as derived from the BF16 head, which stays.
func TestCertifiedHeadPhase(t *testing.T) {
	for _, cfg := range []struct {
		name string
		c    *arch.Config
	}{{"tiny", tinyConfig(t)}, {"real", arch.Real()}} {
		m := FromConfig(cfg.name, cfg.c)
		V, H := int64(cfg.c.VocabSize), int64(cfg.c.HiddenSize)
		for _, target := range plan.Targets {
			p, err := Plan(m, Options{Target: target, Buckets: []int{16}, ContextTokens: 64})
			if err != nil {
				t.Fatalf("%s %s: %v", cfg.name, target, err)
			}
			var decode, greedy *plan.Phase
			for i := range p.Phases {
				switch p.Phases[i].Kind {
				case plan.DecodeStep:
					decode = &p.Phases[i]
				case plan.DecodeGreedy:
					greedy = &p.Phases[i]
				}
			}
			if decode == nil || greedy == nil {
				t.Fatalf("%s %s: no decode or decode_greedy phase", cfg.name, target)
			}
			kernel := map[string]*plan.Kernel{}
			for i := range p.Kernels {
				kernel[p.Kernels[i].Name] = &p.Kernels[i]
			}
			d, g := decode.Launches, greedy.Launches
			if len(g) != len(d)+2 {
				t.Fatalf("%s %s: %d greedy launches, %d decode ones", cfg.name, target, len(g), len(d))
			}
			for i := range len(d) - 1 {
				if d[i].Kernel != g[i].Kernel {
					t.Errorf("%s %s: launch %d: decode %s, greedy %s", cfg.name, target, i, d[i].Kernel, g[i].Kernel)
				}
			}
			head := kernel[d[len(d)-1].Kernel]
			var fams []string
			for _, l := range g[len(d)-1:] {
				fams = append(fams, kernel[l.Kernel].Family)
			}
			// With the final norm folded into decode's head (rmsnorm_gemv,
			// the GPU plans), the greedy head folds it too: the norm goes.
			wantFams := []string{"lm_head_int8", "lm_head_certify", "lm_head_pick"}
			if target.GPU() {
				wantFams = []string{"rmsnorm_lm_head_int8", "rmsnorm_lm_head_certify", "lm_head_pick"}
			} else if kernel[d[len(d)-2].Kernel].Family != string(ir.RMSNorm) || kernel[g[len(d)-2].Kernel].Family != string(ir.RMSNorm) {
				t.Errorf("%s %s: the cpu plan's steps do not end in the final norm", cfg.name, target)
			}
			if diff := cmp.Diff(wantFams, fams); diff != "" {
				t.Errorf("%s %s: greedy head (-want +got):\n%s", cfg.name, target, diff)
			}
			i8, cert, pick := kernel[g[len(d)-1].Kernel], kernel[g[len(d)].Kernel], kernel[g[len(d)+1].Kernel]
			wantSplit, wantUnroll := 1, 1
			if target.GPU() {
				if head.Family != string(ir.RMSNormGEMV) {
					t.Fatalf("%s %s: decode's LM head is %s", cfg.name, target, head.Family)
				}
				wantSplit, wantUnroll = head.Params.Int("split_k"), head.Params.Int("unroll")
				for _, k := range []*plan.Kernel{i8, cert} {
					if k.Params.Real("eps") != head.Params.Real("eps") || k.Params.Flag("one_plus") != head.Params.Flag("one_plus") {
						t.Errorf("%s %s: %s's norm %v, the BF16 head's %v", cfg.name, target, k.Family, k.Params, head.Params)
					}
				}
				// The int8 head writes the normed row where decode's head does.
				dl, gl := d[len(d)-1], g[len(d)-1]
				if diff := cmp.Diff(dl.Args[len(dl.Args)-1], gl.Args[len(gl.Args)-1]); diff != "" {
					t.Errorf("%s %s: the normed row (-decode's head +the int8 head):\n%s", cfg.name, target, diff)
				}
			}
			if cert.Params.Int("split_k") != wantSplit || cert.Params.Int("unroll") != wantUnroll ||
				cert.Params.Int("group") != i8.Params.Int("group") || cert.Params.Int("blocks") != pick.Params.Int("blocks") ||
				i8.Params.Int("group") != kernels.LMHeadWarps*i8.Params.Int("rows_per_warp") {
				t.Errorf("%s %s: int8 %v, certify %v, pick %v, BF16 head %v", cfg.name, target, i8.Params, cert.Params, pick.Params, head.Params)
			}
			if cfg.name == "real" && target == plan.SM90 {
				// 4 rows per warp, 16-byte chunks: 128 per row, unroll 4; a certify block per SM.
				want := []int{4, 4, 32, 132}
				got := []int{i8.Params.Int("rows_per_warp"), i8.Params.Int("unroll"), i8.Params.Int("group"), cert.Params.Int("blocks")}
				if !slices.Equal(want, got) {
					t.Errorf("real sm_90: rows_per_warp, unroll, group, blocks %v, want %v", got, want)
				}
			}
			if !slices.Contains(greedy.Outputs, plan.PortSampled) || !slices.Contains(greedy.Inputs, plan.PortTokens) {
				t.Errorf("%s %s: greedy outputs %v", cfg.name, target, greedy.Outputs)
			}
			if slices.Contains(greedy.Outputs, plan.PortLogits) {
				t.Errorf("%s %s: the greedy step writes logits", cfg.name, target)
			}
			bufs := map[string]plan.Buffer{}
			for _, b := range p.Buffers {
				bufs[b.Name] = b
			}
			src := m.lmHead()
			for name, want := range map[string]plan.Buffer{
				lmHeadInt8:  {Name: lmHeadInt8, Role: ir.Weight, DType: ir.I8, Shape: []int64{V, H}, Bytes: V * H, Tensor: src},
				lmHeadScale: {Name: lmHeadScale, Role: ir.Weight, DType: ir.F32, Shape: []int64{V}, Bytes: 4 * V, Tensor: src},
			} {
				got := bufs[name]
				if got.Derive == nil || kernel[got.Derive.Kernel] == nil || kernel[got.Derive.Kernel].Family != string(ir.QuantizeRowsInt8) || got.Derive.From != src {
					t.Errorf("%s %s: %s derive %+v", cfg.name, target, name, got.Derive)
				}
				got.Derive = nil
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s %s: %s (-want +got):\n%s", cfg.name, target, name, diff)
				}
			}
			if b, ok := bufs[src]; !ok || b.DType != ir.BF16 || b.Derive != nil {
				t.Errorf("%s %s: the BF16 head %s is not a loaded weight: %+v", cfg.name, target, src, b)
			}
		}
	}
}

// TestCertifiedHeadOption: with BF16Head (aimac plan
// --certified-head=false) a GPU plan has no decode_greedy and no derived
// int8 weights; the cpu plan has them.
func TestCertifiedHeadOption(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	for _, target := range plan.Targets {
		p, err := Plan(m, Options{Target: target, Buckets: []int{16}, ContextTokens: 64, BF16Head: true})
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		greedy := slices.ContainsFunc(p.Phases, func(ph plan.Phase) bool { return ph.Kind == plan.DecodeGreedy })
		derived := slices.ContainsFunc(p.Buffers, func(b plan.Buffer) bool { return b.Name == lmHeadInt8 || b.Name == lmHeadScale })
		if want := !target.GPU(); greedy != want || derived != want {
			t.Errorf("%s with BF16Head: decode_greedy %v, int8 rows %v; want %v", target, greedy, derived, want)
		}
	}
}
