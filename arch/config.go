// Package arch describes the qwen3_5_moe architecture (Qwen3.6-35B-A3B):
// its configuration, as read from config.json in either layout, and the
// tensors a checkpoint must hold for the text model (SPEC §1–§5).
package arch

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
)

// Layer kinds as config.json spells them in layer_types.
const (
	LinearAttention = "linear_attention" // Gated DeltaNet mixer
	FullAttention   = "full_attention"   // gated softmax attention mixer
)

// Config is the text model's configuration: every field the forward pass
// depends on, after defaults and derivations.
type Config struct {
	ModelType string `json:"model_type"`

	HiddenSize            int      `json:"hidden_size"`
	NumHiddenLayers       int      `json:"num_hidden_layers"`
	LayerTypes            []string `json:"layer_types"`
	VocabSize             int      `json:"vocab_size"`
	RMSNormEps            float64  `json:"rms_norm_eps"`
	TieWordEmbeddings     bool     `json:"tie_word_embeddings"`
	MaxPositionEmbeddings int      `json:"max_position_embeddings"`

	// Gated full attention (SPEC §2.3, §2.4).
	NumAttentionHeads   int     `json:"num_attention_heads"`
	NumKeyValueHeads    int     `json:"num_key_value_heads"`
	HeadDim             int     `json:"head_dim"`
	RopeTheta           float64 `json:"rope_theta"`
	PartialRotaryFactor float64 `json:"partial_rotary_factor"`

	// Gated DeltaNet (SPEC §3).
	LinearNumKeyHeads   int `json:"linear_num_key_heads"`
	LinearNumValueHeads int `json:"linear_num_value_heads"`
	LinearKeyHeadDim    int `json:"linear_key_head_dim"`
	LinearValueHeadDim  int `json:"linear_value_head_dim"`
	LinearConvKernelDim int `json:"linear_conv_kernel_dim"`

	// Sparse MoE (SPEC §4).
	NumExperts                   int `json:"num_experts"`
	NumExpertsPerTok             int `json:"num_experts_per_tok"`
	MoeIntermediateSize          int `json:"moe_intermediate_size"`
	SharedExpertIntermediateSize int `json:"shared_expert_intermediate_size"`

	BOSTokenID int `json:"bos_token_id"`
	EOSTokenID int `json:"eos_token_id"`
}

// RotaryDim is the number of leading head dimensions RoPE rotates (SPEC §2.4).
func (c *Config) RotaryDim() int { return int(float64(c.HeadDim) * c.PartialRotaryFactor) }

// IsFullAttention reports whether layer i is a gated full-attention layer.
func (c *Config) IsFullAttention(i int) bool { return c.LayerTypes[i] == FullAttention }

// LinearQKVDim is the width of in_proj_qkv's output (q ‖ k ‖ v), also the
// number of conv1d channels.
func (c *Config) LinearQKVDim() int {
	return 2*c.LinearNumKeyHeads*c.LinearKeyHeadDim + c.LinearNumValueHeads*c.LinearValueHeadDim
}

// LinearValueDim is the width of the GDN output and of the z gate.
func (c *Config) LinearValueDim() int { return c.LinearNumValueHeads * c.LinearValueHeadDim }

// ParseConfig reads config.json in the nested layout Qwen ships
// (Qwen3_5MoeForConditionalGeneration, fields under text_config) or the flat
// layout of a text-only checkpoint. All problems are reported at once.
func ParseConfig(data []byte) (*Config, error) {
	top, err := decodeObject(data)
	if err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	fields := top
	where := ""
	if tc, ok := top["text_config"]; ok {
		obj, err := decodeObject(tc)
		if err != nil {
			return nil, fmt.Errorf("text_config: not a JSON object: %w", err)
		}
		fields = obj
		where = "text_config."
		// Fields the nested layout keeps only at the top level.
		for _, k := range []string{"tie_word_embeddings"} {
			if _, in := fields[k]; !in {
				if v, ok := top[k]; ok {
					fields[k] = v
				}
			}
		}
	}
	r := reader{fields: fields, where: where}
	c := &Config{}
	c.ModelType = r.str("model_type", false)
	c.HiddenSize = r.posInt("hidden_size")
	c.NumHiddenLayers = r.posInt("num_hidden_layers")
	c.VocabSize = r.posInt("vocab_size")
	c.RMSNormEps = r.num("rms_norm_eps", 1e-6)
	c.TieWordEmbeddings = r.boolean("tie_word_embeddings", false)
	c.MaxPositionEmbeddings = r.optInt("max_position_embeddings", 32768)
	c.NumAttentionHeads = r.posInt("num_attention_heads")
	c.NumKeyValueHeads = r.posInt("num_key_value_heads")
	c.HeadDim = r.posInt("head_dim")
	c.LinearNumKeyHeads = r.posInt("linear_num_key_heads")
	c.LinearNumValueHeads = r.posInt("linear_num_value_heads")
	c.LinearKeyHeadDim = r.posInt("linear_key_head_dim")
	c.LinearValueHeadDim = r.posInt("linear_value_head_dim")
	c.LinearConvKernelDim = r.posInt("linear_conv_kernel_dim")
	c.NumExperts = r.posInt("num_experts")
	c.NumExpertsPerTok = r.posInt("num_experts_per_tok")
	c.MoeIntermediateSize = r.posInt("moe_intermediate_size")
	c.SharedExpertIntermediateSize = r.posInt("shared_expert_intermediate_size")
	c.BOSTokenID = r.optInt("bos_token_id", -1)
	c.EOSTokenID = r.optInt("eos_token_id", -1)

	// RoPE: rope_parameters (transformers 5) or flat rope_theta/partial_rotary_factor.
	c.RopeTheta = r.num("rope_theta", 10000)
	c.PartialRotaryFactor = r.num("partial_rotary_factor", 1)
	if raw, ok := r.raw("rope_parameters"); ok {
		obj, err := decodeObject(raw)
		if err != nil {
			r.fail("rope_parameters", "not a JSON object")
		} else {
			rp := reader{fields: obj, where: where + "rope_parameters."}
			c.RopeTheta = rp.num("rope_theta", c.RopeTheta)
			c.PartialRotaryFactor = rp.num("partial_rotary_factor", c.PartialRotaryFactor)
			if t := rp.str("rope_type", false); t != "" && t != "default" {
				rp.fail("rope_type", fmt.Sprintf("%q is not supported (want \"default\")", t))
			}
			r.errs = append(r.errs, rp.errs...)
		}
	}

	// Mixer and MoE switches this engine implements one way only.
	if v := r.str("hidden_act", false); v != "" && v != "silu" {
		r.fail("hidden_act", fmt.Sprintf("%q is not supported (want \"silu\")", v))
	}
	if !r.boolean("attn_output_gate", true) {
		r.fail("attn_output_gate", "false is not supported (qwen3_5_moe gates attention output)")
	}
	if r.boolean("attention_bias", false) {
		r.fail("attention_bias", "true is not supported (qwen3_5_moe has no attention biases)")
	}
	if raw, ok := fields["mlp_only_layers"]; ok && !isNull(raw) {
		var v []int
		if err := json.Unmarshal(raw, &v); err != nil {
			r.fail("mlp_only_layers", "not a list of integers")
		} else if len(v) > 0 {
			r.fail("mlp_only_layers", "dense MLP layers are not supported (want [])")
		}
	}
	switch c.ModelType {
	case "", "qwen3_5_moe", "qwen3_5_moe_text":
	default:
		r.fail("model_type", fmt.Sprintf("%q is not qwen3_5_moe", c.ModelType))
	}
	if c.ModelType == "" {
		if mt, ok := top["model_type"]; ok {
			var s string
			if json.Unmarshal(mt, &s) == nil {
				c.ModelType = s
			}
		}
	}

	// layer_types, or derived from full_attention_interval as [HF-C] does.
	if raw, ok := fields["layer_types"]; ok && !isNull(raw) {
		if err := json.Unmarshal(raw, &c.LayerTypes); err != nil {
			r.fail("layer_types", "not a list of strings")
		}
	} else if c.NumHiddenLayers > 0 && c.NumHiddenLayers <= maxHiddenLayers {
		// (check refuses more layers; deriving a billion would take minutes.)
		interval := r.optInt("full_attention_interval", 4)
		if interval <= 0 {
			r.fail("full_attention_interval", "must be > 0")
		} else {
			for i := 0; i < c.NumHiddenLayers; i++ {
				if (i+1)%interval == 0 {
					c.LayerTypes = append(c.LayerTypes, FullAttention)
				} else {
					c.LayerTypes = append(c.LayerTypes, LinearAttention)
				}
			}
		}
	}
	r.errs = append(r.errs, c.check(where)...)
	if len(r.errs) > 0 {
		return nil, errors.Join(r.errs...)
	}
	return c, nil
}

// maxHiddenLayers bounds num_hidden_layers.
const maxHiddenLayers = 1024

// check validates relations between fields.
func (c *Config) check(where string) []error {
	var errs []error
	fail := func(field, msg string) { errs = append(errs, fmt.Errorf("%s%s: %s", where, field, msg)) }
	if c.NumHiddenLayers > 0 && c.NumHiddenLayers <= maxHiddenLayers && len(c.LayerTypes) != c.NumHiddenLayers {
		fail("layer_types", fmt.Sprintf("has %d entries, num_hidden_layers is %d", len(c.LayerTypes), c.NumHiddenLayers))
	}
	for i, t := range c.LayerTypes {
		if t != LinearAttention && t != FullAttention {
			fail("layer_types", fmt.Sprintf("entry %d is %q (want %q or %q)", i, t, LinearAttention, FullAttention))
		}
	}
	if c.NumAttentionHeads > 0 && c.NumKeyValueHeads > 0 && c.NumAttentionHeads%c.NumKeyValueHeads != 0 {
		fail("num_key_value_heads", fmt.Sprintf("%d does not divide num_attention_heads %d", c.NumKeyValueHeads, c.NumAttentionHeads))
	}
	if c.LinearNumKeyHeads > 0 && c.LinearNumValueHeads > 0 && c.LinearNumValueHeads%c.LinearNumKeyHeads != 0 {
		fail("linear_num_value_heads", fmt.Sprintf("%d is not a multiple of linear_num_key_heads %d", c.LinearNumValueHeads, c.LinearNumKeyHeads))
	}
	if c.NumExperts > 0 && c.NumExpertsPerTok > c.NumExperts {
		fail("num_experts_per_tok", fmt.Sprintf("%d exceeds num_experts %d", c.NumExpertsPerTok, c.NumExperts))
	}
	// Bounds that keep every derived size far inside int64 and memory.
	for _, d := range []struct {
		name   string
		v, max int
	}{
		{"hidden_size", c.HiddenSize, 1 << 16}, {"num_hidden_layers", c.NumHiddenLayers, maxHiddenLayers},
		{"vocab_size", c.VocabSize, 1 << 22}, {"num_attention_heads", c.NumAttentionHeads, 1024},
		{"num_key_value_heads", c.NumKeyValueHeads, 1024}, {"head_dim", c.HeadDim, 4096},
		{"linear_num_key_heads", c.LinearNumKeyHeads, 1024}, {"linear_num_value_heads", c.LinearNumValueHeads, 1024},
		{"linear_key_head_dim", c.LinearKeyHeadDim, 4096}, {"linear_value_head_dim", c.LinearValueHeadDim, 4096},
		{"linear_conv_kernel_dim", c.LinearConvKernelDim, 64}, {"num_experts", c.NumExperts, 4096},
		{"num_experts_per_tok", c.NumExpertsPerTok, 4096}, {"moe_intermediate_size", c.MoeIntermediateSize, 1 << 16},
		{"shared_expert_intermediate_size", c.SharedExpertIntermediateSize, 1 << 16},
	} {
		if d.v > d.max {
			fail(d.name, fmt.Sprintf("%d exceeds the supported maximum %d", d.v, d.max))
		}
	}
	if c.MaxPositionEmbeddings <= 0 {
		fail("max_position_embeddings", "must be > 0")
	}
	if !(c.RMSNormEps > 0) {
		fail("rms_norm_eps", "must be > 0")
	}
	if !(c.RopeTheta > 0) {
		fail("rope_theta", "must be > 0")
	}
	if !(c.PartialRotaryFactor > 0 && c.PartialRotaryFactor <= 1) {
		fail("partial_rotary_factor", "must be in (0, 1]")
	} else if c.HeadDim > 0 {
		rd := float64(c.HeadDim) * c.PartialRotaryFactor
		if rd != math.Trunc(rd) || int(rd)%2 != 0 {
			fail("partial_rotary_factor", fmt.Sprintf("head_dim × factor = %g is not an even integer", rd))
		}
	}
	return errs
}

// reader pulls typed fields out of a JSON object and collects every problem.
type reader struct {
	fields map[string]json.RawMessage
	where  string
	errs   []error
}

func (r *reader) fail(field, msg string) {
	r.errs = append(r.errs, fmt.Errorf("%s%s: %s", r.where, field, msg))
}

func (r *reader) raw(field string) (json.RawMessage, bool) {
	v, ok := r.fields[field]
	if !ok || isNull(v) {
		return nil, false
	}
	return v, true
}

func (r *reader) posInt(field string) int {
	v, ok := r.raw(field)
	if !ok {
		r.fail(field, "missing")
		return 0
	}
	n, err := toInt(v)
	if err != nil {
		r.fail(field, err.Error())
		return 0
	}
	if n <= 0 {
		r.fail(field, fmt.Sprintf("must be > 0, got %d", n))
		return 0
	}
	return n
}

func (r *reader) optInt(field string, def int) int {
	v, ok := r.raw(field)
	if !ok {
		return def
	}
	// eos_token_id may be a list; the first id is the model's own.
	if bytes.HasPrefix(bytes.TrimSpace(v), []byte("[")) {
		var ids []json.RawMessage
		if err := json.Unmarshal(v, &ids); err != nil || len(ids) == 0 {
			r.fail(field, "not an integer or a non-empty list of integers")
			return def
		}
		v = ids[0]
	}
	n, err := toInt(v)
	if err != nil {
		r.fail(field, err.Error())
		return def
	}
	return n
}

func (r *reader) num(field string, def float64) float64 {
	v, ok := r.raw(field)
	if !ok {
		return def
	}
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		r.fail(field, "not a number")
		return def
	}
	return f
}

func (r *reader) boolean(field string, def bool) bool {
	v, ok := r.raw(field)
	if !ok {
		return def
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		r.fail(field, "not a boolean")
		return def
	}
	return b
}

func (r *reader) str(field string, required bool) string {
	v, ok := r.raw(field)
	if !ok {
		if required {
			r.fail(field, "missing")
		}
		return ""
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		r.fail(field, "not a string")
		return ""
	}
	return s
}

func toInt(v json.RawMessage) (int, error) {
	var f float64
	if err := json.Unmarshal(v, &f); err != nil {
		return 0, errors.New("not a number")
	}
	if f != math.Trunc(f) || math.Abs(f) > 1<<40 {
		return 0, fmt.Errorf("not an integer: %s", strings.TrimSpace(string(v)))
	}
	return int(f), nil
}

func isNull(v json.RawMessage) bool { return string(bytes.TrimSpace(v)) == "null" }

// decodeObject decodes one JSON object, rejecting duplicate keys and trailing data.
func decodeObject(data []byte) (map[string]json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("want an object")
	}
	out := map[string]json.RawMessage{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := kt.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("duplicate key %q", k)
		}
		out[k] = v
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("trailing data after the object")
	}
	return out, nil
}

// Canonical returns the configuration as canonical JSON (fixed field order),
// the form fingerprints are taken over.
func (c *Config) Canonical() []byte {
	b, err := json.Marshal(c)
	if err != nil {
		panic(err) // a Config always marshals
	}
	return b
}

// LayerKinds counts layers of each kind.
func (c *Config) LayerKinds() map[string]int {
	m := map[string]int{}
	for _, t := range c.LayerTypes {
		m[t]++
	}
	return m
}
