package planner

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// tiledGraphs is every step's graph after the tile pass, by name.
func tiledGraphs(t *testing.T, target plan.Target, tiling Tiling, buckets []int) map[string]*ir.Graph {
	t.Helper()
	m := FromConfig("tiny", tinyConfig(t))
	gs, err := Graphs(m, Options{Target: target, Buckets: buckets, ContextTokens: 64, Tiling: tiling}, "tile")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*ir.Graph{}
	for _, g := range gs {
		out[g.Name] = g
	}
	return out
}

// TestTilePass: with the pass on (the GPU targets' default) every
// projection of a GPU prefill of several rows is a gemm or gemm_add with
// its activations split and every layer's routed experts the grouped
// chain; the decode step, a one-row prefill, the cpu target and Tiling off
// keep the old families.
func TestTilePass(t *testing.T) {
	const layers = 4
	for _, target := range plan.GPUTargets() {
		untiled := tiledGraphs(t, target, TileOff, []int{1, 4})
		tiled := tiledGraphs(t, target, TileDefault, []int{1, 4})
		if diff := cmp.Diff(kindCounts(tiledGraphs(t, target, TileOn, []int{1, 4})["prefill_4"]), kindCounts(tiled["prefill_4"])); diff != "" {
			t.Errorf("%s: tiling on differs from the default (-on +default):\n%s", target, diff)
		}
		before, after := kindCounts(untiled["prefill_4"]), kindCounts(tiled["prefill_4"])
		want := map[ir.Kind]int{
			ir.GEMM: before[ir.MatMul], ir.GEMMAdd: before[ir.MatMulAdd],
			ir.MoECount: layers, ir.MoESort: layers, ir.MoEGateUpGroup: layers, ir.MoEDownGroup: layers, ir.MoESlotSum: layers,
		}
		got := map[ir.Kind]int{}
		for k := range want {
			got[k] = after[k]
		}
		for _, k := range []ir.Kind{ir.MatMul, ir.MatMulAdd, ir.MoEGateUp, ir.MoEDown} {
			want[k], got[k] = 0, after[k]
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s prefill_4 kinds (-want +got):\n%s", target, diff)
		}
		if before[ir.MoEGateUp] != layers || before[ir.MatMul] == 0 {
			t.Errorf("%s: the untiled prefill has %d moe_gate_up and %d matmul", target, before[ir.MoEGateUp], before[ir.MatMul])
		}
		for _, name := range []string{"decode", "prefill_1"} {
			if diff := cmp.Diff(kindCounts(untiled[name]), kindCounts(tiled[name])); diff != "" {
				t.Errorf("%s %s changed (-off +on):\n%s", target, name, diff)
			}
		}
		// The count and the sort run before their layer's gate_up, the slot
		// sum right after the grouped down; every tensor-core op splits.
		ops := tiled["prefill_4"].Ops
		for i, op := range ops {
			switch op.Kind {
			case ir.GEMM, ir.GEMMAdd, ir.MoEDownGroup:
				if got, want := kernels.ATerms(op.Params), activationTerms(target); got != want {
					t.Errorf("%s: op %d %s takes its activations as %d bf16 terms, want %d", target, i, op.Kind, got, want)
				}
			}
			switch op.Kind {
			case ir.MoEGateUpGroup:
				if i < 2 || ops[i-1].Kind != ir.MoESort || ops[i-1].Layer != op.Layer || ops[i-2].Kind != ir.MoECount || ops[i-2].Layer != op.Layer {
					t.Errorf("%s: op %d moe_gate_up_group not preceded by its layer's moe_count and moe_sort", target, i)
				}
				if got, want := kernels.ATerms(op.Params), activationTerms(target); got != want {
					t.Errorf("%s: op %d %s takes its activations as %d bf16 terms, want %d", target, i, op.Kind, got, want)
				}
			case ir.MoEDownGroup:
				if i+1 == len(ops) || ops[i+1].Kind != ir.MoESlotSum {
					t.Errorf("%s: op %d moe_down_group not followed by moe_slot_sum", target, i)
				}
			}
		}
	}
	cpu := tiledGraphs(t, plan.CPU, TileDefault, []int{4})
	if n := kindCounts(cpu["prefill_4"]); n[ir.GEMM]+n[ir.MoESort] != 0 {
		t.Errorf("the cpu plan was tiled: %v", n)
	}
}

// TestTilingOption: an unknown tiling is refused by name.
func TestTilingOption(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	_, err := Plan(m, Options{Target: plan.SM90, Buckets: []int{4}, ContextTokens: 64, Tiling: "sideways"})
	if err == nil || !strings.Contains(err.Error(), `tiling "sideways"`) {
		t.Errorf("err = %v, want the tiling named", err)
	}
}

// TestTileColsFit: the wide tile is taken only where its shared memory
// fits the target (sm_90, not gfx1151's 64 KiB), and the plans' ops carry
// the target's tile.
func TestTileColsFit(t *testing.T) {
	saved := tileCols
	defer func() { tileCols = saved }()
	tileCols = map[plan.Target]int{plan.SM90: kernels.GEMMTileColsWide, plan.GFX1151: kernels.GEMMTileColsWide}
	got := map[plan.Target]int{plan.SM90: gemmTileCols(plan.SM90, activationTerms(plan.SM90)), plan.GFX1151: gemmTileCols(plan.GFX1151, activationTerms(plan.GFX1151)), plan.CPU: gemmTileCols(plan.CPU, activationTerms(plan.CPU))}
	want := map[plan.Target]int{plan.SM90: kernels.GEMMTileColsWide, plan.GFX1151: kernels.GEMMTileCols, plan.CPU: kernels.GEMMTileCols}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tile columns (-want +got):\n%s", diff)
	}
	for _, op := range tiledGraphs(t, plan.SM90, TileDefault, []int{4})["prefill_4"].Ops {
		want := kernels.GEMMTileColsWide
		if n := op.Params.Int("n"); n <= kernels.GEMMTileCols || (op.Params.Flag("wgmma") && n <= 2*kernels.GEMMTileCols) {
			want = kernels.GEMMTileCols
		}
		if op.Kind == ir.GEMM && op.Params.Int("tile_n") != want {
			t.Errorf("sm_90 gemm of %d columns with tile_n %d, want %d", op.Params.Int("n"), op.Params.Int("tile_n"), want)
		}
	}
}

// TestGEMMTileOption: the tiled GEMMs of a prefill take the wgmma tile on
// sm_90 by default and with GEMMTileWGMMA, the mma tile with GEMMTileMMA
// and on gfx1151; wgmma on a target without it, and an unknown tile, are
// refused by name.
func TestGEMMTileOption(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	dense := map[ir.Kind]bool{ir.GEMM: true, ir.GEMMAdd: true}
	grouped := map[ir.Kind]bool{ir.MoEGateUpGroup: true, ir.MoEDownGroup: true}
	type flags struct{ wgmma, ws bool }
	wg := flags{wgmma: true}
	// The grouped GEMMs keep the wgmma tile under wgmma-ws.
	for _, c := range []struct {
		target        plan.Target
		tile          GEMMTile
		want, wantGrp flags
	}{
		{plan.SM90, GEMMTileDefault, wg, wg},
		{plan.SM90, GEMMTileWGMMA, wg, wg},
		{plan.SM90, GEMMTileWGMMAWS, flags{ws: true}, wg},
		{plan.SM90, GEMMTileMMA, flags{}, flags{}},
		{plan.GFX1151, GEMMTileDefault, flags{}, flags{}},
		{plan.GFX1151, GEMMTileMMA, flags{}, flags{}},
	} {
		gs, err := Graphs(m, Options{Target: c.target, Buckets: []int{4}, ContextTokens: 64, GEMMTile: c.tile}, "tile")
		if err != nil {
			t.Fatal(err)
		}
		got, gotGrp := map[flags]int{}, map[flags]int{}
		n, nGrp := 0, 0
		for _, g := range gs {
			for _, op := range g.Ops {
				f := flags{op.Params.Flag("wgmma"), op.Params.Flag("wgmma_ws")}
				switch {
				case dense[op.Kind]:
					got[f]++
					n++
				case grouped[op.Kind]:
					gotGrp[f]++
					nGrp++
				}
			}
		}
		if n == 0 || got[c.want] != n || nGrp == 0 || gotGrp[c.wantGrp] != nGrp {
			t.Errorf("%s, gemm tile %q: dense GEMMs by (wgmma, wgmma_ws) flags %v, grouped %v; want every one %v, %v",
				c.target, c.tile, got, gotGrp, c.want, c.wantGrp)
		}
	}
	for _, c := range []struct {
		target plan.Target
		tile   GEMMTile
		want   string
	}{
		{plan.GFX1151, GEMMTileWGMMA, `gemm tile "wgmma": target gfx1151 has no wgmma`},
		{plan.CPU, GEMMTileWGMMA, `gemm tile "wgmma": target cpu has no wgmma`},
		{plan.GFX1151, GEMMTileWGMMAWS, `gemm tile "wgmma-ws": target gfx1151 has no wgmma`},
		{plan.SM90, "sideways", `gemm tile "sideways": want "wgmma", "wgmma-ws", "mma"`},
	} {
		_, err := Plan(m, Options{Target: c.target, Buckets: []int{4}, ContextTokens: 64, GEMMTile: c.tile})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s, gemm tile %q: err = %v, want %q", c.target, c.tile, err, c.want)
		}
	}
}

// TestTCSumsOption: the default (the target's mode: mma for now, so the
// plans are as before) and TCSumsMMA leave the flags out; TCSumsFlush gives every tiled
// GEMM of a GPU prefill flush_k (the dense ones the 128-column tile),
// TCSumsFlushSlice flush_k16 as well, TCSumsFlushAll flush_k to the GDN
// state pass and (sm_90) the flash attention too; an unknown mode is
// refused by name.
func TestTCSumsOption(t *testing.T) {
	// The real layout with the tiny fixtures' GDN heads (whose chunk the
	// tiles serve): every family that takes the flag is in the prefill.
	c := *arch.Real()
	c.LinearNumKeyHeads, c.LinearNumValueHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim = 2, 4, 16, 16
	m := FromConfig("tiny heads", &c)
	gemms := []ir.Kind{ir.GEMM, ir.GEMMAdd, ir.MoEGateUpGroup, ir.MoEDownGroup}
	for _, target := range plan.GPUTargets() {
		all := append([]ir.Kind{ir.GatedDeltaState}, gemms...)
		flash := all // with --prefill-attention flash: attention_prefill too where it takes the flag
		if flushAttention[target] {
			flash = append(slices.Clone(all), ir.AttentionPrefill) // (gfx1151 plans keep attention and its gate)
		}
		type row struct {
			sums          TCSums
			attn          PrefillAttention
			flush, slices []ir.Kind
		}
		rows := []row{
			{TCSumsMMA, PrefillDefault, nil, nil},
			{TCSumsFlush, PrefillDefault, gemms, nil},
			{TCSumsFlushSlice, PrefillDefault, gemms, gemms},
			{TCSumsFlushAll, PrefillDefault, all, nil}, // (sm_90's default attention_prefill_wg has no flag)
			{TCSumsFlushAll, PrefillFlash, flash, nil},
		}
		for _, r := range rows { // the default: the target's mode's row
			if r.sums == tcSumsDefault[target] && r.attn == PrefillDefault {
				rows = append(rows, row{TCSumsDefault, PrefillDefault, r.flush, r.slices})
			}
		}
		for _, tc := range rows {
			gs, err := Graphs(m, Options{Target: target, Buckets: []int{4}, ContextTokens: 64, TCSums: tc.sums, PrefillAttention: tc.attn}, "tile")
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]map[ir.Kind]bool{"flush_k": {}, "flush_k16": {}}
			for _, g := range gs {
				for _, op := range g.Ops {
					for flag := range got {
						if _, given := op.Params.Flags[flag]; given {
							got[flag][op.Kind] = op.Params.Flag(flag)
						}
					}
					// flush_k takes the 128-column tile but on the wgmma tile
					// without flush_k16 (flushTileCols: its halves).
					limit := kernels.GEMMTileCols
					if op.Params.Flag("wgmma") && !op.Params.Flag("flush_k16") {
						limit = flushTileCols
					}
					if op.Params.Flag("flush_k") && op.Params.Int("tile_n") > limit {
						t.Errorf("%s, tc sums %q: %s with flush_k and tile_n %d", target, tc.sums, op.Kind, op.Params.Int("tile_n"))
					}
				}
			}
			want := map[string]map[ir.Kind]bool{"flush_k": {}, "flush_k16": {}}
			for _, k := range tc.flush {
				want["flush_k"][k] = true
			}
			for _, k := range tc.slices {
				want["flush_k16"][k] = true
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s, tc sums %q, attention %q: the kinds given each flag (-want +got):\n%s", target, tc.sums, tc.attn, diff)
			}
			if _, err := Plan(m, Options{Target: target, Buckets: []int{4}, ContextTokens: 64, TCSums: tc.sums, PrefillAttention: tc.attn}); err != nil {
				t.Errorf("%s, tc sums %q: %v", target, tc.sums, err)
			}
		}
	}
	_, err := Plan(m, Options{Target: plan.SM90, Buckets: []int{4}, ContextTokens: 64, TCSums: "exact"})
	if err == nil || !strings.Contains(err.Error(), `tc sums "exact": want one of ["mma" "flush" "flush-slice" "flush-all"]`) {
		t.Errorf("err = %v, want the mode named", err)
	}
}

// TestATermsOption: Options.ATerms sets every tiled projection's terms, and
// a count outside 1 to 3 or past the target's tile is refused by name.
func TestATermsOption(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	for _, tc := range []struct {
		target plan.Target
		terms  int
		want   int    // the terms every tiled op takes
		err    string // or the error's text
	}{
		{plan.SM90, 0, 3, ""},
		{plan.SM90, 1, 1, ""},
		{plan.SM90, 2, 2, ""},
		{plan.SM90, 3, 3, ""},
		{plan.GFX1151, 0, 2, ""},
		{plan.GFX1151, 1, 1, ""},
		{plan.GFX1151, 3, 0, "activation terms 3: the gfx1151 tile"},
		{plan.SM90, 4, 0, "activation terms 4: want 1 to 3"},
		{plan.SM90, -1, 0, "activation terms -1: want 1 to 3"},
	} {
		p, err := Plan(m, Options{Target: tc.target, Buckets: []int{4}, ContextTokens: 64, ATerms: tc.terms})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s, %d terms: err = %v, want %q", tc.target, tc.terms, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s, %d terms: %v", tc.target, tc.terms, err)
		}
		got := map[int]int{}
		for _, k := range p.Kernels {
			switch ir.Kind(k.Family) {
			case ir.GEMM, ir.GEMMAdd, ir.MoEGateUpGroup, ir.MoEDownGroup:
				got[kernels.ATerms(k.Params)]++
			}
		}
		if len(got) != 1 || got[tc.want] == 0 {
			t.Errorf("%s, %d terms: tiled kernels by terms %v, want all %d", tc.target, tc.terms, got, tc.want)
		}
	}
}

// TestExpertTileOptions: the grouped MoE GEMMs take wide_tile
// (WideExperts) and persistent (PersistentExperts) only when asked, and only
// on the wgmma tile; a persistent launch is a block per multiprocessor at
// most.
func TestExpertTileOptions(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	for _, tc := range []struct {
		flag   string
		target plan.Target
		tile   GEMMTile
		ask    bool
		want   bool
	}{
		{"wide_tile", plan.SM90, GEMMTileDefault, false, false},
		{"wide_tile", plan.SM90, GEMMTileDefault, true, true},
		{"wide_tile", plan.GFX1151, GEMMTileDefault, true, false}, // the mma tile: 128 columns whatever is asked
		{"persistent", plan.SM90, GEMMTileDefault, false, false},
		{"persistent", plan.SM90, GEMMTileDefault, true, true},
		{"persistent", plan.SM90, GEMMTileMMA, true, false},
		{"persistent", plan.GFX1151, GEMMTileDefault, true, false}, // the mma tile
	} {
		o := Options{Target: tc.target, Buckets: []int{4}, ContextTokens: 64, GEMMTile: tc.tile}
		if tc.flag == "wide_tile" {
			o.WideExperts = tc.ask
		} else {
			o.PersistentExperts = tc.ask
		}
		name := fmt.Sprintf("%s, %s, %q, asked %v", tc.flag, tc.target, tc.tile, tc.ask)
		p, err := Plan(m, o)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		n := 0
		persistent := map[string]bool{}
		for _, k := range p.Kernels {
			persistent[k.Name] = k.Params.Flag("persistent")
			if ir.Kind(k.Family) != ir.MoEGateUpGroup && ir.Kind(k.Family) != ir.MoEDownGroup {
				continue
			}
			n++
			if got := k.Params.Flag(tc.flag); got != tc.want {
				t.Errorf("%s: %s has %s %v, want %v", name, k.Name, tc.flag, got, tc.want)
			}
		}
		if n == 0 {
			t.Errorf("%s: no grouped MoE kernels", name)
		}
		for _, ph := range p.Phases {
			for _, l := range ph.Launches {
				blocks := 1
				for _, g := range l.Grid {
					blocks *= g
				}
				if persistent[l.Kernel] && blocks > tc.target.Launch().Multiprocessors {
					t.Errorf("%s: %s: %s launches %v blocks, more than the %d multiprocessors", name, ph.Name, l.Kernel, l.Grid, tc.target.Launch().Multiprocessors)
				}
			}
		}
	}
}

// TestClusterAOption: Options.ClusterA puts cluster_a on every tiled GEMM
// of the wgmma tile whose K is whole 16-byte rows (dense and grouped), and
// their launches are clusters of two blocks over an even grid; off it, on
// the other tiles and on gfx1151, no kernel has it and no launch clusters.
// (A warp-specialized plan is planned at all: its 384-thread blocks.)
func TestClusterAOption(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	for _, tc := range []struct {
		target plan.Target
		tile   GEMMTile
		ask    bool
		want   bool
	}{
		{plan.SM90, GEMMTileDefault, false, false},
		{plan.SM90, GEMMTileDefault, true, true},
		{plan.SM90, GEMMTileMMA, true, false},
		{plan.SM90, GEMMTileWGMMAWS, true, true}, // the grouped GEMMs only
		{plan.GFX1151, GEMMTileDefault, true, false},
	} {
		name := fmt.Sprintf("%s, %q, asked %v", tc.target, tc.tile, tc.ask)
		p, err := Plan(m, Options{Target: tc.target, Buckets: []int{4}, ContextTokens: 64, GEMMTile: tc.tile, ClusterA: tc.ask})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		clustered := map[string]bool{}
		n := 0
		for _, k := range p.Kernels {
			clustered[k.Name] = k.Params.Flag("cluster_a")
			switch ir.Kind(k.Family) {
			case ir.GEMM, ir.GEMMAdd, ir.MoEGateUpGroup, ir.MoEDownGroup:
			default:
				continue
			}
			K := k.Params.Int("k")
			switch ir.Kind(k.Family) {
			case ir.MoEGateUpGroup, ir.MoEDownGroup:
				K = k.Params.Int("hidden") * k.Params.Int("inter")
			}
			// (the warp-specialized plans keep the grouped GEMMs on the wgmma tile)
			want := tc.ask && k.Params.Flag("wgmma") && K%4 == 0
			if want {
				n++
			}
			if got := k.Params.Flag("cluster_a"); got != want {
				t.Errorf("%s: %s has cluster_a %v, want %v", name, k.Name, got, want)
			}
		}
		if tc.want && n == 0 {
			t.Errorf("%s: no kernel took cluster_a", name)
		}
		for _, ph := range p.Phases {
			for _, l := range ph.Launches {
				switch {
				case clustered[l.Kernel] && (l.Cluster != kernels.GEMMClusterBlocks || l.Grid[0]%kernels.GEMMClusterBlocks != 0):
					t.Errorf("%s: %s: %s launches grid %v in clusters of %d", name, ph.Name, l.Kernel, l.Grid, l.Cluster)
				case !clustered[l.Kernel] && l.Cluster != 0:
					t.Errorf("%s: %s: %s launches clusters of %d without cluster_a", name, ph.Name, l.Kernel, l.Cluster)
				}
			}
		}
	}
}

// TestSharedATermsOption: Options.SharedATerms puts ss_a on every tiled GEMM
// of the wgmma tile with flush_k (dense and grouped) on sm_90, none with
// flush-slice's flush_k16, none on gfx1151 or with --cluster-a.
func TestSharedATermsOption(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	for _, tc := range []struct {
		name string
		o    Options
		want bool
	}{
		{"asked", Options{Target: plan.SM90, SharedATerms: true}, true},
		{"not asked", Options{Target: plan.SM90}, false},
		{"flush-slice", Options{Target: plan.SM90, SharedATerms: true, TCSums: TCSumsFlushSlice}, false},
		{"with clusters", Options{Target: plan.SM90, SharedATerms: true, ClusterA: true}, false},
		{"gfx1151", Options{Target: plan.GFX1151, SharedATerms: true}, false},
	} {
		o := tc.o
		o.Buckets, o.ContextTokens = []int{4}, 64
		p, err := Plan(m, o)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		n := 0
		for _, k := range p.Kernels {
			switch ir.Kind(k.Family) {
			case ir.GEMM, ir.GEMMAdd, ir.MoEGateUpGroup, ir.MoEDownGroup:
			default:
				continue
			}
			want := tc.want && k.Params.Flag("flush_k") && !k.Params.Flag("flush_k16")
			if want {
				n++
			}
			if got := k.Params.Flag("ss_a"); got != want {
				t.Errorf("%s: %s has ss_a %v, want %v", tc.name, k.Name, got, want)
			}
		}
		if tc.want && n == 0 {
			t.Errorf("%s: no kernel took ss_a", tc.name)
		}
	}
}
