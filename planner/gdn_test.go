package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
)

// TestChunkGDN checks the gdn pass: asked for, every prefill
// gated_delta_chunked becomes gated_delta_wy then gated_delta_state (the
// target's slices and column tile, split tf32 unless wy-tf32 asks for plain
// products) and every prefill causal_conv1d_silu causal_conv1d_silu_rows;
// the decode step keeps its families; GPU plans take the chunked form by
// default (split products), the cpu plan keeps the serial ones unless
// asked, the state pass stages asynchronously on sm_90 when one slice
// holds k_dim, a GPU plan keeps the serial ones when asked
// (PrefillGDNChunked); the tiny fixtures' heads (dims 16) take the new
// families with slices of 16, a chunk the tiles do not serve (8) keeps the
// serial rule (the conv still goes parallel).
func TestChunkGDN(t *testing.T) {
	count := func(g *ir.Graph) map[ir.Kind]int {
		n := map[ir.Kind]int{}
		for _, op := range g.Ops {
			switch op.Kind {
			case ir.GatedDeltaChunked, ir.GatedDeltaWY, ir.GatedDeltaState, ir.CausalConv1dSiLU, ir.CausalConv1dSiLURows:
				n[op.Kind]++
			}
		}
		return n
	}
	tiny := *arch.Real()
	tiny.LinearNumKeyHeads, tiny.LinearNumValueHeads, tiny.LinearKeyHeadDim, tiny.LinearValueHeadDim = 2, 4, 16, 16
	const gdnLayers = 30
	chunked := map[ir.Kind]int{ir.GatedDeltaWY: gdnLayers, ir.GatedDeltaState: gdnLayers, ir.CausalConv1dSiLURows: gdnLayers}
	serial := map[ir.Kind]int{ir.GatedDeltaChunked: gdnLayers, ir.CausalConv1dSiLU: gdnLayers}
	for _, tc := range []struct {
		name   string
		c      *arch.Config
		target plan.Target
		gdn    PrefillGDN
		chunk  int
		want   map[ir.Kind]int
		tiles  [3]int64 // wy slice, state slice, cols
		split  bool
	}{
		{"real sm_90", arch.Real(), plan.SM90, PrefillGDNWY, 0, chunked, [3]int64{64, 128, 32}, true},
		{"real sm_90 default", arch.Real(), plan.SM90, PrefillGDNDefault, 0, chunked, [3]int64{64, 128, 32}, true},
		{"real gfx1151 default", arch.Real(), plan.GFX1151, PrefillGDNDefault, 0, chunked, [3]int64{32, 32, 32}, true},
		{"real sm_90 tf32", arch.Real(), plan.SM90, PrefillGDNTF32, 0, chunked, [3]int64{32, 128, 32}, false},
		{"real gfx1151 tf32", arch.Real(), plan.GFX1151, PrefillGDNTF32, 0, chunked, [3]int64{32, 32, 32}, false},
		{"real gfx1151", arch.Real(), plan.GFX1151, PrefillGDNWY, 0, chunked, [3]int64{32, 32, 32}, true},
		{"real sm_90 chunked", arch.Real(), plan.SM90, PrefillGDNChunked, 0, serial, [3]int64{}, false},
		{"real gfx1151 chunked", arch.Real(), plan.GFX1151, PrefillGDNChunked, 0, serial, [3]int64{}, false},
		{"real cpu", arch.Real(), plan.CPU, PrefillGDNDefault, 0, serial, [3]int64{}, false},
		{"real cpu wy", arch.Real(), plan.CPU, PrefillGDNWY, 0, chunked, [3]int64{64, 128, 32}, true},
		{"tiny heads sm_90", &tiny, plan.SM90, PrefillGDNWY, 0, chunked, [3]int64{16, 16, 16}, true},
		{"tiny heads sm_90 default", &tiny, plan.SM90, PrefillGDNDefault, 0, chunked, [3]int64{16, 16, 16}, true},
		{"tiny heads gfx1151", &tiny, plan.GFX1151, PrefillGDNDefault, 0, chunked, [3]int64{16, 16, 16}, true},
		{"chunk 8 sm_90", arch.Real(), plan.SM90, PrefillGDNWY, 8, map[ir.Kind]int{ir.GatedDeltaChunked: gdnLayers, ir.CausalConv1dSiLURows: gdnLayers}, [3]int64{}, false},
		{"chunk 8 sm_90 default", arch.Real(), plan.SM90, PrefillGDNDefault, 8, map[ir.Kind]int{ir.GatedDeltaChunked: gdnLayers, ir.CausalConv1dSiLURows: gdnLayers}, [3]int64{}, false},
	} {
		gs, err := Graphs(FromConfig("m", tc.c), Options{Target: tc.target, Buckets: []int{100}, ContextTokens: 256, Chunk: tc.chunk, PrefillGDN: tc.gdn}, "gdn")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, g := range gs {
			got := count(g)
			want := tc.want
			if g.Name == "decode" {
				want = map[ir.Kind]int{}
				if n := got[ir.GatedDeltaWY] + got[ir.GatedDeltaState] + got[ir.CausalConv1dSiLURows]; n != 0 {
					t.Errorf("%s: %d chunked GDN ops at decode", tc.name, n)
				}
				continue
			}
			if g.Name != "prefill_100" {
				continue
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: families of %s (-want +got):\n%s", tc.name, g.Name, diff)
			}
			for i, op := range g.Ops {
				switch op.Kind {
				case ir.GatedDeltaWY:
					if got := [2]int64{op.Params.Ints["slice"], 0}; got[0] != tc.tiles[0] || op.Params.Flag("split") != tc.split {
						t.Errorf("%s: gated_delta_wy slice %d split %v, want %d %v", tc.name, got[0], op.Params.Flag("split"), tc.tiles[0], tc.split)
					}
					// The state pass follows, on the same out and the rows the wy launch wrote.
					next := g.Ops[i+1]
					if next.Kind != ir.GatedDeltaState || next.Operands[0] != op.Operands[5] ||
						!cmp.Equal(next.Operands[2:], op.Operands[:5]) {
						t.Errorf("%s: gated_delta_wy is not followed by its state pass: %+v", tc.name, next)
					}
				case ir.GatedDeltaState:
					if got := [2]int64{op.Params.Ints["slice"], op.Params.Ints["cols"]}; got != [2]int64{tc.tiles[1], tc.tiles[2]} {
						t.Errorf("%s: gated_delta_state tiles %v, want %v", tc.name, got, tc.tiles[1:])
					}
					// Asynchronous staging where the target has the copies and one slice holds k_dim.
					if want := tc.target != plan.GFX1151 && tc.tiles[1] == op.Params.Ints["k_dim"]; op.Params.Flag("async") != want {
						t.Errorf("%s: gated_delta_state async %v, want %v", tc.name, op.Params.Flag("async"), want)
					}
				}
			}
		}
	}
}

// TestGDNParamsFlags checks that gdnParams passes a tile's int_tf32 to the
// state pass and the split gated_delta_wy, lo_acc and pre_split to the
// split state pass only.
func TestGDNParamsFlags(t *testing.T) {
	var p ir.Params
	for name, v := range map[string]int64{"row_stride": 8192, "k_heads": 16, "v_heads": 32, "k_dim": 128, "v_dim": 128, "chunk": 64} {
		p.SetInt(name, v)
	}
	type flags struct{ WYInt, StateInt, StateLo, StatePre bool }
	for _, tc := range []struct {
		name                     string
		intTF32, loAcc, preSplit bool
		split                    bool
		want                     flags
	}{
		{"off", false, false, false, true, flags{}},
		{"int", true, false, false, true, flags{true, true, false, false}},
		{"int lo", true, true, false, true, flags{true, true, true, false}},
		{"int pre", true, false, true, true, flags{true, true, false, true}},
		{"lo pre plain", false, true, true, false, flags{}},
		{"int plain", true, true, true, false, flags{false, true, false, false}},
	} {
		tile := gdnTiles[plan.SM90]
		tile.intTF32, tile.loAcc, tile.preSplit = tc.intTF32, tc.loAcc, tc.preSplit
		wy, st, ok := gdnParams(p, tile, tc.split, false, plan.SM90.Launch())
		if !ok {
			t.Fatalf("%s: no tiles", tc.name)
		}
		got := flags{wy.Flag("int_tf32"), st.Flag("int_tf32"), st.Flag("lo_acc"), st.Flag("pre_split")}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s: flags (-want +got):\n%s", tc.name, d)
		}
	}
}
