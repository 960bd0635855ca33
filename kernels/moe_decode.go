package kernels

import (
	"fmt"

	"github.com/aimaproject/aimac/ir"
)

// The decode step's MoE block after the router projection (SPEC §4) in two
// weight-streaming launches, made by the planner's fusion pass
// (docs/moe-decode.md):
//
//   - moe_decode_gate_up: router_topk, moe_gate_up, the shared expert's
//     gate_proj and up_proj and their silu_mul. Every block ranks the
//     router logits on chip (one warp: softmax, top-k, renormalization), so
//     no launch waits for a separate top-k; it streams the gate and up rows
//     of one selected expert, or of the shared expert (a k+1-th expert of
//     width shared_inter), and writes act[t] = [k × inter routed | shared_inter
//     shared]. One block also writes the ids and weights for the down launch.
//   - moe_decode_down: moe_down, the shared expert's down_proj, its sigmoid
//     gate (the shared_expert_gate dot of the normed row, on chip in every
//     block) and shared_expert_combine: a warp owns output rows over every
//     expert, so the residual is updated in place without atomics.
//
// Their references run the unfused families' references in order on
// scratch rows, so they compute bit for bit what the eleven launches' tail
// did.
func moeDecodeFamilies() []*ir.Family {
	experts := func(p ir.Params, _ int64) int64 {
		return int64(p.Int("experts")) * 2 * int64(p.Int("inter")) * int64(p.Int("hidden"))
	}
	act := func(p ir.Params, rows int64) int64 { return rows * int64(MoEDecodeActWidth(p)) }
	params := moeDecodeParamSpecs()
	return []*ir.Family{
		{
			Kind: ir.MoEDecodeGateUp,
			Operands: []ir.OperandSpec{
				{Name: "act", DType: ir.F32, Access: ir.Write, Extent: act},
				{Name: "ids", DType: ir.I32, Access: ir.Write, Extent: ir.PerRow("k")},
				{Name: "weights", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("k")},
				{Name: "x", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("hidden")},
				{Name: "logits", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("experts")},
				{Name: "gate_up", DType: ir.BF16, Access: ir.Read, Extent: experts},
				{Name: "shared_gate", DType: ir.BF16, Access: ir.Read, Extent: ir.Fixed("shared_inter", "hidden")},
				{Name: "shared_up", DType: ir.BF16, Access: ir.Read, Extent: ir.Fixed("shared_inter", "hidden")},
			},
			// l2_prefetch: the shared expert's warps ask the L2 for their
			// rows before PDL_WAIT() (docs/pdl.md).
			// late_trigger (optional): the trigger once the stream's last
			// pass of loads is out, not at the wait (docs/pdl.md).
			Params: cat(params, ir.Flags("l2_prefetch"), ir.OptionalFlags("late_trigger")),
			Check: func(p ir.Params) error {
				if err := moeDecodeCheck(p); err != nil {
					return err
				}
				// A warp streams a gate and an up row for each of its rows.
				return checkStream(p, 2*p.Int("rows_per_warp"))
			},
			// Grid (k × ⌈inter / rows a block⌉ routed blocks, then ⌈shared_inter
			// / rows a block⌉ shared blocks; rows).
			Launch: func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
				per := c.Warps() * p.Int("rows_per_warp")
				return c.Blocks(p.Int("k")*ir.Ceil(p.Int("inter"), per)+ir.Ceil(p.Int("shared_inter"), per), rows, 1)
			},
			Reference: func(a *ir.Args) error {
				MoEDecodeGateUp(a.F32("act"), a.I32("ids"), a.F32("weights"), a.F32("x"), a.F32("logits"),
					a.BF16("gate_up"), a.BF16("shared_gate"), a.BF16("shared_up"), a.N,
					a.Int("experts"), a.Int("hidden"), a.Int("inter"), a.Int("k"), a.Int("shared_inter"))
				return nil
			},
			TemplateData: func(ir.Params) map[string]any { return map[string]any{"ranked": false} },
		},
		{
			Kind: ir.MoEDecodeDown,
			Operands: []ir.OperandSpec{
				{Name: "y", DType: ir.F32, Access: ir.ReadWrite, Extent: ir.PerRow("hidden")},
				{Name: "act", DType: ir.F32, Access: ir.Read, Extent: act},
				{Name: "ids", DType: ir.I32, Access: ir.Read, Extent: ir.PerRow("k")},
				{Name: "weights", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("k")},
				{Name: "x", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("hidden")},
				{Name: "down", DType: ir.BF16, Access: ir.Read, Extent: ir.Fixed("experts", "hidden", "inter")},
				{Name: "shared_down", DType: ir.BF16, Access: ir.Read, Extent: ir.Fixed("hidden", "shared_inter")},
				{Name: "shared_expert_gate", DType: ir.BF16, Access: ir.Read, Extent: ir.Fixed("hidden")},
			},
			// warp_per_slot chooses the layout: off, a warp owns rows_per_warp
			// output rows and streams them of every slot's expert at once;
			// on, a block owns rows_per_warp output rows and each warp streams
			// them of one slot's expert (every row on one act slice), the
			// warps' sums meeting in shared memory. early_ids (warp per slot
			// only): each warp reads its slot's id before the programmatic
			// wait and asks the L2 for its expert's rows — only where the ids
			// were written two launches back or earlier (rmsnorm_router_topk's
			// ranking; the planner's rule, docs/pdl.md), never by the launch
			// just before.
			Params: cat(params, ir.Flags("warp_per_slot", "early_ids"), ir.OptionalFlags("late_trigger")),
			Check: func(p ir.Params) error {
				if p.Flag("late_trigger") && !p.Flag("warp_per_slot") {
					return fmt.Errorf("late_trigger: only the warp-per-slot layout places its own trigger")
				}
				if err := moeDecodeCheck(p); err != nil {
					return err
				}
				if p.Flag("early_ids") && !p.Flag("warp_per_slot") {
					return fmt.Errorf("early_ids: the warp-per-slot layout reads a slot's id a warp; the other layout does not")
				}
				if p.Flag("warp_per_slot") {
					if p.Int("rows_per_warp") > MoEDecodeMaxBlockRows {
						return fmt.Errorf("rows_per_warp %d: a block keeps at most %d rows' partial sums", p.Int("rows_per_warp"), MoEDecodeMaxBlockRows)
					}
					return checkStream(p, p.Int("rows_per_warp"))
				}
				// A warp streams its rows of every slot's expert at once, then
				// the shared expert's.
				return checkStream(p, p.Int("k")*p.Int("rows_per_warp"))
			},
			// Grid (⌈hidden / rows a block⌉, rows): rows_per_warp output rows
			// a warp (or, warp_per_slot, a block) over every expert.
			Launch: func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
				per := c.Warps() * p.Int("rows_per_warp")
				if p.Flag("warp_per_slot") {
					per = p.Int("rows_per_warp")
				}
				return c.Blocks(ir.Ceil(p.Int("hidden"), per), rows, 1)
			},
			Reference: func(a *ir.Args) error {
				MoEDecodeDown(a.F32("y"), a.F32("act"), a.I32("ids"), a.F32("weights"), a.F32("x"),
					a.BF16("down"), a.BF16("shared_down"), a.BF16("shared_expert_gate"), a.N,
					a.Int("experts"), a.Int("hidden"), a.Int("inter"), a.Int("k"), a.Int("shared_inter"))
				return nil
			},
		},
	}
}

// MoEDecodeMaxExperts bounds the router logits one warp ranks: a lane holds
// experts / 32 probabilities in registers.
const MoEDecodeMaxExperts = 512

// MoEDecodeMaxBlockRows bounds a warp_per_slot down block's output rows:
// their partial sums, k + 1 a row, sit in shared memory.
const MoEDecodeMaxBlockRows = 16

// moeDecodeGateUpRanked declares moe_decode_gate_up_ranked: moe_decode_gate_up
// on ids that the router's launch ranked (rmsnorm_router_topk), so its
// routed blocks read their slot's id instead of ranking the logits, and it
// writes no ids or weights. Its reference is moe_decode_gate_up's after
// the ranking.
func moeDecodeGateUpRanked() *ir.Family {
	gu := moeDecodeFamilies()[0]
	op := func(name string) ir.OperandSpec { return gu.Operands[gu.Operand(name)] }
	ids := op("ids")
	ids.Access = ir.Read
	return &ir.Family{
		Kind:     ir.MoEDecodeGateUpRanked,
		Operands: []ir.OperandSpec{op("act"), ids, op("x"), op("gate_up"), op("shared_gate"), op("shared_up")},
		Params:   gu.Params,
		Check:    gu.Check,
		Launch:   gu.Launch,
		Reference: func(a *ir.Args) error {
			MoEDecodeGateUpRanked(a.F32("act"), a.I32("ids"), a.F32("x"), a.BF16("gate_up"), a.BF16("shared_gate"), a.BF16("shared_up"),
				a.N, a.Int("experts"), a.Int("hidden"), a.Int("inter"), a.Int("k"), a.Int("shared_inter"))
			return nil
		},
		TemplateData: func(ir.Params) map[string]any { return map[string]any{"ranked": true} },
	}
}

// moeDecodeParamSpecs are the shape and streaming parameters every fused MoE
// decode family takes.
func moeDecodeParamSpecs() []ir.ParamSpec {
	return cat(ir.Ints("experts", "hidden", "inter", "k", "shared_inter"), streamParams())
}

// moeDecodeCheck is what both fused MoE families need of their parameters:
// top-k within the experts, every slot's loads in flight at once (at most
// GEMVMaxSlots), and a router one warp ranks.
func moeDecodeCheck(p ir.Params) error {
	if err := topK(p); err != nil {
		return err
	}
	if k := p.Int("k"); k < 1 || k > GEMVMaxSlots {
		return fmt.Errorf("k %d: the fused MoE block keeps every slot in flight, 1 to %d", k, GEMVMaxSlots)
	}
	if e := p.Int("experts"); e > MoEDecodeMaxExperts {
		return fmt.Errorf("experts %d: one warp ranks at most %d router logits", e, MoEDecodeMaxExperts)
	}
	if p.Int("inter") < 1 || p.Int("shared_inter") < 1 || p.Int("hidden") < 1 {
		return fmt.Errorf("hidden %d, inter %d, shared_inter %d: want positive widths", p.Int("hidden"), p.Int("inter"), p.Int("shared_inter"))
	}
	return nil
}

// MoEDecodeActWidth is a token's row of the fused block's activations: the
// k routed experts' silu(gate)·up, then the shared expert's.
func MoEDecodeActWidth(p ir.Params) int {
	return p.Int("k")*p.Int("inter") + p.Int("shared_inter")
}

// MoEDecodeGateUp runs router_topk, moe_gate_up, the shared expert's two
// projections and silu_mul (the references, over all n rows at once as the
// unfused launches do) and lays the activations out as the fused kernel
// does: act[t] = [k × inter routed | shared shared]. ids, weights: [n][k].
func MoEDecodeGateUp(act []float32, ids []int32, weights, x, logits []float32, gateUp, sharedGate, sharedUp []uint16,
	n, experts, hidden, inter, k, shared int) {
	if n <= 0 {
		return
	}
	RouterTopK(ids, weights, logits, n, experts, k)
	MoEDecodeGateUpRanked(act, ids, x, gateUp, sharedGate, sharedUp, n, experts, hidden, inter, k, shared)
}

// MoEDecodeGateUpRanked is MoEDecodeGateUp after the ranking: moe_gate_up
// on the given ids, the shared expert's two projections and silu_mul, laid
// out as act[t] = [k × inter routed | shared shared].
func MoEDecodeGateUpRanked(act []float32, ids []int32, x []float32, gateUp, sharedGate, sharedUp []uint16,
	n, experts, hidden, inter, k, shared int) {
	if n <= 0 {
		return
	}
	routed := make([]float32, n*k*inter)
	MoEGateUp(routed, x, ids, gateUp, n, hidden, inter, k, experts)
	g, u, s := make([]float32, n*shared), make([]float32, n*shared), make([]float32, n*shared)
	MatMul(g, x, sharedGate, n, hidden, shared)
	MatMul(u, x, sharedUp, n, hidden, shared)
	SiLUMul(s, g, u, n*shared)
	width := k*inter + shared
	for t := range n {
		copy(act[t*width:][:k*inter], routed[t*k*inter:][:k*inter])
		copy(act[t*width+k*inter:][:shared], s[t*shared:][:shared])
	}
}

// MoEDecodeDown runs moe_down, the shared expert's down projection, the
// shared_expert_gate projection of x and shared_expert_combine (the
// references, over all n rows at once) on act laid out as MoEDecodeGateUp
// writes it: y[t] += routed[t] + sigmoid(x[t]·gate) · shared[t].
func MoEDecodeDown(y, act []float32, ids []int32, weights, x []float32, down, sharedDown, sharedGate []uint16,
	n, experts, hidden, inter, k, shared int) {
	if n <= 0 {
		return
	}
	width := k*inter + shared
	routedAct, sharedAct := make([]float32, n*k*inter), make([]float32, n*shared)
	for t := range n {
		copy(routedAct[t*k*inter:][:k*inter], act[t*width:][:k*inter])
		copy(sharedAct[t*shared:][:shared], act[t*width+k*inter:][:shared])
	}
	routed, out, gate := make([]float32, n*hidden), make([]float32, n*hidden), make([]float32, n)
	MoEDown(routed, routedAct, ids, weights, down, n, hidden, inter, k, experts)
	MatMul(out, sharedAct, sharedDown, n, shared, hidden)
	MatMul(gate, x, sharedGate, n, hidden, 1)
	SharedExpertCombine(y, routed, out, gate, n, hidden)
}

// MoEDecodeRouteMaxHidden bounds moe_decode_route_gate_up's hidden width:
// every block keeps the normed row in shared memory (4 bytes an element,
// within the 48 KiB of static shared memory).
const MoEDecodeRouteMaxHidden = 8192

// MoEDecodeRouteMaxDots bounds the dot products a moe_decode_route_gate_up
// block sums before its grid barrier (its router rows, then a gate and an
// up row for each of its shared-expert rows): one register a thread each.
const MoEDecodeRouteMaxDots = 64

// MoEDecodeRouteDots is how many router rows and shared-expert rows one
// block of a moe_decode_route_gate_up grid of p's blocks takes before the
// barrier: row r of each goes to block r mod blocks.
func MoEDecodeRouteDots(p ir.Params) (router, shared int) {
	b := max(p.Int("blocks"), 1)
	return ir.Ceil(p.Int("experts"), b), ir.Ceil(p.Int("shared_inter"), b)
}

// moeDecodeRouteGateUp declares moe_decode_route_gate_up: the router's
// rmsnorm_gemv (the post-attention norm and the router projection) folded
// into moe_decode_gate_up, so a decode step's MoE block is two launches
// (docs/moe-decode.md). Each of the grid's blocks (blocks × rows, all
// resident at once) loads its router rows and shared-expert rows before
// the programmatic wait, then norms the row, sums its dots, writes its
// logits and shared-expert activations and arrives at the grid barrier on
// barrier (a count the runtime's reset zeroes and every launch leaves
// flipped by 2³¹: reusable without a host reset); after it, each warp
// ranks the published logits and streams routed rows as moe_decode_gate_up
// does. Block 0 writes the normed row (xn, for moe_decode_down). Its
// reference is the pair's: rmsnorm_gemv, then moe_decode_gate_up's.
func moeDecodeRouteGateUp() *ir.Family {
	gu := moeDecodeFamilies()[0]
	op := func(name string) ir.OperandSpec { return gu.Operands[gu.Operand(name)] }
	logits := op("logits")
	logits.Access = ir.Write
	xn := op("x")
	xn.Name, xn.Access = "xn", ir.Write
	return &ir.Family{
		Kind: ir.MoEDecodeRouteGateUp,
		Operands: []ir.OperandSpec{
			op("act"), op("ids"), op("weights"), logits, xn,
			{Name: "x", DType: ir.F32, Access: ir.Read, Extent: ir.PerRow("hidden")},
			{Name: "norm_w", DType: ir.F32, Access: ir.Read, Extent: ir.Fixed("hidden")},
			{Name: "router", DType: ir.BF16, Access: ir.Read, Extent: ir.Fixed("experts", "hidden")},
			op("gate_up"), op("shared_gate"), op("shared_up"),
			{Name: "barrier", DType: ir.I32, Access: ir.ReadWrite, Extent: ir.Const(1)},
		},
		Params: cat(moeDecodeParamSpecs(), ir.Ints("blocks"), ir.Reals("eps"), ir.Flags("one_plus")),
		Check: func(p ir.Params) error {
			if err := gu.Check(p); err != nil {
				return err
			}
			if h := p.Int("hidden"); h > MoEDecodeRouteMaxHidden {
				return fmt.Errorf("hidden %d: a block keeps the normed row in shared memory, at most %d", h, MoEDecodeRouteMaxHidden)
			}
			if r, s := MoEDecodeRouteDots(p); r+2*s > MoEDecodeRouteMaxDots {
				return fmt.Errorf("blocks %d: each block would sum %d router and %d shared-expert dots before the barrier, more than %d",
					p.Int("blocks"), r, 2*s, MoEDecodeRouteMaxDots)
			}
			return nil
		},
		// Grid (blocks, rows): every block of it waits at one barrier, so
		// the runtime checks that the whole grid is resident at once.
		Launch: func(p ir.Params, rows int, c ir.LaunchConfig) ir.LaunchShape {
			return c.Blocks(p.Int("blocks"), rows, 1)
		},
		GridBarrier: true,
		Reference: func(a *ir.Args) error {
			return MoEDecodeRouteGateUp(a)
		},
	}
}

// MoEDecodeRouteGateUpNormParams are the rmsnorm_gemv parameters of the
// router that moe_decode_route_gate_up folds in (the streaming parameters
// are the CPU's ones, which its reference ignores).
func MoEDecodeRouteGateUpNormParams(p ir.Params) ir.Params {
	n := ir.Params{Ints: map[string]int64{"k": int64(p.Int("hidden")), "n": int64(p.Int("experts")),
		"rows_per_warp": 1, "split_k": 1, "unroll": 1}}
	n.SetReal("eps", p.Real("eps"))
	n.SetFlag("one_plus", p.Flag("one_plus"))
	return n
}

// MoEDecodeRouteGateUpParams are the moe_decode_gate_up parameters of the
// same block: p without the router's.
func MoEDecodeRouteGateUpParams(p ir.Params) ir.Params {
	g := ir.Params{Ints: map[string]int64{}}
	for _, name := range []string{"experts", "hidden", "inter", "k", "shared_inter", "rows_per_warp", "unroll"} {
		g.Ints[name] = int64(p.Int(name))
	}
	return g
}

// MoEDecodeRouteBarrierFlip is what a launch adds to its barrier count:
// the count's top bit flips and its low bits stay 0.
const MoEDecodeRouteBarrierFlip = uint32(1) << 31

// MoEDecodeRouteGateUp is moe_decode_route_gate_up's reference: the
// router's rmsnorm_gemv (logits and the normed row xn), then
// moe_decode_gate_up's reference on them, and the barrier count flipped as
// a launch leaves it. A count with low bits set is an error: a launch did
// not finish, and a barrier would release early.
func MoEDecodeRouteGateUp(a *ir.Args) error {
	bar := a.I32("barrier")
	if c := uint32(bar[0]); c&^MoEDecodeRouteBarrierFlip != 0 {
		return fmt.Errorf("moe_decode_route_gate_up: the barrier count is %#x, want 0 or 2³¹ (a launch did not finish)", c)
	}
	if a.N <= 0 {
		return nil
	}
	norm := a.Sub(Families[ir.RMSNormGEMV], MoEDecodeRouteGateUpNormParams(a.Params), "logits", "x", "norm_w", "router", "xn")
	if err := norm.Family.Reference(norm); err != nil {
		return err
	}
	gu := a.Sub(Families[ir.MoEDecodeGateUp], MoEDecodeRouteGateUpParams(a.Params), "act", "ids", "weights", "xn", "logits",
		"gate_up", "shared_gate", "shared_up")
	if err := gu.Family.Reference(gu); err != nil {
		return err
	}
	bar[0] = int32(uint32(bar[0]) ^ MoEDecodeRouteBarrierFlip)
	return nil
}
