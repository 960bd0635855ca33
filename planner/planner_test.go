package planner

import (
	"bytes"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
)

// tinyConfig has every architectural feature at toy widths.
func tinyConfig(t *testing.T) *arch.Config {
	t.Helper()
	c, err := arch.ParseConfig([]byte(`{"model_type":"qwen3_5_moe","text_config":{"model_type":"qwen3_5_moe_text",
	"hidden_size":16,"num_hidden_layers":4,"vocab_size":40,"num_attention_heads":2,"num_key_value_heads":1,
	"head_dim":8,"linear_num_key_heads":1,"linear_num_value_heads":2,"linear_key_head_dim":4,"linear_value_head_dim":4,
	"linear_conv_kernel_dim":4,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":8,
	"shared_expert_intermediate_size":8,"rope_parameters":{"rope_theta":10000,"partial_rotary_factor":0.5}}}`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestLowerCountsOps(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	tests := []struct {
		step Step
		want map[ir.Kind]int
	}{
		{Step{Kind: plan.Prefill, Tokens: 8, MaxTokens: 16, ContextTokens: 32, KVDType: ir.F32, Chunk: 4},
			map[ir.Kind]int{ir.GatedDeltaChunked: 3, ir.Attention: 1, ir.KVAppend: 1, ir.MoEGateUp: 4, ir.MoEDown: 4, ir.Embedding: 1,
				ir.RMSNorm: 4*2 + 2 + 1, ir.RoPE: 2, ir.CausalConv1dSiLU: 3, ir.MatMul: 3*5 + 4 + 4*5 + 1}},
		{Step{Kind: plan.DecodeStep, Tokens: 1, MaxTokens: 16, ContextTokens: 32, KVDType: ir.BF16},
			map[ir.Kind]int{ir.GatedDeltaRecurrent: 3, ir.Attention: 1}},
		{Step{Kind: plan.Logits, Tokens: 4, MaxTokens: 16}, map[ir.Kind]int{ir.MatMul: 1}},
	}
	for _, tt := range tests {
		g, err := Lower(m, tt.step)
		if err != nil {
			t.Fatalf("%s: %v", tt.step.Kind, err)
		}
		got := map[ir.Kind]int{}
		for _, op := range g.Ops {
			if _, ok := tt.want[op.Kind]; ok {
				got[op.Kind]++
			}
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: op counts (-want +got):\n%s", tt.step.Kind, diff)
		}
	}
}

// TestArenaNoLiveOverlap checks, for every phase of the real model's plan,
// that activations alive at the same time never share arena bytes.
func TestArenaNoLiveOverlap(t *testing.T) {
	m := FromConfig(arch.RealName, arch.Real())
	p, err := Plan(m, Options{Target: "cpu", Buckets: []int{64, 128}, ContextTokens: 1024})
	if err != nil {
		t.Fatal(err)
	}
	for _, ph := range p.Phases {
		first, last := map[string]int{}, map[string]int{}
		for i, l := range ph.Launches {
			for _, a := range l.Args {
				if _, ok := first[a.Buffer]; !ok {
					first[a.Buffer] = i
				}
				last[a.Buffer] = i
			}
		}
		for i, a := range ph.Buffers {
			for _, b := range ph.Buffers[i+1:] {
				live := first[a.Name] <= last[b.Name] && first[b.Name] <= last[a.Name]
				overlap := a.Offset < b.Offset+b.Bytes && b.Offset < a.Offset+a.Bytes
				if live && overlap {
					t.Errorf("%s: %s and %s are live together and overlap", ph.Name, a.Name, b.Name)
				}
			}
			if a.Offset%arenaAlign != 0 || a.Offset+a.Bytes > p.ArenaBytes {
				t.Errorf("%s: %s misplaced at %d", ph.Name, a.Name, a.Offset)
			}
		}
	}
}

func TestPlanDeterministic(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	o := Options{Target: "sm_90", Buckets: []int{4, 16}, ContextTokens: 64}
	a, err := Plan(m, o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Plan(m, o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two plans of the same model differ")
	}
	// Round trip through the file format.
	c, err := plan.Decode(bytes.NewReader(a.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), c.Bytes()) {
		t.Error("decode/encode changes the plan")
	}
}

func TestPlanOptionErrors(t *testing.T) {
	m := FromConfig("tiny", tinyConfig(t))
	tests := []struct {
		o    Options
		want string
	}{
		{Options{Target: "tpu", Buckets: []int{4}, ContextTokens: 8}, `target "tpu" is not one of`},
		{Options{Target: "cpu", ContextTokens: 8}, "no buckets"},
		{Options{Target: "cpu", Buckets: []int{8, 4}, ContextTokens: 8}, "want increasing sizes"},
		{Options{Target: "cpu", Buckets: []int{4}, ContextTokens: 0}, "context tokens 0"},
		{Options{Target: "cpu", Buckets: []int{4}, ContextTokens: 8, LogitsRows: 9}, "logits rows 9"},
	}
	for _, tt := range tests {
		_, err := Plan(m, tt.o)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%+v: error %v, want it to contain %q", tt.o, err, tt.want)
		}
	}
}

func TestFingerprint(t *testing.T) {
	a := FromConfig("a", tinyConfig(t))
	b := FromConfig("b", tinyConfig(t))
	if a.Fingerprint() != b.Fingerprint() {
		t.Error("the name must not change the fingerprint")
	}
	b.DTypes["layers.0.linear_attn.A_log"] = arch.F32
	if a.Fingerprint() == b.Fingerprint() {
		t.Error("a stored dtype change must change the fingerprint")
	}
}
