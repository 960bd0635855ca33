package kernels

import (
	"fmt"

	"github.com/aimaproject/aimac/ir"
)

// gdnDecodeSplit declares gdn_decode_split: gdn_decode_step's arithmetic
// with every value head's state split into column tiles of col_tile
// columns, one block each, so that a decode step streams its state through
// every multiprocessor instead of one per key head. The delta rule is
// independent per state column given the head's q and k, its v entry and
// the gates, so each block recomputes the conv + SiLU and l2 norms of its
// key head's q and k (2·k_dim channels) and owns the conv state of its own
// v channels. The gated RMSNorm needs Σo² over the head's columns: each
// block writes its raw outputs into y and its tile's Σo² into partial, and
// the last block of a key head to arrive (arrivals, a counter per key head
// that it resets to zero) normalizes the key head's rows, summing the
// partials in tile order, and writes the q and k channels' conv state back,
// after every block of the key head has read it. Its reference is
// gdn_decode_step's (the chain's references), plus the partial sums.
func gdnDecodeSplit() *ir.Family {
	channels := func(p ir.Params) int64 { return int64(GDNChannels(p)) }
	return &ir.Family{
		Kind: ir.GDNDecodeSplit,
		Operands: []ir.OperandSpec{
			{Name: "y", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("v_heads", "v_dim")},
			{Name: "partial", DType: ir.F32, Access: ir.Write, Extent: func(p ir.Params, rows int64) int64 {
				return rows * int64(p.Int("v_heads")*GDNSplitTiles(p))
			}},
			{Name: "mixed", DType: ir.F32, Access: ir.Read, Extent: func(p ir.Params, rows int64) int64 { return rows * channels(p) }},
			{Name: "conv_w", DType: ir.F32, Access: ir.Read, Extent: func(p ir.Params, _ int64) int64 { return channels(p) * int64(p.Int("kernel")) }},
			{Name: "conv_state", DType: ir.F32, Access: ir.ReadWrite, Extent: func(p ir.Params, _ int64) int64 {
				return channels(p) * int64(p.Int("kernel")-1)
			}},
			{Name: "b", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("v_heads")},
			{Name: "a", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("v_heads")},
			{Name: "a_log", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("v_heads")},
			{Name: "dt_bias", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("v_heads")},
			{Name: "z", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("v_heads", "v_dim")},
			{Name: "norm_w", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("v_dim")},
			{Name: "state", DType: ir.F32, Access: ir.ReadWrite, Extent: ir.Fixed("v_heads", "k_dim", "v_dim")},
			{Name: "arrivals", DType: ir.I32, Access: ir.ReadWrite, Extent: ir.Fixed("k_heads")},
		},
		// early_state (optional): the state slice loaded before the
		// programmatic wait; late_trigger (optional): the trigger after the
		// block's rows are done, before its arrival (docs/pdl.md).
		Params: cat(ir.Ints("k_heads", "v_heads", "k_dim", "v_dim", "kernel", "col_tile"), ir.Reals("l2_eps", "q_scale", "k_scale", "eps"), ir.OptionalFlags("early_state", "late_trigger")),
		Check: func(p ir.Params) error {
			if err := gdnDecodeStep().Check(p); err != nil {
				return err
			}
			if t := p.Int("col_tile"); t < 1 || p.Int("v_dim")%t != 0 {
				return fmt.Errorf("col_tile %d does not divide v_dim %d", t, p.Int("v_dim"))
			}
			return nil
		},
		// A block per column tile (x) of each value head (y).
		Launch: func(p ir.Params, _ int, c ir.LaunchConfig) ir.LaunchShape {
			return c.Blocks(GDNSplitTiles(p), p.Int("v_heads"), 1)
		},
		Reference: func(a *ir.Args) error {
			return GDNDecodeSplit(a.F32("y"), a.F32("partial"), a.F32("mixed"), a.F32("conv_w"), a.F32("conv_state"), a.F32("b"), a.F32("a"),
				a.F32("a_log"), a.F32("dt_bias"), a.F32("z"), a.F32("norm_w"), a.F32("state"), a.I32("arrivals"), a.N,
				a.Int("k_heads"), a.Int("v_heads"), a.Int("k_dim"), a.Int("v_dim"), a.Int("kernel"), a.Int("col_tile"),
				a.Real32("l2_eps"), a.Real32("q_scale"), a.Real32("k_scale"), a.Real32("eps"))
		},
	}
}

// GDNSplitTiles is the number of column tiles of a value head.
func GDNSplitTiles(p ir.Params) int {
	if t := p.Int("col_tile"); t > 0 {
		return p.Int("v_dim") / t
	}
	return 0
}

// GDNDecodeSplit is gdn_decode_step's reference (GDNDecodeStep: the chain's
// references in order, y bit for bit theirs) and the partial sums the
// kernel leaves: partial[t][j][tile] = Σ o² over the tile's columns of the
// recurrence's output row (t, j), in column order. arrivals must be zero
// (every launch leaves them so) and stays zero.
func GDNDecodeSplit(y, partial, mixed, convW, convState, b, a, aLog, dtBias, z, normW, state []float32, arrivals []int32,
	n, hk, hv, dk, dv, kernel, tile int, l2Eps, qScale, kScale, eps float32) error {
	for kh, c := range arrivals[:hk] {
		if c != 0 {
			return fmt.Errorf("gdn_decode_split: the arrival counter of key head %d is %d, want 0 (a launch did not finish)", kh, c)
		}
	}
	if n <= 0 {
		return nil
	}
	gdnSplitRows(y, partial, mixed, convW, convState, b, a, aLog, dtBias, z, normW, state, n, hk, hv, dk, dv, kernel, tile, l2Eps, qScale, kScale, eps)
	return nil
}

// gdnSplitRows is gdn_decode_step's reference for n > 0 rows (y and both
// states) and the partial sums of the column tiles: partial[t][j][tile] =
// Σ o² over the tile's columns of the recurrence's output row (t, j).
func gdnSplitRows(y, partial, mixed, convW, convState, b, a, aLog, dtBias, z, normW, state []float32,
	n, hk, hv, dk, dv, kernel, tile int, l2Eps, qScale, kScale, eps float32) {
	o := gdnRecurrentRows(mixed, convW, convState, b, a, aLog, dtBias, state, n, hk, hv, dk, dv, kernel, l2Eps, qScale, kScale)
	GatedRMSNorm(y, o, z, normW, n*hv, dv, eps)
	tiles := dv / tile
	for r := range n * hv {
		for tl := range tiles {
			partial[r*tiles+tl] = sumSquares(o[r*dv+tl*tile:][:tile])
		}
	}
}

// gdnSplitShape is how a gdn_decode_split block of c's threads holds a
// k_dim × tile state slice: vec columns a load (16 bytes where the tile
// allows), groups column groups across a row, parts row parts of rows
// rows each (threads past groups·parts idle).
type gdnSplitShape struct{ vec, groups, parts, rows int }

func splitShape(dk, tile int, c ir.LaunchConfig) gdnSplitShape {
	s := gdnSplitShape{vec: 1}
	if tile%4 == 0 {
		s.vec = 4
	}
	s.groups = tile / s.vec
	if s.groups > 0 {
		s.parts = min(c.Threads/s.groups, dk)
	}
	if s.parts > 0 {
		s.rows = dk / s.parts
	}
	return s
}

// GDNDecodeSplitFits reports why the gdn_decode_split template cannot run
// these parameters (col_tile included) with launch configuration c, or nil
// when it can: the tile divides v_dim; its column groups are a power of two
// no wider than a warp (the row parts' sums meet by lane shuffles); k_dim
// splits evenly over the row parts; at most GDNDecodeStepMaxState state
// elements a thread; and shared memory.
func GDNDecodeSplitFits(p ir.Params, c ir.LaunchConfig) error {
	dk, dv, kw, tile := p.Int("k_dim"), p.Int("v_dim"), p.Int("kernel"), p.Int("col_tile")
	if c.Threads <= 0 || c.Warp <= 0 {
		return fmt.Errorf("no GPU launch configuration")
	}
	if tile < 1 || dv%tile != 0 {
		return fmt.Errorf("col_tile %d does not divide v_dim %d", tile, dv)
	}
	s := splitShape(dk, tile, c)
	switch {
	case s.groups&(s.groups-1) != 0 || s.groups > c.Warp:
		return fmt.Errorf("a %d-column tile is %d column groups, not a power of two up to the %d lanes of a warp", tile, s.groups, c.Warp)
	case dk <= 0 || dk%s.parts != 0:
		return fmt.Errorf("k_dim %d does not split over %d row parts", dk, s.parts)
	case s.rows*s.vec > GDNDecodeStepMaxState:
		return fmt.Errorf("a %d×%d state tile needs %d registers a thread, more than %d", dk, tile, s.rows*s.vec, GDNDecodeStepMaxState)
	case kw < 1 || kw > 8:
		return fmt.Errorf("conv kernel %d outside 1..8", kw)
	}
	// q, k, v rows; the column sums; a block sum; the q, k and v channels' new conv state.
	shared := 4 * (2*dk + tile + 2*c.Warps()*tile + c.Warps() + 1 + (2*dk+tile)*max(kw-1, 1))
	if c.MaxSharedBytes > 0 && shared > c.MaxSharedBytes {
		return fmt.Errorf("%d bytes of shared memory, more than %d", shared, c.MaxSharedBytes)
	}
	return nil
}
