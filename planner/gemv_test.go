package planner

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// TestStreamOneRow: on a GPU target the decode step's projections and the
// one-row LM head become the streaming families, with the same shape
// parameters; prefill's many-row projections, and every op on the CPU,
// keep the family they were lowered to.
func TestStreamOneRow(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	count := func(g *ir.Graph) map[ir.Kind]int {
		got := map[ir.Kind]int{}
		for _, op := range g.Ops {
			switch op.Kind {
			case ir.MatMul, ir.GEMV, ir.MatMulAdd, ir.GEMVAdd, ir.MoEGateUp, ir.MoEGateUpGEMV, ir.MoEDown, ir.MoEDownGEMV:
				got[op.Kind]++
			}
		}
		return got
	}
	decode := Step{Kind: plan.DecodeStep, Tokens: 1, MaxTokens: 16, ContextTokens: 32, KVDType: ir.F32}
	prefill := Step{Kind: plan.Prefill, Tokens: 8, MaxTokens: 16, ContextTokens: 32, KVDType: ir.F32, Chunk: 4}
	matmuls := 3*5 + 4 + 4*5 + 1 // GDN, attention, MoE (router, shared ×4) per layer, LM head
	tests := []struct {
		name   string
		step   Step
		target plan.Target
		fuse   bool
		want   map[ir.Kind]int
	}{
		{"decode sm_90", decode, plan.SM90, false, map[ir.Kind]int{ir.GEMV: matmuls, ir.MoEGateUpGEMV: 4, ir.MoEDownGEMV: 4}},
		{"decode gfx1151", decode, plan.GFX1151, false, map[ir.Kind]int{ir.GEMV: matmuls, ir.MoEGateUpGEMV: 4, ir.MoEDownGEMV: 4}},
		{"decode cpu", decode, plan.CPU, false, map[ir.Kind]int{ir.MatMul: matmuls, ir.MoEGateUp: 4, ir.MoEDown: 4}},
		// The fused output projections (one per layer) stream as gemv_add.
		{"decode sm_90 fused", decode, plan.SM90, true, map[ir.Kind]int{ir.GEMV: matmuls - 4, ir.GEMVAdd: 4, ir.MoEGateUpGEMV: 4, ir.MoEDownGEMV: 4}},
		// Only the LM head of the last row is one row in prefill.
		{"prefill sm_90", prefill, plan.SM90, false, map[ir.Kind]int{ir.MatMul: matmuls - 1, ir.GEMV: 1, ir.MoEGateUp: 4, ir.MoEDown: 4}},
	}
	for _, tt := range tests {
		g, err := Lower(m, tt.step)
		if err != nil {
			t.Fatal(err)
		}
		if tt.fuse {
			fuseMatMulAdd(g)
			g.DropUnused()
		}
		if err := streamOneRow(g, tt.target, streamTable[tt.target]); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, count(g)); diff != "" {
			t.Errorf("%s: families (-want +got):\n%s", tt.name, diff)
		}
		for _, op := range g.Ops {
			if err := kernels.Families[op.Kind].CheckParams(op.Params); err != nil {
				t.Errorf("%s: %s: %v", tt.name, op.Kind, err)
			}
		}
	}
}

// TestStreamLaunchParams pins the per-target choices for the real model's
// shapes: several rows per warp while that leaves the GPU full, split-K
// for the narrow outputs, the unroll cut to the chunks a lane has.
func TestStreamLaunchParams(t *testing.T) {
	type choice struct{ RowsPerWarp, SplitK, Unroll int }
	gemvOf := func(tg plan.Target, k, n int64) choice {
		g := &ir.Graph{Name: "t", Tokens: 1, Dyn: []ir.Slot{ir.ParamN}}
		y := g.AddTensor(ir.Tensor{Name: "y", Role: ir.Activation, DType: ir.F32, Shape: []int64{1, n}})
		x := g.AddTensor(ir.Tensor{Name: "x", Role: ir.Input, DType: ir.F32, Shape: []int64{1, k}})
		w := g.AddTensor(ir.Tensor{Name: "w", Role: ir.Weight, DType: ir.BF16, Shape: []int64{n, k}, Source: "w"})
		g.Ops = append(g.Ops, &ir.Op{Kind: ir.MatMul, Params: params(ints{"k": k, "n": n}), Rows: ir.SlotRef(ir.ParamN),
			Operands: []ir.Operand{of(y), of(x), of(w)}})
		if err := streamOneRow(g, tg, streamTable[tg]); err != nil {
			t.Fatal(err)
		}
		p := g.Ops[0].Params
		return choice{p.Int("rows_per_warp"), p.Int("split_k"), p.Int("unroll")}
	}
	tests := []struct {
		target plan.Target
		k, n   int64
		want   choice
	}{
		{plan.SM90, 2048, 248320, choice{4, 1, 4}}, // LM head
		{plan.SM90, 2048, 8192, choice{2, 1, 4}},   // in_proj_qkv, q_proj
		{plan.SM90, 2048, 4096, choice{1, 1, 4}},   // in_proj_z
		{plan.SM90, 4096, 2048, choice{1, 2, 4}},   // out_proj, o_proj
		{plan.SM90, 2048, 256, choice{1, 8, 1}},    // router
		{plan.SM90, 2048, 32, choice{1, 8, 1}},     // GDN b, a
		{plan.SM90, 2048, 1, choice{1, 8, 1}},      // shared-expert gate
		{plan.SM90, 20, 7, choice{1, 1, 1}},        // K % 8 ≠ 0: one element a time, no split of 20
		{plan.GFX1151, 2048, 8192, choice{2, 1, 4}},
		{plan.GFX1151, 2048, 256, choice{1, 2, 4}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, gemvOf(tt.target, tt.k, tt.n)); diff != "" {
			t.Errorf("%s k=%d n=%d (-want +got):\n%s", tt.target, tt.k, tt.n, diff)
		}
	}
}

// TestStreamPrefetch: a gemv family loads its first chunks before the wait
// only on a target that overlaps launches (sm_90) and only when its matrix
// is a weight; any other matrix (an input or an activation: written
// before the launch, by a copy or by an earlier launch) waits at the
// kernel's entry, as every op on gfx1151. With the target's Staged on, a
// launch whose matrix fits on chip stages its rows in shared memory
// instead, and one that does not (or whose block rows exceed a block's
// shared memory) keeps the early stream. The table's own rows keep every
// kernel waiting at its entry.
func TestStreamPrefetch(t *testing.T) {
	type flags struct{ Early, Staged bool }
	prefetch := func(tg plan.Target, role ir.Role, n, k int64) flags {
		g := &ir.Graph{Name: "t", Tokens: 1, Dyn: []ir.Slot{ir.ParamN}}
		y := g.AddTensor(ir.Tensor{Name: "y", Role: ir.Output, DType: ir.F32, Shape: []int64{1, n}})
		x := g.AddTensor(ir.Tensor{Name: "x", Role: ir.Input, DType: ir.F32, Shape: []int64{1, k}})
		w := g.AddTensor(ir.Tensor{Name: "w", Role: role, DType: ir.BF16, Shape: []int64{n, k}, Source: "w"})
		g.Ops = append(g.Ops, &ir.Op{Kind: ir.MatMulAdd, Params: params(ints{"k": k, "n": n}), Rows: ir.SlotRef(ir.ParamN),
			Operands: []ir.Operand{of(y), of(x), of(w)}})
		if err := streamOneRow(g, tg, streamTable[tg]); err != nil {
			t.Fatal(err)
		}
		if g.Ops[0].Kind != ir.GEMVAdd {
			t.Fatalf("%s: %s, want gemv_add", tg, g.Ops[0].Kind)
		}
		return flags{g.Ops[0].Params.Flag("early"), g.Ops[0].Params.Flag("staged")}
	}
	tests := []struct {
		name   string
		target plan.Target
		row    *flags // the target row's Early and Staged (nil: the table's)
		role   ir.Role
		n, k   int64
		want   flags
	}{
		// The table's rows: every target waits at the entry (measured, docs/pdl.md).
		{"out_proj, sm_90's row", plan.SM90, nil, ir.Weight, 2048, 4096, flags{}},
		{"out_proj, gfx1151's row", plan.GFX1151, nil, ir.Weight, 2048, 4096, flags{}},
		{"out_proj", plan.SM90, &flags{Early: true}, ir.Weight, 2048, 4096, flags{Early: true}},
		{"not a weight", plan.SM90, &flags{Early: true}, ir.Input, 64, 2048, flags{}},
		// gfx1151 does not overlap launches: nothing before the wait, whatever its row.
		{"gfx1151", plan.GFX1151, &flags{Early: true, Staged: true}, ir.Weight, 2048, 4096, flags{}},
		{"out_proj staged", plan.SM90, &flags{Early: true, Staged: true}, ir.Weight, 2048, 4096, flags{Staged: true}},
		{"not a weight, staged row", plan.SM90, &flags{Early: true, Staged: true}, ir.Input, 64, 2048, flags{}},
		// 16384 × 2048 (64 MB) is past the launch's on-chip budget.
		{"too large to stage", plan.SM90, &flags{Early: true, Staged: true}, ir.Weight, 16384, 2048, flags{Early: true}},
		// K % 8 ≠ 0 goes one element a time: not staged.
		{"odd k", plan.SM90, &flags{Early: true, Staged: true}, ir.Weight, 7, 20, flags{Early: true}},
		{"staged without early", plan.SM90, &flags{Staged: true}, ir.Weight, 2048, 4096, flags{}},
	}
	for _, tt := range tests {
		saved := streamTable[tt.target]
		if tt.row != nil {
			row := saved
			row.Early, row.Staged = tt.row.Early, tt.row.Staged
			streamTable[tt.target] = row
		}
		got := prefetch(tt.target, tt.role, tt.n, tt.k)
		streamTable[tt.target] = saved
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}
