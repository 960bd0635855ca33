package arch

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestRealConfig(t *testing.T) {
	c := Real()
	kinds := c.LayerKinds()
	if diff := cmp.Diff(map[string]int{LinearAttention: 30, FullAttention: 10}, kinds); diff != "" {
		t.Errorf("layer kinds (-want +got):\n%s", diff)
	}
	for _, i := range []int{3, 7, 39} {
		if !c.IsFullAttention(i) {
			t.Errorf("layer %d should be full attention", i)
		}
	}
	if c.RotaryDim() != 64 || c.LinearQKVDim() != 8192 || c.LinearValueDim() != 4096 {
		t.Errorf("derived dims: rotary %d qkv %d value %d", c.RotaryDim(), c.LinearQKVDim(), c.LinearValueDim())
	}
	if c.RopeTheta != 1e7 || c.PartialRotaryFactor != 0.25 || c.RMSNormEps != 1e-6 {
		t.Errorf("rope/eps: %v %v %v", c.RopeTheta, c.PartialRotaryFactor, c.RMSNormEps)
	}
}

// SPEC §5.1: the text model has 34,660,610,688 parameters and 692 tensors
// besides lm_head... counted here from the tensor table.
func TestRealParameterCount(t *testing.T) {
	c := Real()
	ts := c.Tensors(NestedPrefix)
	var n int64
	for _, s := range ts {
		n += s.Elements()
	}
	if n != 34_660_610_688 {
		t.Errorf("parameters = %d, want 34,660,610,688", n)
	}
	// 692 language-model tensors + lm_head (SPEC §1.4).
	if len(ts) != 693 {
		t.Errorf("tensors = %d, want 693", len(ts))
	}
}

func TestParseConfigLayouts(t *testing.T) {
	flat := `{"model_type":"qwen3_5_moe_text","hidden_size":64,"num_hidden_layers":4,"vocab_size":100,
	"num_attention_heads":4,"num_key_value_heads":2,"head_dim":32,"linear_num_key_heads":2,
	"linear_num_value_heads":4,"linear_key_head_dim":16,"linear_value_head_dim":16,"linear_conv_kernel_dim":4,
	"num_experts":8,"num_experts_per_tok":2,"moe_intermediate_size":32,"shared_expert_intermediate_size":32,
	"rope_theta":10000,"partial_rotary_factor":0.25,"full_attention_interval":4}`
	c, err := ParseConfig([]byte(flat))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{LinearAttention, LinearAttention, LinearAttention, FullAttention}
	if diff := cmp.Diff(want, c.LayerTypes); diff != "" {
		t.Errorf("derived layer_types (-want +got):\n%s", diff)
	}
	nested := `{"model_type":"qwen3_5_moe","tie_word_embeddings":false,"text_config":` + flat + `}`
	c2, err := ParseConfig([]byte(nested))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, c2); diff != "" {
		t.Errorf("nested differs from flat (-flat +nested):\n%s", diff)
	}
}

func TestParseConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		json string
		want []string
	}{
		{"not json", `{"hidden_size": `, []string{"not a JSON object"}},
		{"not an object", `[1,2]`, []string{"want an object"}},
		{"missing fields all reported", `{"text_config":{"hidden_size":64}}`,
			[]string{"text_config.num_hidden_layers: missing", "text_config.vocab_size: missing", "text_config.num_experts: missing"}},
		{"wrong types", `{"hidden_size":"big","num_hidden_layers":1.5}`,
			[]string{"hidden_size: not a number", "num_hidden_layers: not an integer"}},
		{"duplicate key", `{"hidden_size":1,"hidden_size":2}`, []string{`duplicate key "hidden_size"`}},
		{"unsupported switches", strings.Replace(realText(t), `"hidden_act": "silu"`, `"hidden_act": "gelu"`, 1),
			[]string{`hidden_act: "gelu" is not supported`}},
		{"layer_types mismatch", strings.Replace(realText(t), `"num_hidden_layers": 40`, `"num_hidden_layers": 39`, 1),
			[]string{"layer_types: has 40 entries, num_hidden_layers is 39"}},
	}
	for _, tt := range tests {
		_, err := ParseConfig([]byte(tt.json))
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not contain %q", tt.name, err, w)
			}
		}
	}
}

func realText(t *testing.T) string { t.Helper(); return string(RealConfigJSON) }

func FuzzParseConfig(f *testing.F) {
	f.Add(RealConfigJSON)
	f.Add([]byte(`{"text_config":{}}`))
	f.Add([]byte(`{"layer_types":["x"],"num_hidden_layers":1}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			return
		}
		// A config that parses must describe a model whose tensors can be listed.
		_ = c.Tensors(NestedPrefix)
		_ = c.RotaryDim()
	})
}

// TestParseConfigManyLayers: a huge layer count is refused at once, not
// after deriving a layer type for each.
func TestParseConfigManyLayers(t *testing.T) {
	data := strings.Replace(realText(t), `"num_hidden_layers": 40`, `"num_hidden_layers": 2000000000`, 1)
	if data == realText(t) {
		t.Fatal("the real config has no num_hidden_layers 40")
	}
	// Without layer_types the types are derived from the count.
	data = regexp.MustCompile(`"layer_types": \[[^\]]*\],?`).ReplaceAllString(data, "")
	start := time.Now()
	_, err := ParseConfig([]byte(data))
	if err == nil || err.Error() != "text_config.num_hidden_layers: 2000000000 exceeds the supported maximum 1024" {
		t.Errorf("error %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("took %v", d)
	}
}
