package kernels

import (
	"unsafe"

	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/ir"
)

// The block tile of the tensor-core families (gemm_tile.tmpl): rows of A and
// weight rows per block.
const (
	GEMMTileRows = 128
	GEMMTileCols = 128
)

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
	return gemmShared(c.Blocks(ir.Ceil(p.Int("n"), GEMMTileCols), max(1, ir.Ceil(rows, GEMMTileRows)), 1), c)
}

// GEMMSharedBytes is the dynamic shared memory of a gemm tile with the
// configuration's pipeline stages: per stage an f32 A k-tile (128 × 32) and a
// bf16 W k-tile (128 × 32), and two bf16 A tiles (gemm_tile.tmpl).
func GEMMSharedBytes(c ir.LaunchConfig) int {
	const k = 32
	return max(c.Stages, 2)*(GEMMTileRows*k*4+GEMMTileCols*k*2) + 2*GEMMTileRows*k*2
}

func gemmShared(s ir.LaunchShape, c ir.LaunchConfig) ir.LaunchShape {
	s.SharedBytes = GEMMSharedBytes(c)
	return s
}

func gemmFamily(kind, of ir.Kind) *ir.Family {
	return &ir.Family{
		Kind:     kind,
		Operands: operandsOf(of),
		Params:   ir.Ints("k", "n"),
		Launch:   gemmLaunch,
		// The reference is the family's it replaces on x rounded to bf16,
		// the operand the tensor cores take: what is left between the two
		// is the order of the fp32 sums.
		Reference: func(a *ir.Args) error {
			x := a.F32("x")
			rounded := RoundBF16(x[:a.N*a.Int("k")])
			return Families[of].Reference(withOperand(a, "x", f32Bytes(rounded)))
		},
		Template:     "gemm.tmpl",
		TemplateData: func(ir.Params) map[string]any { return map[string]any{"accumulate": kind == ir.GEMMAdd} },
	}
}

// RoundBF16 is x with every element rounded to bf16 (to nearest even), as
// the tensor-core families stage their f32 activations.
func RoundBF16(x []float32) []float32 {
	out := make([]float32, len(x))
	for i, v := range x {
		out[i] = bf16.Round(v)
	}
	return out
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
