package planner

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
)

// TestFuseGDNOut checks the output projection's rule on the real model's
// decode step: off unless asked; on sm_90 with --gdn-out every GDN layer's
// gdn_decode_split and matmul_add become one gdn_decode_out with the pair's
// operands, its partial rows, the projection's weight and the layer's
// barrier, the slice staged as the stage mode says, and the pair (the
// projection as the stream pass makes it) as its fallback; on gfx1151,
// whose 40 compute units cannot hold the 128 blocks at once, nothing
// fuses; a bad stage mode is refused by name.
func TestFuseGDNOut(t *testing.T) {
	m := FromConfig(arch.RealName, arch.Real())
	gdnLayers := 0
	for _, lt := range m.Config.LayerTypes {
		if lt == "linear_attention" {
			gdnLayers++
		}
	}
	decode := func(o Options) *ir.Graph { return decodeAfter(t, m, o, "fuse") }
	if n := kindCounts(decode(Options{Target: plan.SM90}))[ir.GDNDecodeOut]; n != 0 {
		t.Errorf("sm_90: %d gdn_decode_out without being asked", n)
	}
	if n := kindCounts(decode(Options{Target: plan.GFX1151, GDNOut: true}))[ir.GDNDecodeOut]; n != 0 {
		t.Errorf("gfx1151: %d gdn_decode_out, whose 128 blocks a launch do not fit 40 compute units at once", n)
	}
	for _, c := range []struct {
		stage        string
		staged, late bool
		bulk, mid    bool
	}{{"", true, false, false, false}, {"early", true, false, false, false}, {"late", true, true, false, false},
		{"bulk", true, false, true, false}, {"mid", true, false, false, true}, {"off", false, false, false, false}} {
		d := decode(Options{Target: plan.SM90, GDNOut: true, GDNOutStage: c.stage})
		counts := kindCounts(d)
		if counts[ir.GDNDecodeOut] != gdnLayers || counts[ir.GDNDecodeSplit] != 0 {
			t.Errorf("stage %q: %d gdn_decode_out and %d gdn_decode_split, want %d and 0", c.stage, counts[ir.GDNDecodeOut], counts[ir.GDNDecodeSplit], gdnLayers)
		}
		for _, op := range d.Ops {
			if op.Kind != ir.GDNDecodeOut {
				continue
			}
			p := fmt.Sprintf("layers.%d.", op.Layer)
			names := opNames(d, op)
			if names[2] != "gdn_out_part" || names[len(names)-2] != p+"linear_attn.out_proj.weight" ||
				names[len(names)-1] != fmt.Sprintf("state.%d.gdn_out_barrier", op.Layer) {
				t.Errorf("stage %q: operands %v", c.stage, names)
			}
			if len(op.Fallback) != 2 || op.Fallback[0].Kind != ir.GDNDecodeSplit || op.Fallback[1].Kind != ir.GEMVAdd {
				t.Fatalf("stage %q: fallback %v, want gdn_decode_split then gemv_add", c.stage, op.Fallback)
			}
			if diff := cmp.Diff(opNames(d, op.Fallback[0])[1:], names[3:len(names)-2]); diff != "" {
				t.Errorf("stage %q: the split's operands after y (-fallback +fused):\n%s", c.stage, diff)
			}
			q := op.Params
			got := [4]bool{q.Flag("stage"), q.Flag("stage_late"), q.Flag("stage_bulk"), q.Flag("stage_mid")}
			if want := [4]bool{c.staged, c.late, c.bulk, c.mid}; got != want {
				t.Errorf("stage %q: stage, stage_late, stage_bulk, stage_mid %v, want %v", c.stage, got, want)
			}
			if q.Int("hidden") != m.Config.HiddenSize {
				t.Errorf("stage %q: hidden %d, want %d", c.stage, q.Int("hidden"), m.Config.HiddenSize)
			}
		}
	}
	if _, err := Graphs(m, Options{Target: plan.SM90, Buckets: []int{16}, ContextTokens: 64, GDNOut: true, GDNOutStage: "never"}, "fuse"); err == nil {
		t.Error("a stage mode of \"never\" was accepted")
	}
}

// decodeAfter is the decode step's graph of m planned with o (one 16-token
// bucket, a 64-token context) after pass.
func decodeAfter(t *testing.T, m *Model, o Options, pass string) *ir.Graph {
	t.Helper()
	o.Buckets, o.ContextTokens = []int{16}, 64
	gs, err := Graphs(m, o, pass)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		if g.Name == "decode" {
			return g
		}
	}
	t.Fatal("no decode graph")
	return nil
}
