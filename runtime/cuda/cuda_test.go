package cuda_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/codegen"
	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/loader"
	"github.com/aimaproject/aimac/npy"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/runtime/cuda"
	"github.com/aimaproject/aimac/runtime/gpu/gputest"
)

// hfFixture is the committed HuggingFace transformers reference (see
// runtime/hf_test.go): a small random qwen3_5_moe checkpoint and fp32 logits.
const hfFixture = "../../testdata/hf-tiny"

// Limits of the GPU. With the default f32 KV cache, against transformers'
// fp32 logits: top-1 agreement at least minTop1 and a max per-position KLD
// of at most maxKLD at every prompt length. Against the CPU engine, which
// computes what the GPU should (for the bf16 KV cache variant, the CPU
// engine with its cache rounded the way kv_append rounds it): at most
// maxKLDvsCPU at every position.
const (
	maxKLD      = 0.005
	minTop1     = 0.99
	maxKLDvsCPU = 1e-4
	resultsEnv  = "AIMA_GPU_RESULTS"
)

type reference struct {
	Prompts []struct {
		Tokens []int32 `json:"tokens"`
		Logits string  `json:"logits"`
	} `json:"prompts"`
	Greedy struct {
		Prompt []int32 `json:"prompt"`
		Tokens []int32 `json:"tokens"`
	} `json:"greedy"`
}

// promptResult is one prompt's agreement with transformers.
type promptResult struct {
	Buckets []int   `json:"buckets"`
	KVCache string  `json:"kv_cache"`
	Tokens  int     `json:"tokens"`
	MaxKLD  float64 `json:"max_kld"`
	MeanKLD float64 `json:"mean_kld"`
	Top1    float64 `json:"top1_agreement"`
	// CPUMaxKLD is the max KLD against transformers of the CPU engine with
	// the same KV cache type.
	CPUMaxKLD float64 `json:"cpu_max_kld"`
	// MaxKLCPU is the GPU's max KLD against that CPU engine.
	MaxKLCPU float64 `json:"max_kld_vs_cpu"`
	// Gated says whether the transformers limits apply (f32 KV cache).
	Gated bool `json:"gated"`
	Pass  bool `json:"pass"`
}

type results struct {
	Device   string `json:"device"`
	Target   string `json:"target"`
	Compiler string `json:"compiler"`
	Kernels  int    `json:"kernels_compiled"`
	// PrefillGDN counts the default plans' prefill launches of the GDN
	// families: the chunked form on tensor cores (gated_delta_wy,
	// gated_delta_state, causal_conv1d_silu_rows), not the serial ones.
	PrefillGDN     map[string]int `json:"prefill_gdn_launches"`
	LimitKLD       float64        `json:"limit_max_kld"`
	LimitKLDvsCPU  float64        `json:"limit_max_kld_vs_cpu"`
	LimitTop1      float64        `json:"limit_top1"`
	Prompts        []promptResult `json:"prompts"`
	GreedyGPU      []int32        `json:"greedy_gpu"`
	GreedyNoGraph  []int32        `json:"greedy_gpu_without_graph"`
	DecodeGraphBit bool           `json:"decode_graph_logits_identical"`
	// Programmatic: the step graphs ran with programmatic dependent launch;
	// DecodePDLBit: their logits equal the same graphs' without it.
	Programmatic bool `json:"programmatic"`
	DecodePDLBit bool `json:"decode_pdl_logits_identical"`
	// Persistent: the persistent plan (--persistent-decode), per KV dtype.
	Persistent []persistentResult `json:"persistent,omitempty"`
	// GreedySampled: greedy drawn on the device, one step graph per token
	// (decode and sample), equal to GreedyGPU.
	GreedySampled []int32 `json:"greedy_gpu_device_sampled"`
	// PrefillGraphs: the prefill buckets replayed from captured graphs;
	// PrefillGraphBit: the logits of prompts around the bucket edges equal
	// launch by launch.
	PrefillGraphs   bool `json:"prefill_graphs"`
	PrefillGraphBit bool `json:"prefill_graph_logits_identical"`
	// GreedyCertified: greedy with the certified int8 LM head, one step
	// graph per token (decode_greedy: the int8 head, certify, pick), and
	// CertifiedNoGraph the same launch by launch; both equal GreedyGPU.
	// CertifiedStats are the head's counts over both.
	GreedyCertified  []int32                    `json:"greedy_gpu_certified_head"`
	CertifiedNoGraph []int32                    `json:"greedy_gpu_certified_head_without_graph"`
	CertifiedStats   runtime.CertifiedHeadStats `json:"certified_head_stats"`
	GreedyCPU        []int32                    `json:"greedy_cpu"`
	GreedyHF         []int32                    `json:"greedy_transformers"`
	GreedyEqualCPU   bool                       `json:"greedy_equal_cpu"`
	GreedyEqualHF    bool                       `json:"greedy_equal_transformers"`
	Pass             bool                       `json:"pass"`
	Seconds          float64                    `json:"seconds"`
}

// prefillGDN counts p's prefill launches of the GDN families, old and new.
func prefillGDN(p *plan.Plan) map[string]int {
	family := map[string]ir.Kind{}
	for _, k := range p.Kernels {
		family[k.Name] = ir.Kind(k.Family)
	}
	n := map[string]int{}
	for _, ph := range p.Phases {
		if ph.Kind != plan.Prefill {
			continue
		}
		for _, l := range ph.Launches {
			switch f := family[l.Kernel]; f {
			case ir.GatedDeltaWY, ir.GatedDeltaState, ir.CausalConv1dSiLURows, ir.GatedDeltaChunked, ir.CausalConv1dSiLU:
				n[string(f)]++
			}
		}
	}
	return n
}

// gpu compiles the fixture's sm_90 plan for buckets and context (the
// planner's defaults: the prefill GDN in the chunked form, checked here)
// and opens it on the CUDA backend. It returns the engine, the compiled
// count and the plan's prefill GDN launches by family.
func gpu(t *testing.T, c *hipcc.Compiler, cache string, buckets []int, contextTokens int, kv ir.DType, opts ...func(*planner.Options)) (*loader.Loaded, int, map[string]int) {
	t.Helper()
	ck, err := checkpoint.Open(hfFixture)
	if err != nil {
		t.Fatal(err)
	}
	m, err := planner.FromCheckpoint(filepath.Base(hfFixture), ck)
	ck.Close()
	if err != nil {
		t.Fatal(err)
	}
	o := planner.Options{Target: cuda.Target, Buckets: buckets, ContextTokens: contextTokens, KVDType: kv}
	for _, f := range opts {
		f(&o)
	}
	p, err := planner.Plan(m, o)
	if err != nil {
		t.Fatal(err)
	}
	gdn := prefillGDN(p)
	if gdn[string(ir.GatedDeltaWY)] == 0 || gdn[string(ir.GatedDeltaState)] == 0 || gdn[string(ir.CausalConv1dSiLURows)] == 0 ||
		gdn[string(ir.GatedDeltaChunked)] != 0 || gdn[string(ir.CausalConv1dSiLU)] != 0 {
		t.Errorf("buckets %v: the default plan's prefill GDN launches %v, want the chunked form only", buckets, gdn)
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if err := p.WriteFile(planFile); err != nil {
		t.Fatal(err)
	}
	srcs, err := codegen.RenderPlan(p)
	if err != nil {
		t.Fatal(err)
	}
	in := make([]hipcc.Source, len(srcs))
	for i, s := range srcs {
		in[i] = hipcc.Source{Name: s.Kernel, Code: s.Code}
	}
	res, err := c.Compile(context.Background(), hipcc.SM90, in, hipcc.Options{CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	cubins := map[string][]byte{}
	for _, r := range res {
		cubins[r.Name] = r.Object
	}
	l, err := loader.Open(loader.Options{ModelDir: hfFixture, PlanFile: planFile, Cubins: cubins})
	if err != nil {
		t.Fatal(err)
	}
	return l, len(res), gdn
}

// TestHuggingFaceOnGPU runs the fixture on the GPU: teacher-forced logits
// against transformers' fp32 logits at every prompt length, and the greedy
// continuation against the CPU engine's.
func TestHuggingFaceOnGPU(t *testing.T) {
	if err := cuda.Available(); err != nil {
		t.Skipf("no CUDA driver: %v", err)
	}
	start := time.Now()
	c, err := hipcc.Find(hipcc.SM90)
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	data, err := os.ReadFile(filepath.Join(hfFixture, "reference.json"))
	if err != nil {
		t.Fatal(err)
	}
	var ref reference
	if err := json.Unmarshal(data, &ref); err != nil {
		t.Fatal(err)
	}
	out := results{Target: cuda.Target, Compiler: "nvcc " + c.Version,
		LimitKLD: maxKLD, LimitKLDvsCPU: maxKLDvsCPU, LimitTop1: minTop1, GreedyHF: ref.Greedy.Tokens}
	pass := true
	for _, v := range []struct {
		buckets []int
		kv      ir.DType
	}{{[]int{256}, ir.F32}, {[]int{8, 32}, ir.F32}, {[]int{8, 32}, ir.BF16}} {
		buckets := v.buckets
		l, n, gdn := gpu(t, c, cache, buckets, 512, v.kv)
		out.Kernels += n
		out.PrefillGDN = gdn
		if be, ok := l.Backend.(*cuda.CUDA); ok {
			out.Device = be.Device()
		}
		cpu, closeCPU := cpuEngine(t, buckets, 512, v.kv == ir.BF16)
		for _, p := range ref.Prompts {
			shape, want, err := npy.ReadFile(filepath.Join(hfFixture, p.Logits))
			if err != nil {
				t.Fatal(err)
			}
			V := shape[1]
			if shape[0] != len(p.Tokens) || V != l.Engine.Vocab() {
				t.Fatalf("%s: shape %v for %d tokens, vocab %d", p.Logits, shape, len(p.Tokens), l.Engine.Vocab())
			}
			r := promptResult{Buckets: buckets, KVCache: string(v.kv), Tokens: len(p.Tokens), Gated: v.kv == ir.F32}
			cpuRows := make([][]float32, len(p.Tokens))
			if err := cpu.Reset(); err != nil {
				t.Fatal(err)
			}
			if _, err := cpu.Prefill(context.Background(), p.Tokens, func(start int, rows [][]float32) error {
				for i, got := range rows {
					cpuRows[start+i] = slices.Clone(got)
					pos := start + i
					r.CPUMaxKLD = math.Max(r.CPUMaxKLD, klDivergence(want[pos*V:(pos+1)*V], got))
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := l.Engine.Reset(); err != nil {
				t.Fatal(err)
			}
			agree := 0
			if _, err := l.Engine.Prefill(context.Background(), p.Tokens, func(start int, rows [][]float32) error {
				for i, got := range rows {
					pos := start + i
					w := want[pos*V : (pos+1)*V]
					kl := klDivergence(w, got)
					r.MaxKLD = math.Max(r.MaxKLD, kl)
					r.MeanKLD += kl / float64(len(p.Tokens))
					r.MaxKLCPU = math.Max(r.MaxKLCPU, klDivergence(cpuRows[pos], got))
					if runtime.Argmax(w) == runtime.Argmax(got) {
						agree++
					}
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			r.Top1 = float64(agree) / float64(len(p.Tokens))
			t.Logf("buckets %v, %s KV, %3d tokens: max KLD %.3g (CPU engine %.3g), mean KLD %.3g, top-1 agreement %.4f, max KLD vs the CPU engine %.3g",
				buckets, v.kv, r.Tokens, r.MaxKLD, r.CPUMaxKLD, r.MeanKLD, r.Top1, r.MaxKLCPU)
			r.Pass = r.MaxKLCPU <= maxKLDvsCPU && (!r.Gated || (r.MaxKLD <= maxKLD && r.Top1 >= minTop1))
			if !r.Pass {
				pass = false
				t.Errorf("buckets %v, %s KV, %d tokens: max KLD %.3g (limit %g), top-1 agreement %.4f (limit %g), max KLD vs the CPU engine %.3g (limit %g)",
					buckets, v.kv, r.Tokens, r.MaxKLD, maxKLD, r.Top1, minTop1, r.MaxKLCPU, maxKLDvsCPU)
			}
			out.Prompts = append(out.Prompts, r)
		}
		closeCPU()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// Greedy: the GPU continuation equals the CPU engine's.
	greedy := func(l *loader.Loaded) []int32 {
		if err := l.Engine.Reset(); err != nil {
			t.Fatal(err)
		}
		s, err := runtime.NewSampler(runtime.SamplerConfig{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := l.Engine.Generate(context.Background(), ref.Greedy.Prompt, len(ref.Greedy.Tokens), s, nil)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	l, n, _ := gpu(t, c, cache, []int{4, 16}, 128, ir.F32)
	out.Kernels += n
	if !l.Engine.Graphs() {
		t.Error("the CUDA engine does not replay the decode step as a graph")
	}
	out.GreedyGPU = greedy(l)
	// The same decode steps launch by launch: logits identical bit for bit.
	withGraph := decodeLogits(t, l.Engine, ref.Greedy.Prompt, 8)
	out.Programmatic, err = l.Engine.Programmatic()
	if !out.Programmatic {
		t.Errorf("the CUDA engine does not use programmatic dependent launch on sm_90 (%v)", err)
	}
	l.Engine.SetProgrammatic(false)
	out.DecodePDLBit = slices.EqualFunc(withGraph, decodeLogits(t, l.Engine, ref.Greedy.Prompt, 8), slices.Equal[[]float32])
	l.Engine.SetProgrammatic(true)
	if !out.DecodePDLBit {
		pass = false
		t.Error("decode logits with programmatic dependent launch differ from the same graphs without it")
	}
	if !l.Engine.CertifiedHead() {
		t.Error("the CUDA engine does not take the certified int8 head for greedy draws by default")
	}
	if err := l.Engine.SetCertifiedHead(false); err != nil {
		t.Fatal(err)
	}
	out.GreedySampled = deviceGreedy(t, l.Engine, ref.Greedy.Prompt, len(ref.Greedy.Tokens))
	if !slices.Equal(out.GreedySampled, out.GreedyGPU) {
		pass = false
		t.Errorf("greedy drawn on the device in the step graph %v, from the logits %v", out.GreedySampled, out.GreedyGPU)
	}
	withPrefillGraph := prefillLogits(t, l.Engine)
	out.PrefillGraphs, err = l.Engine.PrefillGraphs()
	if !out.PrefillGraphs {
		pass = false
		t.Errorf("the CUDA engine does not replay prefill buckets as graphs (%v)", err)
	}
	if err := l.Engine.SetCertifiedHead(true); err != nil {
		t.Fatal(err)
	}
	out.GreedyCertified = deviceGreedy(t, l.Engine, ref.Greedy.Prompt, len(ref.Greedy.Tokens))
	l.Engine.SetGraphs(false)
	out.CertifiedNoGraph = deviceGreedy(t, l.Engine, ref.Greedy.Prompt, len(ref.Greedy.Tokens))
	l.Engine.SetGraphs(true)
	out.CertifiedStats = l.Engine.HeadStats()
	if !slices.Equal(out.GreedyCertified, out.GreedyGPU) || !slices.Equal(out.CertifiedNoGraph, out.GreedyGPU) || out.CertifiedStats.Steps == 0 {
		pass = false
		t.Errorf("greedy with the certified head %v (launch by launch %v, stats %+v), the BF16 head's %v",
			out.GreedyCertified, out.CertifiedNoGraph, out.CertifiedStats, out.GreedyGPU)
	}
	l.Engine.SetGraphs(false)
	out.PrefillGraphBit = slices.EqualFunc(withPrefillGraph, prefillLogits(t, l.Engine), slices.Equal[[]float32])
	if !out.PrefillGraphBit {
		pass = false
		t.Error("prefill logits from the bucket graphs differ from launch by launch")
	}
	out.GreedyNoGraph = greedy(l)
	out.DecodeGraphBit = slices.EqualFunc(withGraph, decodeLogits(t, l.Engine, ref.Greedy.Prompt, 8), slices.Equal[[]float32])
	if !out.DecodeGraphBit || !slices.Equal(out.GreedyGPU, out.GreedyNoGraph) {
		pass = false
		t.Errorf("decode with a captured graph differs from launch by launch (logits identical: %v; greedy %v vs %v)",
			out.DecodeGraphBit, out.GreedyGPU, out.GreedyNoGraph)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}

	// The persistent plan (--persistent-decode): its runs' items compute what
	// the launches do, so the decode logits equal launch by launch's bit for
	// bit, and so do the greedy continuations through both heads.
	for _, kv := range []ir.DType{ir.F32, ir.BF16} {
		l, n, _ = gpu(t, c, cache, []int{4, 16}, 128, kv, func(o *planner.Options) { o.PersistentDecode = true })
		out.Kernels += n
		pr := persistentResult{KVCache: string(kv)}
		pr.Runs, pr.Launches = l.Engine.Persistent()
		if pr.Runs == 0 {
			pass = false
			t.Errorf("%s KV: the persistent plan's engine runs no persistent launch", kv)
		}
		persistent := decodeLogits(t, l.Engine, ref.Greedy.Prompt, 8)
		pr.Greedy = deviceGreedy(t, l.Engine, ref.Greedy.Prompt, len(ref.Greedy.Tokens))
		l.Engine.SetPersistent(false)
		pr.LogitsIdentical = slices.EqualFunc(persistent, decodeLogits(t, l.Engine, ref.Greedy.Prompt, 8), slices.Equal[[]float32])
		pr.GreedyLaunches = deviceGreedy(t, l.Engine, ref.Greedy.Prompt, len(ref.Greedy.Tokens))
		l.Engine.SetPersistent(true)
		if err := l.Engine.SetCertifiedHead(false); err != nil {
			t.Fatal(err)
		}
		pr.GreedyBF16Head = deviceGreedy(t, l.Engine, ref.Greedy.Prompt, len(ref.Greedy.Tokens))
		if !pr.LogitsIdentical || !slices.Equal(pr.Greedy, pr.GreedyLaunches) || !slices.Equal(pr.GreedyBF16Head, pr.GreedyLaunches) ||
			(kv == ir.F32 && !slices.Equal(pr.Greedy, out.GreedyGPU)) {
			pass = false
			t.Errorf("%s KV, persistent runs %d (%d launches): decode logits identical to launch by launch: %v; greedy %v, launch by launch %v, BF16 head %v (the default plan's %v)",
				kv, pr.Runs, pr.Launches, pr.LogitsIdentical, pr.Greedy, pr.GreedyLaunches, pr.GreedyBF16Head, out.GreedyGPU)
		}
		t.Logf("%s KV: persistent runs %d of %d launches; decode logits identical to launch by launch: %v; greedy %v", kv, pr.Runs, pr.Launches, pr.LogitsIdentical, pr.Greedy)
		out.Persistent = append(out.Persistent, pr)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	cpu, err := loader.Open(loader.Options{ModelDir: hfFixture, Buckets: []int{4, 16}, ContextTokens: 128})
	if err != nil {
		t.Fatal(err)
	}
	out.GreedyCPU = greedy(cpu)
	cpu.Close()
	out.GreedyEqualCPU = slices.Equal(out.GreedyGPU, out.GreedyCPU)
	out.GreedyEqualHF = slices.Equal(out.GreedyGPU, ref.Greedy.Tokens)
	t.Logf("greedy GPU %v", out.GreedyGPU)
	t.Logf("greedy CPU %v (equal: %v; equal to transformers: %v)", out.GreedyCPU, out.GreedyEqualCPU, out.GreedyEqualHF)
	if !out.GreedyEqualCPU {
		pass = false
		t.Errorf("greedy continuation differs: GPU %v, CPU %v", out.GreedyGPU, out.GreedyCPU)
	}
	out.Pass = pass
	out.Seconds = math.Round(time.Since(start).Seconds()*10) / 10
	if path := os.Getenv(resultsEnv); path != "" {
		b, err := json.MarshalIndent(out, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// persistentResult is the persistent plan on the fixture: its runs, the
// decode logits against launch by launch, the greedy continuations.
type persistentResult struct {
	KVCache         string  `json:"kv_cache"`
	Runs            int     `json:"runs"`
	Launches        int     `json:"launches_in_runs"`
	LogitsIdentical bool    `json:"decode_logits_identical_to_launches"`
	Greedy          []int32 `json:"greedy"`
	GreedyLaunches  []int32 `json:"greedy_launch_by_launch"`
	GreedyBF16Head  []int32 `json:"greedy_bf16_head"`
}

// prefillLogits prefills prompts of lengths around the buckets (4, 16) —
// whole buckets, tails, segments after segments — and returns each one's
// last logits.
func prefillLogits(t *testing.T, e *runtime.Engine) [][]float32 {
	t.Helper()
	// Every length prefilled, none of them as the decode tail.
	tail := e.DecodeTail()
	if err := e.SetDecodeTail(0); err != nil {
		t.Fatal(err)
	}
	defer e.SetDecodeTail(tail)
	var out [][]float32
	for _, n := range []int{1, 3, 4, 5, 15, 16, 17, 21, 40} {
		if err := e.Reset(); err != nil {
			t.Fatal(err)
		}
		p := make([]int32, n)
		for i := range p {
			p[i] = int32((i*7919 + 13) % e.Vocab())
		}
		logits, err := e.Prefill(context.Background(), p, nil)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, logits)
	}
	return out
}

// decodeLogits prefills prompt and decodes steps greedy tokens, returning
// every step's logits.
func decodeLogits(t *testing.T, e *runtime.Engine, prompt []int32, steps int) [][]float32 {
	t.Helper()
	if err := e.Reset(); err != nil {
		t.Fatal(err)
	}
	logits, err := e.Prefill(context.Background(), prompt, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for range steps {
		if logits, err = e.Decode(context.Background(), runtime.Argmax(logits)); err != nil {
			t.Fatal(err)
		}
		out = append(out, logits)
	}
	return out
}

// deviceGreedy prefills prompt and draws n greedy tokens on the device: the
// first after the prefill, then one step graph (decode and sample) each.
func deviceGreedy(t *testing.T, e *runtime.Engine, prompt []int32, n int) []int32 {
	t.Helper()
	ctx := context.Background()
	if err := e.Reset(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Prefill(ctx, prompt, nil); err != nil {
		t.Fatal(err)
	}
	var s runtime.DeviceSampling
	tok, _, err := e.SampleNext(ctx, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := []int32{tok}
	for len(out) < n {
		if tok, _, err = e.DecodeSampled(ctx, tok, s, len(out)); err != nil {
			t.Fatal(err)
		}
		out = append(out, tok)
	}
	return out
}

// cpuEngine opens the fixture on the CPU backend; with kv16 its KV cache is
// rounded to bf16 after every kv_append, as a bf16-KV GPU plan stores it:
// the engine the GPU must agree with closely.
func cpuEngine(t *testing.T, buckets []int, contextTokens int, kv16 bool) (*runtime.Engine, func()) {
	t.Helper()
	ck, err := checkpoint.Open(hfFixture)
	if err != nil {
		t.Fatal(err)
	}
	m, err := planner.FromCheckpoint(filepath.Base(hfFixture), ck)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{Target: "cpu", Buckets: buckets, ContextTokens: contextTokens})
	if err != nil {
		t.Fatal(err)
	}
	var be runtime.Backend = runtime.NewCPU()
	if kv16 {
		be = bf16KV{runtime.NewCPU()}
	}
	e, err := runtime.NewEngine(p, be, runtime.CheckpointWeights(ck))
	if err != nil {
		t.Fatal(err)
	}
	return e, func() {
		e.Close()
		ck.Close()
	}
}

// bf16KV is the CPU backend with kv_append's rows rounded to bf16.
type bf16KV struct{ *runtime.CPU }

func (b bf16KV) Launch(k *plan.Kernel, l *plan.Launch, args []runtime.Ref, rows int, p *runtime.Params) error {
	if err := b.CPU.Launch(k, l, args, rows, p); err != nil {
		return err
	}
	if ir.Kind(k.Family) != ir.KVAppend || rows <= 0 {
		return nil
	}
	width := int64(k.Params.Int("width"))
	buf := make([]byte, int64(rows)*width*4)
	for _, c := range args[:2] { // k_cache, v_cache
		at := runtime.Ref{Mem: c.Mem, Offset: c.Offset + int64(p[ir.ParamPos])*width*4}
		if err := b.Download(buf, at); err != nil {
			return err
		}
		for i := 0; i < len(buf); i += 4 {
			f := math.Float32frombits(binary.LittleEndian.Uint32(buf[i:]))
			binary.LittleEndian.PutUint32(buf[i:], math.Float32bits(bf16.Round(f)))
		}
		if err := b.Upload(at, buf); err != nil {
			return err
		}
	}
	return nil
}

// klDivergence is KL(p‖q) of the softmaxes of two logit rows, in float64.
func klDivergence(p, q []float32) float64 {
	lp, lq := runtime.LogSoftmax(p), runtime.LogSoftmax(q)
	var kl float64
	for i := range lp {
		kl += math.Exp(lp[i]) * (lp[i] - lq[i])
	}
	return kl
}

// TestUploadAllRoundTrip runs the parallel pinned-staging upload on the GPU
// (gputest.UploadRoundTrip: odd sizes through small staging chunks, read
// back, progress rising to the total).
func TestUploadAllRoundTrip(t *testing.T) {
	if err := cuda.Available(); err != nil {
		t.Skipf("no CUDA driver: %v", err)
	}
	c, err := cuda.NewCUDA(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	gputest.UploadRoundTrip(t, c.Backend)
}
