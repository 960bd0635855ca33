package cuda_test

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/codegen"
	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/loader"
	"github.com/aimaproject/aimac/npy"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/runtime/cuda"
)

// hfFixture is the committed HuggingFace transformers reference (see
// runtime/hf_test.go): a small random qwen3_5_moe checkpoint and fp32 logits.
const hfFixture = "../../testdata/hf-tiny"

// Limits of the GPU against transformers' fp32 logits: looser than the CPU
// backend's 1e-4 because the GPU keeps the KV cache in bf16.
const (
	maxKLD     = 0.005
	minTop1    = 0.99
	resultsEnv = "AIMA_GPU_RESULTS"
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
	Buckets  []int   `json:"buckets"`
	Tokens   int     `json:"tokens"`
	MaxKLD   float64 `json:"max_kld"`
	MeanKLD  float64 `json:"mean_kld"`
	Top1     float64 `json:"top1_agreement"`
	MaxKLCPU float64 `json:"max_kld_vs_cpu"`
}

type results struct {
	Device         string         `json:"device"`
	Target         string         `json:"target"`
	Compiler       string         `json:"compiler"`
	Kernels        int            `json:"kernels_compiled"`
	KVCache        string         `json:"kv_cache"`
	LimitKLD       float64        `json:"limit_max_kld"`
	LimitTop1      float64        `json:"limit_top1"`
	Prompts        []promptResult `json:"prompts"`
	GreedyGPU      []int32        `json:"greedy_gpu"`
	GreedyCPU      []int32        `json:"greedy_cpu"`
	GreedyHF       []int32        `json:"greedy_transformers"`
	GreedyEqualCPU bool           `json:"greedy_equal_cpu"`
	GreedyEqualHF  bool           `json:"greedy_equal_transformers"`
	Pass           bool           `json:"pass"`
	Seconds        float64        `json:"seconds"`
}

// gpu compiles the fixture's sm_90 plan for buckets and context and opens
// it on the CUDA backend. It returns the engine and the compiled count.
func gpu(t *testing.T, c *hipcc.Compiler, cache string, buckets []int, contextTokens int) (*loader.Loaded, int) {
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
	p, err := planner.Plan(m, planner.Options{Target: cuda.Target, Buckets: buckets, ContextTokens: contextTokens})
	if err != nil {
		t.Fatal(err)
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
	return l, len(res)
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
	out := results{Target: cuda.Target, Compiler: "nvcc " + c.Version, KVCache: "bf16",
		LimitKLD: maxKLD, LimitTop1: minTop1, GreedyHF: ref.Greedy.Tokens}
	pass := true
	for _, buckets := range [][]int{{256}, {8, 32}} {
		l, n := gpu(t, c, cache, buckets, 512)
		out.Kernels += n
		if be, ok := l.Backend.(*cuda.CUDA); ok {
			out.Device = be.Device()
		}
		cpu, err := loader.Open(loader.Options{ModelDir: hfFixture, Buckets: buckets, ContextTokens: 512})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ref.Prompts {
			shape, want, err := npy.ReadFile(filepath.Join(hfFixture, p.Logits))
			if err != nil {
				t.Fatal(err)
			}
			V := shape[1]
			if shape[0] != len(p.Tokens) || V != l.Engine.Vocab() {
				t.Fatalf("%s: shape %v for %d tokens, vocab %d", p.Logits, shape, len(p.Tokens), l.Engine.Vocab())
			}
			cpuRows := make([][]float32, len(p.Tokens))
			if err := cpu.Engine.Reset(); err != nil {
				t.Fatal(err)
			}
			if _, err := cpu.Engine.Prefill(context.Background(), p.Tokens, func(start int, rows [][]float32) error {
				for i, r := range rows {
					cpuRows[start+i] = slices.Clone(r)
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if err := l.Engine.Reset(); err != nil {
				t.Fatal(err)
			}
			r := promptResult{Buckets: buckets, Tokens: len(p.Tokens)}
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
			t.Logf("buckets %v, %3d tokens: max KLD %.3g, mean KLD %.3g, top-1 agreement %.4f, max KLD vs CPU %.3g",
				buckets, r.Tokens, r.MaxKLD, r.MeanKLD, r.Top1, r.MaxKLCPU)
			if !(r.MaxKLD <= maxKLD) || r.Top1 < minTop1 {
				pass = false
				t.Errorf("buckets %v, %d tokens: max KLD %.3g (limit %g), top-1 agreement %.4f (limit %g)",
					buckets, r.Tokens, r.MaxKLD, maxKLD, r.Top1, minTop1)
			}
			out.Prompts = append(out.Prompts, r)
		}
		cpu.Close()
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// Greedy: the GPU continuation equals the CPU engine's.
	greedy := func(l *loader.Loaded) []int32 {
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
	l, n := gpu(t, c, cache, []int{4, 16}, 128)
	out.Kernels += n
	out.GreedyGPU = greedy(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
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

// klDivergence is KL(p‖q) of the softmaxes of two logit rows, in float64.
func klDivergence(p, q []float32) float64 {
	lp, lq := runtime.LogSoftmax(p), runtime.LogSoftmax(q)
	var kl float64
	for i := range lp {
		kl += math.Exp(lp[i]) * (lp[i] - lq[i])
	}
	return kl
}
