// Package roofline is the bandwidth model of a decode step: the bytes its
// launches must move, read off the plan (launches × operand extents), the
// copy bandwidth of the device that bounds them, and the per-family
// aggregation of a step — or of a prefill's segments — timed launch by
// launch, with the matrix work of the families that do it (docs/bench.md).
package roofline

import (
	"fmt"
	"slices"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// Bytes are the bytes one launch (or a sum of launches) must move between
// memory and the chip, by the kind of buffer they belong to.
type Bytes struct {
	// Weights are the weight bytes read.
	Weights int64 `json:"weights"`
	// KV is the KV cache read (attention) and written (the appended row).
	KV int64 `json:"kv"`
	// State is the GDN recurrent and conv state, read plus written.
	State int64 `json:"state"`
}

// Total is every byte the launch must move.
func (b Bytes) Total() int64 { return b.Weights + b.KV + b.State }

// Add returns the sum of b and o.
func (b Bytes) Add(o Bytes) Bytes {
	return Bytes{Weights: b.Weights + o.Weights, KV: b.KV + o.KV, State: b.State + o.State}
}

// Launch is one launch's family, the bytes it must move and its matrix
// work in flops (0 where the family has no FLOP model: launchFLOPs).
type Launch struct {
	Family string
	Bytes  Bytes
	FLOPs  int64
}

// Step is the byte model of a phase at one context length.
type Step struct {
	// Context is the number of tokens the step attends to (its own
	// included): the KV cache it reads.
	Context  int
	Launches []Launch
	Total    Bytes
	// FLOPs is the launches' matrix work.
	FLOPs int64
}

// Families are the phase's families in order of first launch.
func (s *Step) Families() []string {
	var out []string
	for _, l := range s.Launches {
		if !slices.Contains(out, l.Family) {
			out = append(out, l.Family)
		}
	}
	return out
}

// ByFamily sums the launches' bytes by family.
func (s *Step) ByFamily() map[string]Bytes {
	out := map[string]Bytes{}
	for _, l := range s.Launches {
		out[l.Family] = out[l.Family].Add(l.Bytes)
	}
	return out
}

// Decode is the byte model of the plan's decode step attending to context
// tokens (the step's own token included: after a prefill of C tokens the
// first step attends to C+1).
func Decode(p *plan.Plan, context int) (*Step, error) { return ofKind(p, plan.DecodeStep, context) }

// Greedy is Decode for the greedy decode step with the certified int8 LM
// head (the plan's decode_greedy phase, docs/lm-head.md).
func Greedy(p *plan.Plan, context int) (*Step, error) { return ofKind(p, plan.DecodeGreedy, context) }

// ofKind is the byte model of p's first phase of kind.
func ofKind(p *plan.Plan, kind plan.PhaseKind, context int) (*Step, error) {
	for i := range p.Phases {
		if p.Phases[i].Kind == kind {
			return Phase(p, &p.Phases[i], context)
		}
	}
	return nil, fmt.Errorf("plan has no %s phase", kind)
}

// Phase is the byte model of one phase of p with context tokens in the KV
// cache when it reads it (the phase's own rows among them): Segment of
// the phase's rows at position context − rows. The bytes of a launch are, for every operand
// bound to a weight, KV or state buffer, its extent (the family's, for the
// phase's rows) × its element size — read, written, or both for
// read-write — with these rules where the extent is a bound, not what a
// step touches:
//
//   - the routed experts' weights (moe_gate_up, moe_down, their gemv
//     variants, the fused moe_decode_gate_up, moe_decode_route_gate_up and
//     moe_decode_down, the prefill's grouped moe_gate_up_group and
//     moe_down_group): only the k selected experts' slices, k/experts of
//     the extent per row, at most the whole tensor (batch 1 reads k
//     experts; a long prompt's rows, every one);
//   - the embedding table: the rows of the step's tokens, not the table;
//   - the KV cache read by attention (attention, attention_decode_split,
//     attention_decode_stream, attention_decode_mma):
//     context rows of its capacity rows; kv_append (and
//     qk_norm_rope_append, which contains it) writes the step's rows and
//     reads none; the splits with the append folded in
//     (attention_decode_split_qk, attention_decode_mma_qk) write the step's
//     rows and read the context's others;
//   - the certified head's BF16 rows (lm_head_certify's and
//     rmsnorm_lm_head_certify's w): nothing, the candidates' rows are a
//     few KB a token (docs/lm-head.md);
//   - activations, ports and the parameter block count nothing: they are
//     small and stay in cache, the roofline is the bytes that cannot.
func Phase(p *plan.Plan, ph *plan.Phase, context int) (*Step, error) {
	if context < 1 || context > p.ContextTokens {
		return nil, fmt.Errorf("context %d: want 1 to the plan's %d tokens", context, p.ContextTokens)
	}
	return model(p, ph, ph.Tokens, context)
}

// Segment is the byte and FLOP model of phase ph of p run over tokens
// rows at sequence position pos (a prefill segment at its logical length,
// or a decode step: tokens 1): Phase's bytes with the KV cache of pos +
// tokens rows, and each launch's matrix work (launchFLOPs).
func Segment(p *plan.Plan, ph *plan.Phase, tokens, pos int) (*Step, error) {
	switch {
	case tokens < 1 || tokens > ph.Tokens:
		return nil, fmt.Errorf("phase %s: %d tokens, want 1 to its %d", ph.Name, tokens, ph.Tokens)
	case pos < 0 || pos+tokens > p.ContextTokens:
		return nil, fmt.Errorf("phase %s: %d tokens at position %d exceed the plan's %d-token context", ph.Name, tokens, pos, p.ContextTokens)
	}
	return model(p, ph, tokens, pos+tokens)
}

// model is the byte and FLOP model of phase ph over tokens rows (the rows
// of every launch whose row count is a slot's) with context tokens in the
// KV cache, the rows' own included.
func model(p *plan.Plan, ph *plan.Phase, tokens, context int) (*Step, error) {
	roles := map[string]ir.Role{}
	for _, b := range p.Buffers {
		roles[b.Name] = b.Role
	}
	ks := map[string]*plan.Kernel{}
	for i := range p.Kernels {
		ks[p.Kernels[i].Name] = &p.Kernels[i]
	}
	s := &Step{Context: context}
	for i, l := range ph.Launches {
		k := ks[l.Kernel]
		if k == nil {
			return nil, fmt.Errorf("phase %s launch %d: no kernel %s", ph.Name, i, l.Kernel)
		}
		f, err := kernels.Families.Family(ir.Kind(k.Family))
		if err != nil {
			return nil, fmt.Errorf("phase %s launch %d: %w", ph.Name, i, err)
		}
		if len(l.Args) != len(f.Operands) {
			return nil, fmt.Errorf("phase %s launch %d (%s): %d arguments, family takes %d", ph.Name, i, k.Family, len(l.Args), len(f.Operands))
		}
		rows := int64(tokens)
		if r, ok := k.Params.Rows(); ok && l.Rows == nil {
			rows = r
		}
		var b Bytes
		for j, o := range f.Operands {
			role := roles[l.Args[j].Buffer]
			if role != ir.Weight && role != ir.KV && role != ir.State {
				continue
			}
			n := operandBytes(f, k.Params, o, rows, int64(context))
			switch role {
			case ir.Weight:
				b.Weights += n
			case ir.KV:
				b.KV += n
			case ir.State:
				b.State += n
			}
		}
		fl := launchFLOPs(f.Kind, k.Params, rows, max(0, int64(context)-rows))
		s.Launches = append(s.Launches, Launch{Family: k.Family, Bytes: b, FLOPs: fl})
		s.Total = s.Total.Add(b)
		s.FLOPs += fl
	}
	return s, nil
}

// launchFLOPs is the matrix work of one launch of rows rows at sequence
// position pos, a multiply-add counted as two flops, for the families
// that do a prompt's matrix work: the projections (x·Wᵀ: 2·rows·k·n), the
// routed experts (each token's k slots: gate and up 2·2·inter·hidden, down
// 2·inter·hidden), attention (kernels.PrefillFLOPs: q·kᵀ and p·v over the
// visible positions) and the chunked GDN's two passes
// (kernels.GDNChunkFLOPs). The rest — norms, gates, routing, sorting,
// elementwise — is 0: no FLOP model, and no tensor-core work to speak of.
func launchFLOPs(kind ir.Kind, p ir.Params, rows, pos int64) int64 {
	switch kind {
	case ir.MatMul, ir.MatMulAdd, ir.GEMM, ir.GEMMAdd, ir.GEMV, ir.GEMVAdd:
		return 2 * rows * int64(p.Int("k")) * int64(p.Int("n"))
	case ir.MoEGateUp, ir.MoEGateUpGroup, ir.MoEGateUpGEMV:
		return 2 * rows * int64(p.Int("k")) * 2 * int64(p.Int("inter")) * int64(p.Int("hidden"))
	case ir.MoEDown, ir.MoEDownGroup, ir.MoEDownGEMV:
		return 2 * rows * int64(p.Int("k")) * int64(p.Int("inter")) * int64(p.Int("hidden"))
	case ir.Attention, ir.AttentionPrefill, ir.AttentionPrefillWG:
		return kernels.PrefillFLOPs(p, int(rows), int(pos))
	case ir.GatedDeltaWY:
		wy, _ := kernels.GDNChunkFLOPs(p, int(rows))
		return wy
	case ir.GatedDeltaState:
		_, st := kernels.GDNChunkFLOPs(p, int(rows))
		return st
	}
	return 0
}

// operandBytes applies the rules of Phase to one operand.
func operandBytes(f *ir.Family, p ir.Params, o ir.OperandSpec, rows, context int64) int64 {
	size := int64(o.DType.Size())
	if o.DType == ir.AnyFloat {
		size = 4
		if f.AnyFloatIsBF16(p) {
			size = 2
		}
	}
	ext := o.Extent(p, rows)
	switch {
	case routedExperts(f.Kind) && (o.Name == "gate_up" || o.Name == "down"):
		e, k := int64(p.Int("experts")), int64(p.Int("k"))
		return min(ext, ext/e*k*rows) * size
	case f.Kind == ir.Embedding && o.Name == "table":
		return min(ext, rows*int64(p.Int("hidden"))) * size
	case (f.Kind == ir.LMHeadCertify || f.Kind == ir.RMSNormLMHeadCertify) && o.Name == "w":
		return 0 // the candidates' BF16 rows: a few KB a token (all of it only on a fallback)
	case o.Name == "k_cache" || o.Name == "v_cache":
		width := int64(p.Int("width"))
		if f.Kind == ir.KVAppend || f.Kind == ir.QKNormRoPEAppend {
			return rows * width * size // written, not read
		}
		if f.Kind == ir.AttentionDecodeSplitQK || f.Kind == ir.AttentionDecodeMMAQK {
			// The append folded in: the step's rows written, the rest of the
			// context read.
			return (min(ext, max(0, context-rows)*width) + rows*width) * size
		}
		return min(ext, context*width) * size
	}
	if o.Access == ir.ReadWrite {
		return 2 * ext * size
	}
	return ext * size
}

func routedExperts(k ir.Kind) bool {
	return k == ir.MoEGateUp || k == ir.MoEDown || k == ir.MoEGateUpGEMV || k == ir.MoEDownGEMV ||
		k == ir.MoEDecodeGateUp || k == ir.MoEDecodeDown || k == ir.MoEDecodeRouteGateUp || k == ir.MoEDecodeGateUpRanked ||
		k == ir.MoEGateUpGroup || k == ir.MoEDownGroup
}
