package kernels

import (
	"fmt"

	"github.com/aimaproject/aimac/ir"
)

// gdnDecodeStep declares gdn_decode_step: the whole Gated DeltaNet step
// after the input projections (SPEC §3 steps 2–8) in one launch, made by the
// planner's fusion pass from the chain causal_conv1d_silu, gdn_gates,
// l2norm_heads (q, scaled), l2norm_heads (k), gated_delta_recurrent,
// gated_rmsnorm. Its reference is that chain's references run in order on
// scratch rows, so it computes bit for bit what the chain does.
func gdnDecodeStep() *ir.Family {
	channels := func(p ir.Params) int64 { return int64(GDNChannels(p)) }
	return &ir.Family{
		Kind: ir.GDNDecodeStep,
		Operands: []ir.OperandSpec{
			{Name: "y", DType: ir.F32, Access: ir.Write, Extent: ir.PerRow("v_heads", "v_dim")},
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
		},
		Params: cat(ir.Ints("k_heads", "v_heads", "k_dim", "v_dim", "kernel"), ir.Reals("l2_eps", "q_scale", "k_scale", "eps")),
		Check: func(p ir.Params) error {
			if p.Int("v_heads")%p.Int("k_heads") != 0 {
				return fmt.Errorf("v_heads %d is not a multiple of k_heads %d", p.Int("v_heads"), p.Int("k_heads"))
			}
			if p.Int("kernel") < 1 {
				return fmt.Errorf("conv kernel %d is not positive", p.Int("kernel"))
			}
			return nil
		},
		// One block per key head: it owns the conv channels of its q and k
		// head and of its value heads (so no other block reads a conv state
		// it rewrites) and the state slices of those value heads, in turn.
		Launch: func(p ir.Params, _ int, c ir.LaunchConfig) ir.LaunchShape { return c.Blocks(p.Int("k_heads"), 1, 1) },
		Reference: func(a *ir.Args) error {
			GDNDecodeStep(a.F32("y"), a.F32("mixed"), a.F32("conv_w"), a.F32("conv_state"), a.F32("b"), a.F32("a"),
				a.F32("a_log"), a.F32("dt_bias"), a.F32("z"), a.F32("norm_w"), a.F32("state"), a.N,
				a.Int("k_heads"), a.Int("v_heads"), a.Int("k_dim"), a.Int("v_dim"), a.Int("kernel"),
				a.Real32("l2_eps"), a.Real32("q_scale"), a.Real32("k_scale"), a.Real32("eps"))
			return nil
		},
	}
}

// GDNChannels is the conv width of a gdn_decode_step: q and k of every key
// head, then v of every value head.
func GDNChannels(p ir.Params) int {
	return 2*p.Int("k_heads")*p.Int("k_dim") + p.Int("v_heads")*p.Int("v_dim")
}

// GDNDecodeStep runs the unfused chain's references in order on scratch
// rows: the conv (+SiLU) into conv rows, the gates, the l2 norms of q (with
// qScale) and k (kScale) in place, the delta rule into output rows, and the
// gated RMSNorm with z into y. mixed: [n][channels]; the conv output's q, k
// and v sit at columns 0, hk·dk and 2·hk·dk as in the unfused layout.
func GDNDecodeStep(y, mixed, convW, convState, b, a, aLog, dtBias, z, normW, state []float32, n, hk, hv, dk, dv, kernel int,
	l2Eps, qScale, kScale, eps float32) {
	if n <= 0 {
		return
	}
	o := gdnRecurrentRows(mixed, convW, convState, b, a, aLog, dtBias, state, n, hk, hv, dk, dv, kernel, l2Eps, qScale, kScale)
	GatedRMSNorm(y, o, z, normW, n*hv, dv, eps)
}

// gdnRecurrentRows is the chain up to the gated norm: the conv (+SiLU), the
// gates, the l2 norms of q and k and the delta rule, on scratch rows; it
// returns the recurrence's output rows [n][hv][dv].
func gdnRecurrentRows(mixed, convW, convState, b, a, aLog, dtBias, state []float32, n, hk, hv, dk, dv, kernel int,
	l2Eps, qScale, kScale float32) []float32 {
	channels := 2*hk*dk + hv*dv
	cv := make([]float32, n*channels)
	beta := make([]float32, n*hv)
	g := make([]float32, n*hv)
	o := make([]float32, n*hv*dv)
	CausalConv1dSiLU(cv, mixed, convW, convState, n, channels, kernel)
	GDNGates(beta, g, b, a, aLog, dtBias, n, hv)
	L2NormHeads(cv, channels, n, hk, dk, l2Eps, qScale)
	L2NormHeads(cv[hk*dk:], channels, n, hk, dk, l2Eps, kScale)
	GatedDeltaRecurrent(o, cv, cv[hk*dk:], cv[2*hk*dk:], channels, beta, g, state, n, hk, hv, dk, dv)
	return o
}

// StaticSharedBytes is the most shared memory a kernel's static arrays
// may take on every target (CUDA's limit without the dynamic opt-in).
const StaticSharedBytes = 48 << 10

// GDNDecodeStepMaxState is the most state elements one thread of a
// gdn_decode_step block keeps in registers (k_dim·v_dim / threads).
const GDNDecodeStepMaxState = 64

// GDNDecodeStepFits reports why the gdn_decode_step template cannot run
// these parameters with launch configuration c, or nil when it can: a value
// head's columns spread evenly over the block's threads, its rows evenly
// over the column groups, at most GDNDecodeStepMaxState state elements per
// thread, two warps for the two l2 norms, and q, k and v rows that fit the
// block's shared memory with the reductions.
func GDNDecodeStepFits(p ir.Params, c ir.LaunchConfig) error {
	dk, dv, kw := p.Int("k_dim"), p.Int("v_dim"), p.Int("kernel")
	switch {
	case c.Threads <= 0 || c.Warp <= 0:
		return fmt.Errorf("no GPU launch configuration")
	case dv <= 0 || dv > c.Threads || c.Threads%dv != 0:
		return fmt.Errorf("v_dim %d does not divide the %d threads of a block", dv, c.Threads)
	case dk <= 0 || dk%(c.Threads/dv) != 0:
		return fmt.Errorf("k_dim %d does not split over %d column groups", dk, c.Threads/dv)
	case dk*dv/c.Threads > GDNDecodeStepMaxState:
		return fmt.Errorf("a %d×%d state slice needs %d registers a thread, more than %d", dk, dv, dk*dv/c.Threads, GDNDecodeStepMaxState)
	case c.Warps() < 2:
		return fmt.Errorf("%d warps, the l2 norms need 2", c.Warps())
	case kw < 1 || kw > 8:
		return fmt.Errorf("conv kernel %d outside 1..8", kw)
	}
	// Its arrays are static: within 48 KiB whatever the dynamic limit.
	shared, limit := 4*(2*dk+dv+2*c.Threads+c.Warps()), min(c.MaxSharedBytes, StaticSharedBytes)
	if c.MaxSharedBytes > 0 && shared > limit {
		return fmt.Errorf("%d bytes of shared memory, more than %d", shared, limit)
	}
	return nil
}
