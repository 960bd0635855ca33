package kernels

import (
	"fmt"

	"github.com/aimaproject/aimac/ir"
)

// gdnDecodePeer declares gdn_decode_peer: gdn_decode_split's grid (a block
// per column tile of every value head) without its last-block epilogue.
// Each block computes its key head's q and k (conv + SiLU, l2 norms), runs
// the delta rule on its state slice, writes its tile's Σo² into partial
// and publishes it by raising its tag (tags: a counter per block, the
// key head's blocks side by side, all equal between launches) to its value
// at the start plus the row's number; it then waits until the tags of its
// value head's blocks have reached that value, sums their partials and
// normalizes its own columns. The blocks of a key head (its peers) are
// consecutive in launch order and the grid fits one wave, so every peer
// waited for is resident or about to be. The q and k channels' conv state,
// which every peer reads, is written back by the key head's first block
// once every peer's tag has reached the last row. Its reference is
// gdn_decode_split's arithmetic (the chain's references) plus the tags.
func gdnDecodePeer() *ir.Family {
	f := gdnDecodeSplit()
	f.Kind = ir.GDNDecodePeer
	f.Operands[len(f.Operands)-1] = ir.OperandSpec{Name: "tags", DType: ir.I32, Access: ir.ReadWrite, Extent: func(p ir.Params, _ int64) int64 {
		return int64(p.Int("v_heads") * GDNSplitTiles(p))
	}}
	f.Reference = func(a *ir.Args) error {
		return GDNDecodePeer(a.F32("y"), a.F32("partial"), a.F32("mixed"), a.F32("conv_w"), a.F32("conv_state"), a.F32("b"), a.F32("a"),
			a.F32("a_log"), a.F32("dt_bias"), a.F32("z"), a.F32("norm_w"), a.F32("state"), a.I32("tags"), a.N,
			a.Int("k_heads"), a.Int("v_heads"), a.Int("k_dim"), a.Int("v_dim"), a.Int("kernel"), a.Int("col_tile"),
			a.Real32("l2_eps"), a.Real32("q_scale"), a.Real32("k_scale"), a.Real32("eps"))
	}
	return f
}

// GDNDecodePeer is gdn_decode_split's reference (y and both states bit for
// bit the chain's, every row's partial sums) with the tags, which each
// launch raises by its rows: every block's tag by n (int32, wrapping). The tags of a key head must be equal (every launch leaves
// them so; Reset leaves zeros).
func GDNDecodePeer(y, partial, mixed, convW, convState, b, a, aLog, dtBias, z, normW, state []float32, tags []int32,
	n, hk, hv, dk, dv, kernel, tile int, l2Eps, qScale, kScale, eps float32) error {
	peers := hv / hk * (dv / tile)
	for kh := range hk {
		for i, c := range tags[kh*peers : (kh+1)*peers] {
			if first := tags[kh*peers]; c != first {
				return fmt.Errorf("gdn_decode_peer: the tags of key head %d differ (block %d: %d, block 0: %d): a launch did not finish", kh, i, c, first)
			}
		}
	}
	if n <= 0 {
		return nil
	}
	gdnSplitRows(y, partial, mixed, convW, convState, b, a, aLog, dtBias, z, normW, state, n, hk, hv, dk, dv, kernel, tile, l2Eps, qScale, kScale, eps)
	for i := range tags[:hk*peers] {
		tags[i] += int32(n)
	}
	return nil
}

// GDNDecodePeerFits reports why the gdn_decode_peer template cannot run
// these parameters with launch configuration c, or nil when it can:
// gdn_decode_split's tile shape (GDNDecodeSplitFits); a thread per q and k
// channel of the key head and per v channel of the tile; the key head's
// blocks no more than the lanes of a warp (one lane waits for each); and,
// where c names its multiprocessors, no more blocks than multiprocessors,
// so that they are all resident at once.
func GDNDecodePeerFits(p ir.Params, c ir.LaunchConfig) error {
	if err := GDNDecodeSplitFits(p, c); err != nil {
		return err
	}
	hk, hv, dk, tile := p.Int("k_heads"), p.Int("v_heads"), p.Int("k_dim"), p.Int("col_tile")
	tiles := GDNSplitTiles(p)
	switch peers := hv / hk * tiles; {
	case 2*dk > c.Threads:
		return fmt.Errorf("k_dim %d: %d q and k channels, more than the %d threads of a block", dk, 2*dk, c.Threads)
	case tile > c.Threads:
		return fmt.Errorf("a %d-column tile has more v channels than the %d threads of a block", tile, c.Threads)
	case peers > c.Warp:
		return fmt.Errorf("%d blocks a key head (%d value heads × %d tiles), more than the %d lanes of a warp", peers, hv/hk, tiles, c.Warp)
	case c.Multiprocessors > 0 && hv*tiles > c.Multiprocessors:
		return fmt.Errorf("%d blocks, more than the %d multiprocessors: the blocks of a key head wait for one another in one wave", hv*tiles, c.Multiprocessors)
	}
	// q, k, v rows; the l2 sums; three column sums; the q and k channels' new conv state.
	kw := p.Int("kernel")
	shared := 4 * (2*dk + tile + 2*c.Warps() + 2*c.Warps()*tile + c.Warps() + 2*dk*max(kw-1, 1))
	if limit := min(c.MaxSharedBytes, StaticSharedBytes); c.MaxSharedBytes > 0 && shared > limit {
		return fmt.Errorf("%d bytes of shared memory, more than %d", shared, limit)
	}
	return nil
}
