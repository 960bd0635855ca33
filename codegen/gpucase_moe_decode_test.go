package codegen

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
)

// moeDecode is a case kernel of the fused MoE decode families (the down
// family in its warp-owns-rows layout).
func moeDecode(family string, experts, hidden, inter, k, shared, rpw, unroll float64) plan.Kernel {
	p := map[string]float64{"experts": experts, "hidden": hidden, "inter": inter, "k": k,
		"shared_inter": shared, "rows_per_warp": rpw, "unroll": unroll}
	if family == "moe_decode_down" {
		p["warp_per_slot"], p["early_ids"] = 0, 0
	} else {
		p["l2_prefetch"] = 0
	}
	return kern(family, p)
}

// moeDownSlots is a moe_decode_down case kernel in its warp-per-slot
// layout: a block owns rows output rows, a warp streams one slot's.
func moeDownSlots(experts, hidden, inter, k, shared, rows, unroll float64) plan.Kernel {
	return kern("moe_decode_down", map[string]float64{"experts": experts, "hidden": hidden, "inter": inter, "k": k,
		"shared_inter": shared, "rows_per_warp": rows, "unroll": unroll, "warp_per_slot": 1, "early_ids": 0})
}

// routerTopK is an rmsnorm_router_topk case kernel: the router's
// rmsnorm_gemv (width k, n experts, the model's eps and 1+w) ranking top.
func routerTopK(k, n, rpw, split, unroll, top float64) plan.Kernel {
	nk := normGEMV(k, n, rpw, split, unroll, true)
	nk.Params.SetInt("top_k", int64(top))
	nk.Family, nk.Name = "rmsnorm_router_topk", "rmsnorm_router_topk_case"
	return nk
}

// ranked is a moe_decode_gate_up case kernel as moe_decode_gate_up_ranked
// (the same parameters, ids read).
func ranked(k plan.Kernel) plan.Kernel {
	k.Family, k.Name = "moe_decode_gate_up_ranked", "moe_decode_gate_up_ranked_case"
	return k
}

// earlyIDs is a warp-per-slot moe_decode_down case kernel reading its ids
// before the wait.
func earlyIDs(k plan.Kernel) plan.Kernel {
	k.Params = k.Params.Clone()
	k.Params.SetFlag("early_ids", true)
	k.Name = k.Family + "_early_ids_case"
	return k
}

// moeDecodeCases are the correctness cases of moe_decode_gate_up and
// moe_decode_down: the real router (256 experts, top-8) over small experts,
// the tiny fixtures' sizes (testdata/hf-tiny: 16 experts, top-4, inter 32,
// hidden 64; synth's tiny preset: 8 experts, top-2) with the parameters
// the stream pass gives them, odd widths (the one-element paths), top-k 1 and 3, a shared
// expert wider and narrower than the routed ones, a hidden width past the
// 16-byte chunks of the unrolled passes, the real hidden (2048: the gate
// dot's one chunk a thread) and one past a block's chunks (4096: its loop),
// two rows, with act rows whose width leaves the second row's routed or
// shared slice off 16-byte alignment (the one-element path for it). The
// down cases give slot k−1 of the first row an id outside the experts (it
// contributes nothing); outputs past n are poisoned.
var moeDecodeCases = []gpuCase{
	{"moe_dec_gu_router", moeDecode("moe_decode_gate_up", 256, 64, 16, 8, 24, 1, 1), 1, 0},
	{"moe_dec_gu_tiny", moeDecode("moe_decode_gate_up", 16, 64, 32, 4, 32, 1, 1), 1, 0},
	{"moe_dec_gu_synth", moeDecode("moe_decode_gate_up", 8, 64, 32, 2, 32, 1, 1), 1, 0},
	{"moe_dec_gu_odd", moeDecode("moe_decode_gate_up", 5, 20, 6, 3, 10, 2, 1), 1, 0},
	{"moe_dec_gu_k1", moeDecode("moe_decode_gate_up", 7, 16, 5, 1, 3, 1, 1), 1, 0},
	{"moe_dec_gu_rows2", moeDecode("moe_decode_gate_up", 40, 264, 24, 8, 8, 2, 4), 2, 0},
	{"moe_dec_gu_wide", moeDecode("moe_decode_gate_up", 64, 2048, 72, 8, 40, 2, 4), 1, 0},
	{"moe_dec_gu_real", moeDecode("moe_decode_gate_up", 12, 2048, 512, 8, 512, 1, 4), 1, 0},
	// gate_up with the shared expert's rows asked of the L2 before the
	// wait: the tiny fixtures', odd widths (no prefetch), a shared expert
	// past a block's rows, the real sizes, two rows.
	{"moe_dec_gu_l2pf_tiny", l2pf(moeDecode("moe_decode_gate_up", 16, 64, 32, 4, 32, 1, 1)), 1, 0},
	{"moe_dec_gu_l2pf_synth", l2pf(moeDecode("moe_decode_gate_up", 8, 64, 32, 2, 32, 1, 1)), 1, 0},
	{"moe_dec_gu_l2pf_odd", l2pf(moeDecode("moe_decode_gate_up", 5, 20, 6, 3, 10, 2, 1)), 1, 0},
	{"moe_dec_gu_l2pf_rows2", l2pf(moeDecode("moe_decode_gate_up", 40, 264, 24, 8, 8, 2, 4)), 2, 0},
	{"moe_dec_gu_l2pf_wide", l2pf(moeDecode("moe_decode_gate_up", 64, 2048, 72, 8, 40, 2, 4)), 1, 0},
	{"moe_dec_gu_l2pf_real", l2pf(moeDecode("moe_decode_gate_up", 12, 2048, 512, 8, 512, 2, 4)), 1, 0},
	// The router ranking once (rmsnorm_router_topk: the last block to
	// arrive ranks every row): the real router (split 8, top-8), the tiny
	// fixtures' (16 experts top-4, 8 top-2), odd widths (K % 8 ≠ 0, rows
	// past N in a block), top-1, two and three rows (each row's blocks
	// arrive on one count), with the L2 prefetch; then gate_up on the
	// ranked ids (an id outside the experts in the first row's last slot)
	// and down reading its ids before the wait.
	{"moe_rank_router_real", routerTopK(2048, 256, 1, 8, 1, 8), 1, 0},
	{"moe_rank_router_l2pf", l2pf(routerTopK(2048, 256, 1, 8, 1, 8)), 1, 0},
	{"moe_rank_router_tiny", routerTopK(64, 16, 1, 2, 1, 4), 1, 0},
	{"moe_rank_router_synth", routerTopK(64, 8, 1, 2, 1, 2), 1, 0},
	{"moe_rank_router_odd", routerTopK(20, 7, 2, 2, 4, 3), 2, 0},
	{"moe_rank_router_k1", routerTopK(16, 7, 1, 1, 1, 1), 1, 0},
	{"moe_rank_router_rows3", routerTopK(2048, 256, 1, 8, 1, 8), 3, 0},
	{"moe_rank_router_wide", routerTopK(264, 40, 4, 1, 4, 8), 2, 0},
	{"moe_rank_gu_real", ranked(moeDecode("moe_decode_gate_up", 12, 2048, 512, 8, 512, 2, 4)), 1, 0},
	{"moe_rank_gu_l2pf", l2pf(ranked(moeDecode("moe_decode_gate_up", 12, 2048, 512, 8, 512, 2, 4))), 1, 0},
	{"moe_rank_gu_tiny", ranked(moeDecode("moe_decode_gate_up", 16, 64, 32, 4, 32, 1, 1)), 1, 0},
	{"moe_rank_gu_odd", ranked(moeDecode("moe_decode_gate_up", 5, 20, 6, 3, 10, 2, 1)), 1, 0},
	{"moe_rank_gu_rows2", ranked(moeDecode("moe_decode_gate_up", 40, 264, 24, 8, 8, 2, 4)), 2, 0},
	{"moe_rank_dns_real", earlyIDs(moeDownSlots(9, 2048, 512, 8, 512, 8, 2)), 1, 0},
	{"moe_rank_dns_rem", earlyIDs(moeDownSlots(8, 1030, 512, 8, 256, 12, 1)), 2, 0},
	{"moe_rank_dns_tiny", earlyIDs(moeDownSlots(16, 64, 32, 4, 32, 8, 1)), 1, 0},
	{"moe_rank_dns_odd", earlyIDs(moeDownSlots(5, 13, 10, 3, 6, 8, 1)), 1, 0},
	{"moe_rank_dns_k1", earlyIDs(moeDownSlots(7, 16, 5, 1, 3, 8, 1)), 1, 0},
	{"moe_rank_dns_r16", earlyIDs(moeDownSlots(16, 1024, 512, 8, 520, 16, 1)), 2, 0},
	{"moe_dec_dn_tiny", moeDecode("moe_decode_down", 16, 64, 32, 4, 32, 1, 1), 1, 0},
	{"moe_dec_dn_synth", moeDecode("moe_decode_down", 8, 64, 32, 2, 32, 1, 1), 1, 0},
	{"moe_dec_dn_odd", moeDecode("moe_decode_down", 5, 13, 10, 3, 6, 2, 1), 1, 0},
	{"moe_dec_dn_k1", moeDecode("moe_decode_down", 7, 16, 5, 1, 3, 1, 1), 1, 0},
	{"moe_dec_dn_rows2", moeDecode("moe_decode_down", 8, 1030, 512, 8, 256, 2, 1), 2, 0},
	{"moe_dec_dn_wide", moeDecode("moe_decode_down", 8, 4096, 64, 4, 32, 2, 1), 1, 0},
	{"moe_dec_dn_real", moeDecode("moe_decode_down", 9, 2048, 512, 8, 512, 1, 2), 1, 0},
	{"moe_dec_dn_align", moeDecode("moe_decode_down", 6, 64, 16, 3, 12, 1, 1), 2, 0},
	{"moe_dec_dn_align2", moeDecode("moe_decode_down", 6, 64, 8, 3, 10, 1, 1), 2, 0},
	{"moe_dec_dn_1024", moeDecode("moe_decode_down", 16, 1024, 512, 8, 520, 1, 2), 2, 0},
	// The warp-per-slot layout: the real shapes with the planner's rule (8
	// rows, unroll 2), 4 rows, rows past hidden (hidden 1030, 12 rows: the
	// last block partial), the tiny fixtures', odd widths, top-1 and 3,
	// misaligned act rows, 16 rows (two shared rows a warp), two rows of
	// tokens.
	{"moe_dec_dns_real", moeDownSlots(9, 2048, 512, 8, 512, 8, 2), 1, 0},
	{"moe_dec_dns_r4", moeDownSlots(9, 2048, 512, 8, 512, 4, 2), 2, 0},
	{"moe_dec_dns_rem", moeDownSlots(8, 1030, 512, 8, 256, 12, 1), 2, 0},
	{"moe_dec_dns_tiny", moeDownSlots(16, 64, 32, 4, 32, 8, 1), 1, 0},
	{"moe_dec_dns_synth", moeDownSlots(8, 64, 32, 2, 32, 8, 1), 1, 0},
	{"moe_dec_dns_odd", moeDownSlots(5, 13, 10, 3, 6, 8, 1), 1, 0},
	{"moe_dec_dns_k1", moeDownSlots(7, 16, 5, 1, 3, 8, 1), 1, 0},
	{"moe_dec_dns_align", moeDownSlots(6, 64, 16, 3, 12, 8, 1), 2, 0},
	{"moe_dec_dns_align2", moeDownSlots(6, 64, 8, 3, 10, 8, 1), 2, 0},
	{"moe_dec_dns_r16", moeDownSlots(16, 1024, 512, 8, 520, 16, 1), 2, 0},
	{"moe_dec_dns_wide", moeDownSlots(8, 4096, 64, 4, 32, 8, 1), 1, 0},
}

// TestWriteGPUCasesMoEDecode writes the fused MoE decode families'
// correctness cases.
func TestWriteGPUCasesMoEDecode(t *testing.T) {
	out := *gpuCases
	if out == "" {
		out = t.TempDir()
	}
	for i, c := range moeDecodeCases {
		dir := filepath.Join(out, c.name)
		writeCase(t, dir, c, uint64(300+i))
		if entries, err := os.ReadDir(dir); err != nil || len(entries) < 4 {
			t.Errorf("case %s: wrote %d files (%v)", c.name, len(entries), err)
		}
	}
}

// TestCompileMoEDecodeCases compiles every correctness case's kernel for
// gfx1151 (no scratch) and to PTX.
func TestCompileMoEDecodeCases(t *testing.T) { compileCases(t, moeDecodeCases) }

// TestWriteGPUCasesMoEDecodeSpeed writes the fused MoE block's speed cases
// at the real model's sizes (256 experts of 512 × 2048, a shared expert of
// 512, top-8) with the launch parameters the planner gives sm_90
// (TestStreamMoEDecodeParams), and the other choice beside it on the same
// bytes. One row
// reads 8 experts, which fit in the L2 (as speed_moe_gu_gemv's); the
// several-row cases route each row to 8 experts of its own (the router
// logits favour them, the down ids say so), so a launch reads 4 × 8
// (gate_up, 138 MB) or 8 × 8 (down, 136 MB) experts: past the 50 MB L2.
// Without -gpucases the same cases are written at a sixteenth of the
// experts.
func TestWriteGPUCasesMoEDecodeSpeed(t *testing.T) {
	out, E := *gpuCases, 256.0
	if out == "" {
		out, E = t.TempDir(), 64
	}
	const H, I, S, top = 2048, 512, 512, 8
	gu := func(rows int64) int64 { return rows*top*2*I*H*2 + 2*S*H*2 + rows*(H*4+int64(E)*4+(top*I+S)*4) }
	dn := func(rows int64) int64 { return rows*top*H*I*2 + H*S*2 + H*2 + rows*((top*I+S)*4+2*H*4*2) }
	// favour routes row t to experts 8t … 8t+7: their logits lead by more
	// than the others' spread.
	favour := func(a *ir.Args) {
		logits := a.F32("logits")
		for tk := range a.N {
			for j := range top {
				logits[tk*int(E)+tk*top+j] += 8
			}
		}
	}
	note := func(rows int) string {
		if rows == 1 {
			return "one token: its 8 experts (37.7 MB with the shared expert's gate_up, 18.9 MB down) fit in the 50 MB L2, so repeated launches read them from L2"
		}
		return "each row routed to 8 experts of its own: the launch streams them past the 50 MB L2 (HBM-bound)"
	}
	rot := "one token, each launch on one of 16 copies of its operands (302 MB a rotation: from HBM, as in the decode step)"
	cases := []struct {
		c      streamCase
		rows   int
		prep   func(*ir.Args)
		rotate int
	}{
		{streamCase{"speed_moe_dec_gu", moeDecode("moe_decode_gate_up", E, H, I, top, S, 2, 4), gu(1), "", note(1),
			map[string]int64{"gate_up": top * 2 * I * H}}, 1, favour, 0},
		{streamCase{"speed_moe_dec_gu_x4", moeDecode("moe_decode_gate_up", E, H, I, top, S, 2, 4), gu(4), "", note(4),
			map[string]int64{"gate_up": 4 * top * 2 * I * H}}, 4, favour, 0},
		// The same bytes with 1 row a warp (twice the warps, half the loads
		// in flight each): the other choice of the tuning rule.
		{streamCase{"speed_moe_dec_gu_x4_rpw1", moeDecode("moe_decode_gate_up", E, H, I, top, S, 1, 4), gu(4), "speed_moe_dec_gu_x4",
			note(4) + "; 1 row a warp", map[string]int64{"gate_up": 4 * top * 2 * I * H}}, 4, favour, 0},
		{streamCase{"speed_moe_dec_dn", moeDecode("moe_decode_down", E, H, I, top, S, 1, 2), dn(1), "", note(1),
			map[string]int64{"down": top * H * I}}, 1, nil, 0},
		{streamCase{"speed_moe_dec_dn_x8", moeDecode("moe_decode_down", E, H, I, top, S, 1, 2), dn(8), "", note(8),
			map[string]int64{"down": 8 * top * H * I}}, 8, nil, 0},
		// The warp-per-slot layout on the same bytes: 8 rows a block (the
		// planner's rule), and 4.
		{streamCase{"speed_moe_dec_dns", moeDownSlots(E, H, I, top, S, 8, 2), dn(1), "speed_moe_dec_dn", note(1) + "; warp per slot, 8 rows a block",
			map[string]int64{"down": top * H * I}}, 1, nil, 0},
		{streamCase{"speed_moe_dec_dns_x8", moeDownSlots(E, H, I, top, S, 8, 2), dn(8), "speed_moe_dec_dn_x8", note(8) + "; warp per slot, 8 rows a block",
			map[string]int64{"down": 8 * top * H * I}}, 8, nil, 0},
		{streamCase{"speed_moe_dec_dns_x8_r4", moeDownSlots(E, H, I, top, S, 4, 2), dn(8), "speed_moe_dec_dn_x8", note(8) + "; warp per slot, 4 rows a block",
			map[string]int64{"down": 8 * top * H * I}}, 8, nil, 0},
		// Unroll 1: 9 loads in flight a pass instead of 16 then 2.
		{streamCase{"speed_moe_dec_dn_x8_u1", moeDecode("moe_decode_down", E, H, I, top, S, 1, 1), dn(8), "speed_moe_dec_dn_x8",
			note(8) + "; unroll 1", map[string]int64{"down": 8 * top * H * I}}, 8, nil, 0},
		// The decode step's shape from HBM: one token, rotated; the plans'
		// layout (the shared expert's rows loaded before the wait) and 4
		// rows a block (3 blocks an SM).
		{streamCase{"speed_moe_dec_dns_rot", moeDownSlots(E, H, I, top, S, 8, 2), dn(1), "", rot + "; warp per slot, 8 rows a block",
			map[string]int64{"down": top * H * I}}, 1, nil, 16},
		{streamCase{"speed_moe_dec_dns_rot_r4", moeDownSlots(E, H, I, top, S, 4, 2), dn(1), "speed_moe_dec_dns_rot", rot + "; warp per slot, 4 rows a block",
			map[string]int64{"down": top * H * I}}, 1, nil, 16},
	}
	for i, c := range cases {
		dir := filepath.Join(out, c.c.name)
		writeStreamCaseRows(t, dir, c.c, uint64(400+i), c.rows, c.prep)
		if c.rotate > 0 {
			rotateCase(t, dir, c.rotate)
		}
	}
}
