package gpu

import (
	"context"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/ir"
	kfam "github.com/aimaproject/aimac/kernels"
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
	// every grid resident on 132 SMs: the fused routers run
	p, f, e := tinyEngine(t, planner.Options{}, 2, 132)
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

// TestEnginePersistent runs a tiny sm_90 plan with persistent runs
// (--persistent-decode) through the engine on the fake CUDA driver: each
// run of a decode step is one launch of its decode_persistent kernel on as
// many blocks as the device holds (never more than its items), whose item
// table holds every launch of the run in order, with the arguments the
// same step passes launch by launch (a row count from a slot as the slot);
// SetPersistent(false) launches them one by one again.
func TestEnginePersistent(t *testing.T) {
	p, f, e := tinyEngine(t, planner.Options{PersistentDecode: true}, 1, 4)
	var decode *plan.Phase
	var stream *plan.Kernel
	for i := range p.Phases {
		if p.Phases[i].Kind == plan.DecodeStep {
			decode = &p.Phases[i]
		}
	}
	for i := range p.Kernels {
		if p.Kernels[i].Family == string(ir.DecodePersistent) {
			stream = &p.Kernels[i]
		}
	}
	if decode == nil || stream == nil {
		t.Fatal("the plan has no decode phase or no decode_persistent kernel")
	}
	// The decode phase's runs, as the planner marked them.
	type run struct{ from, to int }
	var runs []run
	for i := 0; i < len(decode.Launches); i++ {
		if decode.Launches[i].Stream == "" {
			continue
		}
		j := i
		for j < len(decode.Launches) && decode.Launches[j].Stream != "" {
			j++
		}
		runs = append(runs, run{i, j})
		i = j - 1
	}
	if n, _ := e.Persistent(); len(runs) == 0 || n < len(runs) {
		t.Fatalf("the decode phase has %d runs, the engine runs %d persistent launches", len(runs), n)
	}
	ctx := context.Background()
	if _, err := e.Prefill(ctx, []int32{1, 2, 3}, nil); err != nil {
		t.Fatal(err)
	}
	f.launches()
	e.SetPersistent(false)
	if _, err := e.Decode(ctx, 4); err != nil {
		t.Fatal(err)
	}
	each := f.launches()
	if len(each) != len(decode.Launches) {
		t.Fatalf("launch by launch: %d launches, want %d", len(each), len(decode.Launches))
	}
	if n, _ := e.Persistent(); n != 0 {
		t.Errorf("SetPersistent(false): %d persistent runs", n)
	}
	e.SetPersistent(true)
	if _, err := e.Decode(ctx, 4); err != nil {
		t.Fatal(err)
	}
	got := f.launches()
	want := len(decode.Launches)
	for _, r := range runs {
		want -= r.to - r.from - 1
	}
	if len(got) != want {
		t.Fatalf("persistent: %d launches, want %d", len(got), want)
	}
	// Each persistent launch's item table against the launches it replaces.
	i, g := 0, 0
	for _, r := range runs {
		for ; i < r.from; i, g = i+1, g+1 {
			if got[g].Kernel != decode.Launches[i].Kernel {
				t.Fatalf("launch %d: %s, want %s", g, got[g].Kernel, decode.Launches[i].Kernel)
			}
		}
		pl := got[g]
		items := 0
		for _, l := range decode.Launches[r.from:r.to] {
			items += l.Grid[0] * l.Grid[1]
		}
		if pl.Kernel != stream.Name || pl.Grid != [3]uint32{uint32(min(items, 4)), 1, 1} || pl.Block != [3]uint32{256, 1, 1} {
			t.Fatalf("run %v: launch %s grid %v block %v, want %s on %d blocks of 256", r, pl.Kernel, pl.Grid, pl.Block, stream.Name, min(items, 4))
		}
		words := f.table(t, pl.Args[0], kfam.PersistentTableWords(r.to-r.from))
		if words[0] != uint64(r.to-r.from) || words[1] != uint64(items) {
			t.Errorf("run %v: table header %v, want %d launches, %d items", r, words[:2], r.to-r.from, items)
		}
		first := 0
		for li := r.from; li < r.to; li++ {
			l := decode.Launches[li]
			rec := words[kfam.PersistentHeader+(li-r.from)*kfam.PersistentRecord:]
			wantRec := []string{l.Kernel, fmt.Sprint(l.Grid[0]), fmt.Sprint(l.Grid[1]), fmt.Sprint(first)}
			gotRec := []string{stream.Members[rec[0]], fmt.Sprint(rec[1]), fmt.Sprint(rec[2]), fmt.Sprint(rec[3])}
			gotRec = append(gotRec, f.names(rec[4:4+len(each[li].Args)])...)
			wantRec = append(wantRec, each[li].Args...)
			if l.Rows != nil {
				// The row count from its slot, as a captured prefill passes it
				// (KernelABI 5): the entry point reads the launch's value.
				wantRec[len(wantRec)-2] = fmt.Sprint(uint32(int32(-int(*l.Rows) - 1)))
			}
			if diff := cmp.Diff(wantRec, gotRec); diff != "" {
				t.Errorf("run %v, launch %d (%s): record (-want +got):\n%s", r, li, l.Kernel, diff)
			}
			first += l.Grid[0] * l.Grid[1]
		}
		i, g = r.to, g+1
	}
	if errs := f.misuses(); len(errs) > 0 {
		t.Errorf("driver misuse: %v", errs)
	}
}

// table reads words 64-bit words of device memory at the allocation an
// argument names ("dN+off").
func (f *fake) table(t *testing.T, arg string, words int) []uint64 {
	t.Helper()
	f.quiesce()
	f.mu.Lock()
	defer f.mu.Unlock()
	var id int
	var off uint64
	if _, err := fmt.Sscanf(arg, "d%d+%d", &id, &off); err != nil {
		t.Fatalf("argument %q names no allocation", arg)
	}
	for _, a := range f.allocs {
		if a.id == id {
			at := a.addr + off - devBase
			out := make([]uint64, words)
			for i := range out {
				out[i] = binary.LittleEndian.Uint64(f.dev[at+uint64(8*i):])
			}
			return out
		}
	}
	t.Fatalf("no allocation d%d", id)
	return nil
}

// names are argument values as the launch log spells them.
func (f *fake) names(vals []uint64) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(vals))
	for i, v := range vals {
		if a := f.within(v); a != nil {
			out[i] = fmt.Sprintf("d%d+%d", a.id, v-a.addr)
		} else {
			out[i] = fmt.Sprint(v)
		}
	}
	return out
}

// tinyEngine is the tiny model's sm_90 plan (buckets 8, context 64, and o's
// choices) in an engine on the fake CUDA driver, whose occupancy query
// answers perSM blocks a multiprocessor of sms; both close with the test.
func tinyEngine(t *testing.T, o planner.Options, perSM int32, sms int) (*plan.Plan, *fake, *runtime.Engine) {
	t.Helper()
	cfgJSON, err := synth.ConfigJSON(synth.PresetTiny, 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := arch.ParseConfig(cfgJSON)
	if err != nil {
		t.Fatal(err)
	}
	o.Target, o.Buckets, o.ContextTokens = plan.SM90, []int{8}, 64
	p, err := planner.Plan(planner.FromConfig("tiny", cfg), o)
	if err != nil {
		t.Fatal(err)
	}
	f := newFake("cuda", 1<<28)
	f.perSM = perSM
	objs := map[string][]byte{}
	for _, k := range p.Kernels {
		objs[k.Name] = image(k.Name, len(declared(&k))+2)
	}
	b, err := New(f.driver(), Config{Target: string(plan.SM90), Objects: objs, Multiprocessors: sms})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	e, err := runtime.NewEngine(p, b, runtime.SyntheticWeights(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return p, f, e
}
