package runtime_test

import (
	"github.com/google/go-cmp/cmp"

	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/runtime"
)

// blockBackend is the CPU backend with kernels that read their dynamic
// scalars from the parameter block, as GPU kernels do: an engine that
// forgets a sampling slot draws other tokens. It counts uploads.
type blockBackend struct {
	*runtime.CPU
	block   runtime.Params
	uploads int
}

func (b *blockBackend) SetParams(p *runtime.Params) error { b.block = *p; return nil }

func (b *blockBackend) Upload(dst runtime.Ref, src []byte) error {
	b.uploads++
	return b.CPU.Upload(dst, src)
}

// Launch runs the kernel with the block last set, not the one it is given.
func (b *blockBackend) Launch(k *plan.Kernel, l *plan.Launch, args []runtime.Ref, rows int, _ *runtime.Params) error {
	return b.CPU.Launch(k, l, args, rows, &b.block)
}

// tinyEngine plans the tiny checkpoint for the CPU target and opens it on be.
func tinyEngine(t *testing.T, be runtime.Backend, strip bool) *runtime.Engine {
	t.Helper()
	return tinyEngineWith(t, be, strip, planner.Options{})
}

// tinyEngineWith is tinyEngine with the plan's other options (fusion) from o.
func tinyEngineWith(t *testing.T, be runtime.Backend, strip bool, o planner.Options) *runtime.Engine {
	t.Helper()
	ck, err := checkpoint.Open(tiny(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	m, err := planner.FromCheckpoint("tiny", ck)
	if err != nil {
		t.Fatal(err)
	}
	o.Target, o.Buckets, o.ContextTokens = "cpu", []int{8, 32}, 96
	p, err := planner.Plan(m, o)
	if err != nil {
		t.Fatal(err)
	}
	if strip { // a plan made before the sampler
		p.Phases = slices.DeleteFunc(p.Phases, func(ph plan.Phase) bool { return ph.Kind == plan.Sample })
	}
	e, err := runtime.NewEngine(p, be, runtime.CheckpointWeights(ck))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// hostGreedy decodes n tokens after prompt with Decode and the host argmax,
// with the log-softmax of each chosen token.
func hostGreedy(t *testing.T, e *runtime.Engine, prompt []int32, n int) ([]int32, []float64) {
	t.Helper()
	ctx := context.Background()
	if err := e.Reset(); err != nil {
		t.Fatal(err)
	}
	logits, err := e.Prefill(ctx, prompt, nil)
	if err != nil {
		t.Fatal(err)
	}
	var toks []int32
	var lps []float64
	for len(toks) < n {
		tok := runtime.Argmax(logits)
		toks = append(toks, tok)
		lps = append(lps, runtime.LogSoftmax(logits)[tok])
		if len(toks) < n {
			if logits, err = e.Decode(ctx, tok); err != nil {
				t.Fatal(err)
			}
		}
	}
	return toks, lps
}

// deviceRun decodes n tokens after prompt with SampleNext and DecodeSampled.
func deviceRun(t *testing.T, e *runtime.Engine, prompt []int32, n int, s runtime.DeviceSampling) ([]int32, []float32) {
	t.Helper()
	ctx := context.Background()
	if err := e.Reset(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Prefill(ctx, prompt, nil); err != nil {
		t.Fatal(err)
	}
	tok, lp, err := e.SampleNext(ctx, s, 0)
	if err != nil {
		t.Fatal(err)
	}
	toks, lps := []int32{tok}, []float32{lp}
	for len(toks) < n {
		if tok, lp, err = e.DecodeSampled(ctx, tok, s, len(toks)); err != nil {
			t.Fatal(err)
		}
		toks, lps = append(toks, tok), append(lps, lp)
	}
	return toks, lps
}

// TestDeviceGreedy: greedy sampling on the device decodes the host-greedy
// sequence with the host's logprobs, on the CPU backend and on one whose
// kernels read the parameter block; fed back by the sampler, the token is
// never uploaded.
func TestDeviceGreedy(t *testing.T) {
	cpu := tinyEngine(t, runtime.NewCPU(), false)
	bb := &blockBackend{CPU: runtime.NewCPU()}
	blocked := tinyEngine(t, bb, false)
	if !cpu.CanSample() {
		t.Fatal("the plan has no sampler")
	}
	for _, n := range []int{1, 9, 33} {
		p := prompt(n, cpu.Vocab())
		want, wantLP := hostGreedy(t, cpu, p, 12)
		for name, e := range map[string]*runtime.Engine{"cpu": cpu, "block": blocked} {
			bb.uploads = 0
			got, lps := deviceRun(t, e, p, 12, runtime.DeviceSampling{})
			if !slices.Equal(got, want) {
				t.Fatalf("%s, prompt %d: device greedy %v, host greedy %v", name, n, got, want)
			}
			for i := range lps {
				if math.Abs(float64(lps[i])-wantLP[i]) > 1e-5 {
					t.Errorf("%s, prompt %d, token %d: logprob %g, want %g", name, n, i, lps[i], wantLP[i])
				}
			}
			if name == "block" && bb.uploads != len(tinySegments(n)) {
				t.Errorf("prompt %d: %d uploads for %d prefill segments and 11 sampled decodes", n, bb.uploads, len(tinySegments(n)))
			}
		}
	}
}

// tinySegments is the tiny engine's prefill split of an n-token prompt.
func tinySegments(n int) []runtime.Segment { return runtime.Segments(n, []int{8, 32}) }

// TestDeviceSampledReproducible: a seed reproduces a sampled generation,
// whatever came before on the engine; another seed gives another one; a
// token the sampler did not choose is uploaded and decoded.
func TestDeviceSampledReproducible(t *testing.T) {
	e := tinyEngine(t, &blockBackend{CPU: runtime.NewCPU()}, false)
	p := prompt(13, e.Vocab())
	s := runtime.DeviceSampling{Temperature: 1, TopP: 0.95, TopK: 200, MinP: 0.01, Seed: 1234, VocabLimit: 1000}
	a, _ := deviceRun(t, e, p, 16, s)
	deviceRun(t, e, prompt(5, e.Vocab()), 3, runtime.DeviceSampling{Temperature: 2, Seed: 9})
	b, _ := deviceRun(t, e, p, 16, s)
	if !slices.Equal(a, b) {
		t.Fatalf("seed 1234 twice: %v then %v", a, b)
	}
	s.Seed = 1235
	c, _ := deviceRun(t, e, p, 16, s)
	if slices.Equal(a, c) {
		t.Errorf("seeds 1234 and 1235 drew the same %v", a)
	}
	for _, tok := range a {
		if tok >= 1000 {
			t.Errorf("token %d is past the vocabulary limit", tok)
		}
	}
	// Feed a token of our own: the result is the host's greedy after it.
	ctx := context.Background()
	if err := e.Reset(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Prefill(ctx, p, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.SampleNext(ctx, runtime.DeviceSampling{}, 0); err != nil {
		t.Fatal(err)
	}
	other := int32(17)
	got, _, err := e.DecodeSampled(ctx, other, runtime.DeviceSampling{}, 1)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := hostGreedy(t, e, append(slices.Clone(p), other), 1)
	if got != want[0] {
		t.Errorf("after feeding %d: device greedy %d, host %d", other, got, want[0])
	}
}

// TestSampleLogits: after restoring a snapshot, sampling its logits gives
// what sampling right after the prefill gave.
func TestSampleLogits(t *testing.T) {
	e := tinyEngine(t, runtime.NewCPU(), false)
	ctx := context.Background()
	p := prompt(11, e.Vocab())
	logits, err := e.Prefill(ctx, p, nil)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := e.Snapshot(logits)
	if err != nil {
		t.Fatal(err)
	}
	s := runtime.DeviceSampling{Temperature: 0.8, Seed: 5}
	want, wantLP, err := e.SampleNext(ctx, s, 3)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Decode(ctx, 3); err != nil { // the device logits move on
		t.Fatal(err)
	}
	if _, err := e.Restore(snap); err != nil {
		t.Fatal(err)
	}
	got, gotLP, err := e.SampleLogits(ctx, snap.Logits(), s, 3)
	if err != nil {
		t.Fatal(err)
	}
	if got != want || gotLP != wantLP {
		t.Errorf("restored: %d (%g), want %d (%g)", got, gotLP, want, wantLP)
	}
}

func TestDeviceSamplingErrors(t *testing.T) {
	old := tinyEngine(t, runtime.NewCPU(), true)
	ctx := context.Background()
	if old.CanSample() {
		t.Error("a plan without a sample phase can sample")
	}
	if _, _, err := old.SampleNext(ctx, runtime.DeviceSampling{}, 0); !errors.Is(err, runtime.ErrNoSampler) {
		t.Errorf("no sample phase: %v", err)
	}
	e := tinyEngine(t, runtime.NewCPU(), false)
	if _, _, err := e.SampleNext(ctx, runtime.DeviceSampling{}, 0); err == nil || !strings.Contains(err.Error(), "no logits") {
		t.Errorf("sample before prefill: %v", err)
	}
	for _, s := range []runtime.DeviceSampling{
		{Temperature: -1}, {Temperature: float32(math.Inf(1))}, {TopP: 1.5}, {MinP: float32(math.NaN())}, {TopK: -1}, {VocabLimit: -2},
	} {
		if s.Validate() == nil {
			t.Errorf("%+v validates", s)
		}
	}
	if _, _, err := e.SampleLogits(ctx, make([]float32, 3), runtime.DeviceSampling{}, 0); err == nil {
		t.Error("SampleLogits of 3 logits has no error")
	}
	if _, ok := runtime.DeviceSamplingFor(runtime.SamplerConfig{Temperature: 1, PresencePenalty: 0.5}); ok {
		t.Error("a presence penalty converts to device sampling")
	}
	if s, ok := runtime.DeviceSamplingFor(runtime.SamplerConfig{Temperature: 0.7, TopK: 20, TopP: 0.8, RepetitionPenalty: 1, Seed: 3, VocabLimit: 9}); !ok ||
		!cmp.Equal(s, runtime.DeviceSampling{Temperature: 0.7, TopK: 20, TopP: 0.8, Seed: 3, VocabLimit: 9}) {
		t.Errorf("DeviceSamplingFor: %+v, %v", s, ok)
	}
}

// TestDeviceSampleMask: the engine's sample phase with a mask draws what
// kernels.SampleToken draws with it (an allowed id), reports the unmasked
// logprob, and a mask of the wrong width is refused.
func TestDeviceSampleMask(t *testing.T) {
	e := tinyEngine(t, runtime.NewCPU(), false)
	ctx := context.Background()
	logits, err := e.Prefill(ctx, prompt(9, e.Vocab()), nil)
	if err != nil {
		t.Fatal(err)
	}
	mask := make(runtime.Mask, runtime.MaskWords(e.Vocab()))
	for id := 5; id < e.Vocab(); id += 11 {
		mask[id/32] |= 1 << (id % 32)
	}
	for step, s := range []runtime.DeviceSampling{{}, {Temperature: 1, Seed: 2}, {Temperature: 0.7, TopK: 5, TopP: 0.9, Seed: 3}} {
		s.Mask = mask
		got, lp, err := e.SampleLogits(ctx, logits, s, step)
		if err != nil {
			t.Fatal(err)
		}
		want, wantLP := kernels.SampleToken(logits, kernels.SampleParams{Temperature: s.Temperature, TopK: int32(s.TopK), TopP: s.TopP,
			Seed: s.Seed, Step: uint32(step), Mask: mask})
		if got != want || lp != wantLP || !mask.Has(got) {
			t.Errorf("%+v: drew %d (%g), want %d (%g) from the mask", s, got, lp, want, wantLP)
		}
		s.Mask = nil
		if _, freeLP := kernels.SampleToken(logits, kernels.SampleParams{}); got == runtime.Argmax(logits) && lp != freeLP {
			t.Errorf("the logprob of the free argmax changed under a mask: %g, want %g", lp, freeLP)
		}
	}
	if _, _, err := e.SampleLogits(ctx, logits, runtime.DeviceSampling{Mask: mask[:1]}, 0); err == nil {
		t.Error("a one-word mask is accepted")
	}
}
