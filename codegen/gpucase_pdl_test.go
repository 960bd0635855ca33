package codegen

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
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
// step. Without -gpucases the members are written at a sixteenth of the
// rows, to a temporary directory.
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
	bytes := map[string]int64{}
	for i, m := range members {
		sp := m.sp
		writeTimedCase(t, filepath.Join(out, m.c.name), m.c, uint64(500+i), &sp)
		bytes[m.c.name] = sp.bytes
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
