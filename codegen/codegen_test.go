package codegen

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/plans"
)

var update = flag.Bool("update", false, "rewrite the golden sources under testdata/golden")

// frozen loads a frozen plan of the default model.
func frozen(t *testing.T, target plan.Target) *plan.Plan {
	t.Helper()
	b, err := plans.Frozen(target)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// optionPlans are plans of the real model that reach the families no
// frozen plan uses by default: sm_90 with the streamed decode attention
// (planner.Options.DecodeStream), the cpu with the split pair and its
// plain combine (DecodeSplits), gfx1151 without the tile pass (Tiling
// off: the families the tensor-core ones replace, matmul_add among them),
// gfx1151 without fusion, whose decode streams the unfused MoE block
// (moe_gate_up_gemv, moe_down_gemv: the GPU plans fuse it, the cpu plan
// does not stream), sm_90 with gdn_decode_peer (GDNPeer: measured
// slower than gdn_decode_split, which the frozen plans keep), both GPU
// targets with the router folded into the MoE block (MoERouter), sm_90
// with the tensor-core decode attention (DecodeMMAOn: attention_decode_mma,
// off by default), and both GPU targets with its combine folded in
// (DecodeMMAFused: attention_decode_mma_gate, on gfx1151 through WMMA); the first
// sm_90 and gfx1151 plans keep the serial prefill GDN (--prefill-gdn
// chunked: the frozen GPU plans take the chunked form), the sm_90
// tensor-core plan the chunked form's plain tf32 variant; and sm_90 with
// the prefill attention on warpgroup products (PrefillWGMMA:
// attention_prefill_wg, opt-in).
func optionPlans(t *testing.T) []*plan.Plan {
	t.Helper()
	m := planner.FromConfig(arch.RealName, arch.Real())
	var out []*plan.Plan
	for _, o := range []planner.Options{{Target: plan.SM90, DecodeStream: true, PrefillGDN: planner.PrefillGDNChunked}, {Target: plan.CPU, DecodeSplits: 66},
		{Target: plan.GFX1151, Tiling: planner.TileOff, PrefillGDN: planner.PrefillGDNChunked}, {Target: plan.GFX1151, Fusion: planner.FuseOff},
		// the prefill flash attention of a bf16 cache (--prefill-attention
		// flash-bf16, off by default) beside the tensor-core families
		{Target: plan.SM90, Tiling: planner.TileOn, PrefillAttention: planner.PrefillFlashBF16, PrefillGDN: planner.PrefillGDNTF32},
		{Target: plan.GFX1151, Tiling: planner.TileOn, PrefillAttention: planner.PrefillFlashBF16},
		// the prefill attention on sm_90a's warpgroup products (--prefill-attention wgmma)
		{Target: plan.SM90, PrefillAttention: planner.PrefillWGMMA},
		{Target: plan.SM90, GDNPeer: true},
		// no greedy step with the certified int8 head (--certified-head=false)
		{Target: plan.SM90, BF16Head: true}, {Target: plan.GFX1151, BF16Head: true},
		// the router folded into the MoE block behind a grid barrier (--moe-router)
		{Target: plan.SM90, MoERouter: true}, {Target: plan.GFX1151, MoERouter: true},
		// the router ranking top-k once, down reading the ids before its wait (--moe-rank)
		{Target: plan.SM90, MoERank: true}, {Target: plan.GFX1151, MoERank: true},

		// the tensor-core decode attention with the combine folded in (sm_90),
		// and its WMMA path (gfx1151: off by default there)
		{Target: plan.SM90, DecodeMMA: planner.DecodeMMAOn}, {Target: plan.SM90, DecodeMMA: planner.DecodeMMAFused},
		{Target: plan.GFX1151, DecodeMMA: planner.DecodeMMAFused},
		// the decode step's q/k norm folded into the split (--qk-fold: the
		// tensor-core fold on sm_90, the CUDA-core one on gfx1151)
		{Target: plan.SM90, QKFold: true}, {Target: plan.GFX1151, QKFold: true},
		// the decode steps' runs as persistent launches (--persistent-decode)
		{Target: plan.SM90, PersistentDecode: true}, {Target: plan.GFX1151, PersistentDecode: true},
		// the GDN layer's output projection folded into its split (--gdn-out)
		{Target: plan.SM90, GDNOut: true}, {Target: plan.GFX1151, GDNOut: true}} {
		o.Buckets, o.ContextTokens = []int{1024}, 4096
		p, err := planner.Plan(m, o)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// oracleGPUPlan is the real model's gfx1151 plan with gdn_decode_step kept
// (aimac plan --gdn-col-tile -1): the GPU families gdn_decode_peer and gdn_decode_split replace
// in the frozen plans, still rendered and compiled as its oracle.
func oracleGPUPlan(t *testing.T) *plan.Plan {
	t.Helper()
	p, err := planner.Plan(planner.FromConfig(arch.RealName, arch.Real()), planner.Options{Target: plan.GFX1151,
		Buckets: planner.DefaultBuckets, ContextTokens: plans.DefaultContextTokens, GDNColumnTile: -1})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// representatives picks one kernel per family (the first by name) from
// the gfx1151 plan, from the sm_90 plan for the families only it runs, from
// the cpu plan for the families fusion leaves out
// of the GPU plans, from optionPlans for the families only an option
// reaches, and from oracleGPUPlan for gdn_decode_step: the set the golden
// files pin down.
func representatives(t *testing.T) []plan.Kernel {
	t.Helper()
	byFamily := map[string]plan.Kernel{}
	ps := []*plan.Plan{frozen(t, plan.GFX1151), frozen(t, plan.SM90), frozen(t, plan.CPU), oracleGPUPlan(t)}
	for _, p := range append(ps, optionPlans(t)...) {
		seen := map[string]bool{}
		for _, k := range p.Kernels {
			if old, ok := byFamily[k.Family]; !ok || (seen[k.Family] && k.Name < old.Name) {
				byFamily[k.Family] = k
				seen[k.Family] = true
			}
		}
	}
	if len(byFamily) != len(kernels.Families) {
		var missing []string
		for k := range kernels.Families {
			if _, ok := byFamily[string(k)]; !ok {
				missing = append(missing, string(k))
			}
		}
		sort.Strings(missing)
		t.Fatalf("plan has %d families, the table %d: no plan reaches %v", len(byFamily), len(kernels.Families), missing)
	}
	out := make([]plan.Kernel, 0, len(byFamily))
	for _, k := range byFamily {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Family < out[j].Family })
	return out
}

// TestGolden renders a representative kernel of every family in both
// dialects and compares with testdata/golden (go test ./codegen -update);
// the sm_90 plan's first wgmma gemm as gemm_wgmma.cu (the representative
// gemm is gfx1151's, whose plan keeps the mma tile).
func TestGolden(t *testing.T) {
	type golden struct {
		k      plan.Kernel
		target plan.Target
		file   string
	}
	var gs []golden
	for _, k := range representatives(t) {
		if ir.Kind(k.Family) == ir.DecodePersistent {
			continue // rendered with its plan, below
		}
		for _, target := range plan.GPUTargets() {
			d, _ := target.Dialect()
			if kernels.Families[ir.Kind(k.Family)].CUDAOnly && d != CUDA {
				if _, err := Render(target, k); err == nil {
					t.Errorf("%s: rendered for %s, a CUDA-only family", k.Family, target)
				}
				continue
			}
			gs = append(gs, golden{k, target, k.Family + d.SourceExt()})
		}
	}
	var wg *plan.Kernel
	for _, k := range frozen(t, plan.SM90).Kernels {
		if k.Family == "gemm" && k.Params.Flag("wgmma") && (wg == nil || k.Name < wg.Name) {
			wg = &k
		}
	}
	if wg == nil {
		t.Fatal("the sm_90 plan has no wgmma gemm")
	}
	gs = append(gs, golden{*wg, plan.SM90, "gemm_wgmma.cu"})
	// The same as clusters of two column tiles sharing their A rows (aimac plan --cluster-a).
	cl := *wg
	cl.Name, cl.Params = cl.Name+"_cluster", cl.Params.Clone()
	cl.Params.SetFlag("cluster_a", true)
	gs = append(gs, golden{cl, plan.SM90, "gemm_wgmma_cluster.cu"})
	// The same with its A terms rounded once a k-tile into shared memory (aimac plan --shared-a-terms).
	ss := *wg
	ss.Name, ss.Params = ss.Name+"_ss", ss.Params.Clone()
	ss.Params.SetFlag("ss_a", true)
	gs = append(gs, golden{ss, plan.SM90, "gemm_wgmma_ss.cu"})
	// The grouped MoE's GEMMs as the sm_90 plan takes them (wgmma, flush_k).
	for _, family := range []string{"moe_gate_up_group", "moe_down_group"} {
		var g *plan.Kernel
		for _, k := range frozen(t, plan.SM90).Kernels {
			if k.Family == family && (g == nil || k.Name < g.Name) {
				g = &k
			}
		}
		if g == nil || !g.Params.Flag("wgmma") {
			t.Fatalf("the sm_90 plan has no %s on the wgmma tile", family)
		}
		gs = append(gs, golden{*g, plan.SM90, family + "_wgmma.cu"})
		// The same on 256 columns (aimac plan --wide-experts).
		w := *g
		w.Name, w.Params = w.Name+"_wide", w.Params.Clone()
		w.Params.SetFlag("wide_tile", true)
		gs = append(gs, golden{w, plan.SM90, family + "_wgmma_wide.cu"})
		// A block per multiprocessor walking the tiles (aimac plan --persistent-experts).
		ps := *g
		ps.Name, ps.Params = ps.Name+"_persistent", ps.Params.Clone()
		ps.Params.SetFlag("persistent", true)
		gs = append(gs, golden{ps, plan.SM90, family + "_wgmma_persistent.cu"})
	}
	// The same projection on the warp-specialized tile (aimac plan --gemm-tile wgmma-ws).
	ws := *wg
	ws.Name, ws.Params = "gemm_wgmma_ws", ws.Params.Clone()
	ws.Params.SetFlag("wgmma", false)
	ws.Params.SetFlag("wgmma_ws", true)
	delete(ws.Params.Flags, "flush_k") // the tile rounds its k-tiles' sums itself
	delete(ws.Params.Flags, "flush_k16")
	gs = append(gs, golden{ws, plan.SM90, "gemm_wgmma_ws.cu"})
	// The persistent decode kernel of each target's option plan (aimac plan
	// --persistent-decode), rendered from its members.
	persistent := map[plan.Target]*plan.Plan{}
	for _, p := range optionPlans(t) {
		for _, k := range p.Kernels {
			if ir.Kind(k.Family) == ir.DecodePersistent {
				persistent[p.Target] = p
				d, _ := p.Target.Dialect()
				gs = append(gs, golden{k, p.Target, k.Family + d.SourceExt()})
			}
		}
	}
	for _, g := range gs {
		var s Source
		var err error
		if p := persistent[g.target]; p != nil && ir.Kind(g.k.Family) == ir.DecodePersistent {
			s, err = RenderPersistent(p, g.k)
		} else {
			s, err = Render(g.target, g.k)
		}
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", "golden", g.file)
		if *update {
			if err := os.WriteFile(path, []byte(s.Code), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./codegen -update)", err)
		}
		if string(want) != s.Code {
			t.Errorf("%s is out of date (run go test ./codegen -update and review the diff)", path)
		}
	}
}

// TestRenderFrozenPlans renders every kernel of both GPU plans and checks
// the properties every source must have: one entry point named after the
// kernel, no headers or device-library calls, and the target's block size;
// together the frozen and option plans use every family.
func TestRenderFrozenPlans(t *testing.T) {
	families := map[string]bool{}
	for _, k := range frozen(t, plan.CPU).Kernels {
		families[k.Family] = true
	}
	for _, k := range oracleGPUPlan(t).Kernels {
		families[k.Family] = true
	}
	var ps []*plan.Plan
	for _, target := range plan.GPUTargets() {
		ps = append(ps, frozen(t, target))
	}
	for _, p := range append(ps, optionPlans(t)...) {
		target := p.Target
		if !target.GPU() {
			for _, k := range p.Kernels {
				families[k.Family] = true
			}
			continue
		}
		srcs, err := RenderPlan(p)
		if err != nil {
			t.Fatalf("%s: %v", target, err)
		}
		if len(srcs) != len(p.Kernels) {
			t.Fatalf("%s: %d sources for %d kernels", target, len(srcs), len(p.Kernels))
		}
		for _, s := range srcs {
			families[s.Family] = true
			entries := 1 // a persistent kernel holds its members' entry points too
			for _, k := range p.Kernels {
				if k.Name == s.Kernel {
					entries += len(k.Members)
				}
			}
			if !strings.Contains(s.Code, " "+s.Kernel+"(") || strings.Count(s.Code, "KERNEL void") != entries {
				t.Errorf("%s: %s: entry point missing or repeated", target, s.Kernel)
			}
			for _, bad := range []string{"#include", "__ocml", "__ockl", "{{", "<no value>"} {
				if strings.Contains(s.Code, bad) {
					t.Errorf("%s: %s contains %q", target, s.Kernel, bad)
				}
			}
			if !strings.HasPrefix(s.Hash, "sha256:") || len(s.Hash) != 71 {
				t.Errorf("%s: %s: bad hash %q", target, s.Kernel, s.Hash)
			}
		}
		// Every launch runs the target's block, or whole warps fewer where the
		// family's tile sets its own (attention_prefill: a warp per 16 rows),
		// within the bound the kernels are rendered for.
		threads, warp := target.Launch().Threads, target.Launch().Warp
		for _, ph := range p.Phases {
			for _, l := range ph.Launches {
				if len(l.Block) != 3 || l.Block[0] > threads || l.Block[0] < warp || l.Block[0]%warp != 0 || l.Block[1] != 1 || l.Block[2] != 1 {
					t.Fatalf("%s: %s: launch of %s has block %v, its kernels are rendered for %d threads", target, ph.Name, l.Kernel, l.Block, threads)
				}
			}
		}
		if !strings.Contains(srcs[0].Code, fmt.Sprintf("#define BDIM_X %d\n", threads)) {
			t.Errorf("%s: the prelude is not rendered for %d threads", target, threads)
		}
	}
	if len(families) != len(kernels.Families) {
		t.Errorf("the frozen and option plans use %d families, the table has %d", len(families), len(kernels.Families))
	}
	// The sampler's reference sums its logprob in the device kernel's lane
	// order, which is the block's.
	for _, target := range plan.GPUTargets() {
		if target.Launch().Threads != kernels.SampleThreads {
			t.Errorf("%s: %d threads, kernels.SampleThreads is %d", target, target.Launch().Threads, kernels.SampleThreads)
		}
	}
}

// TestRenderDeterministic guards the source hash: rendering twice gives
// the same bytes, and different parameters give different sources.
func TestRenderDeterministic(t *testing.T) {
	k := plan.Kernel{Name: "add_x", Family: "add", Params: ir.Params{Ints: map[string]int64{"width": 64}}}
	a, err := Render(plan.SM90, k)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Render(plan.SM90, k)
	if a != b {
		t.Fatal("two renders differ")
	}
	k.Params = ir.Params{Ints: map[string]int64{"width": 65}}
	c, _ := Render(plan.SM90, k)
	if c.Hash == a.Hash || !strings.Contains(c.Code, "WIDTH = 65;") {
		t.Fatal("parameters are not folded into the source")
	}
	h, _ := Render(plan.GFX1151, k)
	if h.Hash == c.Hash || !strings.Contains(h.Code, "amdgcn") || strings.Contains(c.Code, "amdgcn") {
		t.Fatal("dialect preludes are not distinct")
	}
}

// TestRenderErrors checks the refusals: unknown dialects, families,
// missing, undeclared and mistyped parameters, and bad names.
func TestRenderErrors(t *testing.T) {
	good := ir.Params{Ints: map[string]int64{"width": 8}}
	cases := []struct {
		t    plan.Target
		k    plan.Kernel
		want string
	}{
		{"tpu", plan.Kernel{Name: "a", Family: "add", Params: good}, `target "tpu" has no GPU dialect`},
		{plan.CPU, plan.Kernel{Name: "a", Family: "add", Params: good}, `target "cpu" has no GPU dialect`},
		{plan.SM90, plan.Kernel{Name: "a", Family: "conv3d", Params: good}, `unknown kernel family "conv3d"`},
		{plan.SM90, plan.Kernel{Name: "a", Family: "add"}, "parameter width (integer) missing"},
		{plan.SM90, plan.Kernel{Name: "a", Family: "add", Params: ir.Params{Reals: map[string]float64{"width": 1.5}}}, "given as a real"},
		{plan.SM90, plan.Kernel{Name: "a", Family: "add", Params: ir.Params{Ints: map[string]int64{"width": 8, "height": 2}}}, "parameter height is not a parameter"},
		{plan.GFX1151, plan.Kernel{Name: "a-b", Family: "add", Params: good}, "not a C identifier"},
	}
	for _, c := range cases {
		if _, err := Render(c.t, c.k); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want %q", c.k, err, c.want)
		}
	}
	for target, want := range map[plan.Target]Dialect{plan.GFX1151: HIP, plan.SM90: CUDA} {
		if d, err := target.Dialect(); err != nil || d != want {
			t.Errorf("%s.Dialect() = %q, %v", target, d, err)
		}
	}
	if _, err := plan.CPU.Dialect(); err == nil {
		t.Error("cpu.Dialect() has no error")
	}
	if _, err := RenderPlan(&plan.Plan{Target: "cpu"}); err == nil {
		t.Error("RenderPlan of a cpu plan has no error")
	}
}

// TestFloatLiterals checks that real parameters reach the source as the
// exact float32 the reference kernels use.
func TestFloatLiterals(t *testing.T) {
	for v, want := range map[float64]string{1e-06: "0x1.0c6f7ap-20f", 0.0625: "0x1p-04f", 1: "0x1p+00f", 0: "0.0f"} {
		if got := floatLit(v); got != want {
			t.Errorf("floatLit(%g) = %s, want %s", v, got, want)
		}
	}
}

// TestSourceABI checks that every source of the frozen plans says it
// implements plan.KernelABI and that its entry point is that ABI's: one
// pointer per operand of the family, then int n, then the parameter block.
func TestSourceABI(t *testing.T) {
	for _, target := range plan.GPUTargets() {
		srcs, err := RenderPlan(frozen(t, target))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range srcs {
			if s.ABI != plan.KernelABI {
				t.Errorf("%s: %s: ABI %d, want %d", target, s.Kernel, s.ABI, plan.KernelABI)
			}
			_, rest, ok := strings.Cut(s.Code, "KERNEL void "+s.Kernel+"(")
			args, _, _ := strings.Cut(rest, ")")
			parts := strings.Split(args, ", ")
			ops := len(kernels.Families[ir.Kind(s.Family)].Operands)
			if !ok || len(parts) != ops+2 || parts[ops] != "int n" || parts[ops+1] != "const int* params" {
				t.Errorf("%s: %s: entry point takes (%s), want %d operand pointers, int n, const int* params", target, s.Kernel, args, ops)
				continue
			}
			for _, a := range parts[:ops] {
				if !strings.Contains(a, "* ") {
					t.Errorf("%s: %s: operand argument %q is not a pointer", target, s.Kernel, a)
				}
			}
		}
	}
}

// TestPlanAlignment checks the ABI's alignment promise on the GPU plans:
// every argument offset, dynamic stride and arena offset is a multiple of
// plan.ArgAlign bytes, so the kernels' 16-byte vector loads are aligned.
func TestPlanAlignment(t *testing.T) {
	for _, target := range plan.GPUTargets() {
		p := frozen(t, target)
		for _, ph := range p.Phases {
			for _, b := range ph.Buffers {
				if b.Offset%plan.ArgAlign != 0 {
					t.Errorf("%s: %s: buffer %s at arena offset %d", target, ph.Name, b.Name, b.Offset)
				}
			}
			for _, l := range ph.Launches {
				for i, a := range l.Args {
					if a.Offset%plan.ArgAlign != 0 || a.DynStride%plan.ArgAlign != 0 {
						t.Errorf("%s: %s: %s argument %d: offset %d, dyn stride %d", target, ph.Name, l.Kernel, i, a.Offset, a.DynStride)
					}
				}
			}
		}
	}
}

// TestTemplateDataShadow: a parameter named like a value codegen sets for
// every template (here the target's pipeline stages) is refused rather than
// silently replaced by the target's value.
func TestTemplateDataShadow(t *testing.T) {
	f := &ir.Family{Kind: "shadow", Params: ir.Ints("stages")}
	k := plan.Kernel{Name: "k", Family: "shadow", Params: ir.Params{Ints: map[string]int64{"stages": 3}}}
	_, err := templateData(CUDA, plan.SM90.Launch(), k, f)
	if err == nil || !strings.Contains(err.Error(), `parameter "stages" shadows`) {
		t.Errorf("error %v, want the shadowed parameter named", err)
	}
}
