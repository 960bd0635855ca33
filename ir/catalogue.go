package ir

// Kind names an operation of the model (SPEC §2–§5) at kernel granularity;
// its declaration is the Family of that kind in kernels.Families.
type Kind string

const (
	Embedding           Kind = "embedding"             // token rows of embed_tokens
	RMSNorm             Kind = "rmsnorm"               // SPEC §2.2, 1+w or plain w
	MatMul              Kind = "matmul"                // x · Wᵀ with BF16 weights
	CausalConv1dSiLU    Kind = "causal_conv1d_silu"    // SPEC §3 step 2
	GDNGates            Kind = "gdn_gates"             // SPEC §3 step 4
	L2NormHeads         Kind = "l2norm_heads"          // SPEC §3 step 5
	GatedDeltaChunked   Kind = "gated_delta_chunked"   // SPEC §3.1, prefill
	GatedDeltaRecurrent Kind = "gated_delta_recurrent" // SPEC §3 step 7, decode
	GatedRMSNorm        Kind = "gated_rmsnorm"         // SPEC §2.2, linear_attn.norm
	RoPE                Kind = "rope"                  // SPEC §2.4
	KVAppend            Kind = "kv_append"             // SPEC §2.3 step 4
	Attention           Kind = "attention"             // SPEC §2.3 step 5
	AttnOutputGate      Kind = "attn_output_gate"      // SPEC §2.3 step 6
	RouterTopK          Kind = "router_topk"           // SPEC §4 step 1
	MoEGateUp           Kind = "moe_gate_up"           // SPEC §4 step 2: silu(gate)·up of each routed expert
	MoEDown             Kind = "moe_down"              // SPEC §4 step 2: down projections, weighted sum
	SiLUMul             Kind = "silu_mul"              // shared expert activation
	Add                 Kind = "add"                   // residual
	SharedExpertCombine Kind = "shared_expert_combine" // SPEC §4 steps 3–4
)

// Fused kinds: made by the planner's fusion pass from a pattern of the
// kinds above, whose kernels stay the oracle of the fused one.
const (
	MatMulAdd        Kind = "matmul_add"          // matmul whose output is added into a residual: y += x · Wᵀ
	GDNDecodeStep    Kind = "gdn_decode_step"     // SPEC §3 steps 2–8 after the projections: conv, gates, l2 norms, delta rule, gated norm
	QKNormRoPEAppend Kind = "qk_norm_rope_append" // SPEC §2.3 steps 2–4: q and k head norms, RoPE of both, k and v into the KV cache
	// GDNDecodeSplit is gdn_decode_step with each value head's state columns
	// split over blocks; the last block of a key head to arrive finishes the
	// gated norm. Its oracle is gdn_decode_step's, the chain's references.
	GDNDecodeSplit Kind = "gdn_decode_split"
	// GDNDecodePeer is gdn_decode_split without the last block: the blocks
	// of a key head, all resident in one wave, publish their tiles' sums of
	// squares under a tag each and wait for one another's, so every block
	// finishes the gated norm of its own columns. Same oracle.
	GDNDecodePeer Kind = "gdn_decode_peer"
	// GDNDecodeOut is gdn_decode_split with the layer's output projection
	// and residual add (matmul_add) in the same launch: every block projects
	// its gated, not yet normalized, output columns through its slice of the
	// projection's columns, and after one grid barrier each block sums the
	// blocks' partial rows of its share of the hidden width, scaled by each
	// head's norm. Its oracle is the pair's: gdn_decode_split, then
	// matmul_add.
	GDNDecodeOut Kind = "gdn_decode_out"
	// The decode step's MoE block after the router projection (SPEC §4) in
	// two weight-streaming launches: top-k with the routed and the shared
	// experts' gate_up·SiLU, then every expert's down projection, the
	// weighted sum, the shared expert's gate and the residual.
	MoEDecodeGateUp Kind = "moe_decode_gate_up" // router_topk + moe_gate_up + the shared expert's gate, up and silu_mul
	MoEDecodeDown   Kind = "moe_decode_down"    // moe_down + the shared expert's down and gate + shared_expert_combine
	// MoEDecodeRouteGateUp is the router's rmsnorm_gemv folded into
	// moe_decode_gate_up: every block norms the row, computes its slice of
	// the router logits and of the shared expert, publishes them and waits
	// at a grid barrier (all blocks co-resident) before ranking top-k and
	// streaming the routed experts. Its oracle is the pair's references.
	MoEDecodeRouteGateUp Kind = "moe_decode_route_gate_up"
	// RMSNormRouterTopK is the router's rmsnorm_gemv with router_topk
	// folded in: the last of its blocks to arrive ranks the logits once and
	// writes ids and weights. MoEDecodeGateUpRanked is moe_decode_gate_up on
	// those ids (no ranking in its blocks). Their oracles are the
	// references of rmsnorm_gemv, router_topk and moe_decode_gate_up.
	RMSNormRouterTopK     Kind = "rmsnorm_router_topk"
	MoEDecodeGateUpRanked Kind = "moe_decode_gate_up_ranked"
)

// Split kinds: made by the planner's split_kv pass from one op of the kinds
// above, which stays their oracle: attention at decode split across the
// context (flash-decoding), then the partial softmaxes merged.
const (
	AttentionDecodeSplit Kind = "attention_decode_split" // SPEC §2.3 step 5 over one split of the context
	AttentionCombine     Kind = "attention_combine"      // merges the splits' partial softmaxes into attention's out
	// The same split with the K/V rows streamed through a shared-memory ring
	// (asynchronous copies where the target has them), and the combine with
	// the output gate applied (SPEC §2.3 step 6).
	AttentionDecodeStream Kind = "attention_decode_stream"
	AttentionCombineGate  Kind = "attention_combine_gate"
	// The same split on tensor cores (q·kᵀ and p·v as bf16 matrix products,
	// q and p as two bf16 terms each) over a bf16 KV cache.
	AttentionDecodeMMA Kind = "attention_decode_mma"
	// attention_decode_mma with attention_combine_gate folded into the
	// launch: the last blocks of a KV head to arrive merge the splits.
	AttentionDecodeMMAGate Kind = "attention_decode_mma_gate"
	// attention_decode_split and attention_decode_mma with
	// qk_norm_rope_append folded into the launch: every block norms and
	// rotates its query heads from the projection's output, the block whose
	// split holds a new position norms and rotates that key itself, uses it
	// with its value straight from the projection, and (one block per KV
	// head) stores both in the cache. Their oracle is qk_norm_rope_append's
	// reference, then the split's.
	AttentionDecodeSplitQK Kind = "attention_decode_split_qk"
	AttentionDecodeMMAQK   Kind = "attention_decode_mma_qk"
)

// Prefill kinds: made by the planner's flash pass from the prefill step's
// attention and its output gate, which stay their oracle.
const (
	AttentionPrefill Kind = "attention_prefill" // SPEC §2.3 steps 5–6 on tensor cores: flash attention with the output gate fused
	// AttentionPrefillWG is attention_prefill on sm_90a's warpgroup matrix
	// instructions (wgmma): the same math, operands and reference.
	AttentionPrefillWG Kind = "attention_prefill_wg"
)

// The chunked gated delta rule of a prefill on tensor cores (the planner's
// gdn pass, docs/prefill-gdn.md): gated_delta_chunked in two launches, the
// per-chunk UT transform for every chunk at once, then the state passed from
// chunk to chunk; and the causal conv with a thread per (channel, row tile).
// gated_delta_chunked and causal_conv1d_silu stay their oracle.
const (
	GatedDeltaWY         Kind = "gated_delta_wy"          // SPEC §3.1 steps 1–4 per chunk: T, w, u, qw, kd, the intra-chunk output
	GatedDeltaState      Kind = "gated_delta_state"       // SPEC §3.1 step 5: the state from chunk to chunk, the outputs' state part
	CausalConv1dSiLURows Kind = "causal_conv1d_silu_rows" // SPEC §3 step 2, every (channel, row tile) at once
)

// Weight-streaming variants of the projections for one activation row (the
// decode step, the LM head of the last row): the same math as MatMul,
// MatMulAdd, MoEGateUp and MoEDown, launched so that the weights stream at
// the copy bandwidth (docs/gemv.md).
const (
	GEMV          Kind = "gemv"             // MatMul of one row: several output rows per warp, split-K for narrow outputs
	GEMVAdd       Kind = "gemv_add"         // MatMulAdd of one row: gemv adding into the residual
	MoEGateUpGEMV Kind = "moe_gate_up_gemv" // MoEGateUp of one token: grid over (row groups, slot)
	MoEDownGEMV   Kind = "moe_down_gemv"    // MoEDown of one token: every slot's loads in flight at once
	// RMSNormGEMV is an RMSNorm folded into the one-row projection that
	// consumes it: each block norms the row on chip, then streams its rows.
	RMSNormGEMV Kind = "rmsnorm_gemv"
)

// Tensor-core variants for many rows (prefill, docs/prefill-gemm.md): the
// math of MatMul, MatMulAdd, MoEGateUp and MoEDown on bf16 operands with
// fp32 accumulation, in block tiles; the kinds they replace stay their
// oracle and the CPU's kernels. The routed experts become five launches:
// the (token, slot) pairs counted and sorted by expert, the grouped gate_up,
// the grouped down and the deterministic sum over each token's slots.
const (
	GEMM           Kind = "gemm"              // MatMul in 128×128 tiles on the tensor cores
	GEMMAdd        Kind = "gemm_add"          // MatMulAdd in tiles: the residual add in the epilogue
	MoECount       Kind = "moe_count"         // per-chunk expert counts of the (token, slot) pairs, for moe_sort
	MoESort        Kind = "moe_sort"          // (token, slot) pairs grouped by expert, padded to the tile
	MoEGateUpGroup Kind = "moe_gate_up_group" // MoEGateUp over the sorted pairs: silu(gate)·up epilogue
	MoEDownGroup   Kind = "moe_down_group"    // MoEDown's products per pair, scaled by the routing weight
	MoESlotSum     Kind = "moe_slot_sum"      // MoEDown's sum over a token's slots, in slot order
)

// Weight generation: no step's graph uses it; every plan lists one kernel
// per weight dtype and runtime.SyntheticWeights launches them.
const (
	FillUniform Kind = "fill_uniform" // counter-based uniform values (kernels.FillUniform)
)

// Sampling on the device: no step's graph uses it; every plan has a phase
// "sample" whose one launch draws the next token from the logits and writes
// it into the tokens input buffer, where the next decode step reads it.
const (
	Sample Kind = "sample" // next token and its logprob (kernels.Sample)
)

// The certified int8 LM head for greedy decoding (docs/lm-head.md): the
// load step derives int8 rows with per-row scales from the BF16 LM head;
// the greedy decode step streams them for approximate logits with a
// rigorous error bound per row, recomputes the exact BF16 logit of every
// row the bound cannot rule out, and picks the argmax, which is the BF16
// head's (MatMul then Sample's greedy) bit for bit.
const (
	QuantizeRowsInt8 Kind = "quantize_rows_int8" // int8 rows, scale max|w|/127 per row (derived weights)
	LMHeadInt8       Kind = "lm_head_int8"       // approximate logits' upper bounds, per-group best lower and upper bounds
	LMHeadCertify    Kind = "lm_head_certify"    // exact BF16 logits of the candidates (every row on fallback), best per block
	LMHeadPick       Kind = "lm_head_pick"       // the argmax over the blocks' bests: the greedy token
	// The final RMSNorm folded in, as rmsnorm_gemv folds it into the BF16
	// head: the int8 head streams x·(1+w) and scales by the row's rsqrt
	// after the sum (block 0 writes the normed row), and certify repeats
	// rmsnorm_gemv's arithmetic for its candidates.
	RMSNormLMHeadInt8    Kind = "rmsnorm_lm_head_int8"
	RMSNormLMHeadCertify Kind = "rmsnorm_lm_head_certify"
)

// DecodePersistent runs a run of consecutive decode-step launches as one
// launch (the planner's persist step, docs/persistent.md): its blocks take
// the run's blocks as work items in order from a counter, each item first
// waiting for the launch before its own to be done. It is no op of a graph:
// the plan's launches stay the oracle, and name it as the stream that may
// run them.
const DecodePersistent Kind = "decode_persistent"

// Access says how an op touches an operand.
type Access string

const (
	Read      Access = "r"
	Write     Access = "w"
	ReadWrite Access = "rw"
)

// AnyFloat in a declaration accepts f32 or bf16: the KV cache is f32 unless
// a GPU plan asks for bf16. The family's AnyFloatFlag says which, since one
// compiled kernel handles one element type.
const AnyFloat DType = "float"
