package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/buildinfo"
	"github.com/aimaproject/aimac/cliflag"
	"github.com/aimaproject/aimac/loader"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/roofline"
	"github.com/aimaproject/aimac/runtime"
)

// benchFlags are `probe bench`'s options.
type benchFlags struct {
	load         loadFlags
	prefill      []int
	decodeCtx    []int
	decodeTokens int
	decodeWarmup int
	profileSteps int
	// profilePrefill: one more cold prefill of each --prefill length timed
	// launch by launch, for its per-family table.
	profilePrefill bool
	copyBytes      int64
	copyRepeats    int
	repeats        int
	warmup         int
	seed           uint64
	idLimit        int
	jsonOut        string
	timeLimit      time.Duration
	commit         string
	// synthContext: decode contexts start from a synthetic KV cache and
	// GDN state (Engine.SyntheticContext) instead of a prefill.
	synthContext bool
	profileMode  string
	programmatic bool
	persistent   bool
	// certifiedSteps: greedy steps decoded with each LM head (bench_certified.go).
	certifiedSteps int
}

func benchCmd() *cobra.Command {
	var f benchFlags
	c := &cobra.Command{
		Use:   "bench",
		Short: "Time cold prefill and greedy decode on random token ids (tok/s)",
		Long: `Load the engine as the other probes do, then time it on seeded random
token ids (no id repeated within a prompt while the vocabulary allows):

  prefill: for each --prefill N, one warm-up prefill, then --repeats cold
           prefills of N fresh ids (Reset before each); tok/s median, min, max.
           With --profile-prefill, one more cold prefill of N fresh ids, never
           replayed as graphs, every step Prefill takes (each bucket segment, and
           each token of a decode tail as a decode step) enqueued launch by launch
           through Engine.ProfilePrefill, with device events between the launches
           behind a head start of copies (the wall clock around each launch on the
           CPU): by kernel family the launches, ms, share, and TFLOP/s where the
           family has a FLOP model (the projections, the routed experts, attention,
           the chunked GDN) and GB/s of its weight, KV and state bytes; and the
           launches' sum against the unprofiled median (the time outside them).
           A decode context of the same length decodes after that prefill.
  decode:  for each --decode-context C, a cold prefill of C ids (with
           --synthetic-context, for a C that is not also a --prefill length: the
           KV cache and GDN state of C tokens filled on the device with seeded
           values and the position set to C instead, in milliseconds where a
           prefill of 128K takes minutes; speed only, the output means nothing,
           and the figures say so: "start": "synthetic"), --decode-warmup
           untimed steps, then --decode-tokens greedy steps; tok/s of the median
           step and of the total. Where the plan samples on the device, a step is
           Engine.DecodeSampled: one graph replay (decode and the greedy draw) and
           the 8-byte id and logprob read back, the server's path; on a GPU
           target with --certified-head (the default) the replay is the decode
           step with the certified int8 LM head, its certify and pick
           (decode_greedy) and 16 bytes come back (id, NaN logprob, candidates,
           fallback); otherwise the logits are read back and the argmax taken on
           the host. The roofline and the family table follow the head that ran.
           Then --profile-steps steps timed launch by launch for the per-family
           table: with --profile-mode graph (a GPU that records events as graph
           nodes) inside one replay of the step captured with a timing node after
           each launch, no host in between; with --profile-mode launches, or
           elsewhere, launches enqueued one by one with device events between
           them (the wall clock on the CPU): the time, bytes and GB/s of every
           kernel family per step.
  certified: with --certified-steps N, from a snapshot of the state after the
           timed steps, N greedy steps sampled on the device with the BF16 LM
           head, then the same N with the certified int8 head: the tokens must
           be identical (the run fails otherwise); both heads' step times, the
           candidates a step and the fallbacks.
  roofline: the bytes the timed step must move at C (weights its launches
           read, the k selected experts' slices only, the KV cache of the
           context, the GDN state read and written; package roofline), over the
           copy bandwidth measured once per run (--copy-bytes copied device to
           device, timed with device events; a host copy on the CPU): the
           step's floor, and the median step's percentage of it.

A context that is also a prefill length decodes after that length's last timed
prefill. Every call is synchronous (the logits are on the host when it returns),
so wall-clock time is device time plus the token upload and logits download.
Prints a table; --json writes every figure, rewritten after each measurement so
an interrupted run keeps what it measured. With --synthetic-weights and no
--model-dir the embedded Qwen3.6-35B-A3B config is used.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBench(cmd, &f) },
	}
	f.load.registerModel(c)
	fl := c.Flags()
	fl.IntSliceVar(&f.prefill, "prefill", []int{1024, 8192}, "prompt `LENGTHS` to time prefill at (repeatable or comma-separated; 0: none)")
	fl.IntSliceVar(&f.decodeCtx, "decode-context", []int{1024, 8192}, "context `LENGTHS` to time decode at (repeatable or comma-separated; 0: none)")
	cliflag.Int(fl, &f.decodeTokens, "decode-tokens", 64, 1, "`N` timed decode steps at each context")
	cliflag.Int(fl, &f.decodeWarmup, "decode-warmup", 2, 0, "`N` untimed decode steps before the timed ones")
	cliflag.Int(fl, &f.profileSteps, "profile-steps", 4, 0, "`N` decode steps timed launch by launch after the timed ones, for the per-family table (0: none)")
	fl.BoolVar(&f.profilePrefill, "profile-prefill", false, "after each --prefill length's timed runs, one more cold prefill of fresh ids timed launch by launch, for its per-family table")
	cliflag.Int(fl, &f.certifiedSteps, "certified-steps", 0, 0, "`N` greedy steps at each context decoded with the BF16 LM head and again with the certified int8 head from the same state: identical tokens required, both timed (0: none)")
	cliflag.Int64(fl, &f.copyBytes, "copy-bytes", 1<<30, 1, "`BYTES` of the copy that measures the bandwidth (device to device on a GPU)")
	cliflag.Int(fl, &f.copyRepeats, "copy-repeats", 5, 1, "`N` timed copies (after one untimed); the median counts")
	cliflag.Int(fl, &f.repeats, "repeats", 3, 1, "`N` timed prefills of each length")
	cliflag.Int(fl, &f.warmup, "warmup", 1, 0, "`N` untimed prefills of each length before the timed ones")
	fl.Uint64Var(&f.seed, "seed", 1, "`SEED` of the random token ids")
	cliflag.Int(fl, &f.idLimit, "id-limit", 0, 0, "draw ids below `N` (0: the tokenizer's size, else the vocabulary)")
	fl.StringVar(&f.jsonOut, "json", "", "write every figure as JSON to this `FILE`")
	cliflag.DurationOrZero(fl, &f.timeLimit, "time-limit", 0, "skip measurements that would end past this `DURATION` after the start (0: no limit)")
	fl.StringVar(&f.commit, "commit", "", "source `COMMIT` to record (default: the binary's build info)")
	fl.BoolVar(&f.synthContext, "synthetic-context", false, "start each decode context that is not a --prefill length from a KV cache and GDN state filled on the device instead of a prefill (speed only: the output means nothing)")
	fl.StringVar(&f.profileMode, "profile-mode", "graph", "`MODE` of timing the family table: graph (inside one replay, where the GPU can) or launches (one by one)")
	fl.BoolVar(&f.programmatic, "programmatic", true, "launch the decode step's kernels with programmatic dependent launch where the device has it (sm_90)")
	fl.BoolVar(&f.persistent, "persistent", true, "run a plan's persistent runs of decode launches as one launch each (aimac plan --persistent-decode; false: launch by launch, the same bundle)")
	return c
}

// benchReport is the JSON written by --json.
type benchReport struct {
	What          string         `json:"what"`
	Started       string         `json:"started"`
	Build         benchBuild     `json:"build"`
	Host          benchHost      `json:"host"`
	Target        string         `json:"target"`
	Device        string         `json:"device,omitempty"`
	PlanHash      string         `json:"plan_hash"`
	Fingerprint   string         `json:"model_fingerprint"`
	Buckets       []int          `json:"buckets"`
	ContextTokens int            `json:"context_tokens"`
	Vocab         int            `json:"vocab"`
	Weights       string         `json:"weights"`
	LoadS         float64        `json:"load_s"`
	Memory        benchMemory    `json:"memory"`
	Method        benchMethod    `json:"method"`
	Copy          *roofline.Copy `json:"copy,omitempty"`
	Prefill       []benchPrefill `json:"prefill"`
	Decode        []benchDecode  `json:"decode"`
	Skipped       []string       `json:"skipped"`
	Complete      bool           `json:"complete"`
	Error         string         `json:"error,omitempty"`
	ElapsedS      float64        `json:"elapsed_s"`
}

type benchBuild struct {
	Commit   string `json:"commit,omitempty"`
	Modified bool   `json:"modified,omitempty"`
	Go       string `json:"go"`
}

type benchHost struct {
	OS   string `json:"os"`
	Arch string `json:"arch"`
	CPUs int    `json:"cpus"`
}

type benchMemory struct {
	Weights     int64 `json:"weights_bytes"`
	KV          int64 `json:"kv_bytes"`
	State       int64 `json:"state_bytes"`
	Activations int64 `json:"activations_bytes"`
	Buffers     int64 `json:"buffers_bytes"`
	Total       int64 `json:"total_bytes"`
}

type benchMethod struct {
	Timing       string `json:"timing"`
	Prompts      string `json:"prompts"`
	Seed         uint64 `json:"seed"`
	IDLimit      int    `json:"id_limit"`
	Repeats      int    `json:"repeats"`
	Warmup       int    `json:"warmup"`
	DecodeTokens int    `json:"decode_tokens"`
	DecodeWarmup int    `json:"decode_warmup"`
	ProfileSteps int    `json:"profile_steps"`
	// ProfilePrefill: each prefill length has its profiled prefill
	// (--profile-prefill).
	ProfilePrefill bool `json:"profile_prefill"`
	// DecodeStep says how a decode step runs (graphs, sampling, PDL).
	DecodeStep string `json:"decode_step"`
	// LMHead is the timed greedy steps' LM head: "bf16" or
	// "certified_int8" (decode_greedy, docs/lm-head.md; --certified-head).
	LMHead     string `json:"lm_head"`
	StepGraphs bool   `json:"step_graphs"`
	// StepGraphsError is why a step graph could not be captured.
	StepGraphsError string `json:"step_graphs_error,omitempty"`
	Programmatic    bool   `json:"programmatic"`
	// ProgrammaticError is why programmatic launch was turned off.
	ProgrammaticError string `json:"programmatic_error,omitempty"`
	// PersistentRuns and PersistentLaunches: the runs of the decode steps'
	// launches that ran as one persistent launch each, and the launches they
	// hold (aimac plan --persistent-decode, docs/persistent.md); the
	// per-family profiles time those launches one by one.
	PersistentRuns     int `json:"persistent_runs,omitempty"`
	PersistentLaunches int `json:"persistent_launches,omitempty"`
	// Fallbacks are the plan's grid-barrier kernels this device cannot
	// hold at once, whose launches ran as their fallbacks
	// (runtime.Engine.Fallbacks).
	Fallbacks  []string `json:"fallbacks,omitempty"`
	Bytes      string   `json:"bytes"`
	TimeLimitS float64  `json:"time_limit_s,omitempty"`
}

// benchPrefill is one prompt length's prefill figures.
type benchPrefill struct {
	Tokens   int           `json:"tokens"`
	Segments []benchSeg    `json:"segments"`
	WarmupS  []float64     `json:"warmup_s"`
	RunsS    []float64     `json:"runs_s"`
	Stats    *benchSummary `json:"seconds,omitempty"`
	TokS     *benchSummary `json:"tok_s,omitempty"`
	// Profile is one more cold prefill timed launch by launch (--profile-prefill).
	Profile *benchPrefillProfile `json:"profile,omitempty"`
}

// benchPrefillProfile is one prefill timed launch by launch, by family:
// decode[].profile's shape, the prefill being the step.
type benchPrefillProfile struct {
	// Steps is the number of steps the prefill took (ByStep).
	Steps int `json:"steps"`
	// Mode is "launches": enqueued one by one, never a graph replay.
	Mode   string `json:"mode"`
	Timing string `json:"timing"`
	// HostBehind counts the steps whose launches the host enqueued slower
	// than the head start lasted (GPU).
	HostBehind int `json:"host_behind_steps"`
	// StepUS is the sum of every launch's time, µs.
	StepUS float64 `json:"step_us"`
	// WallMS is the profiled prefill's wall clock; UnprofiledMS the median
	// of the timed runs, and OutsideMS UnprofiledMS − StepUS/1000: what
	// the timed prefill spends outside the launches as timed here (the
	// host between segments, what the events do not see); negative where
	// the launches one by one take longer than the timed prefill's graphs,
	// whose launches overlap under programmatic dependent launch.
	WallMS       float64            `json:"wall_ms"`
	UnprofiledMS float64            `json:"unprofiled_ms"`
	OutsideMS    float64            `json:"outside_launches_ms"`
	ByStep       []benchPrefillStep `json:"by_step"`
	// Families: us_per_step, bytes and flops are the whole prefill's.
	Families []roofline.Family `json:"families"`
}

// benchPrefillStep is one step of a profiled prefill (runtime.PrefillStep).
type benchPrefillStep struct {
	Segment  int     `json:"segment"`
	Phase    string  `json:"phase"`
	Tokens   int     `json:"tokens"`
	Pos      int     `json:"pos"`
	Launches int     `json:"launches"`
	US       float64 `json:"us"`
	FLOPs    int64   `json:"flops"`
}

type benchSeg struct {
	Tokens int `json:"tokens"`
	Bucket int `json:"bucket"`
}

// benchDecode is one context's decode figures.
type benchDecode struct {
	Context int `json:"context"`
	// Start is how the context was reached: "prefill", or "synthetic" (the
	// KV cache and GDN state filled on the device: the speed of a step at
	// that context, not a generation).
	Start    string    `json:"start"`
	PrefillS float64   `json:"prefill_s"`
	WarmupS  []float64 `json:"warmup_steps_s"`
	StepsS   []float64 `json:"steps_s"`
	// IDs are the greedy ids the timed steps drew, in order: two plans of
	// the same model and weights that compute the same logits draw the same.
	IDs       []int32       `json:"ids"`
	Step      *benchSummary `json:"step_s,omitempty"`
	TotalS    float64       `json:"total_s"`
	TokSStep  float64       `json:"tok_s_median_step"`
	TokSTotal float64       `json:"tok_s_total"`
	TokSRange [2]float64    `json:"tok_s_min_max"`
	// Bytes is what the step must move at context+1 tokens (the first
	// step's), CopyGBs the run's copy bandwidth; RooflineS is their ratio
	// and RooflinePct its share of the median step.
	Bytes       *benchBytes   `json:"bytes,omitempty"`
	CopyGBs     float64       `json:"copy_gb_s,omitempty"`
	RooflineS   float64       `json:"roofline_s,omitempty"`
	RooflineTok float64       `json:"roofline_tok_s,omitempty"`
	RooflinePct float64       `json:"roofline_pct,omitempty"`
	Profile     *benchProfile `json:"profile,omitempty"`
	// Certified compares the two LM heads of greedy decoding (--certified-steps).
	Certified *benchCertified `json:"certified,omitempty"`
}

// benchBytes is a step's byte model (roofline.Bytes and their total).
type benchBytes struct {
	Weights int64 `json:"weights"`
	KV      int64 `json:"kv"`
	State   int64 `json:"state"`
	Total   int64 `json:"total"`
}

func newBenchBytes(b roofline.Bytes) *benchBytes {
	return &benchBytes{Weights: b.Weights, KV: b.KV, State: b.State, Total: b.Total()}
}

// benchProfile is the decode step timed launch by launch, by family.
type benchProfile struct {
	Steps int `json:"steps"`
	// Mode is "graph" (inside one replay) or "launches" (one by one);
	// GraphError is why graph mode was asked for and not used.
	Mode       string `json:"mode"`
	GraphError string `json:"graph_error,omitempty"`
	Timing     string `json:"timing"`
	// HostBehind counts the steps whose launches the host enqueued slower
	// than the head start lasted (GPU): small launches may then include
	// host time.
	HostBehind int               `json:"host_behind_steps"`
	StepUS     float64           `json:"step_us"`
	Families   []roofline.Family `json:"families"`
}

// benchSummary is a sample's median and spread.
type benchSummary struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	N      int     `json:"n"`
}

func summarize(xs []float64) *benchSummary {
	if len(xs) == 0 {
		return nil
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return &benchSummary{Median: med, Min: s[0], Max: s[len(s)-1], N: len(s)}
}

// rate turns a seconds summary of n-token runs into tokens per second
// (the slowest run gives the minimum).
func rate(n int, s *benchSummary) *benchSummary {
	if s == nil {
		return nil
	}
	tps := func(sec float64) float64 { return round(float64(n)/sec, 1) }
	return &benchSummary{Median: tps(s.Median), Min: tps(s.Max), Max: tps(s.Min), N: s.N}
}

func round(x float64, digits int) float64 {
	p := math.Pow(10, float64(digits))
	return math.Round(x*p) / p
}

// benchIDs returns n seeded pseudo-random ids below limit: no id repeats
// while n ≤ limit; longer prompts are fresh shuffles one after another.
// stream separates the prompts of one seed.
func benchIDs(seed, stream uint64, n, limit int) []int32 {
	r := rand.New(rand.NewPCG(seed, stream))
	out := make([]int32, 0, n)
	for len(out) < n {
		for _, id := range r.Perm(limit)[:min(limit, n-len(out))] {
			out = append(out, int32(id))
		}
	}
	return out
}

// promptStream names a prompt: its length and its index among that
// length's prompts (warm-ups first).
func promptStream(n, i int) uint64 { return uint64(n)<<16 | uint64(i) }

// open loads the engine as load does, without a prompt; with synthetic
// weights and no model directory the embedded real config is used. It
// checks before loading that the plan's context holds need tokens.
func (f *benchFlags) open(need int, needWhat string, stderr io.Writer) (*loader.Loaded, time.Duration, error) {
	lf := &f.load
	if err := lf.parseSynthetic(); err != nil {
		return nil, 0, err
	}
	if lf.o.ModelDir == "" {
		if !lf.o.Synthetic {
			return nil, 0, fmt.Errorf("--model-dir is required (or --synthetic-weights SEED to run the embedded %s config)", arch.RealName)
		}
		tmp, err := os.MkdirTemp("", "aima-bench-")
		if err != nil {
			return nil, 0, err
		}
		defer os.RemoveAll(tmp)
		lf.o.ModelDir = filepath.Join(tmp, arch.RealName)
		if err := os.Mkdir(lf.o.ModelDir, 0o755); err != nil {
			return nil, 0, err
		}
		if err := os.WriteFile(filepath.Join(lf.o.ModelDir, "config.json"), arch.RealConfigJSON, 0o644); err != nil {
			return nil, 0, err
		}
	}
	if err := lf.parseBuckets(); err != nil {
		return nil, 0, err
	}
	if err := lf.openBundle(); err != nil {
		return nil, 0, err
	}
	capacity := lf.o.ContextTokens
	if lf.o.PlanFile != "" {
		p, err := plan.ReadFile(lf.o.PlanFile)
		if err != nil {
			return nil, 0, err
		}
		capacity = p.ContextTokens
	}
	if err := checkContext(need, needWhat, capacity); err != nil {
		return nil, 0, err
	}
	o := lf.o
	o.Progress = terminal(stderr)
	start := time.Now()
	l, err := loader.Open(o)
	if err != nil {
		return nil, 0, err
	}
	if err := lf.configure(l.Engine); err != nil {
		l.Close()
		return nil, 0, err
	}
	took := time.Since(start)
	if err := checkContext(need, needWhat, l.Engine.Capacity()); err != nil {
		l.Close()
		return nil, 0, err
	}
	return l, took, nil
}

func checkContext(need int, what string, capacity int) error {
	if need > capacity {
		return fmt.Errorf("%s needs %d context tokens but the plan holds %d: make the plan with --context-tokens %d or more, or ask for less", what, need, capacity, need)
	}
	return nil
}

// validate checks the options and returns the largest context a
// measurement needs and which one it is.
func (f *benchFlags) validate() (int, string, error) {
	f.prefill = slices.DeleteFunc(f.prefill, func(n int) bool { return n == 0 })
	f.decodeCtx = slices.DeleteFunc(f.decodeCtx, func(n int) bool { return n == 0 })
	// The counts are bounded by their flags (cliflag); the lists here.
	if len(f.prefill) == 0 && len(f.decodeCtx) == 0 {
		return 0, "", fmt.Errorf("nothing to time: give --prefill or --decode-context")
	}
	if f.profileMode != "graph" && f.profileMode != "launches" {
		return 0, "", fmt.Errorf("--profile-mode %q: want graph or launches", f.profileMode)
	}
	if f.profilePrefill && len(f.prefill) == 0 {
		return 0, "", fmt.Errorf("--profile-prefill profiles the --prefill lengths: give one")
	}
	need, what := 0, ""
	for _, n := range f.prefill {
		if n < 1 {
			return 0, "", fmt.Errorf("--prefill %d: want ≥ 1", n)
		}
		if n > need {
			need, what = n, fmt.Sprintf("--prefill %d", n)
		}
	}
	for _, c := range f.decodeCtx {
		if c < 1 {
			return 0, "", fmt.Errorf("--decode-context %d: want ≥ 1", c)
		}
		// The certified comparison and the profile both start from the
		// state after the timed steps.
		after := max(f.profileSteps, f.certifiedSteps)
		if t := c + f.decodeWarmup + f.decodeTokens + after; t > need {
			need, what = t, fmt.Sprintf("--decode-context %d with %d+%d+%d steps", c, f.decodeWarmup, f.decodeTokens, after)
		}
	}
	return need, what, nil
}

// bench is one run's state.
type bench struct {
	f        *benchFlags
	e        *runtime.Engine
	be       runtime.Backend
	rep      *benchReport
	limit    int
	deadline time.Time
	start    time.Time
	// perToken estimates a prefill's seconds per token, perStep a decode
	// step's seconds, for the deadline.
	perToken, perStep estimate
}

// estimate is the slowest timed observation, or the last warm-up one until
// there is a timed one (first calls pay one-time costs).
type estimate struct{ timed, warm float64 }

func (e *estimate) add(x float64, warm bool) {
	if warm {
		e.warm = x
	} else {
		e.timed = max(e.timed, x)
	}
}

func (e *estimate) value() float64 {
	if e.timed > 0 {
		return e.timed
	}
	return e.warm
}

func runBench(cmd *cobra.Command, f *benchFlags) error {
	need, needWhat, err := f.validate()
	if err != nil {
		return err
	}
	begin := time.Now()
	l, loadTime, err := f.open(need, needWhat, cmd.ErrOrStderr())
	if err != nil {
		return err
	}
	defer l.Close()
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	p := l.Plan
	mem := l.Memory
	limit := l.Engine.Vocab()
	if l.TokenizerVocab > 0 {
		limit = min(limit, l.TokenizerVocab)
	}
	if f.idLimit > 0 {
		limit = min(limit, f.idLimit)
	}
	rep := &benchReport{
		What:          "aima-engine probe bench: cold prefill and greedy decode, batch 1, random token ids",
		Started:       begin.UTC().Format(time.RFC3339),
		Build:         buildInfo(f.commit),
		Host:          benchHost{OS: goruntime.GOOS, Arch: goruntime.GOARCH, CPUs: goruntime.NumCPU()},
		Target:        string(p.Target),
		PlanHash:      p.Hash(),
		Fingerprint:   p.Model.Fingerprint,
		Buckets:       p.Buckets,
		ContextTokens: p.ContextTokens,
		Vocab:         l.Engine.Vocab(),
		Weights:       "checkpoint " + filepath.Base(f.load.o.ModelDir),
		LoadS:         round(loadTime.Seconds(), 3),
		Memory: benchMemory{Weights: mem.Weights, KV: mem.KV, State: mem.State, Activations: mem.Activations,
			Buffers: mem.Buffers, Total: mem.Total()},
		Method: benchMethod{
			Timing:         "wall clock around each synchronous Engine.Prefill call and each decode step (decode_step says what one is); median of the timed runs",
			Prompts:        "seeded PCG permutations of ids below id_limit, a fresh prompt for every run",
			Seed:           f.seed,
			IDLimit:        limit,
			Repeats:        f.repeats,
			Warmup:         f.warmup,
			DecodeTokens:   f.decodeTokens,
			DecodeWarmup:   f.decodeWarmup,
			ProfileSteps:   f.profileSteps,
			ProfilePrefill: f.profilePrefill,
			Bytes: "per decode step, from the plan (package roofline): weight operands' extents, the routed experts' k of experts slices, " +
				"the embedding's token rows, the KV cache of the tokens attended (kv_append: the row written), GDN state read + written; " +
				"roofline = bytes / the copy's bytes read + written per second",
			TimeLimitS: f.timeLimit.Seconds(),
		},
		Prefill: []benchPrefill{},
		Decode:  []benchDecode{},
		Skipped: []string{},
	}
	if f.load.o.Synthetic {
		rep.Weights = fmt.Sprintf("synthetic, seed %d", f.load.o.SyntheticSeed)
	}
	if d, ok := l.Backend.(interface{ Device() string }); ok {
		rep.Device = d.Device()
	}
	l.Engine.SetProgrammatic(f.programmatic)
	l.Engine.SetPersistent(f.persistent)
	b := &bench{f: f, e: l.Engine, be: l.Backend, rep: rep, limit: limit, start: begin}
	if f.timeLimit > 0 {
		b.deadline = begin.Add(f.timeLimit)
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "target %s%s, plan %s, weights %s, loaded in %.2f s\n", p.Target, deviceSuffix(rep.Device), rep.PlanHash, rep.Weights, loadTime.Seconds())
	fmt.Fprint(out, mem.String())
	if err := b.save(); err != nil {
		return err
	}
	var runErr error
	// The decode roofline and the GPU profiler's head start need the copy.
	if len(f.decodeCtx) > 0 || f.profilePrefill {
		rep.Copy, runErr = roofline.MeasureCopy(l.Backend, f.copyBytes, f.copyRepeats)
		if runErr == nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "[%.0fs] copy bandwidth: %.1f GB/s (%d bytes, %s)\n", time.Since(begin).Seconds(), rep.Copy.GBs, rep.Copy.Bytes, rep.Copy.Method)
			rep.Copy.GBs = round(rep.Copy.GBs, 1)
		}
	}
	if runErr == nil {
		runErr = b.run(ctx, cmd.ErrOrStderr())
	}
	rep.Complete = runErr == nil && len(rep.Skipped) == 0
	if runErr != nil {
		rep.Error = runErr.Error()
	}
	saveErr := b.save()
	b.table(out)
	if runErr != nil {
		return runErr
	}
	return saveErr
}

func deviceSuffix(d string) string {
	if d == "" {
		return ""
	}
	return " on " + d
}

// run measures every length in increasing order: prefill runs, then the
// decode steps of a context on top of its last prefill.
func (b *bench) run(ctx context.Context, log io.Writer) error {
	f := b.f
	lengths := slices.Clone(f.prefill)
	lengths = append(lengths, f.decodeCtx...)
	slices.Sort(lengths)
	lengths = slices.Compact(lengths)
	for _, n := range lengths {
		timed := slices.Contains(f.prefill, n)
		decode := slices.Contains(f.decodeCtx, n)
		var pf *benchPrefill
		if timed {
			segs := []benchSeg{}
			for _, s := range runtime.Segments(n, b.e.Plan().Buckets) {
				segs = append(segs, benchSeg{Tokens: s.Tokens, Bucket: s.Bucket})
			}
			b.rep.Prefill = append(b.rep.Prefill, benchPrefill{Tokens: n, Segments: segs, WarmupS: []float64{}, RunsS: []float64{}})
			pf = &b.rep.Prefill[len(b.rep.Prefill)-1]
		}
		runs := 0
		if timed {
			runs = f.warmup + f.repeats
		}
		// A context that is no timed prefill length starts from a synthetic
		// context when asked to; one that is decodes after its prefill.
		synthetic := decode && !timed && f.synthContext
		if decode && runs == 0 && !synthetic {
			runs = 1 // the context's prefill, untimed as a prefill figure
		}
		var last []float32
		var lastSec float64
		prefilled := false
		for i := range runs {
			if !b.fits(float64(n) * b.perToken.value()) {
				b.skip(fmt.Sprintf("prefill %d run %d and after: out of time", n, i))
				break
			}
			logits, sec, err := b.prefill(ctx, n, i)
			if err != nil {
				return fmt.Errorf("prefill of %d tokens: %w", n, err)
			}
			last, lastSec, prefilled = logits, sec, true
			b.perToken.add(sec/float64(n), timed && i < f.warmup)
			switch {
			case !timed:
			case i < f.warmup:
				pf.WarmupS = append(pf.WarmupS, round(sec, 6))
			default:
				pf.RunsS = append(pf.RunsS, round(sec, 6))
				pf.Stats = summarize(pf.RunsS)
				pf.TokS = rate(n, pf.Stats)
			}
			fmt.Fprintf(log, "[%.0fs] prefill %d: %.1f ms\n", time.Since(b.start).Seconds(), n, sec*1e3)
			if err := b.save(); err != nil {
				return err
			}
		}
		if timed && len(pf.RunsS) < f.repeats && len(pf.RunsS) > 0 {
			b.skip(fmt.Sprintf("prefill %d: %d of %d timed runs", n, len(pf.RunsS), f.repeats))
		}
		if timed && f.profilePrefill {
			// Launch by launch and without graphs a prefill takes longer:
			// twice the slowest timed run, as the estimate.
			if len(pf.RunsS) == 0 || !b.fits(2*float64(n)*b.perToken.value()) {
				b.skip(fmt.Sprintf("prefill %d: profile out of time", n))
			} else {
				logits, err := b.profilePrefill(ctx, pf, runs)
				if err != nil {
					return fmt.Errorf("profile of a prefill of %d tokens: %w", n, err)
				}
				last = logits // the state a decode at n continues from
				pr := pf.Profile
				fmt.Fprintf(log, "[%.0fs] prefill %d: profiled, unprofiled %.1f ms, launches %.1f ms\n", time.Since(b.start).Seconds(), n, pr.UnprofiledMS, pr.StepUS/1e3)
				if err := b.save(); err != nil {
					return err
				}
			}
		}
		if !decode {
			continue
		}
		if !prefilled && !synthetic {
			b.skip(fmt.Sprintf("decode at %d: out of time", n))
			continue
		}
		steps := f.decodeWarmup + f.decodeTokens + f.profileSteps
		if !b.fits(float64(steps) * b.perStep.value()) {
			b.skip(fmt.Sprintf("decode at %d: out of time", n))
			continue
		}
		start := startPrefill
		if synthetic {
			t := time.Now()
			if err := b.e.SyntheticContext(f.seed, n); err != nil {
				return fmt.Errorf("decode at %d: %w", n, err)
			}
			fmt.Fprintf(log, "[%.0fs] decode at %d: synthetic context filled in %.1f ms\n", time.Since(b.start).Seconds(), n, time.Since(t).Seconds()*1e3)
			start, last, lastSec = startSynthetic, nil, 0
		}
		if err := b.decode(ctx, log, n, last, round(lastSec, 6), start); err != nil {
			return fmt.Errorf("decode at %d: %w", n, err)
		}
	}
	return nil
}

// prefill resets the engine and prefills n fresh ids (prompt i of length n).
func (b *bench) prefill(ctx context.Context, n, i int) ([]float32, float64, error) {
	if err := b.e.Reset(); err != nil {
		return nil, 0, err
	}
	ids := benchIDs(b.f.seed, promptStream(n, i), n, b.limit)
	t := time.Now()
	logits, err := b.e.Prefill(ctx, ids, nil)
	sec := time.Since(t).Seconds()
	return logits, sec, err
}

// profilePrefill resets the engine and prefills n fresh ids (prompt i of
// length n, n = pf.Tokens) through Engine.ProfilePrefill, every launch of
// every step timed by a roofline.Profiler, and sets pf.Profile: the
// launches by family with each step's byte and FLOP model
// (roofline.Segment at its rows and position). It returns the logits.
func (b *bench) profilePrefill(ctx context.Context, pf *benchPrefill, i int) ([]float32, error) {
	prof, err := roofline.NewProfiler(b.be, b.rep.Copy)
	if err != nil {
		return nil, err
	}
	defer prof.Close()
	if err := b.e.Reset(); err != nil {
		return nil, err
	}
	p := b.e.Plan()
	phases := map[string]*plan.Phase{}
	for j := range p.Phases {
		phases[p.Phases[j].Name] = &p.Phases[j]
	}
	n := pf.Tokens
	ids := benchIDs(b.f.seed, promptStream(n, i), n, b.limit)
	var steps []*roofline.Step
	var times [][]time.Duration
	pr := &benchPrefillProfile{Mode: "launches", ByStep: []benchPrefillStep{}}
	t := time.Now()
	logits, err := b.e.ProfilePrefill(ctx, ids, func(s runtime.PrefillStep, launches runtime.Launches) error {
		ph := phases[s.Phase]
		if ph == nil {
			return fmt.Errorf("step %+v: the plan has no phase %s", s, s.Phase)
		}
		m, err := roofline.Segment(p, ph, s.Tokens, s.Pos)
		if err != nil {
			return err
		}
		ts, err := prof.Step(func(each func(int, func() error) error) error { return launches(each) })
		if err != nil {
			return err
		}
		var us float64
		for _, d := range ts {
			us += d.Seconds() * 1e6
		}
		steps, times = append(steps, m), append(times, ts)
		pr.ByStep = append(pr.ByStep, benchPrefillStep{Segment: s.Segment, Phase: s.Phase, Tokens: s.Tokens, Pos: s.Pos,
			Launches: len(ts), US: round(us, 1), FLOPs: m.FLOPs})
		pr.StepUS += us
		return nil
	})
	wall := time.Since(t)
	if err != nil {
		return nil, err
	}
	fams, err := roofline.ProfileTotal(steps, times)
	if err != nil {
		return nil, err
	}
	for j := range fams {
		fm := &fams[j]
		fm.US, fm.Share, fm.GBs, fm.TFLOPs = round(fm.US, 1), round(fm.Share, 4), round(fm.GBs, 1), round(fm.TFLOPs, 3)
	}
	pr.Steps, pr.Timing, pr.HostBehind, pr.Families = len(steps), prof.Timing, prof.Behind, fams
	pr.WallMS = round(wall.Seconds()*1e3, 3)
	if pf.Stats != nil {
		pr.UnprofiledMS = round(pf.Stats.Median*1e3, 3)
		pr.OutsideMS = round(pf.Stats.Median*1e3-pr.StepUS/1e3, 3)
	}
	pr.StepUS = round(pr.StepUS, 1)
	pf.Profile = pr
	return logits, nil
}

// How a decode context was reached (benchDecode.Start).
const (
	startPrefill   = "prefill"
	startSynthetic = "synthetic"
)

// decode runs the warm-up and timed greedy steps at context n: after a
// prefill whose last logits are given, or, with logits nil, after a
// synthetic context (the first token is then a seeded id).
func (b *bench) decode(ctx context.Context, log io.Writer, n int, logits []float32, prefillS float64, start string) error {
	f := b.f
	b.rep.Decode = append(b.rep.Decode, benchDecode{Context: n, Start: start, PrefillS: prefillS, WarmupS: []float64{}, StepsS: []float64{}, IDs: []int32{}})
	d := &b.rep.Decode[len(b.rep.Decode)-1]
	device := b.e.CanSample()
	var greedy runtime.DeviceSampling
	var tok int32
	switch {
	case logits == nil:
		tok = benchIDs(f.seed, promptStream(n, 1<<15), 1, b.limit)[0]
	case device:
		t, _, err := b.e.SampleNext(ctx, greedy, 0)
		if err != nil {
			return err
		}
		tok = t
	default:
		tok = argmax(logits)
	}
	for i := range f.decodeWarmup + f.decodeTokens {
		t := time.Now()
		var err error
		if device {
			tok, _, err = b.e.DecodeSampled(ctx, tok, greedy, i+1)
		} else {
			logits, err = b.e.Decode(ctx, tok)
		}
		sec := time.Since(t).Seconds()
		if err != nil {
			return err
		}
		if !device {
			tok = argmax(logits)
		}
		b.perStep.add(sec, i < f.decodeWarmup)
		if i < f.decodeWarmup {
			d.WarmupS = append(d.WarmupS, round(sec, 6))
			continue
		}
		d.StepsS = append(d.StepsS, round(sec, 6))
		d.IDs = append(d.IDs, tok)
	}
	b.noteStep(device)
	d.Step = summarize(d.StepsS)
	for _, s := range d.StepsS {
		d.TotalS += s
	}
	d.TotalS = round(d.TotalS, 6)
	d.TokSStep = round(1/d.Step.Median, 2)
	d.TokSTotal = round(float64(len(d.StepsS))/d.TotalS, 2)
	d.TokSRange = [2]float64{round(1/d.Step.Max, 2), round(1/d.Step.Min, 2)}
	fmt.Fprintf(log, "[%.0fs] decode at %d: %d steps, median %.2f ms\n", time.Since(b.start).Seconds(), n, len(d.StepsS), d.Step.Median*1e3)
	if err := b.roofline(d, n); err != nil {
		return err
	}
	if err := b.certified(ctx, log, d, logits); err != nil {
		return fmt.Errorf("certified head: %w", err)
	}
	if err := b.save(); err != nil {
		return err
	}
	if f.profileSteps == 0 {
		return nil
	}
	if err := b.profile(ctx, d, tok); err != nil {
		return fmt.Errorf("profile: %w", err)
	}
	fmt.Fprintf(log, "[%.0fs] decode at %d: %d steps profiled (%s), %.0f µs of launches a step\n", time.Since(b.start).Seconds(), n, d.Profile.Steps, d.Profile.Mode, d.Profile.StepUS)
	return b.save()
}

// noteStep records how the decode steps ran, once they have.
func (b *bench) noteStep(device bool) {
	m := &b.rep.Method
	steps, serr := b.e.StepGraphs()
	m.StepGraphs = steps
	if serr != nil {
		m.StepGraphsError = serr.Error()
	}
	pdl, err := b.e.Programmatic()
	m.Programmatic = pdl
	if err != nil {
		m.ProgrammaticError = err.Error()
	}
	var parts []string
	certified := b.certifiedTimed(device)
	m.LMHead = "bf16"
	switch {
	case device && steps && certified:
		m.LMHead = "certified_int8"
		parts = append(parts, "Engine.DecodeSampled: one graph replay per token (parameter block and token copied from pinned memory, the decode step with the certified int8 LM head, its certify and pick on the device, id, NaN logprob, candidates and fallback flag copied into pinned memory), the host waits for those 16 bytes only")
	case device && steps:
		parts = append(parts, "Engine.DecodeSampled: one graph replay per token (parameter block and token copied from pinned memory, decode, greedy draw on the device, id and logprob copied into pinned memory), the host waits for those 8 bytes only")
	case device && b.e.Graphs():
		parts = append(parts, "Engine.DecodeSampled: the decode step replayed as a graph and the greedy draw launched on the device, parameter block and token uploaded synchronously, the host waits for the stream")
	case device:
		parts = append(parts, "Engine.DecodeSampled launch by launch, greedy draw on the device")
	default:
		parts = append(parts, "Engine.Decode (logits read back), argmax on the host outside the timed call")
	}
	if certified && !(device && steps) {
		m.LMHead = "certified_int8"
		parts = append(parts, "the certified int8 LM head (decode_greedy)")
	}
	if pdl {
		parts = append(parts, "programmatic dependent launch")
	}
	m.PersistentRuns, m.PersistentLaunches = b.e.Persistent()
	if m.PersistentRuns > 0 {
		parts = append(parts, fmt.Sprintf("%d runs of %d launches each one persistent launch (the profiles time them launch by launch)", m.PersistentRuns, m.PersistentLaunches))
	}
	if m.Fallbacks = b.e.Fallbacks(); len(m.Fallbacks) > 0 {
		parts = append(parts, fmt.Sprintf("the launches of %s as their fallbacks (their grids do not fit this device at once)", strings.Join(m.Fallbacks, ", ")))
	}
	m.DecodeStep = strings.Join(parts, "; ")
}

// certifiedTimed reports whether the timed greedy steps (drawn on the
// device when device) take the certified int8 LM head.
func (b *bench) certifiedTimed(device bool) bool { return device && b.e.CertifiedHead() }

// stepBytes is the byte model of the timed greedy step at context n:
// decode_greedy's when the certified head serves it, else decode's.
func (b *bench) stepBytes(n int) (*roofline.Step, error) {
	if b.certifiedTimed(b.e.CanSample()) {
		return roofline.Greedy(b.e.Plan(), n)
	}
	return roofline.Decode(b.e.Plan(), n)
}

// roofline sets the byte model of decode at context n (the first step
// attends to n+1 tokens) and its floor at the run's copy bandwidth.
func (b *bench) roofline(d *benchDecode, n int) error {
	s, err := b.stepBytes(n + 1)
	if err != nil {
		return err
	}
	d.Bytes = newBenchBytes(s.Total)
	if c := b.rep.Copy; c != nil && c.GBs > 0 {
		d.CopyGBs = c.GBs
		floor := float64(s.Total.Total()) / (c.GBs * 1e9)
		d.RooflineS = round(floor, 9)
		d.RooflineTok = round(1/floor, 1)
		d.RooflinePct = round(100*floor/d.Step.Median, 1)
	}
	return nil
}

// profile runs --profile-steps greedy steps after the timed ones, from
// token tok, each launch timed (inside a graph replay in graph mode), and
// aggregates their launches' times by family with the byte model at each
// step's context.
func (b *bench) profile(ctx context.Context, d *benchDecode, tok int32) error {
	var prof *roofline.Profiler
	mode, note := "launches", ""
	if b.f.profileMode == "graph" {
		gp, err := roofline.NewGraphProfiler(b.be)
		switch {
		case err != nil:
			note = err.Error() + "; launches timed one by one instead"
		case gp != nil:
			prof, mode = gp, "graph"
		}
	}
	if prof == nil {
		p, err := roofline.NewProfiler(b.be, b.rep.Copy)
		if err != nil {
			return err
		}
		prof = p
	}
	defer prof.Close()
	var steps []*roofline.Step
	var times [][]time.Duration
	for range b.f.profileSteps {
		s, err := b.stepBytes(b.e.Position() + 1)
		if err != nil {
			return err
		}
		var ts []time.Duration
		// The steps the timed ones ran: with the certified head
		// decode_greedy's launches, else decode's.
		certified := b.certifiedTimed(b.e.CanSample())
		next := func(logits []float32, err error) (int32, error) {
			if err != nil {
				return 0, err
			}
			return argmax(logits), nil
		}
		if prof.Graph() {
			ts, err = prof.GraphStep(func(in func(runtime.Launches) error) error {
				var err error
				if certified {
					tok, err = b.e.ProfileGreedyIn(ctx, tok, in)
				} else {
					tok, err = next(b.e.ProfileDecodeIn(ctx, tok, in))
				}
				return err
			})
		} else {
			ts, err = prof.Step(func(each func(i int, run func() error) error) error {
				var err error
				if certified {
					tok, err = b.e.ProfileGreedy(ctx, tok, each)
				} else {
					tok, err = next(b.e.ProfileDecode(ctx, tok, each))
				}
				return err
			})
		}
		if err != nil {
			return err
		}
		steps, times = append(steps, s), append(times, ts)
	}
	fams, err := roofline.Profile(steps, times)
	if err != nil {
		return err
	}
	p := &benchProfile{Steps: len(steps), Mode: mode, Timing: prof.Timing, GraphError: note, HostBehind: prof.Behind, Families: fams}
	for i := range p.Families {
		fm := &p.Families[i]
		p.StepUS += fm.US
		fm.US, fm.Share, fm.GBs, fm.TFLOPs = round(fm.US, 2), round(fm.Share, 4), round(fm.GBs, 1), round(fm.TFLOPs, 3)
	}
	p.StepUS = round(p.StepUS, 1)
	d.Profile = p
	return nil
}

// prefillProfileTable prints a profiled prefill of n tokens: its launches'
// sum against the unprofiled prefill, each step where there are several,
// and the family table.
func prefillProfileTable(out io.Writer, n int, pr *benchPrefillProfile) {
	launches := 0
	for _, s := range pr.ByStep {
		launches += s.Launches
	}
	fmt.Fprintf(out, "prefill %d, each launch timed (%s): %d launches in %d steps, %.1f ms of launches; the profiled prefill %.1f ms wall",
		n, pr.Timing, launches, pr.Steps, pr.StepUS/1e3, pr.WallMS)
	if pr.UnprofiledMS > 0 {
		fmt.Fprintf(out, "; unprofiled (median) %.1f ms, %.1f ms outside the launches", pr.UnprofiledMS, pr.OutsideMS)
	}
	fmt.Fprintln(out)
	if pr.HostBehind > 0 {
		fmt.Fprintf(out, "  (%d of the steps: the host enqueued slower than the head start lasted; small launches may include host time)\n", pr.HostBehind)
	}
	if len(pr.ByStep) > 1 {
		for _, s := range pr.ByStep {
			fmt.Fprintf(out, "  segment %d: %s, %d tokens at %d: %d launches, %.1f ms\n", s.Segment, s.Phase, s.Tokens, s.Pos, s.Launches, s.US/1e3)
		}
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "family\tlaunches\tms\tshare %\tGFLOP\tTFLOP/s\tMB\tGB/s\t")
	dash := func(x float64, format string) string {
		if x == 0 {
			return "-"
		}
		return fmt.Sprintf(format, x)
	}
	for _, fm := range pr.Families {
		fmt.Fprintf(w, "%s\t%d\t%.2f\t%.1f\t%s\t%s\t%s\t%s\t\n", fm.Family, fm.Launches, fm.US/1e3, 100*fm.Share,
			dash(float64(fm.FLOPs)/1e9, "%.1f"), dash(fm.TFLOPs, "%.1f"), dash(float64(fm.BytesTotal)/1e6, "%.1f"), dash(fm.GBs, "%.1f"))
	}
	w.Flush()
}

// contextLabel is a decode context as the table shows it.
func contextLabel(d benchDecode) string {
	if d.Start == startSynthetic {
		return fmt.Sprintf("%d (synthetic)", d.Context)
	}
	return fmt.Sprint(d.Context)
}

// argmax is the greedy choice (the lowest id among equal maxima; NaN never wins).
func argmax(logits []float32) int32 {
	best := 0
	for i, v := range logits {
		if v > logits[best] || (logits[best] != logits[best] && v == v) {
			best = i
		}
	}
	return int32(best)
}

// fits reports whether work estimated at est seconds ends before the deadline.
func (b *bench) fits(est float64) bool {
	if b.deadline.IsZero() {
		return true
	}
	return time.Now().Add(time.Duration(est * float64(time.Second))).Before(b.deadline)
}

func (b *bench) skip(what string) { b.rep.Skipped = append(b.rep.Skipped, what) }

// save rewrites the JSON file (when asked for) through a temporary file.
func (b *bench) save() error {
	if b.f.jsonOut == "" {
		return nil
	}
	b.rep.ElapsedS = round(time.Since(b.start).Seconds(), 3)
	data, err := json.MarshalIndent(b.rep, "", " ")
	if err != nil {
		return err
	}
	tmp := b.f.jsonOut + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, b.f.jsonOut)
}

// table prints the figures for a person.
func (b *bench) table(out io.Writer) {
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	if len(b.rep.Prefill) > 0 {
		fmt.Fprintln(w, "prefill tokens\truns\tmedian ms\tmin ms\tmax ms\ttok/s median\ttok/s min\ttok/s max\t")
		for _, p := range b.rep.Prefill {
			if p.Stats == nil {
				fmt.Fprintf(w, "%d\t0\t-\t-\t-\t-\t-\t-\t\n", p.Tokens)
				continue
			}
			fmt.Fprintf(w, "%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t\n", p.Tokens, p.Stats.N,
				p.Stats.Median*1e3, p.Stats.Min*1e3, p.Stats.Max*1e3, p.TokS.Median, p.TokS.Min, p.TokS.Max)
		}
		w.Flush()
	}
	for _, p := range b.rep.Prefill {
		if p.Profile != nil {
			prefillProfileTable(out, p.Tokens, p.Profile)
		}
	}
	if len(b.rep.Decode) > 0 {
		fmt.Fprintln(w, "decode context\tsteps\tmedian ms/tok\tmin ms\tmax ms\ttok/s median\ttok/s total\t")
		for _, d := range b.rep.Decode {
			if d.Step == nil {
				fmt.Fprintf(w, "%s\t0\t-\t-\t-\t-\t-\t\n", contextLabel(d))
				continue
			}
			fmt.Fprintf(w, "%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", contextLabel(d), d.Step.N,
				d.Step.Median*1e3, d.Step.Min*1e3, d.Step.Max*1e3, d.TokSStep, d.TokSTotal)
		}
		w.Flush()
	}
	for _, d := range b.rep.Decode {
		if d.Bytes == nil {
			continue
		}
		fmt.Fprintf(out, "decode at %d: the step must move %.4g GB (weights %.4g, KV %.4g, state %.4g)", d.Context,
			float64(d.Bytes.Total)/1e9, float64(d.Bytes.Weights)/1e9, float64(d.Bytes.KV)/1e9, float64(d.Bytes.State)/1e9)
		if d.CopyGBs > 0 {
			fmt.Fprintf(out, "; at the copy's %.1f GB/s %.3f ms (%.1f tok/s): %.1f %% of roofline", d.CopyGBs, d.RooflineS*1e3, d.RooflineTok, d.RooflinePct)
		}
		fmt.Fprintln(out)
		if d.Profile == nil {
			continue
		}
		fmt.Fprintf(out, "decode at %d, %d steps, each launch timed (%s), %.1f µs of launches a step:\n", d.Context, d.Profile.Steps, d.Profile.Timing, d.Profile.StepUS)
		if d.Profile.HostBehind > 0 {
			fmt.Fprintf(out, "  (%d of the steps: the host enqueued slower than the head start lasted; small launches may include host time)\n", d.Profile.HostBehind)
		}
		fmt.Fprintln(w, "family\tlaunches\tµs/step\tshare %\tMB\tGB/s\t")
		for _, fm := range d.Profile.Families {
			fmt.Fprintf(w, "%s\t%d\t%.1f\t%.1f\t%.3f\t%.1f\t\n", fm.Family, fm.Launches, fm.US, 100*fm.Share, float64(fm.Bytes.Total())/1e6, fm.GBs)
		}
		w.Flush()
	}
	if b.rep.Method.DecodeStep != "" {
		fmt.Fprintln(out, "decode step:", b.rep.Method.DecodeStep)
	}
	for _, d := range b.rep.Decode {
		if d.Start == startSynthetic {
			fmt.Fprintln(out, "synthetic: the context's KV cache and GDN state were filled on the device, not prefilled: the speed of a step at that context, not a generation")
			break
		}
	}
	for _, s := range b.rep.Skipped {
		fmt.Fprintln(out, "skipped:", s)
	}
	if b.rep.Error != "" {
		fmt.Fprintln(out, "error:", b.rep.Error)
	}
}

// buildInfo is the binary's source commit (from the VCS stamp of `go
// build`) unless commit names one.
func buildInfo(commit string) benchBuild {
	bi := buildinfo.Read()
	b := benchBuild{Go: bi.Go, Modified: bi.Modified}
	if bi.Commit != buildinfo.Unknown {
		b.Commit = bi.Commit
	}
	if c := strings.TrimSpace(commit); c != "" && c != b.Commit {
		b.Commit, b.Modified = c, false
	}
	return b
}
