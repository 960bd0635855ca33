package gpu

import (
	"context"
	"testing"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/synth"
)

// TestEngineStepGraphs runs a tiny sm_90 plan through the engine on the
// fake CUDA driver: after the prefill, each decode step (Decode and
// DecodeSampled) is one graph launch and one event wait, with no
// synchronous copy; its launches read the step's position; every launch
// but the first is made with programmatic serialization, and none is with
// programmatic launch turned off.
func TestEngineStepGraphs(t *testing.T) {
	cfgJSON, err := synth.ConfigJSON(synth.PresetTiny, 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := arch.ParseConfig(cfgJSON)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(planner.FromConfig("tiny", cfg), planner.Options{Target: plan.SM90, Buckets: []int{8}, ContextTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	f := newFake("cuda", 1<<28)
	f.perSM = 2 // every grid resident on 132 SMs: the fused routers run
	objs := map[string][]byte{}
	for _, k := range p.Kernels {
		objs[k.Name] = image(k.Name, len(declared(&k))+2)
	}
	b, err := New(f.driver(), Config{Target: string(plan.SM90), Objects: objs, Multiprocessors: 132})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	e, err := runtime.NewEngine(p, b, runtime.SyntheticWeights(1))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if pdl, _ := e.Programmatic(); !e.Graphs() || !pdl {
		t.Fatalf("graphs %v, programmatic %v on sm_90", e.Graphs(), pdl)
	}
	ctx := context.Background()
	if _, err := e.Prefill(ctx, []int32{1, 2, 3}, nil); err != nil {
		t.Fatal(err)
	}
	f.launches()
	decode, sample, greedy := 0, 0, 0
	for i := range p.Phases {
		switch p.Phases[i].Kind {
		case plan.DecodeStep:
			decode = len(p.Phases[i].Launches)
		case plan.Sample:
			sample = len(p.Phases[i].Launches)
		case plan.DecodeGreedy:
			greedy = len(p.Phases[i].Launches)
		}
	}
	if !e.CertifiedHead() || greedy == 0 {
		t.Fatalf("certified head %v, %d decode_greedy launches: want the certified head on sm_90", e.CertifiedHead(), greedy)
	}
	check := func(what string, pos int32, want int, pdl bool) {
		t.Helper()
		got := f.launches()
		if len(got) != want {
			t.Fatalf("%s: %d launches ran, want %d", what, len(got), want)
		}
		for i, r := range got {
			if r.Via != "replay" || r.Params[ir.ParamPos] != pos || r.Programmatic != (pdl && i > 0) {
				t.Errorf("%s: launch %d (%s): via %s, pos %d, programmatic %v", what, i, r.Kernel, r.Via, r.Params[ir.ParamPos], r.Programmatic)
			}
		}
	}
	syncCopies := func() int { return f.calls["MemcpyHtoD"] + f.calls["MemcpyDtoH"] + f.calls["StreamSynchronize"] }
	for step := range 3 {
		before, launches := syncCopies(), f.calls["GraphLaunch"]
		if _, err := e.Decode(ctx, 4); err != nil {
			t.Fatal(err)
		}
		if _, _, err := e.DecodeSampled(ctx, 5, runtime.DeviceSampling{}, step); err != nil {
			t.Fatal(err)
		}
		if n, g := syncCopies()-before, f.calls["GraphLaunch"]-launches; n != 0 || g != 2 {
			t.Errorf("step %d: %d synchronous copies or syncs and %d graph launches for two decode steps", step, n, g)
		}
		// The Decode graph's launches at pos, then the DecodeSampled one's
		// (a greedy draw: decode_greedy, the certified int8 head) at pos+1;
		// each graph's first launch is plain.
		pos := int32(3 + 2*step)
		got := f.launches()
		if len(got) != decode+greedy {
			t.Fatalf("step %d: %d launches, want %d + %d", step, len(got), decode, greedy)
		}
		for i, r := range got {
			first := i == 0 || i == decode
			at := pos
			if i >= decode {
				at = pos + 1
			}
			if r.Via != "replay" || r.Params[ir.ParamPos] != at || r.Programmatic == first {
				t.Errorf("step %d: launch %d (%s): via %s, pos %d, programmatic %v", step, i, r.Kernel, r.Via, r.Params[ir.ParamPos], r.Programmatic)
			}
		}
	}
	// With the BF16 head a greedy draw is decode + sample, one graph.
	if err := e.SetCertifiedHead(false); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.DecodeSampled(ctx, 5, runtime.DeviceSampling{}, 3); err != nil {
		t.Fatal(err)
	}
	check("the BF16 head", 9, decode+sample, true)
	e.SetProgrammatic(false)
	if pdl, _ := e.Programmatic(); pdl {
		t.Error("SetProgrammatic(false) left it on")
	}
	if _, err := e.Decode(ctx, 4); err != nil {
		t.Fatal(err)
	}
	check("without programmatic launch", 10, decode, false)
	if errs := f.misuses(); len(errs) > 0 {
		t.Errorf("driver misuse: %v", errs)
	}
}
