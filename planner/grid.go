package planner

import "github.com/aimaproject/aimac/ir"

// blockThreads is the launch block of every family: 8 warps of 32 on sm_90,
// 8 waves of 32 on gfx1151 (wave32), so one rule serves both dialects.
const blockThreads = 256

// gridFor is the launch shape of an op over a bucket of rows: one block per
// row (or per row and head for per-head families), one warp per output
// column group for matrix products. Kernels guard rows past the logical n.
func gridFor(op *ir.Op, tokens int) (grid, block []int) {
	rows := tokens
	if op.Rows == "" {
		rows = int(op.Params["rows"])
	}
	p := op.Params
	block = []int{blockThreads, 1, 1}
	warps := blockThreads / 32
	switch op.Kind {
	case ir.MatMul:
		grid = []int{ceil(int(p["n"]), warps), rows, 1}
	case ir.MoEGateUp:
		// One warp per intermediate row, per (slot, token).
		grid = []int{ceil(int(p["inter"]), warps), int(p["k"]), rows}
	case ir.MoEDown:
		// One warp per output column, per token.
		grid = []int{ceil(int(p["hidden"]), warps), rows, 1}
	case ir.RMSNorm:
		grid = []int{rows * int(p["heads"]), 1, 1}
	case ir.GatedRMSNorm:
		grid = []int{rows * int(p["heads"]), 1, 1}
	case ir.L2NormHeads, ir.RoPE:
		grid = []int{rows, 1, 1}
	case ir.GatedDeltaChunked, ir.GatedDeltaRecurrent:
		grid = []int{int(p["v_heads"]), 1, 1}
	case ir.CausalConv1dSiLU:
		grid = []int{ceil(int(p["channels"]), blockThreads), 1, 1}
	case ir.Attention:
		grid = []int{int(p["q_heads"]), rows, 1}
	default:
		grid = []int{rows, 1, 1}
	}
	return grid, block
}

func ceil(a, b int) int { return (a + b - 1) / b }
