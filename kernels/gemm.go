package kernels

import (
	"fmt"
	"maps"
	"strings"
	"unsafe"

	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/ir"
)

// The block tile of the tensor-core families (gemm_tile.tmpl): rows of A and
// weight rows per block. gemm and gemm_add may take GEMMTileColsWide weight
// rows instead (tile_n: 8 warps of 64 × 64, half the A staging per product,
// 160 KiB of shared memory split: sm_90 only).
const (
	GEMMTileRows     = 128
	GEMMTileCols     = 128
	GEMMTileColsWide = 256
)

// The wgmma tile (gemm_wgmma.tmpl, sm_90a): k-tiles of GEMMWGMMADepth (one
// 128-byte row of bf16 weights, the swizzle's width), and the 1 KiB its
// shared memory gives to aligning the stages on 1024 bytes.
const (
	GEMMWGMMADepth = 64
	gemmWGMMAAlign = 1024
)

// The warp-specialized wgmma tile (gemm_wgmma_ws.tmpl, sm_90a): a block of
// GEMMWSThreads (a producer warpgroup that streams the stages, two consumer
// warpgroups that multiply), products issued GEMMWSPart columns at a time
// into a fresh partial sum a k-tile (64: 32 registers of partial sums beside
// the 128 accumulators and the A fragments, within the consumers' 240), f32 A rows of GEMMWSARowBytes in a
// stage (64 floats and 32 bytes of padding: a warp's fragment reads hit 32
// banks), and per stage two mbarriers (full, empty).
const (
	GEMMWSThreads      = 384
	GEMMWSPart         = 64
	GEMMWSARowBytes    = GEMMWGMMADepth*4 + 32
	gemmWSBarrierBytes = 16
)

// gemmTileCols is the weight rows of a block: tile_n where the family has
// it, else GEMMTileCols.
func gemmTileCols(p ir.Params) int {
	if n := p.Int("tile_n"); n > 0 {
		return n
	}
	if p.Flag("wide_tile") { // the grouped MoE's 256 columns on the wgmma tile
		return GEMMTileColsWide
	}
	return GEMMTileCols
}

// gemmFamilies are the tensor-core variants of the projections for many
// rows (docs/prefill-gemm.md): operands and parameters of the family they
// stand in for, bf16 operands with fp32 accumulation. Any K and N: k-tiles
// past K and weight rows past N are zeros, K % 8 ≠ 0 stages W one element
// at a time.
func gemmFamilies() []*ir.Family {
	return append([]*ir.Family{gemmFamily(ir.GEMM, ir.MatMul), gemmFamily(ir.GEMMAdd, ir.MatMulAdd)}, moeGroupFamilies()...)
}

// gemmLaunch is one block per BM × BN tile of the output; blocks past the
// logical rows return at once.
func gemmLaunch(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
	return gemmShared(c.Blocks(ir.Ceil(p.Int("n"), gemmTileCols(p)), max(1, ir.Ceil(rows, GEMMTileRows)), 1), p, c)
}

// GEMMSharedBytes is the dynamic shared memory of a gemm tile with the
// configuration's pipeline stages (gemm_tile.tmpl): per stage an f32 A
// k-tile (128 × 32) and a bf16 W k-tile (tile_n × 32), then the bf16 A tiles —
// one term, or hi and lo with split_a — double-buffered where the
// configuration's shared memory holds two, else once (gfx1151's 64 KiB with
// split_a: one more barrier a k-tile). The template reads its A buffers
// back from this figure.
//
// With wgmma the stages hold an f32 A k-tile (128 × 64) and a bf16 W k-tile
// (tile_n × 64), as many as fit up to the configuration's stages (sm_90:
// four of 48 KiB with 128 columns, three of 64 KiB with 256), after the
// alignment; there are no bf16 A tiles (the fragments are rounded in
// registers).
func GEMMSharedBytes(p ir.Params, c ir.LaunchConfig) int {
	if p.Flag("wgmma_ws") {
		stage := GEMMTileRows*GEMMWSARowBytes + gemmTileCols(p)*GEMMWGMMADepth*2
		// The producer's row pointers (one A row and tile_n/64 weight rows a
		// thread of its 128) after the stages: they take none of its registers.
		ptrs := GEMMTileRows * (1 + gemmTileCols(p)/64) * 8
		stages := max(2, min(c.Stages, (c.MaxSharedBytes-gemmWGMMAAlign-ptrs)/(stage+gemmWSBarrierBytes)))
		return gemmWGMMAAlign + stages*(stage+gemmWSBarrierBytes) + ptrs
	}
	if p.Flag("wgmma") {
		// A stage's f32 A and bf16 W, and what the stages do not repeat (fixed).
		w := gemmTileCols(p) * GEMMWGMMADepth * 2
		stage, fixed := GEMMTileRows*GEMMWGMMADepth*4+w, 0
		switch {
		case p.Flag("cluster_a"):
			// A rows padded to GEMMWSARowBytes (bulk copies write linearly),
			// and the stage's A barrier.
			stage = GEMMTileRows*GEMMWSARowBytes + w + gemmClusterBarrierBytes
		case p.Flag("ss_a"):
			// W stages only, then two buffers of the A terms as bf16 tiles.
			stage, fixed = w, 2*ATerms(p)*GEMMTileRows*GEMMWGMMADepth*2
		}
		stages := max(2, min(c.Stages, (c.MaxSharedBytes-gemmWGMMAAlign-fixed)/stage))
		return gemmWGMMAAlign + stages*stage + fixed
	}
	const k = 32
	stages := max(c.Stages, 2) * (GEMMTileRows*k*4 + gemmTileCols(p)*k*2)
	a := ATerms(p) * GEMMTileRows * k * 2
	if stages+2*a <= c.MaxSharedBytes {
		return stages + 2*a
	}
	return stages + a
}

func gemmShared(s ir.LaunchShape, p ir.Params, c ir.LaunchConfig) ir.LaunchShape {
	s.SharedBytes = GEMMSharedBytes(p, c)
	if p.Flag("wgmma_ws") {
		s.Block[0] = GEMMWSThreads
	}
	if p.Flag("cluster_a") {
		// Neighbouring column tiles pair up; an odd last one gets a partner
		// past the weight rows (zeros, nothing stored) that copies its half
		// of the rows.
		s.Cluster = GEMMClusterBlocks
		s.Grid[0] += s.Grid[0] % GEMMClusterBlocks
	}
	return s
}

// GEMMClusterBlocks is the blocks of a cluster_a launch's clusters: two
// column tiles of one row tile, each copying half of the A rows of a
// k-tile into both (docs/prefill-gemm.md, "A shared by a cluster").
const GEMMClusterBlocks = 2

// gemmClusterBarrierBytes is a cluster_a stage's A barrier (an mbarrier).
const gemmClusterBarrierBytes = 8

// checkSSA refuses ss_a (the A terms rounded once a k-tile into shared
// memory, both product operands from there) off the wgmma tile, without
// flush_k's k-tile sums or with flush_k16's, with cluster_a or the
// persistent walk.
func checkSSA(p ir.Params) error {
	switch {
	case !p.Flag("ss_a"):
		return nil
	case !p.Flag("wgmma") || p.Flag("wgmma_ws"):
		return fmt.Errorf("ss_a: the A terms in shared memory are the wgmma tile's")
	case !p.Flag("flush_k") || p.Flag("flush_k16"):
		return fmt.Errorf("ss_a takes flush_k's k-tile sums (flush_k %v, flush_k16 %v)", p.Flag("flush_k"), p.Flag("flush_k16"))
	case p.Flag("cluster_a") || p.Flag("persistent"):
		return fmt.Errorf("ss_a with cluster_a or persistent: the tile stages its own A")
	}
	return nil
}

// checkClusterA refuses cluster_a off the wgmma tile, with the persistent
// walk, or where the A rows (K of the param named k) are not whole 16-byte
// bulk copies.
func checkClusterA(p ir.Params, k string) error {
	if !p.Flag("cluster_a") {
		return nil
	}
	if !p.Flag("wgmma") || p.Flag("wgmma_ws") {
		return fmt.Errorf("cluster_a: the clusters' shared A rows are the wgmma tile's")
	}
	if p.Flag("persistent") {
		return fmt.Errorf("cluster_a with persistent: a cluster's blocks walk no tiles")
	}
	if K := p.Int(k); K%4 != 0 {
		return fmt.Errorf("cluster_a with %s %d: the A rows are bulk copies of whole 16-byte chunks (%s %% 4 = 0)", k, K, k)
	}
	return nil
}

// checkTile refuses both wgmma tiles at once (each is a whole tile).
func checkTile(p ir.Params) error {
	if p.Flag("wgmma") && p.Flag("wgmma_ws") {
		return fmt.Errorf("wgmma and wgmma_ws: a tiled GEMM takes one tile")
	}
	if p.Flag("wgmma_ws") && p.Flag("flush_k") {
		return fmt.Errorf("flush_k with wgmma_ws: the warp-specialized tile rounds its k-tiles' sums to nearest itself")
	}
	return nil
}

// GEMMMMAs is the tensor-core products per multiply-add of the matrix
// work: one per term of A (hi·W, lo·W, lo2·W).
func GEMMMMAs(p ir.Params) int { return ATerms(p) }

// ATerms is the bf16 terms a tensor-core family stages its f32 activations
// as: one, two with split_a (hi + lo, x to ≈ 2⁻¹⁷ of itself), three with
// split_a3 as well (hi + lo + lo2, x to ≈ 2⁻²⁶: below f32's own rounding of
// the sums, so the prefill's projections round like the f32 ones they
// replace — at 8K tokens two terms flip near-tied routing choices that fp32
// keeps).
func ATerms(p ir.Params) int {
	switch {
	case p.Flag("split_a") && p.Flag("split_a3"):
		return 3
	case p.Flag("split_a"):
		return 2
	}
	return 1
}

// checkATerms refuses split_a3 without split_a (the third term follows hi
// and lo), and flush_k16 without flush_k (the finer grain of the same
// flush: every 16-deep slice's products summed apart on the wgmma tile; the
// mma tile flushes every slice with flush_k alone).
func checkATerms(p ir.Params) error {
	if p.Flag("split_a3") && !p.Flag("split_a") {
		return fmt.Errorf("split_a3 without split_a: the third bf16 term follows hi and lo")
	}
	if p.Flag("flush_k16") && !p.Flag("flush_k") {
		return fmt.Errorf("flush_k16 without flush_k: the slice-by-slice flush is flush_k's finer grain")
	}
	return nil
}

func gemmFamily(kind, of ir.Kind) *ir.Family {
	return &ir.Family{
		Kind:     kind,
		Operands: operandsOf(of),
		Params:   cat(ir.Ints("k", "n", "tile_n"), ir.Flags("split_a", "split_a3", "wgmma"), ir.OptionalFlags("flush_k", "flush_k16", "wgmma_ws", "cluster_a", "ss_a")),
		Check: func(p ir.Params) error {
			n := p.Int("tile_n")
			if n != GEMMTileCols && n != GEMMTileColsWide {
				return fmt.Errorf("tile_n %d: the tile takes %d or %d weight rows", n, GEMMTileCols, GEMMTileColsWide)
			}
			// The wgmma tile of 256 columns flushes half its columns at a time
			// (a 64 × 128 partial sum); the mma tile's second set fits 128 only.
			if p.Flag("flush_k") && n != GEMMTileCols && !p.Flag("wgmma") {
				return fmt.Errorf("flush_k with tile_n %d on the mma tile: the second accumulator set fits the %d-column tile only", n, GEMMTileCols)
			}
			if p.Flag("flush_k16") && n != GEMMTileCols {
				return fmt.Errorf("flush_k16 with tile_n %d: the slice-by-slice flush takes the %d-column tile", n, GEMMTileCols)
			}
			if err := checkTile(p); err != nil {
				return err
			}
			if err := checkClusterA(p, "k"); err != nil {
				return err
			}
			if err := checkSSA(p); err != nil {
				return err
			}
			return checkATerms(p)
		},
		Launch: gemmLaunch,
		// The reference is the family's it replaces on x as the tensor cores
		// take it (ATerms bf16 terms): what is left between the two is the
		// order of the fp32 sums.
		Reference: func(a *ir.Args) error {
			x := a.F32("x")
			staged := StageA(x[:a.N*a.Int("k")], ATerms(a.Params))
			return Families[of].Reference(withOperand(a, "x", f32Bytes(staged)))
		},
		Template: "gemm.tmpl",
		TemplateData: func(p ir.Params) map[string]any {
			d := map[string]any{"accumulate": kind == ir.GEMMAdd, "tile_cols": gemmTileCols(p), "wgmma_half": false}
			if p.Flag("wgmma") {
				maps.Copy(d, wgmmaOperands(gemmTileCols(p)))
				if p.Flag("flush_k") && gemmTileCols(p) == GEMMTileColsWide {
					d["wgmma_half"] = wgmmaOperands(GEMMTileCols) // the flush's half-width products
				}
			}
			if p.Flag("wgmma_ws") {
				maps.Copy(d, wgmmaWSOperands(gemmTileCols(p)))
			}
			return d
		},
	}
}

// wgmmaOperands is the template data of wgmma.tmpl's wgmma_rs for a product
// of n columns: the n/2 accumulator registers of a thread in the
// instruction's order (register r is element r%8 of atom r/8: an atom's 16
// columns are two of the instruction's 8-column groups, laid out as the
// m16n8k16 accumulator), then the four A registers, the B descriptor and the
// accumulate predicate's input.
func wgmmaOperands(n int) map[string]any { return wgmmaOperandsNamed("wgmma", n) }

// wgmmaOperandsNamed is wgmmaOperands under the keys prefix_atoms,
// prefix_d, ...: the same asm operands for another atom (wgmma_part), with
// its instruction width as prefix_n.
func wgmmaOperandsNamed(prefix string, n int) map[string]any {
	regs := n / 2
	d, outs := make([]string, regs), make([]string, regs)
	for r := range regs {
		d[r] = fmt.Sprintf("%%%d", r)
		outs[r] = fmt.Sprintf(`"+f"(acc[%d].v[%d])`, r/8, r%8)
	}
	return map[string]any{
		prefix + "_cols":  n,
		prefix + "_atoms": n / 16,
		prefix + "_d":     strings.Join(d, ", "),
		prefix + "_outs":  strings.Join(outs, ", "),
		prefix + "_a":     fmt.Sprintf("%%%d, %%%d, %%%d, %%%d", regs, regs+1, regs+2, regs+3),
		prefix + "_b":     regs + 4,
		prefix + "_scale": regs + 5,
		// Both operands from shared memory (wgmma_ss): A's descriptor, B's, the predicate's input.
		prefix + "_ss_a":     regs,
		prefix + "_ss_b":     regs + 1,
		prefix + "_ss_scale": regs + 2,
	}
}

// wgmmaWSOperands is the template data of the warp-specialized tile
// (gemm_wgmma_ws.tmpl) of n columns: wgmma.tmpl's atoms at that width (its
// descriptor and hold) and wgmma_part at the GEMMWSPart columns it issues.
func wgmmaWSOperands(n int) map[string]any {
	d := wgmmaOperands(n)
	maps.Copy(d, wgmmaOperandsNamed("wgmma_part", GEMMWSPart))
	d["ws_threads"], d["a_row_bytes"] = GEMMWSThreads, GEMMWSARowBytes
	return d
}

// RoundBF16 is x with every element rounded to bf16 (to nearest even), as
// the tensor-core families stage their f32 activations as one term.
func RoundBF16(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = bf16.Round(v)
	}
	return out
}

// SplitBF16 is x as the tensor-core families stage it in two bf16 terms:
// hi = bf16(v), lo = bf16(v − hi), and the element hi + lo (exact in f32:
// lo's 8 bits start at least 8 below hi's), which is v to ≈ 2⁻¹⁷ of
// itself. The kernels add hi·W and lo·W in one fp32 accumulator.
func SplitBF16(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		hi := bf16.Round(v)
		out[i] = hi + bf16.Round(v-hi)
	}
	return out
}

// Split3BF16 is x as three bf16 terms: hi and lo as SplitBF16, lo2 =
// bf16(v − hi − lo) (v − hi and its remainder after lo are exact in f32),
// and the element hi + lo + lo2, which is v to ≈ 2⁻²⁶ of itself.
func Split3BF16(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		hi := bf16.Round(v)
		r := v - hi
		lo := bf16.Round(r)
		out[i] = hi + (lo + bf16.Round(r-lo))
	}
	return out
}

// StageA is x as a tensor-core family's A operand takes it in terms bf16
// terms: RoundBF16 (one), SplitBF16 (two), Split3BF16 (three).
func StageA(x []float32, terms int) []float32 {
	switch terms {
	case 3:
		return Split3BF16(x)
	case 2:
		return SplitBF16(x)
	}
	return RoundBF16(x)
}

// f32Bytes views x as the bytes of an operand's memory.
func f32Bytes(x []float32) []byte {
	if len(x) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&x[0])), 4*len(x))
}

// withOperand is a copy of a's arguments with operand name's memory replaced.
func withOperand(a *ir.Args, name string, mem []byte) *ir.Args {
	b := *a
	b.Mem = append([][]byte(nil), a.Mem...)
	b.Mem[a.Family.Operand(name)] = mem
	return &b
}
