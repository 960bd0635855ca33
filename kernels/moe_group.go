package kernels

import (
	"fmt"
	"maps"

	"github.com/aimaproject/aimac/ir"
)

// MoESortMaxExperts bounds the experts of a moe_sort: its block keeps a
// tile base, an offset, a running rank and a bit word per warp for each in
// static shared memory (36 KiB at 512).
const MoESortMaxExperts = 512

// MoESortChunk is the (token, slot) pairs of one block of moe_count and
// moe_sort: 8 warps of 256 (8 rounds of 32 lanes each).
const MoESortChunk = 2048

// MoESortBlocks is the blocks of moe_count and moe_sort for rows tokens of
// k slots: one per chunk of pairs, at least one.
func MoESortBlocks(rows, k int) int { return max(1, ir.Ceil(rows*k, MoESortChunk)) }

// MoETiles is the most row tiles the (token, slot) pairs of rows tokens
// routed to k of experts experts fill when each expert's pairs are padded
// to whole tiles of GEMMTileRows: every tile but one per used expert is
// full.
func MoETiles(rows, k, experts int) int {
	pairs := rows * k
	return ir.Ceil(pairs, GEMMTileRows) + min(experts, pairs)
}

func moeTiles(p ir.Params, rows int64) int64 {
	return int64(MoETiles(int(rows), p.Int("k"), p.Int("experts")))
}

// The sorted pairs: order holds, tile after tile, the pair index t·k + s
// of each row (−1 past an expert's last pair); tiles[0] is the number of
// tiles in use and tiles[1 + i] the expert of tile i.
var (
	orderOperand = ir.OperandSpec{Name: "order", DType: ir.I32, Access: ir.Read, Extent: func(p ir.Params, rows int64) int64 {
		return moeTiles(p, rows) * GEMMTileRows
	}}
	tilesOperand = ir.OperandSpec{Name: "tiles", DType: ir.I32, Access: ir.Read, Extent: func(p ir.Params, rows int64) int64 {
		return 1 + moeTiles(p, rows)
	}}
	// counts[b][e]: the pairs of chunk b (MoESortChunk pairs) routed to e.
	countsOperand = ir.OperandSpec{Name: "counts", DType: ir.I32, Access: ir.Read, Extent: func(p ir.Params, rows int64) int64 {
		return int64(MoESortBlocks(int(rows), p.Int("k")) * p.Int("experts"))
	}}
	idsOperand = ir.OperandSpec{Name: "ids", DType: ir.I32, Access: ir.Read, Extent: ir.PerRow("k")}
)

func written(o ir.OperandSpec) ir.OperandSpec { o.Access = ir.Write; return o }

// moeGroupFamilies are the routed experts of a prefill on the tensor cores
// (docs/prefill-gemm.md): moe_sort groups the (token, slot) pairs by expert
// on the device, moe_gate_up_group and moe_down_group run the gemm tile
// over each expert's pairs (every expert's weights read once per tile of
// its pairs), moe_slot_sum adds each token's slots in order. Together they
// are moe_gate_up followed by moe_down on bf16 operands; no atomics touch
// the results, so every run gives the same bits.
// moeGroupCheck is topK, the tile's rule and the A terms' rule.
func moeGroupCheck(p ir.Params) error {
	if err := topK(p); err != nil {
		return err
	}
	if p.Flag("wide_tile") && (!p.Flag("wgmma") || p.Flag("flush_k16")) {
		return fmt.Errorf("wide_tile takes the wgmma tile without flush_k16 (wgmma %v, flush_k16 %v)", p.Flag("wgmma"), p.Flag("flush_k16"))
	}
	if p.Flag("persistent") && (!p.Flag("wgmma") || p.Flag("wgmma_ws")) {
		return fmt.Errorf("persistent takes the wgmma tile (wgmma %v, wgmma_ws %v)", p.Flag("wgmma"), p.Flag("wgmma_ws"))
	}
	if err := checkTile(p); err != nil {
		return err
	}
	// gate_up's A rows are hidden wide, down's inter.
	for _, k := range []string{"hidden", "inter"} {
		if err := checkClusterA(p, k); err != nil {
			return err
		}
	}
	if err := checkSSA(p); err != nil {
		return err
	}
	return checkATerms(p)
}

func moeGroupFamilies() []*ir.Family {
	moeParams := cat(ir.Ints("experts", "hidden", "inter", "k"), ir.Flags("split_a", "split_a3", "wgmma"), ir.OptionalFlags("flush_k", "flush_k16", "wgmma_ws", "wide_tile", "persistent", "cluster_a", "ss_a"))
	// Both grouped GEMMs take the 128-column tile, mma or wgmma, or with
	// wide_tile the wgmma tile's 256 (gemmTileCols; with flush_k its
	// products half the columns at a time, as the dense gemm's).
	tileData := func(p ir.Params) map[string]any {
		cols := gemmTileCols(p)
		d := map[string]any{"tile_cols": cols, "wgmma_half": false}
		if p.Flag("wgmma") {
			maps.Copy(d, wgmmaOperands(cols))
			if p.Flag("flush_k") && cols == GEMMTileColsWide {
				d["wgmma_half"] = wgmmaOperands(GEMMTileCols)
			}
		}
		if p.Flag("wgmma_ws") {
			maps.Copy(d, wgmmaWSOperands(cols))
		}
		return d
	}
	// A block's outputs are num/den of its weight rows (gate_up's interleave
	// gate and up rows). With persistent a block per multiprocessor (the
	// tile's shared memory holds one there) walks the (column, row) tiles:
	// no more blocks than tiles.
	tileGrid := func(cols string, num, den int) func(ir.Params, int, ir.LaunchConfig) ir.LaunchShape {
		return func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
			per := gemmTileCols(p) * num / den
			x, y := ir.Ceil(p.Int(cols), per), MoETiles(max(rows, 1), p.Int("k"), p.Int("experts"))
			if p.Flag("persistent") {
				return gemmShared(c.Blocks(min(x*y, max(c.Multiprocessors, 1)), 1, 1), p, c)
			}
			return gemmShared(c.Blocks(x, y, 1), p, c)
		}
	}
	return []*ir.Family{
		{
			Kind:     ir.MoECount,
			Operands: []ir.OperandSpec{written(countsOperand), idsOperand},
			Params:   ir.Ints("experts", "k"),
			Check:    moeSortCheck,
			// A block per chunk of pairs: their counts in shared memory.
			Launch: func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
				return c.Blocks(MoESortBlocks(rows, p.Int("k")), 1, 1)
			},
			Reference: func(a *ir.Args) error {
				MoECount(a.I32("counts"), a.I32("ids"), a.N, a.Int("k"), a.Int("experts"))
				return nil
			},
			TemplateData: func(ir.Params) map[string]any { return map[string]any{"chunk": MoESortChunk} },
		},
		{
			Kind:     ir.MoESort,
			Operands: []ir.OperandSpec{written(orderOperand), written(tilesOperand), idsOperand, countsOperand},
			Params:   ir.Ints("experts", "k"),
			Check:    moeSortCheck,
			// A block per chunk of pairs: each scans the chunks' counts for its
			// offsets and ranks its own chunk's pairs.
			Launch: func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
				return c.Blocks(MoESortBlocks(rows, p.Int("k")), 1, 1)
			},
			Reference: func(a *ir.Args) error {
				MoESort(a.I32("order"), a.I32("tiles"), a.I32("ids"), a.N, a.Int("k"), a.Int("experts"))
				return nil
			},
			TemplateData: func(ir.Params) map[string]any {
				return map[string]any{"tile_rows": GEMMTileRows, "chunk": MoESortChunk}
			},
		},
		{
			Kind: ir.MoEGateUpGroup,
			Operands: []ir.OperandSpec{
				{Name: "act", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("k", "inter")},
				{Name: "x", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("hidden")},
				orderOperand, tilesOperand,
				operandsOf(ir.MoEGateUp)[3],
			},
			Params: moeParams,
			Check:  moeGroupCheck,
			// (half tiles of gate and up rows, row tiles): a block's 128 (256)
			// weight rows are 64 (128) gate rows and the up rows of the same outputs.
			Launch:       tileGrid("inter", 1, 2),
			TemplateData: tileData,
			Reference: func(a *ir.Args) error {
				return MoEGateUpGroup(a.F32("act"), a.F32("x"), a.I32("order"), a.I32("tiles"), a.BF16("gate_up"),
					a.N, a.Int("hidden"), a.Int("inter"), a.Int("k"), a.Int("experts"), ATerms(a.Params))
			},
		},
		{
			Kind: ir.MoEDownGroup,
			Operands: []ir.OperandSpec{
				{Name: "ys", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("k", "hidden")},
				{Name: "act", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("k", "inter")},
				orderOperand, tilesOperand,
				{Name: "weights", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("k")},
				operandsOf(ir.MoEDown)[4],
			},
			Params:       moeParams,
			Check:        moeGroupCheck,
			Launch:       tileGrid("hidden", 1, 1),
			TemplateData: tileData,
			Reference: func(a *ir.Args) error {
				return MoEDownGroup(a.F32("ys"), a.F32("act"), a.I32("order"), a.I32("tiles"), a.F32("weights"), a.BF16("down"),
					a.N, a.Int("hidden"), a.Int("inter"), a.Int("k"), a.Int("experts"), ATerms(a.Params))
			},
		},
		{
			Kind: ir.MoESlotSum,
			Operands: []ir.OperandSpec{
				{Name: "y", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("hidden")},
				{Name: "ys", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("k", "hidden")},
				{Name: "ids", DType: ir.I32, Access: ir.Read, Extent: ir.PerRow("k")},
			},
			Params: ir.Ints("experts", "hidden", "k"),
			Check:  moeGroupCheck,
			Launch: perRowLaunch,
			Reference: func(a *ir.Args) error {
				MoESlotSum(a.F32("y"), a.F32("ys"), a.I32("ids"), a.N, a.Int("hidden"), a.Int("k"), a.Int("experts"))
				return nil
			},
		},
	}
}

// moeSortCheck holds moe_count and moe_sort to their shared memory.
func moeSortCheck(p ir.Params) error {
	if err := topK(p); err != nil {
		return err
	}
	if p.Int("experts") > MoESortMaxExperts {
		return fmt.Errorf("experts %d: moe_sort holds at most %d", p.Int("experts"), MoESortMaxExperts)
	}
	return nil
}

// MoECount is moe_sort's first pass: counts[b·experts + e] is the number of
// pairs among b·MoESortChunk .. (b+1)·MoESortChunk − 1 of the n·k routed to
// expert e (ids outside the experts left out), for the chunks that hold a
// pair.
func MoECount(counts, ids []int32, n, k, experts int) {
	pairs := n * k
	used := ir.Ceil(pairs, MoESortChunk)
	clear(counts[:used*experts])
	for i, e := range ids[:pairs] {
		if e >= 0 && int(e) < experts {
			counts[(i/MoESortChunk)*experts+int(e)]++
		}
	}
}

// MoESort groups the n·k (token, slot) pairs of ids by expert, in pair
// order within an expert, each expert's run padded with −1 to whole tiles
// of GEMMTileRows: order[i·GEMMTileRows + r] is row r of tile i, tiles[0]
// the tiles in use and tiles[1 + i] the expert of tile i. Ids outside
// [0, experts) are left out.
func MoESort(order, tiles, ids []int32, n, k, experts int) {
	counts := make([]int, experts)
	for _, e := range ids[:n*k] {
		if e >= 0 && int(e) < experts {
			counts[e]++
		}
	}
	base := make([]int, experts)
	used := 0
	for e, c := range counts {
		base[e] = used
		for j := range ir.Ceil(c, GEMMTileRows) {
			tiles[1+used+j] = int32(e)
		}
		used += ir.Ceil(c, GEMMTileRows)
	}
	tiles[0] = int32(used)
	for i := range order[:used*GEMMTileRows] {
		order[i] = -1
	}
	next := make([]int, experts)
	for i, e := range ids[:n*k] {
		if e >= 0 && int(e) < experts {
			order[base[e]*GEMMTileRows+next[e]] = int32(i)
			next[e]++
		}
	}
}

// sortedGroups walks the tiles of a moe_sort result: for each tile its
// expert and the pair indices of its rows (−1 rows dropped), after checking
// that they address the n·k pairs and the experts.
func sortedGroups(order, tiles []int32, n, k, experts int, each func(e int, pairs []int)) error {
	used := int(tiles[0])
	if used < 0 || used > MoETiles(n, k, experts) {
		return fmt.Errorf("%d tiles in use, at most %d for %d tokens", used, MoETiles(n, k, experts), n)
	}
	for i := range used {
		e := int(tiles[1+i])
		if e < 0 || e >= experts {
			return fmt.Errorf("tile %d: expert %d outside [0, %d)", i, e, experts)
		}
		var pairs []int
		for _, p := range order[i*GEMMTileRows:][:GEMMTileRows] {
			if p < 0 {
				continue
			}
			if int(p) >= n*k {
				return fmt.Errorf("tile %d: pair %d outside the %d pairs", i, p, n*k)
			}
			pairs = append(pairs, int(p))
		}
		each(e, pairs)
	}
	return nil
}

// MoEGateUpGroup is MoEGateUp over sorted pairs on x as the tensor cores
// take it (StageA in terms bf16 terms): act[p] =
// silu(gate_e·x[t]) ⊙ up_e·x[t] for every pair p = t·k + s of a tile of
// expert e. Rows of pairs left out (ids outside the experts) are not
// written.
func MoEGateUpGroup(act, x []float32, order, tiles []int32, gateUp []uint16, n, hidden, inter, k, experts, terms int) error {
	return sortedGroups(order, tiles, n, k, experts, func(e int, pairs []int) {
		xs := make([]float32, len(pairs)*hidden)
		for i, p := range pairs {
			copy(xs[i*hidden:][:hidden], x[(p/k)*hidden:][:hidden])
		}
		xs = StageA(xs, terms)
		h := make([]float32, len(pairs)*2*inter)
		matmulTile(h, xs, gateUp[e*2*inter*hidden:][:2*inter*hidden], 0, len(pairs), 0, 2*inter, hidden, 2*inter)
		for i, p := range pairs {
			row := h[i*2*inter:][:2*inter]
			SiLUMul(act[p*inter:], row[:inter], row[inter:], inter)
		}
	})
}

// MoEDownGroup is MoEDown's products over sorted pairs on act as the
// tensor cores take it (StageA), each scaled by its routing weight: ys[p] =
// weights[p] · down_e · act[p]. Rows of pairs left out are not written.
func MoEDownGroup(ys, act []float32, order, tiles []int32, weights []float32, down []uint16, n, hidden, inter, k, experts, terms int) error {
	return sortedGroups(order, tiles, n, k, experts, func(e int, pairs []int) {
		as := make([]float32, len(pairs)*inter)
		for i, p := range pairs {
			copy(as[i*inter:][:inter], act[p*inter:][:inter])
		}
		as = StageA(as, terms)
		out := make([]float32, len(pairs)*hidden)
		matmulTile(out, as, down[e*hidden*inter:][:hidden*inter], 0, len(pairs), 0, hidden, inter, hidden)
		for i, p := range pairs {
			dst := ys[p*hidden:][:hidden]
			for j, v := range out[i*hidden:][:hidden] {
				dst[j] = weights[p] * v
			}
		}
	})
}

// MoESlotSum is MoEDown's sum: y[t] = Σ_s ys[t·k + s] over the slots in
// order from zero, slots with ids outside [0, experts) left out.
func MoESlotSum(y, ys []float32, ids []int32, n, hidden, k, experts int) {
	for t := range n {
		yt := y[t*hidden:][:hidden]
		clear(yt)
		for s := range k {
			if e := ids[t*k+s]; e < 0 || int(e) >= experts {
				continue
			}
			for j, v := range ys[(t*k+s)*hidden:][:hidden] {
				yt[j] += v
			}
		}
	}
}
