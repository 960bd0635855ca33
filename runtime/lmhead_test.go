package runtime_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/runtime"
)

// TestCertifiedHeadGreedy: with the certified int8 head on, greedy draws on
// the tiny fixture decode the BF16 head's sequence (host greedy over
// Decode's logits), on the CPU backend, on one whose kernels read the
// parameter block, through captured graphs, as one step graph a token
// (decode_greedy's launches and its 16-byte result, no upload or parameter
// write before it), and with the plan's fusion on (the final norm folded
// into both heads: rmsnorm_gemv and the rmsnorm_ certified families); the
// token is fed back without an upload; every draw after the first is a
// certified step.
func TestCertifiedHeadGreedy(t *testing.T) {
	cpu := tinyEngine(t, runtime.NewCPU(), false)
	bb := &blockBackend{CPU: runtime.NewCPU()}
	blocked := tinyEngine(t, bb, false)
	graphed := tinyEngine(t, &graphBackend{recorder: &recorder{CPU: runtime.NewCPU()}}, false)
	sb := newStepBackend()
	stepped := tinyEngine(t, sb, false)
	fused := tinyEngineWith(t, runtime.NewCPU(), false, planner.Options{Fusion: planner.FuseOn})
	fusedStep := tinyEngineWith(t, newStepBackend(), false, planner.Options{Fusion: planner.FuseOn})
	if cpu.CertifiedHead() {
		t.Fatal("the cpu target's engine starts with the certified head on; the BF16 head is its oracle")
	}
	if fams := greedyFamilies(fused.Plan()); !slices.Contains(fams, "rmsnorm_lm_head_int8") || !slices.Contains(fams, "rmsnorm_lm_head_certify") || slices.Contains(fams, "rmsnorm") {
		t.Fatalf("the fused plan's decode_greedy: %v, want the norm folded into the certified head", fams)
	}
	const n = 24
	for name, e := range map[string]*runtime.Engine{"cpu": cpu, "block": blocked, "graph": graphed, "step": stepped, "fused": fused, "fused_step": fusedStep} {
		if err := e.SetCertifiedHead(true); err != nil {
			t.Fatal(err)
		}
		for _, plen := range []int{1, 9, 33} {
			p := prompt(plen, e.Vocab())
			if err := e.SetCertifiedHead(false); err != nil {
				t.Fatal(err)
			}
			want, _ := hostGreedy(t, e, p, n)
			if err := e.SetCertifiedHead(true); err != nil {
				t.Fatal(err)
			}
			before := e.HeadStats()
			bb.uploads = 0
			starts := sb.starts
			got, lps := deviceRun(t, e, p, n, runtime.DeviceSampling{})
			if name == "step" && sb.starts-starts != n-1 {
				t.Errorf("prompt %d: %d step graphs for %d certified decode steps", plen, sb.starts-starts, n-1)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s, prompt %d: certified greedy %v, BF16 greedy %v", name, plen, got, want)
			}
			st := e.HeadStats()
			if st.Steps-before.Steps != n-1 || st.Fallbacks != 0 || st.Candidates-before.Candidates < n-1 {
				t.Errorf("%s, prompt %d: stats %+v after %+v, want %d certified steps, no fallback", name, plen, st, before, n-1)
			}
			for i, lp := range lps[1:] {
				if !math.IsNaN(float64(lp)) {
					t.Errorf("%s, prompt %d, token %d: logprob %g from the certified head, want NaN", name, plen, i+1, lp)
				}
			}
			if name == "block" && bb.uploads != len(tinySegments(plen)) {
				t.Errorf("prompt %d: %d uploads for %d prefill segments and %d certified decodes", plen, bb.uploads, len(tinySegments(plen)), n-1)
			}
		}
		t.Logf("%s: %+v", name, e.HeadStats())
	}
	if on, err := stepped.StepGraphs(); !on || err != nil {
		t.Errorf("step graphs %v, %v", on, err)
	}
	// decode → logits (the BF16 reference run, host greedy),
	// decode_greedy → id (the first draw after a prefill samples the
	// prefill's logits: no decode) and a graph of each prefill bucket.
	if sb.captures != 4 {
		t.Errorf("%d captures, want 4", sb.captures)
	}
}

// greedyFamilies are the families of p's decode_greedy launches.
func greedyFamilies(p *plan.Plan) []string {
	family := map[string]string{}
	for _, k := range p.Kernels {
		family[k.Name] = k.Family
	}
	var out []string
	for _, ph := range p.Phases {
		if ph.Kind == plan.DecodeGreedy {
			for _, l := range ph.Launches {
				out = append(out, family[l.Kernel])
			}
		}
	}
	return out
}

// TestCertifiedHeadChoice: only greedy, unmasked draws that need no
// logprob take the certified head; a vocabulary limit is honoured; after a
// certified step the device holds no logits for SampleNext; a plan without
// decode_greedy refuses the head.
func TestCertifiedHeadChoice(t *testing.T) {
	e := tinyEngine(t, runtime.NewCPU(), false)
	if err := e.SetCertifiedHead(true); err != nil {
		t.Fatal(err)
	}
	p := prompt(9, e.Vocab())
	for _, s := range []runtime.DeviceSampling{
		{NeedLogprob: true},
		{Temperature: 0.7, Seed: 3},
		{Mask: runtime.Mask(make([]uint32, runtime.MaskWords(e.Vocab())))},
	} {
		for i := range s.Mask {
			s.Mask[i] = 0x5555_5555
		}
		before := e.HeadStats()
		if err := e.SetCertifiedHead(false); err != nil {
			t.Fatal(err)
		}
		want, _ := deviceRun(t, e, p, 8, s)
		if err := e.SetCertifiedHead(true); err != nil {
			t.Fatal(err)
		}
		got, lps := deviceRun(t, e, p, 8, s)
		if !slices.Equal(got, want) || e.HeadStats() != before {
			t.Errorf("%+v: %v with the head on, %v off, stats %+v → %+v: want the BF16 head", s, got, want, before, e.HeadStats())
		}
		if s.NeedLogprob && math.IsNaN(float64(lps[len(lps)-1])) {
			t.Errorf("NeedLogprob: a NaN logprob")
		}
	}
	limited := runtime.DeviceSampling{VocabLimit: e.Vocab() / 3}
	if err := e.SetCertifiedHead(false); err != nil {
		t.Fatal(err)
	}
	want, _ := deviceRun(t, e, p, 12, limited)
	if err := e.SetCertifiedHead(true); err != nil {
		t.Fatal(err)
	}
	got, _ := deviceRun(t, e, p, 12, limited)
	if !slices.Equal(got, want) {
		t.Errorf("vocab limit %d: certified %v, BF16 %v", limited.VocabLimit, got, want)
	}
	for _, id := range got {
		if int(id) >= limited.VocabLimit {
			t.Errorf("vocab limit %d: drew %d", limited.VocabLimit, id)
		}
	}
	if _, _, err := e.SampleNext(context.Background(), runtime.DeviceSampling{}, 0); err == nil {
		t.Error("SampleNext after a certified step drew from stale logits")
	}

	stripped := tinyEngine(t, runtime.NewCPU(), false)
	strippedPlan := *stripped.Plan()
	strippedPlan.Phases = slices.DeleteFunc(slices.Clone(strippedPlan.Phases), func(ph plan.Phase) bool { return ph.Kind == plan.DecodeGreedy })
	old, err := runtime.NewEngine(&strippedPlan, runtime.NewCPU(), runtime.SyntheticWeights(1))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := old.SetCertifiedHead(true); !errors.Is(err, runtime.ErrNoCertifiedHead) {
		t.Errorf("a plan without decode_greedy: %v, want ErrNoCertifiedHead", err)
	}
}

// TestProfileGreedy: the certified greedy step timed launch by launch
// (ProfileGreedy) and with its launches handed over (ProfileGreedyIn)
// decodes the BF16 head's greedy sequence, running every decode_greedy
// launch once a step; a plan without decode_greedy is refused.
func TestProfileGreedy(t *testing.T) {
	for _, o := range []planner.Options{{}, {Fusion: planner.FuseOn}} {
		e := tinyEngineWith(t, runtime.NewCPU(), false, o)
		p := prompt(9, e.Vocab())
		const n = 12
		want, _ := hostGreedy(t, e, p, n)
		launches := len(greedyFamilies(e.Plan()))
		for _, in := range []bool{false, true} {
			ctx := context.Background()
			if err := e.Reset(); err != nil {
				t.Fatal(err)
			}
			logits, err := e.Prefill(ctx, p, nil)
			if err != nil {
				t.Fatal(err)
			}
			tok := runtime.Argmax(logits)
			got := []int32{tok}
			for len(got) < n {
				ran := 0
				each := func(i int, run func() error) error {
					if i != ran {
						t.Fatalf("launch %d handed over as %d", ran, i)
					}
					ran++
					return run()
				}
				if in {
					tok, err = e.ProfileGreedyIn(ctx, tok, func(l runtime.Launches) error { return l(each) })
				} else {
					tok, err = e.ProfileGreedy(ctx, tok, each)
				}
				if err != nil {
					t.Fatal(err)
				}
				if ran != launches {
					t.Fatalf("fusion %q: %d launches ran, decode_greedy has %d", o.Fusion, ran, launches)
				}
				got = append(got, tok)
			}
			if !slices.Equal(got, want) {
				t.Errorf("fusion %q, in %v: profiled greedy %v, BF16 greedy %v", o.Fusion, in, got, want)
			}
		}
	}
	stripped := tinyEngine(t, runtime.NewCPU(), false)
	sp := *stripped.Plan()
	sp.Phases = slices.DeleteFunc(slices.Clone(sp.Phases), func(ph plan.Phase) bool { return ph.Kind == plan.DecodeGreedy })
	old, err := runtime.NewEngine(&sp, runtime.NewCPU(), runtime.SyntheticWeights(1))
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if _, err := old.ProfileGreedy(context.Background(), 1, func(int, func() error) error { return nil }); !errors.Is(err, runtime.ErrNoCertifiedHead) {
		t.Errorf("a plan without decode_greedy: %v, want ErrNoCertifiedHead", err)
	}
}
