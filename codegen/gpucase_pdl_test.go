package codegen

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// chainMeta is a chain case's meta.json: no kernel of its own, the cases
// gpucheck launches in turn, reps rounds, with and without programmatic
// stream serialization (codegen/testdata/gpucheck.py).
type chainMeta struct {
	Chain []string `json:"chain"`
	Reps  int      `json:"reps"`
	Bytes int64    `json:"bytes"`
	Note  string   `json:"note"`
}

// TestWriteGPUCasesPDLChain writes the chains that time the early weight
// stream of the gemv families the way the decode step runs them: a
// latency-bound launch before a streaming one, launched with and without
// programmatic dependent launch, the streaming kernel waiting at its entry
// (late, the oracle), loading its first chunks before the wait (early) or
// copying its block's rows to shared memory before it (staged).
// The pairs are the step's: gdn_decode_split → gemv_add (the GDN layer's
// out_proj and residual, 2048 × 4096) and moe_decode_down →
// rmsnorm_gemv (the next layer's input norm and qkv|z|b|a, 12352 × 2048).
// Every member rotates through copies of its operands so that the chain's
// weights exceed the L2 (gemv_add 16 × 16.8 MB, qkvzba 6 × 50.6 MB, the
// down experts 16 × 18.9 MB): each launch streams from HBM, as in the
// step. Then the L2 prefetch before the wait (l2_prefetch) in the same
// pairs, and whole decode layers as the step launches them — the GDN
// layer's six (qkv|z|b|a, gdn_decode_split, gemv_add, the router,
// moe_decode_gate_up, moe_decode_down) and the attention layer's eight at
// 8K context (q|k|v, qk_norm_rope_append, attention_decode_mma,
// attention_combine_gate, then the same four) — late, with the prefetch,
// and with the router ranking top-k once (rmsnorm_router_topk,
// moe_decode_gate_up_ranked, moe_decode_down reading its ids before its
// wait), so each planner flag is measured alone and together. Without
// -gpucases the members are written at a sixteenth of the rows, to a
// temporary directory.
func TestWriteGPUCasesPDLChain(t *testing.T) {
	out, scale := *gpuCases, 1.0
	if out == "" {
		out, scale = t.TempDir(), 16
	}
	const H, I, S, top = 2048, 512, 512, 8
	N, Q := 2048/scale, 12352/scale
	addBytes := int64(N)*4096*2 + 4096*4 + 2*int64(N)*4
	normBytes := int64(Q)*H*2 + H*4*3 + int64(Q)*4
	dnBytes := int64(top*H*I*2 + H*S*2 + H*2 + (top*I+S)*4 + 2*H*4*2)
	gdn := gdnSplit(16, 32, 128, 128, 32)
	members := []struct {
		c  gpuCase
		sp caseSpeed
	}{
		{gpuCase{"chain_gdn_split", gdn, 1, 0}, caseSpeed{reps: 200, rotate: 128, bytes: gdnBytes(gdn),
			note: "gdn_decode_split, tile 32 (128 blocks), 128 copies: the latency-bound launch before gemv_add"}},
		{gpuCase{"chain_gemv_add_late", gemvAdd(4096, N, 1, 2, 4), 1, 0}, caseSpeed{reps: 200, rotate: 16, bytes: addBytes,
			note: "GDN out_proj + residual (gemv_add, the planner's split 2, 1 row a warp, unroll 4), 16 copies (268 MB): waits at its entry"}},
		{gpuCase{"chain_gemv_add_early", early(gemvAdd(4096, N, 1, 2, 4)), 1, 0}, caseSpeed{reps: 200, rotate: 16, bytes: addBytes,
			from: "chain_gemv_add_late", note: "the same, its lanes' 8 chunks (the whole slice) loaded before the wait"}},
		{gpuCase{"chain_gemv_add_staged", staged(gemvAdd(4096, N, 1, 2, 4)), 1, 0}, caseSpeed{reps: 200, rotate: 16, bytes: addBytes,
			from: "chain_gemv_add_late", note: "the same, each block's 4 rows (32 KB) copied to shared memory before the wait"}},
		{gpuCase{"chain_moe_dn", moeDownSlots(top, H, I, top, S, 8, 2), 1, 0}, caseSpeed{reps: 200, rotate: 16, bytes: dnBytes,
			note: "moe_decode_down (warp per slot, 8 rows a block), 8 experts + the shared one, 16 copies (302 MB)"}},
		{gpuCase{"chain_norm_qkvzba_late", normGEMV(H, Q, 4, 1, 4, true), 1, 0}, caseSpeed{reps: 200, rotate: 6, bytes: normBytes,
			note: "input norm + GDN qkv|z|b|a (rmsnorm_gemv, 4 rows a warp, unroll 4), 6 copies (303 MB): waits at its entry"}},
		{gpuCase{"chain_norm_qkvzba_early", early(normGEMV(H, Q, 4, 1, 4, true)), 1, 0}, caseSpeed{reps: 200, rotate: 6, bytes: normBytes,
			from: "chain_norm_qkvzba_late", note: "the same, its lanes' first 4 chunks of each of 4 rows loaded before the wait"}},
	}
	// The rest of a decode layer for the layer chains: the attention
	// layer's q|k|v projection, q/k norm + RoPE + KV append, split
	// attention at 8K on tensor cores (attention_decode_mma, 66 splits, bf16
	// KV: the sm_90 plans' kernel) and its combine; the router;
	// each streaming launch also with its first bytes asked of the L2
	// before the wait (l2_prefetch, on the late kernel's inputs).
	const hq, hkv, d = 16, 2, 256
	QKV, R := 9216/scale, 256/scale
	ctx := int(8192 / scale)
	qkvBytes := int64(QKV)*H*2 + H*4*3 + int64(QKV)*4
	routerBytes := int64(R)*H*2 + H*4*3 + int64(R)*4
	const splits = 66
	records := int64(hq * splits * kernels.PartialStride(d) * 4)
	members = append(members, []struct {
		c  gpuCase
		sp caseSpeed
	}{
		{gpuCase{"chain_norm_qkvzba_l2pf", l2pf(normGEMV(H, Q, 4, 1, 4, true)), 1, 0}, caseSpeed{reps: 200, rotate: 6, bytes: normBytes,
			from: "chain_norm_qkvzba_late", note: "the same, the first third of every warp's row slices (16 MiB) asked of the L2 before the wait"}},
		{gpuCase{"chain_gemv_add_l2pf", l2pf(gemvAdd(4096, N, 1, 2, 4)), 1, 0}, caseSpeed{reps: 200, rotate: 16, bytes: addBytes,
			from: "chain_gemv_add_late", note: "the same, its whole 16.8 MB asked of the L2 before the wait (one bulk prefetch a warp)"}},
		{gpuCase{"chain_norm_router_late", normGEMV(H, R, 1, 8, 1, true), 1, 0}, caseSpeed{reps: 200, rotate: 32, bytes: routerBytes,
			note: "post-attention norm + router (rmsnorm_gemv, split 8), 32 copies (34 MB): waits at its entry"}},
		{gpuCase{"chain_norm_router_l2pf", l2pf(normGEMV(H, R, 1, 8, 1, true)), 1, 0}, caseSpeed{reps: 200, rotate: 32, bytes: routerBytes,
			from: "chain_norm_router_late", note: "the same, its 1 MB asked of the L2 before the wait"}},
		{gpuCase{"chain_norm_qkv_late", normGEMV(H, QKV, 4, 1, 4, true), 1, 0}, caseSpeed{reps: 200, rotate: 8, bytes: qkvBytes,
			note: "input norm + attention q|k|v (rmsnorm_gemv, 4 rows a warp), 8 copies (302 MB): waits at its entry"}},
		{gpuCase{"chain_norm_qkv_l2pf", l2pf(normGEMV(H, QKV, 4, 1, 4, true)), 1, 0}, caseSpeed{reps: 200, rotate: 8, bytes: qkvBytes,
			from: "chain_norm_qkv_late", note: "the same, the first 44 % of every warp's row slices (16 MiB) asked of the L2 before the wait"}},
		{gpuCase{"chain_router_topk_l2pf", l2pf(routerTopK(H, R, 1, 8, 1, top)), 1, 0}, caseSpeed{reps: 200, rotate: 32, bytes: routerBytes + top*8,
			note: "the router ranking top-8 once (rmsnorm_router_topk: its last block to arrive), its 1 MB asked of the L2 before the wait"}},
		{gpuCase{"chain_router_topk", routerTopK(H, R, 1, 8, 1, top), 1, 0}, caseSpeed{reps: 200, rotate: 32, bytes: routerBytes + top*8,
			from: "chain_router_topk_l2pf", note: "the router ranking top-8 once, waiting at its entry"}},
		{gpuCase{"chain_moe_dn_early_ids", earlyIDs(moeDownSlots(top, H, I, top, S, 8, 2)), 1, 0}, caseSpeed{reps: 200, rotate: 16, bytes: dnBytes,
			note: "moe_decode_down reading its ids before the wait (written two launches back) and asking the L2 for its experts' rows, 16 copies"}},
		{gpuCase{"chain_moe_dn_early_ids_u1", earlyIDs(moeDownSlots(top, H, I, top, S, 8, 1)), 1, 0}, caseSpeed{reps: 200, rotate: 16, bytes: dnBytes,
			from: "chain_moe_dn_early_ids", note: "the same at unroll 1: two passes a row from the L2 its prefetch filled, fewer registers (room beside it for the next projection)"}},
		{gpuCase{"chain_qknorm", qkNormKernel(hq, hkv, d, 64, 64, true), 1, 63}, caseSpeed{reps: 200,
			bytes: (2*hq*d+2*hkv*d+hq*d)*4 + 2*hkv*d*2, note: "q/k norm + RoPE + KV append (18 blocks): latency-bound"}},
		{gpuCase{"chain_attn_combine", combineGateKernel(hq, d, splits), 1, 0}, caseSpeed{reps: 200,
			bytes: records + 3*hq*d*4, note: "combine + gate of the 66 splits' records"}},
	}...)
	bytes := map[string]int64{}
	for i, m := range members {
		sp := m.sp
		writeTimedCase(t, filepath.Join(out, m.c.name), m.c, uint64(500+i), &sp)
		bytes[m.c.name] = sp.bytes
	}
	// Split attention over an 8K context (pos 8191) on tensor cores, the
	// caches tiled from one period of positions, 4 copies: 16.8 MB of bf16
	// KV a launch, from HBM.
	split := gpuCase{"chain_attn_mma_8k", mmaKernel(plan.SM90, hq, hkv, d, ctx, splits, 32), 1, ctx - 1}
	sp := caseSpeed{reps: 200, rotate: 4, bytes: 2*int64(ctx)*hkv*d*2 + hq*d*4 + records,
		note: "attention_decode_mma over 8K positions, bf16 KV, 66 splits (the sm_90 plans' kernel), 4 copies"}
	writeCaseFull(t, filepath.Join(out, split.name), split, 560, min(speedPeriod, ctx), &sp)
	bytes[split.name] = sp.bytes
	// moe_decode_gate_up over the real 256 experts, one token routed to the
	// stored 8 (favoured logits), 8 copies of its operands (302 MB a
	// rotation: from HBM as in the step).
	E := 256 / scale
	guBytes := int64(top*2*I*H*2+2*S*H*2) + H*4 + int64(E)*4 + (top*I+S)*4 + top*8
	favour := func(a *ir.Args) {
		logits := a.F32("logits")
		for j := range top {
			logits[j] += 8
		}
	}
	for i, c := range []streamCase{
		{"chain_moe_gu_late", moeDecode("moe_decode_gate_up", E, H, I, top, S, 2, 4), guBytes, "",
			"moe_decode_gate_up (top-8 ranked in every block, 8 routed + the shared expert), 8 copies (302 MB): waits at its entry",
			map[string]int64{"gate_up": top * 2 * I * H}},
		{"chain_moe_gu_l2pf", l2pf(moeDecode("moe_decode_gate_up", E, H, I, top, S, 2, 4)), guBytes, "chain_moe_gu_late",
			"the same, the shared expert's 4.2 MB asked of the L2 before the wait", map[string]int64{"gate_up": top * 2 * I * H}},
		// The ranked launch reads no logits: its tensor holds only the 8
		// experts its ids name (the kernel differs in the ids' bound alone),
		// so its copies take 8 × 38 MB of the device, not 8 × 1.1 GB.
		{"chain_moe_gu_ranked_l2pf", l2pf(ranked(moeDecode("moe_decode_gate_up", top, H, I, top, S, 2, 4))), guBytes - int64(E)*4 - top*4, "",
			"moe_decode_gate_up_ranked: the 8 ids the router ranked, no ranking in its blocks; the shared expert asked of the L2 before the wait; 8 copies",
			map[string]int64{"gate_up": top * 2 * I * H}},
		{"chain_moe_gu_ranked", ranked(moeDecode("moe_decode_gate_up", top, H, I, top, S, 2, 4)), guBytes - int64(E)*4 - top*4, "chain_moe_gu_ranked_l2pf",
			"moe_decode_gate_up_ranked waiting at its entry", map[string]int64{"gate_up": top * 2 * I * H}},
	} {
		dir := filepath.Join(out, c.name)
		prep := favour
		if c.k.Family == "moe_decode_gate_up_ranked" {
			prep = nil // its ids, a permutation of the stored 8 experts, are the routing
		}
		writeStreamCaseRows(t, dir, c, uint64(570+i), 1, prep)
		rotateCase(t, dir, 8)
		bytes[c.name] = c.bytes
	}
	chains := []struct {
		name    string
		members []string
		note    string
	}{
		{"chain_gdn_gemv_add_late", []string{"chain_gdn_split", "chain_gemv_add_late"}, "the GDN layer's tail as the step runs it; gemv_add waits at its entry"},
		{"chain_gdn_gemv_add_early", []string{"chain_gdn_split", "chain_gemv_add_early"}, "the same with gemv_add's early stream"},
		{"chain_gdn_gemv_add_staged", []string{"chain_gdn_split", "chain_gemv_add_staged"}, "the same with gemv_add's rows staged in shared memory"},
		{"chain_gemv_add_late_only", []string{"chain_gemv_add_late"}, "gemv_add after gemv_add: the launch gap between two streams"},
		{"chain_gemv_add_early_only", []string{"chain_gemv_add_early"}, "the same, early stream"},
		{"chain_gemv_add_staged_only", []string{"chain_gemv_add_staged"}, "the same, staged rows"},
		{"chain_moe_norm_late", []string{"chain_moe_dn", "chain_norm_qkvzba_late"}, "the MoE block's end and the next GDN layer's input projection; rmsnorm_gemv waits at its entry"},
		{"chain_moe_norm_early", []string{"chain_moe_dn", "chain_norm_qkvzba_early"}, "the same with rmsnorm_gemv's early stream"},
		// The L2 prefetch: the pairs above, then whole decode layers as the
		// step launches them (docs/pdl.md).
		{"chain_gdn_gemv_add_l2pf", []string{"chain_gdn_split", "chain_gemv_add_l2pf"}, "gdn_decode_split → gemv_add with gemv_add's 16.8 MB asked of the L2 before its wait"},
		{"chain_gemv_add_l2pf_only", []string{"chain_gemv_add_l2pf"}, "gemv_add after gemv_add, L2 prefetch"},
		{"chain_moe_norm_l2pf", []string{"chain_moe_dn", "chain_norm_qkvzba_l2pf"}, "moe_decode_down → qkv|z|b|a with 16 MiB of it asked of the L2 before its wait"},
		{"chain_gdn_layer_late", []string{"chain_norm_qkvzba_late", "chain_gdn_split", "chain_gemv_add_late", "chain_norm_router_late", "chain_moe_gu_late", "chain_moe_dn"},
			"a GDN layer's six launches as the decode step runs them; every kernel waits at its entry"},
		{"chain_gdn_layer_l2pf", []string{"chain_norm_qkvzba_l2pf", "chain_gdn_split", "chain_gemv_add_l2pf", "chain_norm_router_l2pf", "chain_moe_gu_l2pf", "chain_moe_dn"},
			"the same with the L2 prefetch in qkv|z|b|a, gemv_add, the router and gate_up's shared expert"},
		{"chain_gdn_layer_ranked", []string{"chain_norm_qkvzba_l2pf", "chain_gdn_split", "chain_gemv_add_l2pf", "chain_router_topk_l2pf", "chain_moe_gu_ranked_l2pf", "chain_moe_dn_early_ids"},
			"the L2 prefetch, and the router ranking top-8 once: gate_up reads 8 ids, down reads them before its wait and prefetches its experts"},
		{"chain_gdn_layer_ranked_only", []string{"chain_norm_qkvzba_late", "chain_gdn_split", "chain_gemv_add_late", "chain_router_topk", "chain_moe_gu_ranked", "chain_moe_dn_early_ids"},
			"the router ranking top-8 once without the L2 prefetch of the projections (down's early ids and their prefetch kept)"},
		{"chain_gdn_layer_ranked_u1", []string{"chain_norm_qkvzba_l2pf", "chain_gdn_split", "chain_gemv_add_l2pf", "chain_router_topk_l2pf", "chain_moe_gu_ranked_l2pf", "chain_moe_dn_early_ids_u1"},
			"chain_gdn_layer_ranked with down at unroll 1 (its registers leave the next layer's qkv|z|b|a room to start early)"},
		{"chain_moe_late", []string{"chain_norm_router_late", "chain_moe_gu_late", "chain_moe_dn"}, "the MoE block alone: router, gate_up ranking in every block, down"},
		{"chain_moe_ranked", []string{"chain_router_topk_l2pf", "chain_moe_gu_ranked_l2pf", "chain_moe_dn_early_ids"}, "the same ranked once in the router, with the prefetches"},
		{"chain_attn_layer_late", []string{"chain_norm_qkv_late", "chain_qknorm", "chain_attn_mma_8k", "chain_attn_combine", "chain_gemv_add_late", "chain_norm_router_late", "chain_moe_gu_late", "chain_moe_dn"},
			"an attention layer's eight launches at 8K context as the decode step runs them; every kernel waits at its entry"},
		{"chain_attn_layer_l2pf", []string{"chain_norm_qkv_l2pf", "chain_qknorm", "chain_attn_mma_8k", "chain_attn_combine", "chain_gemv_add_l2pf", "chain_norm_router_l2pf", "chain_moe_gu_l2pf", "chain_moe_dn"},
			"the same with the L2 prefetch in q|k|v, gemv_add, the router and gate_up's shared expert"},
		{"chain_attn_layer_ranked", []string{"chain_norm_qkv_l2pf", "chain_qknorm", "chain_attn_mma_8k", "chain_attn_combine", "chain_gemv_add_l2pf", "chain_router_topk_l2pf", "chain_moe_gu_ranked_l2pf", "chain_moe_dn_early_ids"},
			"the same with the router ranking top-8 once"},
	}
	for _, c := range chains {
		m := chainMeta{Chain: c.members, Reps: 64, Note: c.note}
		for _, name := range c.members {
			if _, ok := bytes[name]; !ok {
				t.Fatalf("chain %s: no member case %s", c.name, name)
			}
			m.Bytes += bytes[name]
		}
		dir := filepath.Join(out, c.name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := json.MarshalIndent(m, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "meta.json"), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
