package roofline

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/plans"
)

// The tiny model: hidden 64, 4 layers (3 GDN, layer 3 full attention), vocab
// 300, 2 query heads and 1 KV head of 32, GDN 1 key head and 2 value heads of
// 16, conv kernel 4, 4 experts (top-2) of 32, a shared expert of 32.
const tinyConfig = `{"model_type":"qwen3_5_moe","text_config":{"model_type":"qwen3_5_moe_text",
	"hidden_size":64,"num_hidden_layers":4,"vocab_size":300,"num_attention_heads":2,"num_key_value_heads":1,
	"head_dim":32,"linear_num_key_heads":1,"linear_num_value_heads":2,"linear_key_head_dim":16,"linear_value_head_dim":16,
	"linear_conv_kernel_dim":4,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":32,
	"shared_expert_intermediate_size":32,"rope_parameters":{"rope_theta":10000,"partial_rotary_factor":0.5}}}`

func tinyPlan(t *testing.T) *plan.Plan {
	t.Helper()
	c, err := arch.ParseConfig([]byte(tinyConfig))
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(planner.FromConfig("tiny", c), planner.Options{Target: "cpu", Buckets: []int{4}, ContextTokens: 16})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tinyDecode is the tiny decode step's bytes by family at context tokens,
// counted by hand from the tensor shapes (bf16 matrices, f32 vectors, f32
// KV and state).
func tinyDecode(context int64) map[string]Bytes {
	const (
		gdnLayers, attnLayers, layers = 3, 1, 4
		hidden, vocab                 = 64, 300
		bf16, f32                     = 2, 4
	)
	const (
		gdnProj  = (64 + 32 + 2 + 2) * hidden * bf16 // in_proj qkv, z, b, a
		gdnOut   = hidden * 32 * bf16
		attnProj = (128 + 32 + 32) * hidden * bf16 // q (with its gate), k, v
		attnOut  = hidden * 64 * bf16
		// router, shared gate and up, shared-expert gate; shared down
		mlp = (4+32+32+1)*hidden*bf16 + hidden*32*bf16
	)
	return map[string]Bytes{
		"embedding": {Weights: hidden * bf16}, // one row of the table
		// input and post-attention norms, the final norm, q and k norms
		"rmsnorm":   {Weights: (2*layers+1)*hidden*f32 + 2*32*f32},
		"matmul":    {Weights: gdnLayers*(gdnProj+gdnOut) + attnLayers*(attnProj+attnOut) + layers*mlp + vocab*hidden*bf16},
		"gdn_gates": {Weights: gdnLayers * 2 * 2 * f32}, // A_log, dt_bias
		// conv weights read; conv state (3 × 64) read and written
		"causal_conv1d_silu":    {Weights: gdnLayers * 64 * 4 * f32, State: gdnLayers * 2 * 3 * 64 * f32},
		"gated_delta_recurrent": {State: gdnLayers * 2 * (2 * 16 * 16) * f32},
		"gated_rmsnorm":         {Weights: gdnLayers * 16 * f32},
		// 2 of 4 experts: gate_up [4 64 64], down [4 64 32]
		"moe_gate_up": {Weights: layers * 2 * 64 * hidden * bf16},
		"moe_down":    {Weights: layers * 2 * hidden * 32 * bf16},
		// one K and one V row written; context rows of each read
		"kv_append":    {KV: attnLayers * 2 * 32 * f32},
		"attention":    {KV: attnLayers * 2 * context * 32 * f32},
		"l2norm_heads": {}, "add": {}, "router_topk": {}, "silu_mul": {}, "shared_expert_combine": {},
		"rope": {}, "attn_output_gate": {},
	}
}

func TestDecodeBytes(t *testing.T) {
	p := tinyPlan(t)
	for _, ctx := range []int{1, 5, 16} {
		s, err := Decode(p, ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := tinyDecode(int64(ctx))
		if d := cmp.Diff(want, s.ByFamily()); d != "" {
			t.Errorf("context %d: bytes by family (-want +got):\n%s", ctx, d)
		}
		var sum Bytes
		for _, b := range want {
			sum = sum.Add(b)
		}
		if s.Total != sum {
			t.Errorf("context %d: total %+v, families sum to %+v", ctx, s.Total, sum)
		}
		if s.Context != ctx || len(s.Launches) != len(p.Phases[len(p.Buckets)].Launches) {
			t.Errorf("context %d: step of %d launches at context %d", ctx, len(s.Launches), s.Context)
		}
	}
}

func TestDecodeBytesErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		edit    func(p *plan.Plan) int
		wantErr string
	}{
		{"context 0", func(*plan.Plan) int { return 0 }, "context 0: want 1 to the plan's 16 tokens"},
		{"past the plan", func(*plan.Plan) int { return 17 }, "context 17: want 1 to the plan's 16 tokens"},
		{"no decode", func(p *plan.Plan) int {
			p.Phases = p.Phases[:len(p.Buckets)]
			return 1
		}, "plan has no decode phase"},
		{"unknown kernel", func(p *plan.Plan) int {
			p.Phases[len(p.Buckets)].Launches[0].Kernel = "nope"
			return 1
		}, "launch 0: no kernel nope"},
		{"arguments", func(p *plan.Plan) int {
			l := &p.Phases[len(p.Buckets)].Launches[0]
			l.Args = l.Args[:1]
			return 1
		}, "1 arguments, family takes 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tinyPlan(t)
			ctx := tc.edit(q)
			_, err := Decode(q, ctx)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// TestDecodeBytesReal holds the frozen plans of the real model to what a
// decode step reads by the plan's buffers: every weight once but the routed
// experts (8 of 256) and the embedding table (one row) — 5.9 GB, the 2.95 B
// active parameters in bf16 —, its GDN state (30 layers of 32 × 128 × 128 f32
// and the conv state of 8192 × 3, read and written, with the GPU plans'
// arrival counters) and the f32 KV cache of
// 10 layers × 2 KV heads × 256 at the context, one row written. The
// derived weights (the certified head's int8 rows) are decode_greedy's.
func TestDecodeBytesReal(t *testing.T) {
	for _, target := range []plan.Target{plan.CPU, plan.SM90, plan.GFX1151} {
		data, err := plans.Frozen(target)
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		var weights int64
		for _, b := range p.Buffers {
			switch {
			case b.Role != ir.Weight, b.Derive != nil:
			case strings.Contains(b.Name, ".mlp.experts."):
				weights += b.Bytes / 256 * 8
			case b.Name == "embed_tokens.weight":
				weights += 2048 * 2
			default:
				weights += b.Bytes
			}
		}
		if weights < 5.89e9 || weights > 5.90e9 {
			t.Fatalf("%s: %d bytes of weights a token, want 5.89 to 5.90 GB", target, weights)
		}
		kvPerToken := int64(10 * 2 * 2 * 256 * 2) // k and v, bf16: the GPU plans' cache
		if target == plan.CPU {
			kvPerToken *= 2 // f32
		}
		for _, ctx := range []int64{1025, 8193} {
			s, err := Decode(p, int(ctx))
			if err != nil {
				t.Fatal(err)
			}
			want := Bytes{
				Weights: weights,
				KV:      ctx*kvPerToken + kvPerToken, // the context read, one row written
				State:   30*2*32*128*128*4 + 30*2*8192*3*4,
			}
			if target.GPU() {
				want.State += 30 * 2 * 16 * 4 // gdn_decode_split's arrival counters, one per key head
			}
			if s.Total != want {
				t.Errorf("%s at %d: %+v, want %+v", target, ctx, s.Total, want)
			}
		}
	}
}

// TestGreedyBytesReal: the decode_greedy phase moves decode's bytes less
// half the LM head, plus the int8 head's scales: the BF16 rows only for
// the candidates. With the final norm folded (the GPU plans) certify reads
// the norm's 8 KB of weights as well as the int8 head.
func TestGreedyBytesReal(t *testing.T) {
	for _, target := range []plan.Target{plan.CPU, plan.SM90, plan.GFX1151} {
		data, err := plans.Frozen(target)
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		d, err := Decode(p, 1025)
		if err != nil {
			t.Fatal(err)
		}
		g, err := Greedy(p, 1025)
		if err != nil {
			t.Fatal(err)
		}
		const V, H = 248320, 2048
		want := d.Total.Weights - V*H*2 + V*H + V*4
		if target.GPU() {
			want += H * 4
		}
		if g.Total.Weights != want || g.Total.KV != d.Total.KV || g.Total.State != d.Total.State {
			t.Errorf("%s: greedy %+v, decode %+v: want weights %d", target, g.Total, d.Total, want)
		}
	}
}

// TestSegmentFLOPsReal holds the frozen plans' prefill of 8192 tokens
// from position 0, and of 5000 after them, to the matrix work counted from
// the weights' shapes: every projection 2 flops a weight a row (the LM
// head's one row), the k = 8 routed experts' gate, up and down a token,
// attention's q·kᵀ and p·v over each row's visible positions, and on the
// GPU plans the chunked GDN's two passes; no other family has flops.
func TestSegmentFLOPsReal(t *testing.T) {
	const V, H, I, K = 248320, 2048, 512, 8
	for _, target := range []plan.Target{plan.CPU, plan.SM90, plan.GFX1151} {
		data, err := plans.Frozen(target)
		if err != nil {
			t.Fatal(err)
		}
		p, err := plan.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		var proj int64 // weights of the projections every row runs
		for _, b := range p.Buffers {
			if b.Role == ir.Weight && b.Derive == nil && len(b.Shape) == 2 && b.DType == ir.BF16 &&
				b.Name != "embed_tokens.weight" && b.Name != "lm_head.weight" {
				proj += b.Shape[0] * b.Shape[1]
			}
		}
		var ph *plan.Phase
		for i := range p.Phases {
			if p.Phases[i].Kind == plan.Prefill && p.Phases[i].Tokens == 8192 {
				ph = &p.Phases[i]
			}
		}
		for _, tc := range []struct{ rows, pos int64 }{{8192, 0}, {5000, 8192}} {
			s, err := Segment(p, ph, int(tc.rows), int(tc.pos))
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int64{}
			for _, l := range s.Launches {
				f := l.Family
				switch f {
				case "gemm", "gemm_add", "gemv", "matmul", "matmul_add":
					f = "projections"
				case "moe_gate_up_group":
					f = "moe_gate_up"
				case "moe_down_group":
					f = "moe_down"
				case "attention_prefill", "attention_prefill_wg":
					f = "attention"
				}
				if l.FLOPs != 0 {
					got[f] += l.FLOPs
				}
			}
			visible := tc.rows*tc.pos + tc.rows*(tc.rows+1)/2
			want := map[string]int64{
				"projections": 2*tc.rows*proj + 2*V*H,
				"moe_gate_up": 40 * 2 * tc.rows * K * 2 * I * H,
				"moe_down":    40 * 2 * tc.rows * K * I * H,
				"attention":   10 * visible * 16 * 4 * 256,
			}
			if target.GPU() {
				chunks := (tc.rows + 63) / 64
				want["gated_delta_wy"] = 30 * chunks * 32 * (4*64*64*128 + 4*64*64*256)
				want["gated_delta_state"] = 30 * chunks * 32 * 6 * 64 * 128 * 128
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s, %d rows at %d: flops by family (-want +got):\n%s", target, tc.rows, tc.pos, d)
			}
			var sum int64
			for _, f := range got {
				sum += f
			}
			if s.FLOPs != sum || s.Context != int(tc.pos+tc.rows) {
				t.Errorf("%s: step flops %d at context %d, launches sum to %d", target, s.FLOPs, s.Context, sum)
			}
		}
	}
}

func TestSegmentErrors(t *testing.T) {
	p := tinyPlan(t) // bucket 4, context 16
	ph := &p.Phases[0]
	for _, tc := range []struct {
		tokens, pos int
		wantErr     string
	}{
		{0, 0, "0 tokens, want 1 to its 4"},
		{5, 0, "5 tokens, want 1 to its 4"},
		{4, -1, "4 tokens at position -1 exceed"},
		{4, 13, "4 tokens at position 13 exceed the plan's 16-token context"},
	} {
		if _, err := Segment(p, ph, tc.tokens, tc.pos); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("Segment(%d, %d): %v, want %q", tc.tokens, tc.pos, err, tc.wantErr)
		}
	}
	if _, err := Segment(p, ph, 4, 12); err != nil {
		t.Errorf("a segment filling the context: %v", err)
	}
}

// TestSegmentExpertBytesReal: the sm_90 prefill's grouped experts read the
// k = 8 selected experts' slices a row, at most every expert: 4 rows read
// 32 of 256, a segment of 8192 rows the whole tensors.
func TestSegmentExpertBytesReal(t *testing.T) {
	data, err := plans.Frozen(plan.SM90)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	const gateUp, down = 256 * 1024 * 2048 * 2, 256 * 2048 * 512 * 2 // bf16 bytes a layer
	for _, tc := range []struct {
		rows int
		want map[string]int64
	}{
		{4, map[string]int64{"moe_gate_up_group": 40 * gateUp / 256 * 32, "moe_down_group": 40 * down / 256 * 32}},
		{8192, map[string]int64{"moe_gate_up_group": 40 * gateUp, "moe_down_group": 40 * down}},
	} {
		var ph *plan.Phase
		for i := range p.Phases {
			if p.Phases[i].Kind == plan.Prefill && p.Phases[i].Tokens >= tc.rows && ph == nil {
				ph = &p.Phases[i]
			}
		}
		s, err := Segment(p, ph, tc.rows, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for f, b := range s.ByFamily() {
			if _, ok := tc.want[f]; ok {
				got[f] = b.Weights
			}
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%d rows (%s): expert weight bytes (-want +got):\n%s", tc.rows, ph.Name, d)
		}
	}
}

// TestDecodeBytesFold: with qk_norm_rope_append folded into the split
// (--qk-fold), the decode step's KV bytes are the context's: the new row is
// written and the other rows read, none read back (the pair reads the new
// row again after appending it).
func TestDecodeBytesFold(t *testing.T) {
	m := planner.FromConfig(arch.RealName, arch.Real())
	kv := func(fold bool) int64 {
		p, err := planner.Plan(m, planner.Options{Target: plan.SM90, Buckets: []int{1024}, ContextTokens: 4096, QKFold: fold})
		if err != nil {
			t.Fatal(err)
		}
		s, err := Decode(p, 1025)
		if err != nil {
			t.Fatal(err)
		}
		return s.Total.KV
	}
	row := int64(10 * 2 * 2 * 256 * 2) // k and v of 10 layers, bf16
	if pair, fold := kv(false), kv(true); pair != 1026*row || fold != 1025*row {
		t.Errorf("KV bytes at 1025: pair %d, fold %d; want %d and %d", pair, fold, 1026*row, 1025*row)
	}
}
