package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/roofline"
	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/synth"
)

func tinyModel(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(synth.Options{Preset: "tiny", Seed: 2, Out: dir}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readReport(t *testing.T, path string) benchReport {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r benchReport
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return r
}

// TestBench times the tiny model on the CPU backend: every requested length
// has its runs, medians inside their spread, and the decode steps; the table
// and the JSON agree.
func TestBench(t *testing.T) {
	dir := tinyModel(t)
	js := filepath.Join(t.TempDir(), "bench.json")
	out, err := run("probe", "bench", "--model-dir", dir, "--buckets", "8,32", "--context-tokens", "128",
		"--prefill", "5", "--prefill", "40", "--decode-context", "12,40", "--decode-tokens", "4",
		"--repeats", "2", "--copy-bytes", "1048576", "--json", js)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"target cpu", "memory plan", "prefill tokens", "decode context"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	r := readReport(t, js)
	if r.Target != "cpu" || !strings.HasPrefix(r.PlanHash, "sha256:") || r.ContextTokens != 128 || !r.Complete || r.Error != "" {
		t.Errorf("report header: target %q hash %q context %d complete %v error %q", r.Target, r.PlanHash, r.ContextTokens, r.Complete, r.Error)
	}
	if r.LoadS <= 0 || r.Memory.Total <= 0 || r.Memory.KV <= 0 {
		t.Errorf("load %v s, memory %+v", r.LoadS, r.Memory)
	}
	if len(r.Prefill) != 2 || r.Prefill[0].Tokens != 5 || r.Prefill[1].Tokens != 40 {
		t.Fatalf("prefill entries %+v", r.Prefill)
	}
	for _, p := range r.Prefill {
		if len(p.RunsS) != 2 || len(p.WarmupS) != 1 || p.Stats == nil || p.TokS == nil {
			t.Fatalf("prefill %d: %+v", p.Tokens, p)
		}
		s, k := p.Stats, p.TokS
		if !(s.Min <= s.Median && s.Median <= s.Max) || !(k.Min <= k.Median && k.Median <= k.Max) || k.Median <= 0 {
			t.Errorf("prefill %d: seconds %+v tok/s %+v", p.Tokens, s, k)
		}
	}
	if segs := r.Prefill[1].Segments; len(segs) != 2 || segs[0] != (benchSeg{32, 32}) || segs[1] != (benchSeg{8, 8}) {
		t.Errorf("segments of 40 tokens with buckets 8,32: %+v", segs)
	}
	if len(r.Decode) != 2 || r.Decode[0].Context != 12 || r.Decode[1].Context != 40 {
		t.Fatalf("decode entries %+v", r.Decode)
	}
	for _, d := range r.Decode {
		if len(d.StepsS) != 4 || len(d.WarmupS) != 2 || d.Step == nil || d.TokSStep <= 0 || d.TokSTotal <= 0 || d.PrefillS <= 0 || d.Start != "prefill" {
			t.Errorf("decode at %d: %+v", d.Context, d)
		}
	}
	if r.Method.IDLimit <= 0 || r.Method.IDLimit > r.Vocab {
		t.Errorf("id limit %d, vocab %d", r.Method.IDLimit, r.Vocab)
	}
}

// TestBenchSyntheticContext: with --synthetic-context the decode contexts
// that are no prefill length are reached without a prefill (no prefill
// time), marked synthetic in the JSON and the table; one that is a prefill
// length decodes after its prefill; the steps are the device sampler's.
func TestBenchSyntheticContext(t *testing.T) {
	dir := tinyModel(t)
	js := filepath.Join(t.TempDir(), "bench.json")
	out, err := run("probe", "bench", "--model-dir", dir, "--buckets", "8,32", "--context-tokens", "128",
		"--prefill", "20", "--repeats", "1", "--decode-context", "20,30,100", "--decode-tokens", "3", "--profile-steps", "1",
		"--synthetic-context", "--copy-bytes", "65536", "--json", js)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"30 (synthetic)", "100 (synthetic)", "synthetic: the context's KV cache and GDN state were filled on the device",
		"decode step: Engine.DecodeSampled launch by launch, greedy draw on the device"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	r := readReport(t, js)
	if !r.Complete || len(r.Prefill) != 1 || len(r.Decode) != 3 {
		t.Fatalf("complete %v, %d prefill and %d decode entries", r.Complete, len(r.Prefill), len(r.Decode))
	}
	for i, d := range r.Decode {
		start, prefilled := "synthetic", false
		if i == 0 {
			start, prefilled = "prefill", true
		}
		if d.Start != start || (d.PrefillS > 0) != prefilled || len(d.StepsS) != 3 || d.TokSStep <= 0 || d.Profile == nil || d.Profile.Mode != "launches" {
			t.Errorf("decode at %d: %+v", d.Context, d)
		}
	}
}

// TestBenchTimeLimit: past the time limit measurements are skipped and said
// so; the run still succeeds with what it has.
func TestBenchTimeLimit(t *testing.T) {
	dir := tinyModel(t)
	js := filepath.Join(t.TempDir(), "bench.json")
	if _, err := run("probe", "bench", "--model-dir", dir, "--buckets", "8", "--context-tokens", "64",
		"--prefill", "8", "--decode-context", "8", "--decode-tokens", "2", "--time-limit", "1ns", "--copy-bytes", "65536", "--json", js); err != nil {
		t.Fatal(err)
	}
	r := readReport(t, js)
	if r.Complete || len(r.Skipped) == 0 {
		t.Errorf("complete %v, skipped %q", r.Complete, r.Skipped)
	}
}

// TestBenchSynthetic: synthetic weights from the model's config.json.
func TestBenchSynthetic(t *testing.T) {
	dir := tinyModel(t)
	js := filepath.Join(t.TempDir(), "bench.json")
	if _, err := run("probe", "bench", "--model-dir", dir, "--synthetic-weights", "3", "--buckets", "16", "--context-tokens", "64",
		"--prefill", "10", "--decode-context", "10", "--decode-tokens", "2", "--repeats", "1", "--copy-bytes", "65536", "--json", js); err != nil {
		t.Fatal(err)
	}
	if r := readReport(t, js); r.Weights != "synthetic, seed 3" || !r.Complete {
		t.Errorf("weights %q complete %v", r.Weights, r.Complete)
	}
}

func TestBenchErrors(t *testing.T) {
	dir := tinyModel(t)
	// A plan for the tiny model, to show that without --model-dir the
	// embedded real config is what the plan is held to.
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := planner.FromCheckpoint("tiny", ck)
	ck.Close()
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{Target: "cpu", Buckets: []int{16}, ContextTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if err := p.WriteFile(planFile); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--prefill", "8"}, "--model-dir is required"},
		{[]string{"--model-dir", dir, "--context-tokens", "64", "--prefill", "65", "--decode-context", "0"}, "--prefill 65 needs 65 context tokens but the plan holds 64"},
		{[]string{"--model-dir", dir, "--context-tokens", "64", "--prefill", "8", "--decode-context", "60", "--decode-tokens", "4"}, "--decode-context 60 with 2+4+4 steps needs 70 context tokens"},
		{[]string{"--model-dir", dir, "--plan", planFile, "--prefill", "100", "--decode-context", "0"}, "needs 100 context tokens but the plan holds 64"},
		{[]string{"--model-dir", dir, "--repeats", "0"}, `invalid argument "0" for "--repeats" flag: want ≥ 1`},
		{[]string{"--model-dir", dir, "--prefill", "-3"}, "--prefill -3"},
		{[]string{"--model-dir", dir, "--decode-tokens", "0"}, `invalid argument "0" for "--decode-tokens" flag: want ≥ 1`},
		{[]string{"--model-dir", dir, "--prefill", "0", "--decode-context", "0"}, "nothing to time"},
		{[]string{"--model-dir", dir, "--copy-bytes", "0"}, `invalid argument "0" for "--copy-bytes" flag: want ≥ 1`},
		{[]string{"--model-dir", dir, "--profile-mode", "nsight"}, `--profile-mode "nsight": want graph or launches`},
		{[]string{"--synthetic-weights", "1", "--plan", planFile, "--prefill", "8", "--decode-context", "8", "--decode-tokens", "1"}, "was made for model"},
	}
	for _, tt := range tests {
		_, err := run(append([]string{"probe", "bench"}, tt.args...)...)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want %q", tt.args, err, tt.want)
		}
	}
}

// TestBenchRoofline: each decode context has the byte model of the plan's
// decode step, the run's copy bandwidth and the roofline it gives, and a
// family table whose families are the decode phase's, each launch counted,
// the bytes adding up to the step's and the shares to one.
func TestBenchRoofline(t *testing.T) {
	dir := tinyModel(t)
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := planner.FromCheckpoint("tiny", ck)
	ck.Close()
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{Target: "cpu", Buckets: []int{8, 32}, ContextTokens: 128})
	if err != nil {
		t.Fatal(err)
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if err := p.WriteFile(planFile); err != nil {
		t.Fatal(err)
	}
	js := filepath.Join(t.TempDir(), "bench.json")
	out, err := run("probe", "bench", "--model-dir", dir, "--plan", planFile, "--prefill", "0", "--decode-context", "12,40",
		"--decode-tokens", "3", "--profile-steps", "2", "--copy-bytes", "1048576", "--copy-repeats", "2", "--json", js)
	if err != nil {
		t.Fatal(err)
	}
	r := readReport(t, js)
	if c := r.Copy; c == nil || c.Bytes != 1<<20 || len(c.RunsS) != 2 || c.GBs <= 0 || c.Method != "host copy, wall clock" {
		t.Fatalf("copy %+v", r.Copy)
	}
	var decode *plan.Phase
	for i := range p.Phases {
		if p.Phases[i].Kind == plan.DecodeStep {
			decode = &p.Phases[i]
		}
	}
	launches := map[string]int{}
	for _, l := range decode.Launches {
		for _, k := range p.Kernels {
			if k.Name == l.Kernel {
				launches[k.Family]++
			}
		}
	}
	for _, d := range r.Decode {
		want, err := roofline.Decode(p, d.Context+1)
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Bytes; got == nil || *got != *newBenchBytes(want.Total) || got.Total != got.Weights+got.KV+got.State || got.KV <= 0 || got.State <= 0 {
			t.Errorf("decode at %d: bytes %+v, want %+v", d.Context, got, want.Total)
		}
		floor := float64(d.Bytes.Total) / (r.Copy.GBs * 1e9)
		if d.CopyGBs != r.Copy.GBs || math.Abs(d.RooflineS-floor) > 1e-9 || math.Abs(d.RooflinePct-100*floor/d.Step.Median) > 0.05+1e-9 {
			t.Errorf("decode at %d: copy %v GB/s, roofline %v s (want %v), %v %%", d.Context, d.CopyGBs, d.RooflineS, floor, d.RooflinePct)
		}
		pr := d.Profile
		if pr == nil || pr.Steps != 2 || pr.Timing != "wall clock around each launch" {
			t.Fatalf("decode at %d: profile %+v", d.Context, pr)
		}
		got := map[string]int{}
		var bytes, share, us float64
		for _, f := range pr.Families {
			got[f.Family] = f.Launches
			bytes += float64(f.BytesTotal)
			share += f.Share
			us += f.US
			if f.BytesTotal != f.Bytes.Total() || f.US < 0 {
				t.Errorf("decode at %d: family %+v", d.Context, f)
			}
		}
		if diff := cmp.Diff(launches, got); diff != "" {
			t.Errorf("decode at %d: launches by family (-plan +table):\n%s", d.Context, diff)
		}
		// The profiled steps attend to more tokens than the first: only the KV grows.
		lo, hi := float64(d.Bytes.Total), float64(d.Bytes.Total)+float64(2*(3+2+2))*float64(d.Bytes.KV)/float64(d.Context+1)
		if bytes < lo || bytes > hi {
			t.Errorf("decode at %d: families move %.0f bytes, want %.0f to %.0f", d.Context, bytes, lo, hi)
		}
		if math.Abs(share-1) > 0.01 || math.Abs(us-pr.StepUS) > 0.1*float64(len(pr.Families)) || pr.StepUS <= 0 {
			t.Errorf("decode at %d: shares sum to %v, µs to %v of %v", d.Context, share, us, pr.StepUS)
		}
	}
	for _, want := range []string{"decode at 12: the step must move", "% of roofline", "family", "moe_gate_up", "attention"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

func TestBenchIDs(t *testing.T) {
	a := benchIDs(7, promptStream(500, 1), 500, 1000)
	b := benchIDs(7, promptStream(500, 1), 500, 1000)
	c := benchIDs(7, promptStream(500, 2), 500, 1000)
	seen := map[int32]bool{}
	for i, id := range a {
		if id != b[i] {
			t.Fatal("same seed and stream, different ids")
		}
		if id < 0 || id >= 1000 || seen[id] {
			t.Fatalf("id %d at %d: out of range or repeated", id, i)
		}
		seen[id] = true
	}
	same := 0
	for i := range a {
		if a[i] == c[i] {
			same++
		}
	}
	if same > 10 {
		t.Errorf("streams 1 and 2 share %d of 500 positions", same)
	}
	if long := benchIDs(1, 0, 250, 100); len(long) != 250 {
		t.Errorf("%d ids, want 250", len(long))
	}
}

func TestArgmax(t *testing.T) {
	nan := float32(0)
	nan /= nan
	for _, tt := range []struct {
		in   []float32
		want int32
	}{
		{[]float32{1, 3, 2}, 1},
		{[]float32{5, 5, 1}, 0},
		{[]float32{nan, 1, 2}, 2},
		{[]float32{-1, nan, -2}, 0},
	} {
		if got := argmax(tt.in); got != tt.want {
			t.Errorf("argmax(%v) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

// TestBenchCertified: --certified-steps decodes the same greedy steps with
// both LM heads on the tiny model (the CPU runs the references) and
// reports identical tokens, both heads' step times and the candidates.
func TestBenchCertified(t *testing.T) {
	dir := tinyModel(t)
	js := filepath.Join(t.TempDir(), "bench.json")
	if _, err := run("probe", "bench", "--model-dir", dir, "--buckets", "8,32", "--context-tokens", "128",
		"--prefill", "0", "--decode-context", "12", "--decode-tokens", "2", "--certified-steps", "24",
		"--profile-steps", "0", "--copy-bytes", "65536", "--json", js); err != nil {
		t.Fatal(err)
	}
	r := readReport(t, js)
	if len(r.Decode) != 1 || r.Decode[0].Certified == nil {
		t.Fatalf("decode entries %+v", r.Decode)
	}
	c := r.Decode[0].Certified
	if c.Steps != 24 || !c.Identical || c.FirstDiff != -1 || c.BF16Step == nil || c.Int8Step == nil || c.Candidates < 1 || c.Fallbacks != 0 {
		t.Errorf("certified %+v", c)
	}
}

// TestBenchProfilePrefill: --profile-prefill adds to each prefill length
// one profiled prefill whose steps are Prefill's (the bucket segments, and
// with --decode-tail the last segment's tokens as decode steps), every
// launch of their phases counted by family, the flops those of
// roofline.Segment at each step's rows and position, the shares summing to
// one, against the unprofiled median; a decode at the same length
// continues after it.
func TestBenchProfilePrefill(t *testing.T) {
	dir := tinyModel(t)
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, err := planner.FromCheckpoint("tiny", ck)
	ck.Close()
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{Target: "cpu", Buckets: []int{8, 32}, ContextTokens: 128})
	if err != nil {
		t.Fatal(err)
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	if err := p.WriteFile(planFile); err != nil {
		t.Fatal(err)
	}
	phases := map[string]*plan.Phase{}
	for i := range p.Phases {
		phases[p.Phases[i].Name] = &p.Phases[i]
	}
	family := map[string]string{}
	for _, k := range p.Kernels {
		family[k.Name] = k.Family
	}
	js := filepath.Join(t.TempDir(), "bench.json")
	out, err := run("probe", "bench", "--model-dir", dir, "--plan", planFile, "--decode-tail", "4",
		"--prefill", "8,35,72", "--repeats", "2", "--decode-context", "35", "--decode-tokens", "2", "--profile-steps", "0",
		"--profile-prefill", "--copy-bytes", "65536", "--json", js)
	if err != nil {
		t.Fatal(err)
	}
	r := readReport(t, js)
	if !r.Complete || !r.Method.ProfilePrefill || len(r.Prefill) != 3 || len(r.Decode) != 1 || r.Decode[0].Step == nil {
		t.Fatalf("complete %v, profile_prefill %v, %d prefill and %d decode entries", r.Complete, r.Method.ProfilePrefill, len(r.Prefill), len(r.Decode))
	}
	type step struct {
		Segment int
		Phase   string
		Tokens  int
		Pos     int
	}
	for _, pf := range r.Prefill {
		pr := pf.Profile
		if pr == nil || pr.Mode != "launches" || pr.Timing != "wall clock around each launch" {
			t.Fatalf("prefill %d: profile %+v", pf.Tokens, pr)
		}
		// The steps Prefill takes with a decode tail of 4.
		var want []step
		segs := runtime.Segments(pf.Tokens, p.Buckets)
		for i, s := range segs {
			if i == len(segs)-1 && s.Tokens <= 4 {
				for j := range s.Tokens {
					want = append(want, step{i, "decode", 1, s.Start + j})
				}
				continue
			}
			want = append(want, step{i, fmt.Sprintf("prefill_%d", s.Bucket), s.Tokens, s.Start})
		}
		var got []step
		launches := map[string]int{}
		flops := map[string]int64{}
		var stepUS float64
		for _, s := range pr.ByStep {
			got = append(got, step{s.Segment, s.Phase, s.Tokens, s.Pos})
			ph := phases[s.Phase]
			if ph == nil || s.Launches != len(ph.Launches) {
				t.Fatalf("prefill %d: step %+v of phase %v", pf.Tokens, s, ph)
			}
			model, err := roofline.Segment(p, ph, s.Tokens, s.Pos)
			if err != nil {
				t.Fatal(err)
			}
			for i, l := range ph.Launches {
				launches[family[l.Kernel]]++
				flops[family[l.Kernel]] += model.Launches[i].FLOPs
			}
			if s.FLOPs != model.FLOPs || s.US <= 0 {
				t.Errorf("prefill %d: step %+v, want %d flops", pf.Tokens, s, model.FLOPs)
			}
			stepUS += s.US
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("prefill %d: steps (-want +got):\n%s", pf.Tokens, d)
		}
		gotLaunches, gotFLOPs := map[string]int{}, map[string]int64{}
		var share, us float64
		for _, f := range pr.Families {
			gotLaunches[f.Family] = f.Launches
			gotFLOPs[f.Family] = f.FLOPs
			share += f.Share
			us += f.US
		}
		for f, n := range flops {
			if n == 0 {
				delete(flops, f) // families without a FLOP model
			}
		}
		for f, n := range gotFLOPs {
			if n == 0 {
				delete(gotFLOPs, f)
			}
		}
		if d := cmp.Diff(launches, gotLaunches); d != "" {
			t.Errorf("prefill %d: launches by family (-plan +profile):\n%s", pf.Tokens, d)
		}
		if d := cmp.Diff(flops, gotFLOPs); d != "" {
			t.Errorf("prefill %d: flops by family (-model +profile):\n%s", pf.Tokens, d)
		}
		if len(flops) < 4 {
			t.Errorf("prefill %d: flops for %v only", pf.Tokens, flops)
		}
		if pr.Steps != len(pr.ByStep) || math.Abs(share-1) > 0.01 || math.Abs(us-pr.StepUS) > 0.1*float64(len(pr.Families)) ||
			math.Abs(stepUS-pr.StepUS) > 0.1*float64(len(pr.ByStep)) || pr.WallMS < pr.StepUS/1e3 {
			t.Errorf("prefill %d: %d steps, shares sum to %v, µs to %v (steps %v) of %v, wall %v ms", pf.Tokens, pr.Steps, share, us, stepUS, pr.StepUS, pr.WallMS)
		}
		if pr.UnprofiledMS != round(pf.Stats.Median*1e3, 3) || math.Abs(pr.OutsideMS-(pr.UnprofiledMS-pr.StepUS/1e3)) > 0.01 {
			t.Errorf("prefill %d: unprofiled %v ms (median %v s), outside %v ms", pf.Tokens, pr.UnprofiledMS, pf.Stats.Median, pr.OutsideMS)
		}
		if !strings.Contains(out, fmt.Sprintf("prefill %d, each launch timed (wall clock around each launch)", pf.Tokens)) {
			t.Errorf("table lacks prefill %d's profile:\n%s", pf.Tokens, out)
		}
	}
	for _, want := range []string{"segment 1: prefill_32, 32 tokens at 32", "segment 1: decode, 1 tokens at 32", "segment 1: decode, 1 tokens at 34", "TFLOP/s", "outside the launches"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if _, err := run("probe", "bench", "--model-dir", dir, "--prefill", "0", "--decode-context", "8", "--profile-prefill"); err == nil ||
		!strings.Contains(err.Error(), "--profile-prefill profiles the --prefill lengths") {
		t.Errorf("--profile-prefill without a prefill length: %v", err)
	}
}
