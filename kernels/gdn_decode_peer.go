package kernels

import (
	"fmt"
	"math"

	"github.com/aimaproject/aimac/ir"
)

// gdnDecodePeer declares gdn_decode_peer: gdn_decode_split's grid (a block
// per column tile of every value head) without its last-block epilogue.
// Each block computes its key head's q and k (conv + SiLU, l2 norms), runs
// the delta rule on its state slice and publishes its tile's Σo² in its
// slot: a (tag, sum) pair of 32-bit words written as one 64-bit store, the
// tag raised by one for each row written to that slot. Rows alternate
// between two slots a block (parity t mod 2), so a peer one row ahead never
// overwrites a sum not yet read. A block then polls the slots of its value
// head's blocks until their tags reach the row's, sums their Σo² and
// normalizes its own columns. The blocks of a key head (its peers) are
// consecutive in launch order and the grid fits one wave, so every peer
// waited for is resident or about to be. The q and k channels' conv state,
// which every peer reads, is written back by the key head's first block
// once every peer has published the last row. Its reference is
// gdn_decode_split's arithmetic (the chain's references) plus the slots.
func gdnDecodePeer() *ir.Family {
	f := gdnDecodeSplit()
	f.Kind = ir.GDNDecodePeer
	// gdn_decode_split's operands without partial, and the slots for its counters.
	var ops []ir.OperandSpec
	for _, o := range f.Operands {
		switch o.Name {
		case "partial":
		case "arrivals":
			ops = append(ops, ir.OperandSpec{Name: "slots", DType: ir.I32, Access: ir.ReadWrite, Extent: func(p ir.Params, _ int64) int64 {
				return int64(GDNPeerSlotWords * p.Int("v_heads") * GDNSplitTiles(p))
			}})
		default:
			ops = append(ops, o)
		}
	}
	f.Operands = ops
	f.Reference = func(a *ir.Args) error {
		return GDNDecodePeer(a.F32("y"), a.F32("mixed"), a.F32("conv_w"), a.F32("conv_state"), a.F32("b"), a.F32("a"),
			a.F32("a_log"), a.F32("dt_bias"), a.F32("z"), a.F32("norm_w"), a.F32("state"), a.I32("slots"), a.N,
			a.Int("k_heads"), a.Int("v_heads"), a.Int("k_dim"), a.Int("v_dim"), a.Int("kernel"), a.Int("col_tile"),
			a.Real32("l2_eps"), a.Real32("q_scale"), a.Real32("k_scale"), a.Real32("eps"))
	}
	return f
}

// GDNPeerSlotWords is the int32 words of gdn_decode_peer's slots per
// block: two parities of a (tag, Σo² bits) pair. The slots are laid out
// [parity][value head][tile][tag, sum], a key head's blocks side by side.
const GDNPeerSlotWords = 4

// GDNDecodePeer is gdn_decode_split's reference (y and both states bit for
// bit the chain's) with the slots each launch writes: for row t, block
// (value head j, tile) raises the tag of its slot of parity t mod 2 by one
// (int32, wrapping) and stores the float bits of its tile's Σo² beside it.
// The tags of a key head must be equal within each parity (every launch
// leaves them so; Reset leaves zeros).
func GDNDecodePeer(y, mixed, convW, convState, b, a, aLog, dtBias, z, normW, state []float32, slots []int32,
	n, hk, hv, dk, dv, kernel, tile int, l2Eps, qScale, kScale, eps float32) error {
	tiles := dv / tile
	peers, blocks := hv/hk*tiles, hv*tiles
	for par := range 2 {
		for kh := range hk {
			first := slots[2*(par*blocks+kh*peers)]
			for i := range peers {
				if c := slots[2*(par*blocks+kh*peers+i)]; c != first {
					return fmt.Errorf("gdn_decode_peer: the tags of key head %d differ (parity %d, block %d: %d, block 0: %d): a launch did not finish", kh, par, i, c, first)
				}
			}
		}
	}
	if n <= 0 {
		return nil
	}
	partial := make([]float32, n*blocks)
	gdnSplitRows(y, partial, mixed, convW, convState, b, a, aLog, dtBias, z, normW, state, n, hk, hv, dk, dv, kernel, tile, l2Eps, qScale, kScale, eps)
	for t := range n {
		for blk := range blocks {
			s := 2 * ((t%2)*blocks + blk)
			slots[s]++
			slots[s+1] = int32(math.Float32bits(partial[t*blocks+blk]))
		}
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
