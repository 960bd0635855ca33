package planner

import (
	"fmt"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// Tiling says whether the tile pass runs.
type Tiling string

const (
	// TileDefault is on for GPU targets (their prefill's projections and
	// routed experts on the tensor cores, the activations split into bf16
	// terms: activationTerms) and off on the cpu, whose plan keeps
	// the old families as the oracle.
	TileDefault Tiling = ""
	TileOn      Tiling = "on"  // on for every target (the tiled families' references run on the CPU)
	TileOff     Tiling = "off" // never: prefill keeps matmul and the per-slot MoE kernels
)

// tilePass runs tileMany over the prefill graphs of a GPU target (of any
// target with TileOn), and the logits pass of many rows (teacher forcing:
// the LM head over every row).
func tilePass(c *compilation) error {
	if c.o.Tiling == TileOff || (c.o.Tiling == TileDefault && !c.o.Target.GPU()) {
		return nil
	}
	for i, g := range c.graphs {
		if k := c.steps[i].Kind; k != plan.Prefill && k != plan.Logits {
			continue
		}
		if err := tileMany(g, gemmTileCols(c.o.Target, c.o.aTerms()), c.o.aTerms(), c.o.gemmTileKind(), c.o.flushSums(), c.o.flushSlices(), expertTile{wide: c.o.WideExperts, persistent: c.o.PersistentExperts, cluster: c.o.ClusterA, shared: c.o.SharedATerms}); err != nil {
			return err
		}
	}
	return nil
}

// tileMany replaces the projections of a prefill graph of more than one
// row by the tensor-core families (docs/prefill-gemm.md): matmul by gemm,
// matmul_add by gemm_add, and each routed-expert pair moe_gate_up →
// moe_down by moe_count, moe_sort, moe_gate_up_group, moe_down_group,
// moe_slot_sum.
// Their tiles take any K, N and row count (partial tiles are zero-filled
// and not stored, blocks past the logical rows return at once), so no shape
// keeps the old family; a one-row graph is the streaming pass's. With flush
// every tiled GEMM takes flush_k (each k-tile's products added into the
// sum rounded to nearest; with slices flush_k16, each 16-deep slice's) on
// the 128-column tile, the only one with registers for the second
// accumulator set — but the warp-specialized tile's, which rounds its
// k-tiles' sums to nearest itself at either width.
func tileMany(g *ir.Graph, cols, terms int, tile gemmTileKind, flush, slices bool, experts expertTile) error {
	if g.Tokens <= 1 {
		return nil
	}
	for _, op := range g.Ops {
		if op.Rows == nil {
			continue
		}
		switch op.Kind {
		case ir.MatMul:
			op.Kind = ir.GEMM
		case ir.MatMulAdd:
			op.Kind = ir.GEMMAdd
		default:
			continue
		}
		op.Params = op.Params.Clone()
		setATerms(&op.Params, terms)
		tile.set(&op.Params)
		if tile != tileWGMMAWS {
			setFlush(&op.Params, flush, slices)
		}
		// A projection one narrow tile covers (the GDN's b and a, the shared
		// expert's gate) would only pad a wide one; on the wgmma tile one of
		// two narrow tiles (the router's 256 columns) too: twice the blocks,
		// each half as long, where one column of wide tiles leaves half the
		// SMs idle at 8K rows.
		n := cols
		if w := op.Params.Int("n"); w <= kernels.GEMMTileCols || (tile.warpgroup() && w <= 2*kernels.GEMMTileCols) {
			n = kernels.GEMMTileCols
		}
		if flush && tile != tileWGMMAWS {
			// The mma tile's second set fits 128 columns only, as does the
			// wgmma tile's slice-by-slice flush (flush_k16).
			limit := kernels.GEMMTileCols
			if tile == tileWGMMA && !slices {
				limit = flushTileCols
			}
			n = min(n, limit)
		}
		op.Params.SetInt("tile_n", int64(n))
		experts.stageA(op.Kind, &op.Params)
	}
	groupExperts(g, terms, tile.grouped(), flush, slices, experts)
	if err := g.Verify(kernels.Families); err != nil {
		return fmt.Errorf("tiling %s: %w", g.Name, err)
	}
	return nil
}

// groupExperts rewrites every moe_gate_up whose act output only the next
// moe_down of its layer reads into the grouped chain: the pairs counted
// and sorted once (moe_count and moe_sort, before the gate_up), the grouped
// gate_up into the same act, the grouped down into per-pair rows ys, and
// their slot sum into the down's output. counts, order, tiles and ys are
// activations shared by the layers.
// It returns the number of rewrites.
func groupExperts(g *ir.Graph, terms int, tile gemmTileKind, flush, slices bool, experts expertTile) int {
	u := indexUses(g)
	var out []*ir.Op
	replace := map[int][]*ir.Op{}
	n := 0
	for i, gu := range g.Ops {
		if gu.Kind != ir.MoEGateUp || gu.Rows == nil {
			continue
		}
		act := gu.Operands[0]
		j := u.next(act.Tensor, i)
		if j < 0 || !plain(act) {
			continue
		}
		dn := g.Ops[j]
		if dn.Kind != ir.MoEDown || dn.Layer != gu.Layer || dn.Rows == nil || *dn.Rows != *gu.Rows ||
			dn.Operands[1] != act || dn.Operands[2] != gu.Operands[2] || !u.deadAfter(act.Tensor, j) {
			continue
		}
		// The grouped gate_up and down take the same terms, tile and sums.
		grouped := func(q ir.Params) ir.Params {
			q = q.Clone()
			setATerms(&q, terms)
			tile.set(&q)
			setFlush(&q, flush, slices)
			if experts.wide && tile == tileWGMMA && !slices {
				q.SetFlag("wide_tile", true)
			}
			if experts.persistent && tile == tileWGMMA {
				q.SetFlag("persistent", true)
			}
			return q
		}
		p, dp := grouped(gu.Params), grouped(dn.Params)
		experts.stageA(ir.MoEGateUpGroup, &p)
		experts.stageA(ir.MoEDownGroup, &dp)
		sortP := ir.Params{Ints: map[string]int64{"experts": int64(p.Int("experts")), "k": int64(p.Int("k"))}}
		sumP := ir.Params{Ints: map[string]int64{"experts": int64(p.Int("experts")), "hidden": int64(p.Int("hidden")), "k": int64(p.Int("k"))}}
		if kernels.Families[ir.MoESort].CheckParams(sortP) != nil {
			continue // more experts than moe_sort's block holds: keep the per-slot kernels
		}
		tiles := int64(kernels.MoETiles(g.Tokens, p.Int("k"), p.Int("experts")))
		counts := tileTensor(g, "moe_counts", ir.I32, int64(kernels.MoESortBlocks(g.Tokens, p.Int("k"))), int64(p.Int("experts")))
		order := tileTensor(g, "moe_order", ir.I32, tiles*kernels.GEMMTileRows)
		tileList := tileTensor(g, "moe_tiles", ir.I32, 1+tiles)
		ys := tileTensor(g, "moe_ys", ir.F32, int64(g.Tokens), int64(p.Int("k")*p.Int("hidden")))
		ids := gu.Operands[2]
		rows := gu.Rows
		replace[i] = []*ir.Op{
			{Kind: ir.MoECount, Layer: gu.Layer, Rows: rows, Params: sortP.Clone(), Operands: []ir.Operand{of(counts), ids}},
			{Kind: ir.MoESort, Layer: gu.Layer, Rows: rows, Params: sortP, Operands: []ir.Operand{of(order), of(tileList), ids, of(counts)}},
			{Kind: ir.MoEGateUpGroup, Layer: gu.Layer, Rows: rows, Params: p,
				Operands: []ir.Operand{act, gu.Operands[1], of(order), of(tileList), gu.Operands[3]}},
		}
		replace[j] = []*ir.Op{
			{Kind: ir.MoEDownGroup, Layer: dn.Layer, Rows: rows, Params: dp,
				Operands: []ir.Operand{of(ys), act, of(order), of(tileList), dn.Operands[3], dn.Operands[4]}},
			{Kind: ir.MoESlotSum, Layer: dn.Layer, Rows: rows, Params: sumP, Operands: []ir.Operand{dn.Operands[0], of(ys), ids}},
		}
		n++
	}
	if n == 0 {
		return 0
	}
	for i, op := range g.Ops {
		if r, ok := replace[i]; ok {
			out = append(out, r...)
			continue
		}
		out = append(out, op)
	}
	g.Ops = out
	return n
}

// tileTensor is the graph's activation called name, added with shape when
// it is not there yet.
func tileTensor(g *ir.Graph, name string, dt ir.DType, shape ...int64) *ir.Tensor {
	if t := g.Tensor(name); t != nil {
		return t
	}
	return g.AddTensor(ir.Tensor{Name: name, Role: ir.Activation, DType: dt, Shape: shape})
}

// tileCols is the gemm tile's weight rows per target. sm_90 takes the wide
// tile: split, it measured 1.27× the 128-column tile's rate on the H200
// (8192 × 2048 → 8192: 1.91 ms against 2.43; docs/prefill-gemm.md);
// gfx1151's 64 KiB hold only the narrow one.
var tileCols = map[plan.Target]int{plan.SM90: kernels.GEMMTileColsWide, plan.GFX1151: kernels.GEMMTileCols}

// GEMMTile chooses the tile under the tiled GEMMs.
type GEMMTile string

const (
	GEMMTileDefault GEMMTile = ""         // the target's: wgmmaDefault
	GEMMTileWGMMA   GEMMTile = "wgmma"    // gemm_wgmma.tmpl: sm_90a's warpgroup products, A from registers
	GEMMTileWGMMAWS GEMMTile = "wgmma-ws" // gemm_wgmma_ws.tmpl: the same products, warp-specialized, partial sums added in f32
	GEMMTileMMA     GEMMTile = "mma"      // gemm_tile.tmpl's mma atoms: mma.sync on sm_90, WMMA on gfx1151
)

// gemmTileKind is the tile a plan's tiled GEMMs take, as their flags say it.
type gemmTileKind int

const (
	tileMMA     gemmTileKind = iota // gemm_tile.tmpl
	tileWGMMA                       // gemm_wgmma.tmpl: the wgmma flag
	tileWGMMAWS                     // gemm_wgmma_ws.tmpl: the wgmma_ws flag
)

// set writes the tile's flags into a tiled GEMM's parameters.
func (k gemmTileKind) set(p *ir.Params) {
	p.SetFlag("wgmma", k == tileWGMMA)
	if k == tileWGMMAWS { // an optional flag: the other tiles' kernels stay as they were
		p.SetFlag("wgmma_ws", true)
	}
}

// expertTile is how the grouped MoE GEMMs take the wgmma tile:
//
//   - wide (Options.WideExperts): its 256 columns (wide_tile; with flush_k
//     half of them at a time, as the dense gemm's): half the blocks, each
//     row tile's A staged once for twice the weight rows. With flush_k the
//     wide grouped kernels spill 4 bytes on sm_90 (so the bundler refuses
//     them) and the plans keep 128.
//
//   - persistent (Options.PersistentExperts): a block per multiprocessor
//     walking the tiles, each copying its next tile's first k-tiles in under
//     the last one's stores; correct, and slower on the H200 at the real
//     model's tile fill, where the static walk balances worse than the
//     dispatch of one-tile blocks.
//
//   - cluster (Options.ClusterA): clusters of two column tiles sharing
//     their A rows (cluster_a), on the wgmma tile, where K allows; the
//     dense GEMMs take it too (tileMany).
//
// docs/prefill-gemm.md has the measurements.
//   - shared (Options.SharedATerms): the A terms rounded once a k-tile
//     into shared memory (ss_a), on the wgmma tile with flush_k's sums; the
//     dense GEMMs too.
type expertTile struct{ wide, persistent, cluster, shared bool }

// stageA sets the asked-for ways of staging A (cluster_a, then ss_a) on a
// tiled GEMM of family kind where the family accepts them: its rules (the
// wgmma tile, K whole 16-byte rows for clusters, flush_k's sums for ss_a,
// neither with the persistent walk or the other) are the planner's.
func (e expertTile) stageA(kind ir.Kind, p *ir.Params) {
	for _, f := range []struct {
		asked bool
		flag  string
	}{{e.cluster, "cluster_a"}, {e.shared, "ss_a"}} {
		if !f.asked {
			continue
		}
		q := p.Clone()
		q.SetFlag(f.flag, true)
		if kernels.Families[kind].CheckParams(q) == nil {
			*p = q
		}
	}
}

// grouped is the tile of the grouped MoE GEMMs: the wgmma tile where the
// dense ones take the warp-specialized one, which measured slower on them
// (H200, 65,536 pairs: gate_up 2308 µs against 2094, down 1539 against
// 1419; docs/prefill-gemm.md).
func (k gemmTileKind) grouped() gemmTileKind {
	if k == tileWGMMAWS {
		return tileWGMMA
	}
	return k
}

// warpgroup says whether the tile issues warpgroup products (whose narrow
// tile covers up to 256 columns better than one wide one: see tileMany).
func (k gemmTileKind) warpgroup() bool { return k != tileMMA }

// gemmTileKind is the tile the options ask for.
func (o *Options) gemmTileKind() gemmTileKind {
	switch {
	case o.GEMMTile == GEMMTileWGMMAWS:
		return tileWGMMAWS
	case o.wgmma():
		return tileWGMMA
	}
	return tileMMA
}

// wgmmaTargets are the targets that have the wgmma tile; wgmmaDefault those
// whose tiled GEMMs (gemm, gemm_add, the grouped MoE's) take it by default,
// at the same tile widths as the mma tile. On the H200 with three A terms
// it measured 0.69× the wide mma tile's time (8192 × 2048 → 8192: 1652 µs
// against 2388) and 0.58× the narrow one's for the grouped GEMMs
// (docs/prefill-gemm.md).
var (
	wgmmaTargets = map[plan.Target]bool{plan.SM90: true}
	wgmmaDefault = map[plan.Target]bool{plan.SM90: true}
)

// wgmma says whether the plan's tiled GEMMs take the wgmma tile.
func (o *Options) wgmma() bool {
	if o.GEMMTile == GEMMTileDefault {
		return wgmmaDefault[o.Target]
	}
	return o.GEMMTile == GEMMTileWGMMA
}

// gemmTileCols is the target's tile, or the narrow one where the wide tile's
// shared memory does not fit the target (the cpu plan's references do not
// depend on it).
func gemmTileCols(t plan.Target, terms int) int {
	n, ok := tileCols[t]
	if !ok {
		return kernels.GEMMTileCols
	}
	if !tileFits(t, n, terms) {
		return kernels.GEMMTileCols
	}
	return n
}

// tileFits says whether a tile of cols weight rows with terms A terms fits
// the target's shared memory (the cpu's references have no such limit).
func tileFits(t plan.Target, cols, terms int) bool {
	if !t.GPU() {
		return true
	}
	var p ir.Params
	p.SetInt("tile_n", int64(cols))
	setATerms(&p, terms)
	return kernels.GEMMSharedBytes(p, t.Launch()) <= t.Launch().MaxSharedBytes
}

// activationTerms is the bf16 terms every tiled projection stages its
// activations as (kernels.ATerms): three where the narrow tile holds them
// (sm_90, the cpu's references), else two (gfx1151's 64 KiB: two stages
// and one A buffer of two terms). One term moves the HF fixture past the
// CPU gate with any one family left so (docs/prefill-gemm.md: the LM head
// alone 4e-4, q/k/v 0.025, the experts, the router and the GDN projections
// 0.1 to 12); two (≈ 2⁻¹⁷) hold it (3.3e-5) but leave the GPU up to 0.026
// from the CPU engine with a bf16 KV cache; three (≈ 2⁻²⁶, below the f32
// sums' own rounding) bring the GPU within 1.5e-6 of it.
func activationTerms(t plan.Target) int {
	if tileFits(t, kernels.GEMMTileCols, 3) {
		return 3
	}
	return 2
}

// aTerms is the plan's activation terms: Options.ATerms, or the target's.
func (o *Options) aTerms() int {
	if o.ATerms == 0 {
		return activationTerms(o.Target)
	}
	return o.ATerms
}

// setATerms sets the flags that stage A in terms bf16 terms.
func setATerms(p *ir.Params, terms int) {
	p.SetFlag("split_a", terms >= 2)
	p.SetFlag("split_a3", terms >= 3)
}

// flushTileCols is the wgmma tile's width with flush_k: 256 columns, each
// warpgroup's 64 × 256 flushed half its columns at a time through one
// 64 × 128 partial set (the 128-column tile's products, in the same order:
// the same sums bit for bit). On the H200: 255 registers, no spill,
// 8192 × 2048 → 8192 in 1,779 µs against the 128-column tile's 2,007, the
// add 4096 → 2048 in 911 against 1,035 (results/h200/variants/).
var flushTileCols = 2 * kernels.GEMMTileCols

// TCSums chooses how the tensor-core kernels keep their sums over a long
// axis (docs/prefill-gemm.md, "Sums over K"): the tiled GEMMs' K (flush_k,
// flush_k16) and, with TCSumsFlushAll, the chunked GDN's state across
// chunks and the flash prefill attention's P·V across KV tiles too.
type TCSums string

const (
	TCSumsDefault    TCSums = ""            // the target's: tcSumsDefault
	TCSumsMMA        TCSums = "mma"         // the whole sum in the MMA accumulators (their truncating alignment)
	TCSumsFlush      TCSums = "flush"       // the tiled GEMMs' k-tiles summed apart, added in with round-to-nearest FADDs
	TCSumsFlushSlice TCSums = "flush-slice" // the same for every 16-deep slice (the wgmma tile's finer grain)
	TCSumsFlushAll   TCSums = "flush-all"   // flush, and the GDN state pass and attention_prefill
)

// TCSumsModes are the modes the option takes.
var TCSumsModes = []TCSums{TCSumsMMA, TCSumsFlush, TCSumsFlushSlice, TCSumsFlushAll}

// tcSumsDefault is each target's mode. sm_90 flushes: on the H200 the
// full-width 4-layer gate at 8192 tokens went from 0.0259 max KLD against
// HF fp32 (a flipped router near-tie) to 0.00273 with flush (the untiled
// plan's figure), at 18,901 → 17,300 tok/s of 8K prefill; flush-slice gave
// the same KLD at 16,015. gfx1151's WMMA is not known to truncate, and the
// cpu runs the references: both keep mma.
var tcSumsDefault = map[plan.Target]TCSums{plan.SM90: TCSumsFlush, plan.GFX1151: TCSumsMMA, plan.CPU: TCSumsMMA}

// tcSums is the plan's mode.
func (o *Options) tcSums() TCSums {
	if o.TCSums == TCSumsDefault {
		return tcSumsDefault[o.Target]
	}
	return o.TCSums
}

// flushSums says whether the plan's tiled GEMMs take flush_k; flushSlices
// whether flush_k16 too; flushAll whether the GDN state pass and flash
// attention take theirs.
func (o *Options) flushSums() bool   { return o.tcSums() != TCSumsMMA && o.tcSums() != TCSumsDefault }
func (o *Options) flushSlices() bool { return o.tcSums() == TCSumsFlushSlice }
func (o *Options) flushAll() bool    { return o.tcSums() == TCSumsFlushAll }

// setFlush sets flush_k where flush is on (and flush_k16 with slices); a
// plan without them leaves the optional flags out, so its kernels keep
// their names.
func setFlush(p *ir.Params, flush, slices bool) {
	if flush {
		p.SetFlag("flush_k", true)
	}
	if flush && slices {
		p.SetFlag("flush_k16", true)
	}
}
