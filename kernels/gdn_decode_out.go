package kernels

import (
	"fmt"

	"github.com/aimaproject/aimac/ir"
)

// gdnDecodeOut declares gdn_decode_out: gdn_decode_split and the layer's
// output projection with its residual add (matmul_add, h += W·y) in one
// launch (docs/gdn-decode.md). The gated RMSNorm of a value head is one
// scale per head and row, inv = rsqrt(mean(o²) + eps), so the projection
// of the normed output is Σ_heads inv_head · W[:, head]·(w ⊙ o ⊙ silu(z)):
// every block projects its tile's gated columns through its slice of W's
// columns (hidden × col_tile weights, which it may stage in shared memory
// before the programmatic wait: they depend on no launch) into a partial
// row of part, and writes its tile's Σo² into partial as gdn_decode_split
// does. After one grid barrier, block b sums the partial rows of its share
// of the hidden width in block order, each scaled by its head's inv, and
// adds the sum into h. The q and k channels' conv state, which every block
// of a key head reads before the barrier, is written after it by the key
// head's first block. One launch and one barrier replace gdn_decode_split's
// last-block norm and the whole gemv_add launch. Its reference is the
// pair's (gdn_decode_split, then matmul_add), plus the partial rows. y
// (the normed output, which nothing after the projection reads) and the
// split's arrival counters (zero, as every launch leaves them) are the
// pair's operands too, so the launch's fallback finds them as it left
// them.
func gdnDecodeOut() *ir.Family {
	split := gdnDecodeSplit()
	op := func(name string) ir.OperandSpec { return split.Operands[split.Operand(name)] }
	return &ir.Family{
		Kind: ir.GDNDecodeOut,
		Operands: []ir.OperandSpec{
			{Name: "h", DType: ir.F32, Access: ir.ReadWrite, Extent: ir.PerRow("hidden")},
			op("y"),
			{Name: "part", DType: ir.F32, Access: ir.Write, Extent: func(p ir.Params, rows int64) int64 {
				return rows * int64(GDNOutBlocks(p)) * int64(p.Int("hidden"))
			}},
			op("partial"), op("mixed"), op("conv_w"), op("conv_state"), op("b"), op("a"), op("a_log"), op("dt_bias"),
			op("z"), op("norm_w"), op("state"), op("arrivals"),
			{Name: "out_w", DType: ir.BF16, Access: ir.Read, Extent: ir.Fixed("hidden", "v_heads", "v_dim")},
			{Name: "barrier", DType: ir.I32, Access: ir.ReadWrite, Extent: ir.Const(1)},
		},
		// stage: the block's hidden × col_tile slice of out_w is copied to
		// shared memory (GDNOutStageBytes) before the programmatic wait, or,
		// with stage_late (optional), after the state's loads; with
		// stage_mid (optional), after the first row's inputs are loaded; with
		// stage_bulk (optional, sm_90) as bulk copies on an mbarrier.
		Params: cat(ir.Ints("k_heads", "v_heads", "k_dim", "v_dim", "kernel", "col_tile", "hidden"), ir.Reals("l2_eps", "q_scale", "k_scale", "eps"), ir.Flags("stage"), ir.OptionalFlags("stage_late", "stage_bulk", "stage_mid")),
		Check: func(p ir.Params) error {
			if err := split.Check(p); err != nil {
				return err
			}
			if h := p.Int("hidden"); h < 1 {
				return fmt.Errorf("hidden %d: want at least 1", h)
			}
			modes := 0
			for _, f := range []string{"stage_late", "stage_bulk", "stage_mid"} {
				if p.Flag(f) {
					modes++
				}
			}
			if modes > 0 && !p.Flag("stage") {
				return fmt.Errorf("stage_late, stage_bulk or stage_mid without stage: they say when and how the staged slice is copied")
			}
			if modes > 1 {
				return fmt.Errorf("at most one of stage_late, stage_bulk and stage_mid: each says when the slice is copied")
			}
			if p.Flag("stage") && !GDNOutVectorized(p) {
				return fmt.Errorf("stage: col_tile %d, v_dim %d: the staged slice is copied 16 bytes at a time (both multiples of 8, col_tile/8 dividing a warp)",
					p.Int("col_tile"), p.Int("v_dim"))
			}
			return nil
		},
		// A block per column tile (x) of each value head (y), as
		// gdn_decode_split; every block waits at the barrier, so the
		// runtime checks that the whole grid is resident at once.
		Launch: func(p ir.Params, _ int, c ir.LaunchConfig) ir.LaunchShape {
			s := c.Blocks(GDNSplitTiles(p), p.Int("v_heads"), 1)
			if p.Flag("stage") {
				s.SharedBytes = GDNOutStageBytes(p)
			}
			return s
		},
		GridBarrier: true,
		Reference:   GDNDecodeOut,
	}
}

// GDNOutBarrierFlip is what a gdn_decode_out launch adds to its barrier
// count in all (the grid barrier's arithmetic: 0 and 2³¹ alternate).
const GDNOutBarrierFlip = 1 << 31

// GDNOutBlocks is the blocks of a gdn_decode_out launch: the value heads'
// column tiles.
func GDNOutBlocks(p ir.Params) int { return p.Int("v_heads") * GDNSplitTiles(p) }

// GDNOutStageBytes is the dynamic shared memory of a staged gdn_decode_out
// block: its hidden × col_tile BF16 slice of out_w.
func GDNOutStageBytes(p ir.Params) int { return p.Int("hidden") * p.Int("col_tile") * 2 }

// GDNOutVectorized reports whether a block's slice of out_w goes 16 bytes
// at a time: its rows start 16-byte aligned (v_dim and col_tile multiples
// of 8) and a row's chunks divide a warp's lanes.
func GDNOutVectorized(p ir.Params) bool {
	tile, dv := p.Int("col_tile"), p.Int("v_dim")
	return tile%8 == 0 && dv%8 == 0 && 32%(tile/8) == 0
}

// GDNDecodeOutFits reports why the gdn_decode_out template cannot run p
// with launch configuration c, or nil: gdn_decode_split's limits, and the
// staged slice within the block's shared memory beside the split's own.
func GDNDecodeOutFits(p ir.Params, c ir.LaunchConfig) error {
	if err := GDNDecodeSplitFits(p, c); err != nil {
		return err
	}
	if p.Flag("stage") && c.MaxSharedBytes > 0 && GDNOutStageBytes(p)+(16<<10) > c.MaxSharedBytes {
		return fmt.Errorf("a staged %d-byte slice of out_w leaves too little of the %d bytes of shared memory", GDNOutStageBytes(p), c.MaxSharedBytes)
	}
	return nil
}

// GDNDecodeOut is gdn_decode_out's reference: gdn_decode_split's (y and
// partial as it leaves them), matmul_add's h += y·out_wᵀ, and
// the partial rows the kernel leaves in part: part[t][b][r] = Σ_i
// out_w[r][c_i] · norm_w[c_i mod v_dim] · o[t][c_i] · silu(z[t][c_i]) over
// block b's columns c_i (head b / tiles, tile b mod tiles), o the
// recurrence's raw output. The barrier count must be 0 or 2³¹ and is
// flipped.
func GDNDecodeOut(a *ir.Args) error {
	bar := a.I32("barrier")
	if c := uint32(bar[0]); c&^GDNOutBarrierFlip != 0 {
		return fmt.Errorf("gdn_decode_out: the barrier count is %#x, want 0 or 2³¹ (a launch did not finish)", c)
	}
	for kh, c := range a.I32("arrivals")[:a.Int("k_heads")] {
		if c != 0 {
			return fmt.Errorf("gdn_decode_out: the arrival counter of key head %d is %d, want 0", kh, c)
		}
	}
	if a.N <= 0 {
		return nil
	}
	hk, hv, dk, dv := a.Int("k_heads"), a.Int("v_heads"), a.Int("k_dim"), a.Int("v_dim")
	kernel, tile, hidden := a.Int("kernel"), a.Int("col_tile"), a.Int("hidden")
	mixed, convW, convState, z, normW := a.F32("mixed"), a.F32("conv_w"), a.F32("conv_state"), a.F32("z"), a.F32("norm_w")
	o := gdnRecurrentRows(mixed, convW, convState, a.F32("b"), a.F32("a"), a.F32("a_log"), a.F32("dt_bias"), a.F32("state"),
		a.N, hk, hv, dk, dv, kernel, a.Real32("l2_eps"), a.Real32("q_scale"), a.Real32("k_scale"))
	y := a.F32("y")
	GatedRMSNorm(y, o, z, normW, a.N*hv, dv, a.Real32("eps"))
	tiles := dv / tile
	partial, part, w := a.F32("partial"), a.F32("part"), a.BF16("out_w")
	width := hv * dv
	g := make([]float32, tile)
	for r := range a.N * hv {
		t, j := r/hv, r%hv
		for tl := range tiles {
			cols := o[r*dv+tl*tile:][:tile]
			partial[r*tiles+tl] = sumSquares(cols)
			for i := range tile {
				c := tl*tile + i
				g[i] = normW[c] * cols[i] * silu(z[r*dv+c])
			}
			row := part[(t*hv*tiles+j*tiles+tl)*hidden:][:hidden]
			for q := range hidden {
				var s float32
				for i := range tile {
					s += widen(w[q*width+j*dv+tl*tile+i]) * g[i]
				}
				row[q] = s
			}
		}
	}
	sum := make([]float32, a.N*hidden)
	MatMul(sum, y, w, a.N, width, hidden)
	Add(a.F32("h"), sum, a.N*hidden)
	bar[0] = int32(uint32(bar[0]) ^ GDNOutBarrierFlip)
	return nil
}
