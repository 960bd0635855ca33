package runtime_test

import (
	"context"
	"math"
	"slices"
	"testing"

	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/ir"
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
// rmsnorm_gemv): the fused families' composed references make every logit
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
