package runtime_test

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/runtime"
)

// TestFusedPlanBitIdentical runs the tiny checkpoint on the CPU with the
// fusion pass forced on and off (matmul_add; the concatenated input
// projections, read at offsets by prefill and as one matmul by decode,
// built by the loader from the checkpoint's tensors; and, in the decode
// steps, gdn_decode_step (or, when a column tile is asked for,
// gdn_decode_peer with its tags, and gdn_decode_split with its arrival
// counters), qk_norm_rope_append,
// moe_decode_gate_up and moe_decode_down, and the norms folded into
// rmsnorm_gemv; TestResidentPlan adds the router rule): the fused families' composed references make every logit
// of a prefill and the decode steps after it equal bit for bit to the
// unfused plan's.
func TestFusedPlanBitIdentical(t *testing.T) {
	fusedKinds := []ir.Kind{ir.MatMulAdd, ir.QKNormRoPEAppend, ir.RMSNormGEMV, ir.MoEDecodeGateUp, ir.MoEDecodeDown}
	ck, err := checkpoint.Open(tiny(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := planner.FromCheckpoint("tiny", ck)
	if err != nil {
		t.Fatal(err)
	}
	run := func(f planner.Fusion, tile int, peer bool) [][]float32 {
		p, err := planner.Plan(m, planner.Options{Target: "cpu", Buckets: []int{8, 32}, ContextTokens: 96, Fusion: f, GDNColumnTile: tile, GDNPeer: peer})
		if err != nil {
			t.Fatal(err)
		}
		fused := map[ir.Kind]int{}
		for _, ph := range p.Phases {
			for _, l := range ph.Launches {
				for _, k := range p.Kernels {
					if k.Name == l.Kernel && (slices.Contains(fusedKinds, ir.Kind(k.Family)) || ir.Kind(k.Family) == ir.GDNDecodeStep || ir.Kind(k.Family) == ir.GDNDecodeSplit || ir.Kind(k.Family) == ir.GDNDecodePeer) {
						fused[ir.Kind(k.Family)]++
					}
				}
			}
		}
		gdn := ir.GDNDecodeStep
		switch {
		case tile > 0 && peer:
			gdn = ir.GDNDecodePeer
		case tile > 0:
			gdn = ir.GDNDecodeSplit
		}
		for _, k := range append(slices.Clone(fusedKinds), gdn) {
			if (f == planner.FuseOn) != (fused[k] > 0) {
				t.Fatalf("fusion %q: %d %s launches", f, fused[k], k)
			}
		}
		parts := 0
		for _, b := range p.Buffers {
			parts += len(b.Parts)
		}
		if (f == planner.FuseOn) != (parts > 0) {
			t.Fatalf("fusion %q: %d parts of concatenated weights", f, parts)
		}
		e, err := runtime.NewEngine(p, runtime.NewCPU(), runtime.CheckpointWeights(ck))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		logits, err := e.Prefill(ctx, []int32{1, 5, 9, 2, 7, 3, 11, 4, 6, 8, 10}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := [][]float32{logits}
		for range 4 {
			if logits, err = e.Decode(ctx, runtime.Argmax(logits)); err != nil {
				t.Fatal(err)
			}
			out = append(out, logits)
		}
		return out
	}
	b := run(planner.FuseOff, 0, false)
	for _, c := range []struct {
		tile int
		peer bool
	}{{0, false}, {4, false}, {4, true}} {
		a := run(planner.FuseOn, c.tile, c.peer)
		for s := range a {
			for i := range a[s] {
				if math.Float32bits(a[s][i]) != math.Float32bits(b[s][i]) {
					t.Fatalf("column tile %d (peer %v): step %d logit %d: fused %v, unfused %v", c.tile, c.peer, s, i, a[s][i], b[s][i])
				}
			}
		}
	}
}

// residency is the CPU backend answering for the residency of grids as a
// device would: resident says whether every grid fits; err fails the query.
type residency struct {
	*runtime.CPU
	resident bool
	err      error
	asked    int
}

func (r *residency) Resident(k *plan.Kernel, l *plan.Launch) (bool, error) {
	r.asked++
	return r.resident, r.err
}

// TestResidentPlan runs the tiny checkpoint's fused plan with the router
// rule (MoERouter) on the CPU, its logits equal to the unfused plan's bit
// for bit; then on a backend whose device cannot hold the fused router's
// grid: the engine runs each moe_decode_route_gate_up's fallback (the
// router's rmsnorm_gemv and moe_decode_gate_up) instead, with the same
// logits; on a device that holds the grid the plan runs as it is; a
// failing query fails NewEngine.
func TestResidentPlan(t *testing.T) {
	ck, err := checkpoint.Open(tiny(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := planner.FromCheckpoint("tiny", ck)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{Target: "cpu", Buckets: []int{8}, ContextTokens: 64, Fusion: planner.FuseOn, MoERouter: true})
	if err != nil {
		t.Fatal(err)
	}
	unfused, err := planner.Plan(m, planner.Options{Target: "cpu", Buckets: []int{8}, ContextTokens: 64, Fusion: planner.FuseOff})
	if err != nil {
		t.Fatal(err)
	}
	count := func(e *runtime.Engine, family ir.Kind) int {
		n := 0
		for _, ph := range e.Plan().Phases {
			for _, l := range ph.Launches {
				for _, k := range e.Plan().Kernels {
					if k.Name == l.Kernel && ir.Kind(k.Family) == family {
						n++
					}
				}
			}
		}
		return n
	}
	run := func(be runtime.Backend, p *plan.Plan) ([][]float32, *runtime.Engine) {
		e, err := runtime.NewEngine(p, be, runtime.CheckpointWeights(ck))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Close() })
		logits, err := e.Prefill(context.Background(), []int32{1, 5, 9, 2, 7}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := [][]float32{logits}
		for range 3 {
			if logits, err = e.Decode(context.Background(), runtime.Argmax(logits)); err != nil {
				t.Fatal(err)
			}
			out = append(out, logits)
		}
		return out, e
	}
	want, _ := run(runtime.NewCPU(), unfused)
	fusedLogits, fused := run(runtime.NewCPU(), p)
	for s := range want {
		for i := range want[s] {
			if math.Float32bits(fusedLogits[s][i]) != math.Float32bits(want[s][i]) {
				t.Fatalf("step %d logit %d: fused router %v, unfused %v", s, i, fusedLogits[s][i], want[s][i])
			}
		}
	}
	// Every decode phase (decode, decode_greedy) folds each layer's router.
	layers := 0
	for _, ph := range p.Phases {
		if ph.Kind.Decode() {
			layers += m.Config.NumHiddenLayers
		}
	}
	if n := count(fused, ir.MoEDecodeRouteGateUp); n != layers {
		t.Fatalf("the fused plan has %d moe_decode_route_gate_up launches, want %d", n, layers)
	}
	no := &residency{CPU: runtime.NewCPU()}
	got, e := run(no, p)
	if n, g := count(e, ir.MoEDecodeRouteGateUp), count(e, ir.MoEDecodeGateUp); n != 0 || g != layers || no.asked != layers {
		t.Errorf("not resident: %d fused launches, %d moe_decode_gate_up, %d queries; want 0, %d, %d", n, g, no.asked, layers, layers)
	}
	// The engine names the kernels that fell back, each once.
	var routeKernels []string
	for _, k := range p.Kernels {
		if ir.Kind(k.Family) == ir.MoEDecodeRouteGateUp {
			routeKernels = append(routeKernels, k.Name)
		}
	}
	if diff := cmp.Diff(routeKernels, e.Fallbacks()); len(routeKernels) == 0 || diff != "" {
		t.Errorf("not resident: Fallbacks (-the plan's grid-barrier kernels +reported):\n%s", diff)
	}
	if f := fused.Fallbacks(); len(f) != 0 {
		t.Errorf("the CPU (no residency query): Fallbacks %v, want none", f)
	}
	for s := range want {
		for i := range want[s] {
			if math.Float32bits(got[s][i]) != math.Float32bits(want[s][i]) {
				t.Fatalf("step %d logit %d: fallback %v, unfused %v", s, i, got[s][i], want[s][i])
			}
		}
	}
	yes := &residency{CPU: runtime.NewCPU(), resident: true}
	if _, e := run(yes, p); count(e, ir.MoEDecodeRouteGateUp) != layers || len(e.Fallbacks()) != 0 {
		t.Errorf("resident: the engine does not run the fused launches, or reports fallbacks %v", e.Fallbacks())
	}
	bad := &residency{CPU: runtime.NewCPU(), err: errors.New("occupancy query failed")}
	if _, err := runtime.NewEngine(p, bad, runtime.CheckpointWeights(ck)); err == nil || !strings.Contains(err.Error(), "occupancy query failed") {
		t.Errorf("a failing residency query: NewEngine error %v", err)
	}
}

// TestRankedPlan runs the tiny checkpoint's fused plan with the ranking
// rule (MoERank: the router's launch ranks top-k, gate_up reads the ids,
// down reads them before its wait) on the CPU: its logits equal the
// unfused plan's bit for bit, prefill and three decode steps, and every
// decode phase ranks each layer's block in its router.
func TestRankedPlan(t *testing.T) {
	ck, err := checkpoint.Open(tiny(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := planner.FromCheckpoint("tiny", ck)
	if err != nil {
		t.Fatal(err)
	}
	run := func(o planner.Options) ([][]float32, *plan.Plan) {
		p, err := planner.Plan(m, o)
		if err != nil {
			t.Fatal(err)
		}
		e, err := runtime.NewEngine(p, runtime.NewCPU(), runtime.CheckpointWeights(ck))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		logits, err := e.Prefill(context.Background(), []int32{1, 5, 9, 2, 7}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := [][]float32{logits}
		for range 3 {
			if logits, err = e.Decode(context.Background(), runtime.Argmax(logits)); err != nil {
				t.Fatal(err)
			}
			out = append(out, logits)
		}
		return out, p
	}
	want, _ := run(planner.Options{Target: "cpu", Buckets: []int{8}, ContextTokens: 64, Fusion: planner.FuseOff})
	got, p := run(planner.Options{Target: "cpu", Buckets: []int{8}, ContextTokens: 64, Fusion: planner.FuseOn, MoERank: true})
	for s := range want {
		for i := range want[s] {
			if math.Float32bits(got[s][i]) != math.Float32bits(want[s][i]) {
				t.Fatalf("step %d logit %d: ranked %v, unfused %v", s, i, got[s][i], want[s][i])
			}
		}
	}
	layers, ranked := 0, 0
	for _, ph := range p.Phases {
		if ph.Kind.Decode() {
			layers += m.Config.NumHiddenLayers
		}
		for _, l := range ph.Launches {
			for _, k := range p.Kernels {
				if k.Name == l.Kernel && ir.Kind(k.Family) == ir.RMSNormRouterTopK {
					ranked++
				}
			}
		}
	}
	if ranked != layers {
		t.Errorf("the ranked plan has %d rmsnorm_router_topk launches, want %d", ranked, layers)
	}
}

// TestFoldedPlanBitIdentical runs the tiny checkpoint on the CPU with the
// fusion pass on and the decode attention split (3 splits), once with
// qk_norm_rope_append folded into the split (attention_decode_split_qk,
// QKFold) and once with the pair (the default): the
// folded family's reference is the pair's, so every logit of a prefill and
// the decode steps after it (each appending to the caches the next reads)
// is equal bit for bit.
func TestFoldedPlanBitIdentical(t *testing.T) {
	ck, err := checkpoint.Open(tiny(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := planner.FromCheckpoint("tiny", ck)
	if err != nil {
		t.Fatal(err)
	}
	run := func(chain bool) [][]float32 {
		p, err := planner.Plan(m, planner.Options{Target: "cpu", Buckets: []int{8, 32}, ContextTokens: 96, Fusion: planner.FuseOn, DecodeSplits: 3, QKFold: !chain})
		if err != nil {
			t.Fatal(err)
		}
		n := map[ir.Kind]int{}
		for _, ph := range p.Phases {
			for _, l := range ph.Launches {
				for _, k := range p.Kernels {
					if k.Name == l.Kernel {
						n[ir.Kind(k.Family)]++
					}
				}
			}
		}
		if folded := n[ir.AttentionDecodeSplitQK] > 0; folded == chain || (n[ir.QKNormRoPEAppend] > 0) != chain {
			t.Fatalf("pair %v: %d attention_decode_split_qk, %d qk_norm_rope_append launches", chain, n[ir.AttentionDecodeSplitQK], n[ir.QKNormRoPEAppend])
		}
		e, err := runtime.NewEngine(p, runtime.NewCPU(), runtime.CheckpointWeights(ck))
		if err != nil {
			t.Fatal(err)
		}
		defer e.Close()
		ctx := context.Background()
		logits, err := e.Prefill(ctx, []int32{1, 5, 9, 2, 7, 3, 11, 4, 6, 8, 10}, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := [][]float32{logits}
		for range 4 {
			if logits, err = e.Decode(ctx, runtime.Argmax(logits)); err != nil {
				t.Fatal(err)
			}
			out = append(out, logits)
		}
		return out
	}
	a, b := run(false), run(true)
	for s := range a {
		for i := range a[s] {
			if math.Float32bits(a[s][i]) != math.Float32bits(b[s][i]) {
				t.Fatalf("step %d logit %d: folded %v, pair %v", s, i, a[s][i], b[s][i])
			}
		}
	}
}
