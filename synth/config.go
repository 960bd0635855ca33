package synth

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/aimaproject/aimac/arch"
)

// Preset names.
const (
	PresetTiny = "tiny" // a few-megabyte model whose forward pass is cheap enough for unit tests
	PresetFull = "full" // the real model's dimensions, for load and memory tests
)

// MaxLayers bounds Options.Layers, as arch.ParseConfig bounds num_hidden_layers.
const MaxLayers = 1024

// Presets lists the preset names Write accepts, sorted, for CLI help and
// validation messages.
func Presets() []string { return []string{PresetFull, PresetTiny} }

// defaultLayers is a preset's layer count when Options.Layers is 0.
func defaultLayers(preset string) (int, error) {
	switch preset {
	case PresetTiny:
		return 4, nil
	case PresetFull:
		return 40, nil
	}
	return 0, fmt.Errorf("synth: unknown preset %q (want one of %s)", preset, strings.Join(Presets(), ", "))
}

// resolveLayers checks a preset and a requested layer count and returns the
// count to build; one place so ConfigJSON and Write agree.
func resolveLayers(preset string, layers int) (int, error) {
	def, err := defaultLayers(preset)
	if err != nil {
		return 0, err
	}
	if layers < 0 || layers > MaxLayers {
		return 0, fmt.Errorf("synth: layers %d out of range (want 0 for the preset's default %d, or 1…%d)", layers, def, MaxLayers)
	}
	if layers == 0 {
		return def, nil
	}
	return layers, nil
}

// layerTypes follows the real model's pattern: full attention at every
// fourth layer, Gated DeltaNet elsewhere.
func layerTypes(n int) []string {
	out := make([]string, n)
	for i := range out {
		if (i+1)%4 == 0 {
			out[i] = arch.FullAttention
		} else {
			out[i] = arch.LinearAttention
		}
	}
	return out
}

// ConfigJSON returns the nested config.json that Write puts in a preset's
// output (layers 0 = the preset's default), so callers can inspect or plan
// for a synthetic model without writing its weights.
func ConfigJSON(preset string, layers int) ([]byte, error) {
	n, err := resolveLayers(preset, layers)
	if err != nil {
		return nil, err
	}
	tok, err := theTokenizer()
	if err != nil {
		return nil, err
	}
	var top map[string]any
	switch preset {
	case PresetTiny:
		top = tinyConfig(n, tok)
	case PresetFull:
		if top, err = fullConfig(n); err != nil {
			return nil, err
		}
	}
	data, err := prettyJSON(top)
	if err != nil {
		return nil, fmt.Errorf("synth: encoding config.json: %w", err)
	}
	if _, err := arch.ParseConfig(data); err != nil {
		return nil, fmt.Errorf("synth: generated config.json does not parse: %w", err)
	}
	return data, nil
}

// num keeps a number's spelling (1e-06, 0.0) as Python writes it.
func num(s string) json.Number { return json.Number(s) }

// tinyConfig is a small model with every structural feature of the real
// one: both mixers, GQA, the q/gate interleave, partial RoPE, GVA in the
// DeltaNet (2 value heads per key head), routed and shared experts.
func tinyConfig(layers int, tok *tokenizer) map[string]any {
	const hidden = 64
	eot := tok.id("<|endoftext|>")
	text := map[string]any{
		"attention_bias":                  false,
		"attention_dropout":               num("0.0"),
		"attn_output_gate":                true,
		"bos_token_id":                    eot,
		"dtype":                           "bfloat16",
		"eos_token_id":                    eot,
		"full_attention_interval":         4,
		"head_dim":                        32,
		"hidden_act":                      "silu",
		"hidden_size":                     hidden,
		"initializer_range":               num("0.02"),
		"layer_types":                     layerTypes(layers),
		"linear_conv_kernel_dim":          4,
		"linear_key_head_dim":             16,
		"linear_num_key_heads":            2,
		"linear_num_value_heads":          4,
		"linear_value_head_dim":           16,
		"mamba_ssm_dtype":                 "float32",
		"max_position_embeddings":         262144,
		"mlp_only_layers":                 []int{},
		"model_type":                      "qwen3_5_moe_text",
		"moe_intermediate_size":           32,
		"mtp_num_hidden_layers":           1,
		"mtp_use_dedicated_embeddings":    false,
		"num_attention_heads":             4,
		"num_experts":                     8,
		"num_experts_per_tok":             2,
		"num_hidden_layers":               layers,
		"num_key_value_heads":             2,
		"output_router_logits":            false,
		"partial_rotary_factor":           num("0.25"),
		"rms_norm_eps":                    num("1e-06"),
		"router_aux_loss_coef":            num("0.001"),
		"shared_expert_intermediate_size": 32,
		"use_cache":                       true,
		"vocab_size":                      tinyVocabSize,
		"rope_parameters": map[string]any{
			"mrope_interleaved":     true,
			"mrope_section":         []int{2, 1, 1},
			"partial_rotary_factor": num("0.25"),
			"rope_theta":            10000000,
			"rope_type":             "default",
		},
	}
	return map[string]any{
		"architectures":         []string{"Qwen3_5MoeForConditionalGeneration"},
		"image_token_id":        tok.id("<|image_pad|>"),
		"model_type":            "qwen3_5_moe",
		"text_config":           text,
		"tie_word_embeddings":   false,
		"video_token_id":        tok.id("<|video_pad|>"),
		"vision_config":         visionConfig(hidden),
		"vision_end_token_id":   tok.id("<|vision_end|>"),
		"vision_start_token_id": tok.id("<|vision_start|>"),
	}
}

// tinyVocabSize is the tiny model's embedding rows: the tokenizer's ids
// plus unused padding rows, as the real model pads 248077 to 248320.
const tinyVocabSize = 1024

// fullConfig is the real config.json with the layer count changed and the
// vision tower swapped for the decoy whose tensors synth writes.
func fullConfig(layers int) (map[string]any, error) {
	dec := json.NewDecoder(bytes.NewReader(arch.RealConfigJSON))
	dec.UseNumber()
	var top map[string]any
	if err := dec.Decode(&top); err != nil {
		return nil, fmt.Errorf("synth: embedded real config: %w", err)
	}
	text, ok := top["text_config"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("synth: embedded real config has no text_config object")
	}
	text["num_hidden_layers"] = layers
	text["layer_types"] = layerTypes(layers)
	hidden, err := text["hidden_size"].(json.Number).Int64()
	if err != nil {
		return nil, fmt.Errorf("synth: embedded real config: hidden_size: %w", err)
	}
	top["vision_config"] = visionConfig(int(hidden))
	return top, nil
}

// Decoy vision tower dimensions: small, so the tensors cost nothing, but
// consistent with the decoy tensors synth writes under model.visual.
const (
	visionHidden = 32
	visionMerge  = 2
	visionPatch  = 4
	visionTPatch = 2
)

// visionConfig describes the decoy vision tower; text engines must ignore it.
func visionConfig(outHidden int) map[string]any {
	return map[string]any{
		"deepstack_visual_indexes": []int{},
		"depth":                    1,
		"hidden_act":               "gelu_pytorch_tanh",
		"hidden_size":              visionHidden,
		"in_channels":              3,
		"initializer_range":        num("0.02"),
		"intermediate_size":        2 * visionHidden,
		"model_type":               "qwen3_5_moe_vision",
		"num_heads":                2,
		"num_position_embeddings":  16,
		"out_hidden_size":          outHidden,
		"patch_size":               visionPatch,
		"spatial_merge_size":       visionMerge,
		"temporal_patch_size":      visionTPatch,
	}
}
