package planner

import (
	"fmt"
	"maps"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// streamTuning is a GPU target's row for the weight-streaming families
// (docs/gemv.md): how many warps keep its memory system busy, how many
// 16-byte chunks per row a lane loads before its FMAs, and how many output
// rows a warp may take.
type streamTuning struct {
	FillWarps      int // compute units × the warps each should have streaming
	Unroll         int
	MaxRowsPerWarp int
	// Early: the gemv families load their first weight chunks before
	// PDL_WAIT() (kernels' early flag), where the target launches with
	// programmatic serialization and the op's matrix is a weight.
	Early bool
	// Staged: where Early holds and the launch's whole matrix fits on
	// chip (StagedPerSM bytes a multiprocessor), its blocks copy their
	// rows to shared memory before the wait instead (kernels' staged
	// flag).
	Staged bool
	// L2Prefetch: where Early would hold (and neither it nor Staged is
	// set), the gemv families and moe_decode_gate_up's shared expert ask
	// the L2 for their first weight bytes before PDL_WAIT() (kernels'
	// l2_prefetch flag), for launches of at most L2PrefetchMaxBytes.
	L2Prefetch bool
	// RankOnce: the decode step's MoE blocks rank their top-k once, in the
	// router's launch (fuseMoERank), and moe_decode_down reads the ids
	// before its wait.
	RankOnce bool
	// LateTrigger: the decode step's streaming launches trigger their
	// dependants once a lane's last pass of loads is out, gdn_decode_split
	// after its rows (kernels' late_trigger flag), where the target launches
	// with programmatic serialization.
	LateTrigger bool
	// EarlyState: gdn_decode_split loads its state slice before the wait
	// (kernels' early_state flag), where the target launches so.
	EarlyState bool
}

// L2PrefetchMaxBytes bounds the matrices whose launches prefetch: the
// decode step's projections (≤ 50.6 MB, one wave of blocks), not the LM
// head (1 GB in many waves: a later wave's blocks find nothing to overlap).
const L2PrefetchMaxBytes = 64 << 20

// StagedPerSM bounds the weights a staged launch may hold on chip: 128 KiB
// a multiprocessor, half the H200's shared memory, so the launch before
// keeps room beside it.
const StagedPerSM = 128 << 10

// streamTable: sm_90 is the H200's 132 SMs at 16 streaming warps each (a
// quarter of the 64 resident); gfx1151 the Radeon 8060S's 40 CUs at 8.
var streamTable = map[plan.Target]streamTuning{
	// Early and Staged off on sm_90: measured on the H200 as chains of
	// launches with programmatic launch, both were slower than waiting at
	// the entry (gdn_decode_split → gemv_add 14.4 µs a round late, 17.1
	// early, 16.9 staged; docs/pdl.md).
	plan.SM90:    {FillWarps: 132 * 16, Unroll: 4, MaxRowsPerWarp: 4},
	plan.GFX1151: {FillWarps: 40 * 8, Unroll: 4, MaxRowsPerWarp: 2},
}

// streamRow is the target's row of streamTable with what the options ask
// for on top of it (Options.L2Prefetch, Options.MoERank, Options.StreamUnroll).
func (o *Options) streamRow() streamTuning {
	tune := streamTable[o.Target]
	tune.L2Prefetch = tune.L2Prefetch || o.L2Prefetch
	tune.RankOnce = tune.RankOnce || o.MoERank
	tune.LateTrigger = tune.LateTrigger || o.LateTrigger
	tune.EarlyState = tune.EarlyState || o.GDNEarlyState
	if o.StreamUnroll > 0 {
		tune.Unroll = o.StreamUnroll
	}
	return tune
}

// streamPass runs streamOneRow over every graph.
func streamPass(c *compilation) error {
	tune := c.o.streamRow()
	for _, g := range c.graphs {
		if err := streamOneRow(g, c.o.Target, tune); err != nil {
			return err
		}
	}
	return nil
}

// streamOneRow replaces the projections of one activation row (the decode
// step, the LM head of the last row) on a GPU target by their
// weight-streaming variants, with launch parameters from the target's row
// of streamTable and the op's shape. Other ops, and every op of the CPU
// target, keep the family they were lowered to.
func streamOneRow(g *ir.Graph, t plan.Target, tune streamTuning) error {
	if _, ok := streamTable[t]; !ok {
		return nil
	}
	for _, op := range g.Ops {
		rows := int64(g.Tokens)
		if op.Rows == nil {
			rows, _ = op.Params.Rows()
		}
		if rows != 1 {
			continue
		}
		p := op.Params.Clone()
		if p.Ints == nil {
			p.Ints = map[string]int64{}
		}
		switch op.Kind {
		case ir.MatMul, ir.MatMulAdd:
			maps.Copy(p.Ints, gemvParams(p.Int("n"), p.Int("k"), t, tune))
			setPrefetch(&p, g, op.Operands[2], t, tune)
			op.Kind = map[ir.Kind]ir.Kind{ir.MatMul: ir.GEMV, ir.MatMulAdd: ir.GEMVAdd}[op.Kind]
		case ir.MoEGateUp:
			rpw := rowsPerWarp(p.Int("k")*p.Int("inter"), 2, tune)
			maps.Copy(p.Ints, map[string]int64{"rows_per_warp": int64(rpw),
				"unroll": int64(unroll(chunks(p.Int("hidden")), t.Launch().Warp, 2*rpw, tune))})
			op.Kind = ir.MoEGateUpGEMV
		case ir.MoEDown:
			slots := p.Int("k")
			if slots > kernels.GEMVMaxSlots {
				continue // more slots than the streaming kernel holds in flight
			}
			rpw := min(rowsPerWarp(p.Int("hidden"), slots, tune), max(1, kernels.GEMVMaxLoads/slots))
			maps.Copy(p.Ints, map[string]int64{"rows_per_warp": int64(rpw),
				"unroll": int64(unroll(chunks(p.Int("inter")), t.Launch().Warp, slots*rpw, tune))})
			op.Kind = ir.MoEDownGEMV
		case ir.MoEDecodeGateUp, ir.MoEDecodeGateUpRanked:
			// The k routed experts' rows and the shared expert's, a gate and
			// an up row each.
			rpw, u := moeGateUpStream(p, t, tune)
			maps.Copy(p.Ints, map[string]int64{"rows_per_warp": int64(rpw), "unroll": int64(u)})
			f := kernels.Families[op.Kind]
			sg, su := op.Operands[f.Operand("shared_gate")], op.Operands[f.Operand("shared_up")]
			p.SetFlag("l2_prefetch", tune.L2Prefetch && t.Programmatic() && p.Int("hidden")%8 == 0 &&
				g.Tensors[sg.Tensor].Role == ir.Weight && g.Tensors[su.Tensor].Role == ir.Weight)
			setLateTrigger(&p, t, tune)
		case ir.MoEDecodeDown:
			if p.Flag("warp_per_slot") {
				// A block's rows of one expert a warp: as many rows as keep
				// the loads a lane holds in bounds, up to a block's cap.
				u := unroll(chunks(p.Int("inter")), t.Launch().Warp, 1, tune)
				rows := min(kernels.MoEDecodeMaxBlockRows/2, kernels.GEMVMaxLoads/u)
				maps.Copy(p.Ints, map[string]int64{"rows_per_warp": int64(rows), "unroll": int64(u)})
				setLateTrigger(&p, t, tune)
				break
			}
			// Every slot's rows in flight at once, then the shared expert's.
			slots := p.Int("k")
			rpw := min(rowsPerWarp(p.Int("hidden"), slots, tune), max(1, kernels.GEMVMaxLoads/slots))
			maps.Copy(p.Ints, map[string]int64{"rows_per_warp": int64(rpw),
				"unroll": int64(unroll(chunks(p.Int("inter")), t.Launch().Warp, slots*rpw, tune))})
		case ir.GDNDecodeSplit:
			// Not a stream, but the launch before the GDN layer's output
			// projection: where its trigger sits decides when that stream's
			// blocks come.
			setLateTrigger(&p, t, tune)
			if tune.EarlyState && t.Programmatic() {
				p.SetFlag("early_state", true)
			}
		default:
			continue
		}
		op.Params = p
	}
	if err := g.Verify(kernels.Families); err != nil {
		return fmt.Errorf("streaming %s: %w", g.Name, err)
	}
	return nil
}

// gemvParams are the launch parameters of a gemv family (gemv, gemv_add,
// rmsnorm_gemv) over n rows of width k on target t: rows per warp to fill
// the target's streaming warps, split-K while the rows alone leave them
// idle and each slice keeps two passes of a warp, the unroll within a
// lane's loads. A target without a row in streamTable (the cpu, which runs
// the references) gets ones.
func gemvParams(n, k int, t plan.Target, tune streamTuning) map[string]int64 {
	if _, ok := streamTable[t]; !ok {
		return map[string]int64{"rows_per_warp": 1, "split_k": 1, "unroll": 1}
	}
	warps := t.Launch().Warps()
	rpw := rowsPerWarp(n, 1, tune)
	split := 1
	for split < min(warps, kernels.GEMVMaxSplitK) && ir.Ceil(n, rpw)*split < tune.FillWarps &&
		chunks(k)/(2*split) >= t.Launch().Warp {
		split *= 2
	}
	return map[string]int64{"rows_per_warp": int64(rpw), "split_k": int64(split),
		"unroll": int64(unroll(chunks(k)/split, t.Launch().Warp, rpw, tune))}
}

// setPrefetch sets the early, staged and l2_prefetch flags of a gemv
// family's params p (shape and launch parameters set) streaming the matrix
// w: what it reads before PDL_WAIT(). Only on a target whose launches
// overlap (plan.TargetSpec.Programmatic) and whose row says so, and only
// for a weight (the kernel ABI allows nothing else to be read before the
// wait); staged where the row allows it, the rows are 16-byte aligned, a
// block's rows fit its shared memory and the launch's matrix fits on chip;
// l2_prefetch where neither is set, the rows are 16-byte aligned and the
// matrix is within L2PrefetchMaxBytes.
func setPrefetch(p *ir.Params, g *ir.Graph, w ir.Operand, t plan.Target, tune streamTuning) {
	pre := t.Programmatic() && g.Tensors[w.Tensor].Role == ir.Weight
	early := tune.Early && pre
	n, k := p.Int("n"), p.Int("k")
	staged := early && tune.Staged && k%8 == 0 && kernels.GEMVStagedBytes(*p) <= kernels.GEMVStageBytes &&
		int64(n)*int64(k)*2 <= int64(t.Launch().Multiprocessors)*StagedPerSM
	p.SetFlag("early", early && !staged)
	p.SetFlag("staged", staged)
	p.SetFlag("l2_prefetch", tune.L2Prefetch && pre && !early && k%8 == 0 && int64(n)*int64(k)*2 <= L2PrefetchMaxBytes)
	if !early {
		setLateTrigger(p, t, tune)
	}
}

// setLateTrigger sets the optional late_trigger flag where the row asks for
// it and the target's launches overlap; absent otherwise, so the plans
// without it keep their kernels' names and sources.
func setLateTrigger(p *ir.Params, t plan.Target, tune streamTuning) {
	if tune.LateTrigger && t.Programmatic() {
		p.SetFlag("late_trigger", true)
	}
}

// rowsPerWarp is the most output rows per warp (each streaming width
// weight rows) that still leaves FillWarps warps over n rows, and that
// keeps the loads a lane holds within bounds.
func rowsPerWarp(n, width int, tune streamTuning) int {
	rpw := tune.MaxRowsPerWarp
	for rpw > 1 && (ir.Ceil(n, rpw) < tune.FillWarps || width*rpw > kernels.GEMVMaxLoads) {
		rpw /= 2
	}
	return rpw
}

// chunks is the number of 16-byte weight chunks of a row of k BF16 values
// (k itself when rows are not 16-byte aligned and go one element a time).
func chunks(k int) int {
	if k%8 != 0 {
		return k
	}
	return k / 8
}

// unroll is the target's unroll, no more than the chunks a lane has in
// its slice of a row, and within the loads a lane may hold.
func unroll(sliceChunks, warp, rows int, tune streamTuning) int {
	return max(1, min(tune.Unroll, ir.Ceil(sliceChunks, warp), kernels.GEMVMaxLoads/rows))
}
