package kernels

import (
	"fmt"
	"slices"

	"github.com/aimaproject/aimac/ir"
)

// gemvFamilies are the weight-streaming variants of the projections for one
// activation row (docs/gemv.md). Each has the operands and the math of the
// family it stands in for — its reference is that family's — plus launch
// parameters the planner chooses per target and shape:
//
//   - rows_per_warp: output rows one warp computes, so each lane keeps
//     rows_per_warp × unroll 16-byte weight loads in flight and reuses every
//     activation element it loads for all of them;
//   - unroll: 16-byte chunks per row a lane loads before its FMAs;
//   - split_k (gemv, gemv_add): warps of a block that share one group of rows,
//     each over a slice of K, summed in shared memory (narrow outputs: the
//     router, the GDN b/a projections, the shared-expert gate);
//   - early (gemv, gemv_add, rmsnorm_gemv): a lane's first chunks of its
//     rows, up to GEMVMaxLoads loads (the whole slice where it has no
//     more), are loaded before PDL_WAIT(), so that under programmatic
//     launch the stream starts while the launch before finishes
//     (docs/pdl.md); off, the kernel waits at its entry;
//   - staged (the same three): the block's whole weight rows are copied to
//     shared memory (cp.async on sm_90) before the wait and read from
//     there, for launches whose weights fit on chip (gemv_add's 16.8 MB is
//     ≈ 127 KB an SM); at most one of early and staged;
//   - l2_prefetch (the same three): before PDL_WAIT() each warp asks the L2
//     for the first GEMVPrefetchChunks chunks of its rows' slices, one bulk
//     prefetch a row (sm_90's cp.async.bulk.prefetch.L2): the stream after
//     the wait starts from the L2, with no register or shared memory held
//     (docs/pdl.md); at most one of early, staged and l2_prefetch;
//   - late_trigger (optional, the late and l2_prefetch kernels): the wait
//     stays at the entry and PDL_TRIGGER() comes once a lane's last pass of
//     loads is out, so the next launch's blocks are scheduled during this
//     one's tail rather than beside its whole stream (docs/pdl.md).
//
// Any K: a lane reads 8 BF16 weights (16 bytes) a load when K % 8 == 0,
// and one element at a time otherwise.
func gemvFamilies() []*ir.Family {
	return []*ir.Family{
		gemvFamily(ir.GEMV, ir.MatMul),
		gemvFamily(ir.GEMVAdd, ir.MatMulAdd),
		rmsnormGEMV(),
		rmsnormRouterTopK(),
		{
			Kind:     ir.MoEGateUpGEMV,
			Operands: operandsOf(ir.MoEGateUp),
			Params:   cat(ir.Ints("experts", "hidden", "inter", "k"), streamParams()),
			Check: func(p ir.Params) error {
				if err := topK(p); err != nil {
					return err
				}
				// A warp streams a gate and an up row for each of its rows.
				return checkStream(p, 2*p.Int("rows_per_warp"))
			},
			// Grid (row groups, slot, token): every block streams rows of one
			// selected expert.
			Launch: func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
				return c.Blocks(ir.Ceil(p.Int("inter"), c.Warps()*p.Int("rows_per_warp")), p.Int("k"), rows)
			},
			Reference: func(a *ir.Args) error { return Families[ir.MoEGateUp].Reference(a) },
		},
		{
			Kind:     ir.MoEDownGEMV,
			Operands: operandsOf(ir.MoEDown),
			Params:   cat(ir.Ints("experts", "hidden", "inter", "k"), streamParams()),
			Check: func(p ir.Params) error {
				if err := topK(p); err != nil {
					return err
				}
				// A warp streams its rows of every slot's expert at once.
				if p.Int("k") > GEMVMaxSlots {
					return fmt.Errorf("k %d: moe_down_gemv keeps every slot in flight, at most %d", p.Int("k"), GEMVMaxSlots)
				}
				return checkStream(p, p.Int("k")*p.Int("rows_per_warp"))
			},
			// Grid (row groups, token): a warp's rows_per_warp output rows
			// over all k slots.
			Launch: func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
				return c.Blocks(ir.Ceil(p.Int("hidden"), c.Warps()*p.Int("rows_per_warp")), rows, 1)
			},
			Reference: func(a *ir.Args) error { return Families[ir.MoEDown].Reference(a) },
		},
	}
}

// streamParams are the launch parameters every streaming family takes.
func streamParams() []ir.ParamSpec { return ir.Ints("rows_per_warp", "unroll") }

// Bounds of the streaming families' launch parameters: split_k divides
// the 8 warps of a 256-thread block; a lane holds at most GEMVMaxLoads
// 16-byte loads (4 registers each) so nothing spills to scratch.
const (
	GEMVMaxSplitK = 8
	GEMVMaxLoads  = 16
	GEMVMaxSlots  = 8
	// GEMVStageBytes bounds a staged block's weight rows in shared memory
	// (static shared memory, 48 KiB on both targets).
	GEMVStageBytes = 48 << 10
	// L2PrefetchBytes bounds what one launch asks the L2 for before its
	// PDL_WAIT() (l2_prefetch): a third of the H200's 50 MB, so the lines
	// stay there beside what the launch before it streams (≤ 19 MB in the
	// decode step but for the LM head, which nothing prefetches beside).
	L2PrefetchBytes = 16 << 20
)

// GEMVPrefetchChunks are the 16-byte chunks of each warp's slice of a row
// that an l2_prefetch gemv block prefetches: the whole slice when the
// launch's n × k matrix is within L2PrefetchBytes, else the same fraction
// of every slice (at least one chunk), so the launch's total stays within
// it and every warp's first loads find the L2.
func GEMVPrefetchChunks(p ir.Params) int {
	k, n := int64(p.Int("k")), int64(p.Int("n"))
	per := (k/8 + int64(p.Int("split_k")) - 1) / int64(p.Int("split_k"))
	if total := n * k * 2; total > L2PrefetchBytes {
		per = max(1, per*L2PrefetchBytes/total)
	}
	return int(per)
}

// GEMVStagedBytes are the shared-memory bytes a staged gemv block holds:
// its row groups' rows (a block of GEMVMaxSplitK warps) of k BF16 weights.
func GEMVStagedBytes(p ir.Params) int {
	return GEMVMaxSplitK / p.Int("split_k") * p.Int("rows_per_warp") * p.Int("k") * 2
}

// checkStream bounds the loads a lane keeps in flight: rows weight rows
// times unroll chunks.
func checkStream(p ir.Params, rows int) error {
	if u := p.Int("unroll"); u > 8 {
		return fmt.Errorf("unroll %d: want 1 to 8", u)
	}
	if rows*p.Int("unroll") > GEMVMaxLoads {
		return fmt.Errorf("%d rows × unroll %d: a lane would hold more than %d loads", rows, p.Int("unroll"), GEMVMaxLoads)
	}
	return nil
}

// operandsOf are the operands of the family kind, which its streaming
// variant takes unchanged.
func operandsOf(kind ir.Kind) []ir.OperandSpec {
	for _, f := range families() {
		if f.Kind == kind {
			return slices.Clone(f.Operands)
		}
	}
	panic("kernels: no family " + string(kind))
}

// gemvFamily is the streaming variant kind of the matmul family of: its
// operands and reference, several rows per warp and split-K (gemv.tmpl and
// gemv_add.tmpl share gemv_stream.tmpl's kernel).
func gemvFamily(kind, of ir.Kind) *ir.Family {
	return &ir.Family{
		Kind:     kind,
		Operands: operandsOf(of),
		Params:   cat(ir.Ints("k", "n", "split_k"), streamParams(), ir.Flags("early", "staged", "l2_prefetch"), ir.OptionalFlags("late_trigger")),
		Check: func(p ir.Params) error {
			if s := p.Int("split_k"); s&(s-1) != 0 || s > GEMVMaxSplitK {
				return fmt.Errorf("split_k %d: want a power of two up to %d (it divides a block's warps)", s, GEMVMaxSplitK)
			}
			if p.Flag("late_trigger") && (p.Flag("early") || p.Flag("staged")) {
				return fmt.Errorf("late_trigger with early or staged: the trigger moves in the late and l2_prefetch kernels only")
			}
			if p.Flag("l2_prefetch") && (p.Flag("early") || p.Flag("staged")) {
				return fmt.Errorf("l2_prefetch with early or staged: a kernel reads one of them before its wait, not two")
			}
			if p.Flag("staged") {
				if p.Flag("early") {
					return fmt.Errorf("early and staged: a kernel streams its first chunks into registers or its rows into shared memory, not both")
				}
				if b := GEMVStagedBytes(p); b > GEMVStageBytes {
					return fmt.Errorf("staged: a block's %d bytes of weight rows exceed the %d a block stages", b, GEMVStageBytes)
				}
			}
			return checkStream(p, p.Int("rows_per_warp"))
		},
		// Blocks of warps/split_k row groups, rows_per_warp rows each.
		Launch: func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
			groups := max(1, c.Warps()/p.Int("split_k"))
			return c.Blocks(ir.Ceil(p.Int("n"), groups*p.Int("rows_per_warp")), rows, 1)
		},
		Reference: func(a *ir.Args) error { return Families[of].Reference(a) },
		// gemv writes y, gemv_add adds into it; rmsnorm_gemv norms x first.
		TemplateData: func(p ir.Params) map[string]any {
			return map[string]any{"accumulate": kind == ir.GEMVAdd, "norm": kind == ir.RMSNormGEMV, "max_loads": GEMVMaxLoads,
				"stage_bytes": GEMVStageBytes, "prefetch_chunks": GEMVPrefetchChunks(p), "topk": false}
		},
	}
}

// rmsnormGEMV declares rmsnorm_gemv: the layer norm (rmsnorm of one vector
// per row, width k) folded into the projection of one row that consumes it
// (the fusion pass's rule). Its blocks stream their weight rows as gemv
// does against x·(1+norm_w) and scale each sum by the row's
// rsqrt(mean(x²)+eps) at the end (one scalar per row), so no reduction
// stands before the stream; block 0 of each row also writes the normed row
// to xn, for the norm's other readers (the experts, the hidden rows the
// logits phase reads). Its reference is the pair's: rmsnorm into xn, then
// matmul from it; the GPU's sums round differently (the scale after the
// sum), within float rounding of it.
func rmsnormGEMV() *ir.Family {
	f := gemvFamily(ir.RMSNormGEMV, ir.MatMul)
	f.Operands = []ir.OperandSpec{
		{Name: "y", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("n")},
		{Name: "x", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("k")},
		{Name: "norm_w", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("k")},
		{Name: "w", DType: ir.BF16, Access: ir.Read, Extent: ir.Fixed("n", "k")},
		{Name: "xn", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("k")},
	}
	f.Params = cat(f.Params, ir.Reals("eps"), ir.Flags("one_plus"))
	f.Reference = func(a *ir.Args) error {
		norm := a.Sub(Families[ir.RMSNorm], RMSNormGEMVNormParams(a.Params), "xn", "x", "norm_w")
		if err := norm.Family.Reference(norm); err != nil {
			return err
		}
		mm := a.Sub(Families[ir.MatMul], ir.Params{Ints: map[string]int64{"k": int64(a.Int("k")), "n": int64(a.Int("n"))}}, "y", "xn", "w")
		return mm.Family.Reference(mm)
	}
	return f
}

// rmsnormRouterTopK declares rmsnorm_router_topk: rmsnorm_gemv over the
// router's rows (n = the experts) with router_topk folded in. Its blocks
// compute the logits as rmsnorm_gemv's do, then arrive on count (a state
// the runtime's reset zeroes, flipped by 2³¹ a launch as the grid barrier's
// count); the last block to arrive reads every row's logits back and
// ranks them (softmax, top_k, renormalized), writing ids and weights. No
// block waits for another, so the grid need not be resident at once. The
// MoE launches after it read the ids instead of ranking 256 logits in
// every block, and moe_decode_down, two launches later, may read them
// before its programmatic wait (docs/pdl.md). Its reference is
// rmsnorm_gemv's, then router_topk's, and the count flipped.
func rmsnormRouterTopK() *ir.Family {
	f := rmsnormGEMV()
	f.Kind = ir.RMSNormRouterTopK
	f.Operands = append(f.Operands,
		ir.OperandSpec{Name: "ids", DType: ir.I32, Access: ir.Write, Extent: ir.PerRow("top_k")},
		ir.OperandSpec{Name: "weights", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("top_k")},
		ir.OperandSpec{Name: "count", DType: ir.I32, Access: ir.ReadWrite, Extent: ir.Const(1)},
	)
	f.Params = cat(f.Params, ir.Ints("top_k"))
	check := f.Check
	f.Check = func(p ir.Params) error {
		if err := check(p); err != nil {
			return err
		}
		if k, n := p.Int("top_k"), p.Int("n"); k > n || k > WarpLanes {
			return fmt.Errorf("top_k %d: want at most the %d router rows and the %d lanes that write them", k, n, WarpLanes)
		}
		if n := p.Int("n"); n > MoEDecodeMaxExperts {
			return fmt.Errorf("n %d: one warp ranks at most %d router logits", n, MoEDecodeMaxExperts)
		}
		return nil
	}
	data := f.TemplateData
	f.TemplateData = func(p ir.Params) map[string]any {
		d := data(p)
		d["norm"], d["topk"] = true, true
		return d
	}
	gemv := f.Reference
	f.Reference = func(a *ir.Args) error {
		count := a.I32("count")
		if c := uint32(count[0]); c&^MoEDecodeRouteBarrierFlip != 0 {
			return fmt.Errorf("rmsnorm_router_topk: the arrival count is %#x, want 0 or 2³¹ (a launch did not finish)", c)
		}
		if a.N <= 0 {
			return nil
		}
		if err := gemv(a); err != nil {
			return err
		}
		RouterTopK(a.I32("ids"), a.F32("weights"), a.F32("y"), a.N, a.Int("n"), a.Int("top_k"))
		count[0] = int32(uint32(count[0]) ^ MoEDecodeRouteBarrierFlip)
		return nil
	}
	return f
}

// WarpLanes is the lanes of the narrowest warp of the GPU targets (wave32
// on gfx1151): a kernel whose lane k writes slot k takes at most as many
// slots.
const WarpLanes = 32

// RMSNormGEMVNormParams are the rmsnorm parameters an rmsnorm_gemv's norm
// runs with: one vector of k per row, the rows packed.
func RMSNormGEMVNormParams(p ir.Params) ir.Params {
	k := int64(p.Int("k"))
	n := ir.Params{Ints: map[string]int64{"width": k, "heads": 1, "x_stride": k, "y_stride": k}}
	n.SetReal("eps", p.Real("eps"))
	n.SetFlag("one_plus", p.Flag("one_plus"))
	return n
}
