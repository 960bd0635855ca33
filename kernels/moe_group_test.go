package kernels_test

import (
	"unsafe"

	"github.com/aimaproject/aimac/ir"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/kernels"
)

// TestMoESort: pairs grouped by expert in pair order, each expert padded to
// whole tiles with −1, ids outside the experts left out.
func TestMoESort(t *testing.T) {
	const tile = kernels.GEMMTileRows
	ids := []int32{2, 0, 2, 7, -1, 2} // 3 tokens × 2 slots, 4 experts
	tiles := make([]int32, 1+kernels.MoETiles(3, 2, 4))
	order := make([]int32, (len(tiles)-1)*tile)
	kernels.MoESort(order, tiles, ids, 3, 2, 4)
	if diff := cmp.Diff([]int32{2, 0, 2}, tiles[:3]); diff != "" {
		t.Errorf("tiles (-want +got):\n%s", diff)
	}
	want := slices.Repeat([]int32{-1}, 2*tile)
	want[0] = 1                                      // expert 0: pair 1
	want[tile], want[tile+1], want[tile+2] = 0, 2, 5 // expert 2: pairs 0, 2, 5
	if diff := cmp.Diff(want, order[:2*tile]); diff != "" {
		t.Errorf("order (-want +got):\n%s", diff)
	}
}

// TestMoECount: each chunk of MoESortChunk pairs counted per expert, ids
// outside the experts left out, chunks past the pairs untouched.
func TestMoECount(t *testing.T) {
	const chunk = kernels.MoESortChunk
	n, k, experts := (2*chunk+5)/3, 3, 4 // 2 chunks and 5 pairs: 3 chunks
	ids := make([]int32, n*k)
	want := make([]int32, 4*experts)
	for i := range ids {
		ids[i] = int32(i%5) - 1 // −1, 0, 1, 2, 3
		if e := ids[i]; e >= 0 {
			want[(i/chunk)*experts+int(e)]++
		}
	}
	want[3*experts] = 99 // a fourth chunk: no pairs
	counts := make([]int32, 4*experts)
	for i := range counts {
		counts[i] = 99
	}
	kernels.MoECount(counts, ids, n, k, experts)
	for i := 3*experts + 1; i < len(want); i++ {
		want[i] = 99
	}
	if diff := cmp.Diff(want, counts); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if got := kernels.MoESortBlocks(n, k); got != 3 {
		t.Errorf("MoESortBlocks(%d, %d) = %d, want 3", n, k, got)
	}
	if got := kernels.MoESortBlocks(0, k); got != 1 {
		t.Errorf("MoESortBlocks(0, %d) = %d, want 1", k, got)
	}
}

// TestMoETilesBound: however the pairs fall, the tiles in use stay within
// MoETiles (the grid and the buffers the planner sizes).
func TestMoETilesBound(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range []struct{ rows, k, experts int }{{1, 8, 256}, {300, 2, 4}, {129, 1, 3}, {1000, 8, 16}, {64, 4, 512}} {
		for range 20 {
			ids := make([]int32, c.rows*c.k)
			for i := range ids {
				ids[i] = int32(rng.IntN(c.experts))
			}
			tiles := make([]int32, 1+kernels.MoETiles(c.rows, c.k, c.experts))
			order := make([]int32, (len(tiles)-1)*kernels.GEMMTileRows)
			kernels.MoESort(order, tiles, ids, c.rows, c.k, c.experts)
			if int(tiles[0]) > kernels.MoETiles(c.rows, c.k, c.experts) {
				t.Fatalf("%+v: %d tiles, bound %d", c, tiles[0], kernels.MoETiles(c.rows, c.k, c.experts))
			}
		}
	}
}

// TestMoEGroupedMatchesOracle: moe_sort, moe_gate_up_group, moe_down_group
// and moe_slot_sum give what moe_gate_up and moe_down give on x and act as
// the grouped kernels stage them (one bf16 term, or hi + lo when split).
// Both sides sum in fp32 in possibly different orders (matmul's row paths):
// within 1e-5 of the output's largest magnitude.
func TestMoEGroupedMatchesOracle(t *testing.T) {
	for terms := 1; terms <= 3; terms++ {
		testMoEGrouped(t, terms)
	}
}

func testMoEGrouped(t *testing.T, terms int) {
	for _, c := range []struct{ n, experts, hidden, inter, k int }{{1, 16, 64, 32, 4}, {65, 16, 64, 32, 4}, {300, 4, 40, 12, 2}, {7, 5, 20, 6, 3}} {
		rng := rand.New(rand.NewPCG(uint64(c.n), 3))
		x := randVec(rng, c.n*c.hidden)
		gateUp := randBF16(rng, c.experts*2*c.inter*c.hidden)
		down := randBF16(rng, c.experts*c.hidden*c.inter)
		ids := make([]int32, c.n*c.k)
		weights := make([]float32, c.n*c.k)
		for tok := range c.n {
			for s, e := range rng.Perm(c.experts)[:c.k] {
				ids[tok*c.k+s], weights[tok*c.k+s] = int32(e), rng.Float32()
			}
		}
		ids[c.k-1] = -1
		// The oracle on the staged operands.
		act := make([]float32, c.n*c.k*c.inter)
		kernels.MoEGateUp(act, kernels.StageA(x, terms), ids, gateUp, c.n, c.hidden, c.inter, c.k, c.experts)
		want := make([]float32, c.n*c.hidden)
		kernels.MoEDown(want, kernels.StageA(act, terms), ids, weights, down, c.n, c.hidden, c.inter, c.k, c.experts)
		// The grouped chain.
		tiles := make([]int32, 1+kernels.MoETiles(c.n, c.k, c.experts))
		order := make([]int32, (len(tiles)-1)*kernels.GEMMTileRows)
		kernels.MoESort(order, tiles, ids, c.n, c.k, c.experts)
		gact := make([]float32, c.n*c.k*c.inter)
		if err := kernels.MoEGateUpGroup(gact, x, order, tiles, gateUp, c.n, c.hidden, c.inter, c.k, c.experts, terms); err != nil {
			t.Fatal(err)
		}
		ys := make([]float32, c.n*c.k*c.hidden)
		if err := kernels.MoEDownGroup(ys, gact, order, tiles, weights, down, c.n, c.hidden, c.inter, c.k, c.experts, terms); err != nil {
			t.Fatal(err)
		}
		got := make([]float32, c.n*c.hidden)
		kernels.MoESlotSum(got, ys, ids, c.n, c.hidden, c.k, c.experts)
		var scale, worst float64
		for i := range want {
			scale = max(scale, math.Abs(float64(want[i])))
			worst = max(worst, math.Abs(float64(got[i]-want[i])))
		}
		if worst > 1e-5*scale {
			t.Errorf("%+v, %d terms: max error %g against a largest output %g", c, terms, worst, scale)
		}
	}
}

// TestSortedGroupsRefuses: a tile count or a pair past the bounds is an
// error of the grouped references, not an index panic.
func TestSortedGroupsRefuses(t *testing.T) {
	x, act := make([]float32, 8), make([]float32, 8)
	gateUp := make([]uint16, 2*2*2*2)
	tiles := []int32{5, 0}
	order := make([]int32, kernels.GEMMTileRows)
	if err := kernels.MoEGateUpGroup(act, x, order, tiles, gateUp, 1, 2, 2, 1, 2, 1); err == nil {
		t.Error("5 tiles for one pair: no error")
	}
	tiles = []int32{1, 0}
	order[0] = 9
	if err := kernels.MoEGateUpGroup(act, x, order, tiles, gateUp, 1, 2, 2, 1, 2, 1); err == nil {
		t.Error("pair 9 of 1: no error")
	}
}

func randVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = rng.Float32()*2 - 1
	}
	return v
}

func randBF16(rng *rand.Rand, n int) []uint16 {
	w := make([]uint16, n)
	for i := range w {
		w[i] = bf16.FromFloat32(float32(rng.NormFloat64() * 0.1))
	}
	return w
}

// TestGEMMReference: gemm's reference is x rounded to bf16 (hi + lo with
// split_a, + lo2 with split_a3) times W in fp32, against the same product in float64 within 1e-5
// relative to the row's absolute sum; gemm_add adds it into y.
func TestGEMMReference(t *testing.T) {
	const rows, k, n = 5, 37, 9
	rng := rand.New(rand.NewPCG(4, 5))
	x, w := randVec(rng, rows*k), randBF16(rng, n*k)
	y0 := randVec(rng, rows*n)
	for _, c := range []struct {
		kind  ir.Kind
		terms int
	}{{ir.GEMM, 1}, {ir.GEMMAdd, 1}, {ir.GEMM, 2}, {ir.GEMMAdd, 2}, {ir.GEMM, 3}, {ir.GEMMAdd, 3}} {
		kind := c.kind
		f := kernels.Families[kind]
		y := slices.Clone(y0)
		var p ir.Params
		p.SetInt("k", k)
		p.SetInt("n", n)
		p.SetInt("tile_n", kernels.GEMMTileCols)
		p.SetFlag("split_a", c.terms >= 2)
		p.SetFlag("split_a3", c.terms >= 3)
		var block [ir.ParamSlots]int32
		a := &ir.Args{Family: f, Params: p, N: rows, Block: &block, Mem: [][]byte{f32Bytes(y), f32Bytes(slices.Clone(x)), u16Bytes(w)}}
		if err := f.Reference(a); err != nil {
			t.Fatal(err)
		}
		for r := range rows {
			for j := range n {
				var s, mag float64
				for i := range k {
					a, rest := float32(0), x[r*k+i]
					for range c.terms {
						term := bf16.Round(rest)
						a, rest = a+term, rest-term
					}
					v := float64(a) * float64(bf16.ToFloat32(w[j*k+i]))
					s, mag = s+v, mag+math.Abs(v)
				}
				if kind == ir.GEMMAdd {
					s += float64(y0[r*n+j])
				}
				if d := math.Abs(float64(y[r*n+j]) - s); d > 1e-5*(mag+1) {
					t.Errorf("%s %d terms [%d][%d]: got %g, want %g", kind, c.terms, r, j, y[r*n+j], s)
				}
			}
		}
	}
}

func u16Bytes(v []uint16) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 2*len(v)) }

// TestSplitBF16: hi + lo carries x to 2⁻¹⁶ of itself (bf16 alone: 2⁻⁸),
// hi is bf16(x) and lo is bf16(x − hi), so that the kernels' two products
// add up to the reference's one.
func TestSplitBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 7))
	x := randVec(rng, 4096)
	x = append(x, 0, 1, -1, 1e-30, 3.0000002, -65504.5, float32(math.Inf(1)))
	split, round := kernels.SplitBF16(x), kernels.RoundBF16(x)
	for i, v := range x {
		hi := bf16.Round(v)
		if want := hi + bf16.Round(v-hi); split[i] != want && !math.IsInf(float64(v), 0) {
			t.Errorf("SplitBF16(%g) = %g, want hi + lo = %g", v, split[i], want)
		}
		if math.IsInf(float64(v), 0) {
			continue
		}
		if d := math.Abs(float64(split[i] - v)); d > math.Abs(float64(v))/(1<<16) {
			t.Errorf("SplitBF16(%g) = %g: off by %g", v, split[i], d)
		}
		if round[i] != hi {
			t.Errorf("RoundBF16(%g) = %g, want %g", v, round[i], hi)
		}
	}
	if got := kernels.StageA(x[:3], 1); !slices.Equal(got, round[:3]) {
		t.Errorf("StageA one term = %v, want %v", got, round[:3])
	}
	if got := kernels.StageA(x[:3], 2); !slices.Equal(got, split[:3]) {
		t.Errorf("StageA split = %v, want %v", got, split[:3])
	}
	if got, want := kernels.StageA(x[:3], 3), kernels.Split3BF16(x[:3]); !slices.Equal(got, want) {
		t.Errorf("StageA three terms = %v, want %v", got, want)
	}
}

// TestSplit3BF16: hi + lo + lo2 carries x to 2⁻²⁴ of itself (the third
// term is bf16 of what hi and lo leave, exact in f32), each term the bf16
// of the remainder before it.
func TestSplit3BF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	x := randVec(rng, 4096)
	x = append(x, 0, 1, -1, 1e-30, 3.0000002, -65504.5, 1+1.0/(1<<23))
	got := kernels.Split3BF16(x)
	worst := 0.0
	for i, v := range x {
		hi := bf16.Round(v)
		lo := bf16.Round(v - hi)
		if want := hi + (lo + bf16.Round(v-hi-lo)); got[i] != want {
			t.Errorf("Split3BF16(%g) = %g, want hi + lo + lo2 = %g", v, got[i], want)
		}
		if v != 0 {
			worst = max(worst, math.Abs(float64(got[i]-v))/math.Abs(float64(v)))
		}
	}
	if worst > 1.0/(1<<24) {
		t.Errorf("Split3BF16 is off by up to %g of x, want at most 2⁻²⁴", worst)
	}
}

// TestFlushKCheck: flush_k takes the mma tile of 128 columns (its second
// accumulator set leaves no registers on the 256-column one) and either
// wgmma tile (256 columns: half at a time), flush_k16 128 columns with
// flush_k; both may be left out; the grouped GEMMs (always 128 columns)
// take them either way.
func TestFlushKCheck(t *testing.T) {
	gemm := func(cols int, flush *bool) ir.Params {
		var p ir.Params
		p.SetInt("k", 64)
		p.SetInt("n", 64)
		p.SetInt("tile_n", int64(cols))
		p.SetFlag("split_a", true)
		p.SetFlag("split_a3", true)
		p.SetFlag("wgmma", true)
		if flush != nil {
			p.SetFlag("flush_k", *flush)
		}
		return p
	}
	on, off := true, false
	with := func(p ir.Params, flag string) ir.Params {
		p = p.Clone()
		p.SetFlag(flag, true)
		return p
	}
	without := func(p ir.Params, flag string) ir.Params {
		p = p.Clone()
		p.SetFlag(flag, false)
		return p
	}
	tests := []struct {
		name string
		kind ir.Kind
		p    ir.Params
		want string
	}{
		{"left out", ir.GEMM, gemm(kernels.GEMMTileColsWide, nil), ""},
		{"off, wide", ir.GEMMAdd, gemm(kernels.GEMMTileColsWide, &off), ""},
		{"on, narrow", ir.GEMM, gemm(kernels.GEMMTileCols, &on), ""},
		{"on, wide wgmma (half the columns at a time)", ir.GEMM, gemm(kernels.GEMMTileColsWide, &on), ""},
		{"on, wide mma", ir.GEMM, without(gemm(kernels.GEMMTileColsWide, &on), "wgmma"), "flush_k with tile_n 256 on the mma tile: the second accumulator set fits the 128-column tile only"},
		{"slices, wide", ir.GEMM, with(gemm(kernels.GEMMTileColsWide, &on), "flush_k16"), "flush_k16 with tile_n 256"},
		{"slices", ir.GEMM, with(gemm(kernels.GEMMTileCols, &on), "flush_k16"), ""},
		{"slices without flush_k", ir.GEMMAdd, with(gemm(kernels.GEMMTileCols, nil), "flush_k16"), "flush_k16 without flush_k"},
	}
	for _, tt := range tests {
		err := kernels.Families[tt.kind].CheckParams(tt.p)
		if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
	var p ir.Params
	for k, v := range map[string]int64{"experts": 16, "hidden": 64, "inter": 32, "k": 4} {
		p.SetInt(k, v)
	}
	p.SetFlag("split_a", true)
	p.SetFlag("split_a3", false)
	p.SetFlag("wgmma", false)
	p.SetFlag("flush_k", true)
	for _, kind := range []ir.Kind{ir.MoEGateUpGroup, ir.MoEDownGroup} {
		if err := kernels.Families[kind].CheckParams(p); err != nil {
			t.Errorf("%s with flush_k: %v", kind, err)
		}
		q := p.Clone()
		delete(q.Flags, "flush_k")
		q.SetFlag("flush_k16", true)
		if err := kernels.Families[kind].CheckParams(q); err == nil || !strings.Contains(err.Error(), "flush_k16 without flush_k") {
			t.Errorf("%s with flush_k16 alone: error %v", kind, err)
		}
	}
}

// TestPersistentCheck: the grouped GEMMs take persistent on the wgmma tile
// only, and their launch is then a block per multiprocessor at most, one
// per tile where the tiles are fewer.
func TestPersistentCheck(t *testing.T) {
	base := func(wgmma, ws bool) ir.Params {
		var p ir.Params
		for k, v := range map[string]int64{"experts": 16, "hidden": 2048, "inter": 512, "k": 8} {
			p.SetInt(k, v)
		}
		p.SetFlag("split_a", true)
		p.SetFlag("split_a3", true)
		p.SetFlag("wgmma", wgmma)
		if ws {
			p.SetFlag("wgmma_ws", true)
		}
		p.SetFlag("flush_k", true)
		p.SetFlag("persistent", true)
		return p
	}
	c := ir.LaunchConfig{Threads: 256, Warp: 32, MaxSharedBytes: 227 << 10, Stages: 4, Multiprocessors: 132}
	for _, kind := range []ir.Kind{ir.MoEGateUpGroup, ir.MoEDownGroup} {
		f := kernels.Families[kind]
		tests := []struct {
			name string
			p    ir.Params
			want string
		}{
			{"wgmma", base(true, false), ""},
			{"mma", base(false, false), "persistent takes the wgmma tile"},
			{"warp-specialized", base(false, true), "persistent takes the wgmma tile"},
		}
		for _, tt := range tests {
			err := f.CheckParams(tt.p)
			if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s, %s: error %v, want %q", kind, tt.name, err, tt.want)
			}
		}
		for _, rows := range []int{8192, 65, 1} {
			one := base(true, false)
			delete(one.Flags, "persistent")
			g := f.Launch(one, rows, c).Grid
			want := min(g[0]*g[1]*g[2], c.Multiprocessors)
			s := f.Launch(base(true, false), rows, c)
			if s.Grid[0] != want || s.Grid[1] != 1 || s.Grid[2] != 1 {
				t.Errorf("%s at %d rows: grid %v, want [%d 1 1] (the one-tile grid %v, %d multiprocessors)", kind, rows, s.Grid, want, g, c.Multiprocessors)
			}
		}
	}
}

// TestClusterACheck: cluster_a is the wgmma tile's, without the persistent
// walk, where K is whole 16-byte rows; its launches are clusters of two
// column tiles, an odd last one given a partner past the weight rows.
func TestClusterACheck(t *testing.T) {
	c := ir.LaunchConfig{Threads: 256, Warp: 32, MaxSharedBytes: 227 << 10, Stages: 4, Multiprocessors: 132}
	params := func(ints map[string]int64, flags ...string) ir.Params {
		var p ir.Params
		for k, v := range ints {
			p.SetInt(k, v)
		}
		for _, f := range []string{"split_a", "split_a3", "wgmma"} {
			p.SetFlag(f, false)
		}
		for _, f := range flags {
			p.SetFlag(f, true)
		}
		return p
	}
	moe := map[string]int64{"experts": 16, "hidden": 2048, "inter": 512, "k": 8}
	tests := []struct {
		name string
		kind ir.Kind
		p    ir.Params
		want string
		grid [3]int // the launch over 200 rows, when it is accepted
	}{
		{"gemm, 256 columns", ir.GEMM, params(map[string]int64{"k": 2048, "n": 8192, "tile_n": 256}, "split_a", "split_a3", "wgmma", "flush_k", "cluster_a"), "", [3]int{32, 2, 1}},
		{"gemm, one tile of columns", ir.GEMM, params(map[string]int64{"k": 64, "n": 7, "tile_n": 256}, "wgmma", "flush_k", "cluster_a"), "", [3]int{2, 2, 1}},
		{"gemm, three tiles", ir.GEMM, params(map[string]int64{"k": 2048, "n": 300, "tile_n": 128}, "wgmma", "cluster_a"), "", [3]int{4, 2, 1}},
		{"gemm_add", ir.GEMMAdd, params(map[string]int64{"k": 4096, "n": 2048, "tile_n": 256}, "split_a", "wgmma", "flush_k", "cluster_a"), "", [3]int{8, 2, 1}},
		{"gemm, K off 16 bytes", ir.GEMM, params(map[string]int64{"k": 1001, "n": 300, "tile_n": 256}, "wgmma", "cluster_a"), "cluster_a with k 1001", [3]int{}},
		{"gemm, mma tile", ir.GEMM, params(map[string]int64{"k": 2048, "n": 300, "tile_n": 128}, "cluster_a"), "the wgmma tile's", [3]int{}},
		{"gemm, warp-specialized", ir.GEMM, params(map[string]int64{"k": 2048, "n": 300, "tile_n": 256}, "wgmma_ws", "cluster_a"), "the wgmma tile's", [3]int{}},
		{"gate_up", ir.MoEGateUpGroup, params(moe, "split_a", "split_a3", "wgmma", "flush_k", "cluster_a"), "", [3]int{8, 0, 1}},
		{"down", ir.MoEDownGroup, params(moe, "split_a", "split_a3", "wgmma", "flush_k", "cluster_a"), "", [3]int{16, 0, 1}},
		{"down, persistent", ir.MoEDownGroup, params(moe, "wgmma", "flush_k", "persistent", "cluster_a"), "cluster_a with persistent", [3]int{}},
		{"gate_up, inter off 16 bytes", ir.MoEGateUpGroup, params(map[string]int64{"experts": 5, "hidden": 20, "inter": 6, "k": 3}, "wgmma", "cluster_a"), "cluster_a with inter 6", [3]int{}},
	}
	for _, tt := range tests {
		f := kernels.Families[tt.kind]
		err := f.CheckParams(tt.p)
		if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
			continue
		}
		if err != nil {
			continue
		}
		s := f.Launch(tt.p, 200, c)
		want := tt.grid
		if want[1] == 0 { // the grouped GEMMs' row tiles: the one-block launch's
			one := tt.p.Clone()
			delete(one.Flags, "cluster_a")
			want[1] = f.Launch(one, 200, c).Grid[1]
		}
		if diff := cmp.Diff(struct {
			Grid    [3]int
			Cluster int
		}{want, kernels.GEMMClusterBlocks}, struct {
			Grid    [3]int
			Cluster int
		}{s.Grid, s.Cluster}); diff != "" {
			t.Errorf("%s: launch (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestSSACheck: ss_a is the wgmma tile's, with flush_k and not flush_k16,
// cluster_a or persistent; its shared memory is the W stages and two term
// buffers.
func TestSSACheck(t *testing.T) {
	c := ir.LaunchConfig{Threads: 256, Warp: 32, MaxSharedBytes: 227 << 10, Stages: 4, Multiprocessors: 132}
	gemm := func(flags ...string) ir.Params {
		var p ir.Params
		for k, v := range map[string]int64{"k": 2048, "n": 8192, "tile_n": 256} {
			p.SetInt(k, v)
		}
		for _, f := range []string{"split_a", "split_a3", "wgmma"} {
			p.SetFlag(f, false)
		}
		for _, f := range flags {
			p.SetFlag(f, true)
		}
		return p
	}
	for _, tt := range []struct {
		name   string
		p      ir.Params
		want   string
		shared int
	}{
		{"three terms, 256 columns", gemm("split_a", "split_a3", "wgmma", "flush_k", "ss_a"), "", 1024 + 4*256*64*2 + 2*3*128*64*2},
		{"one term", gemm("wgmma", "flush_k", "ss_a"), "", 1024 + 4*256*64*2 + 2*1*128*64*2},
		{"no flush", gemm("wgmma", "ss_a"), "ss_a takes flush_k's", 0},
		{"warp-specialized tile", gemm("wgmma_ws", "ss_a"), "the wgmma tile's", 0},
		{"with clusters", gemm("wgmma", "flush_k", "cluster_a", "ss_a"), "ss_a with cluster_a", 0},
	} {
		f := kernels.Families[ir.GEMM]
		err := f.CheckParams(tt.p)
		if (tt.want == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
			continue
		}
		if err == nil {
			if got := f.Launch(tt.p, 8192, c).SharedBytes; got != tt.shared {
				t.Errorf("%s: %d shared bytes, want %d", tt.name, got, tt.shared)
			}
		}
	}
}
