package checkpoint

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/bf16"
)

// Shard names of the tiny fixture checkpoint.
const (
	shard1 = "model-00001-of-00003.safetensors"
	shard2 = "model-00002-of-00003.safetensors"
	shard3 = "model-00003-of-00003.safetensors"
)

// fixture is a small checkpoint in memory, damaged by tests before write.
type fixture struct {
	config  map[string]any // nested layout; text fields under "text_config"
	files   []shardFile    // in shard order
	noIndex bool           // write a single model.safetensors, no index
	// weightMap, when set, replaces the index derived from files.
	weightMap map[string]string
}

type shardFile struct {
	name    string
	tensors []WriteTensor
}

// tinyText is the text_config of the fixture: 4 layers (3 GDN + 1 full
// attention), every dimension small so a checkpoint is a few hundred KiB.
func tinyText() map[string]any {
	return map[string]any{
		"model_type":                      "qwen3_5_moe_text",
		"hidden_size":                     16,
		"num_hidden_layers":               4,
		"layer_types":                     []string{arch.LinearAttention, arch.LinearAttention, arch.LinearAttention, arch.FullAttention},
		"num_attention_heads":             2,
		"num_key_value_heads":             1,
		"head_dim":                        8,
		"partial_rotary_factor":           0.5,
		"rope_theta":                      10000,
		"linear_num_key_heads":            1,
		"linear_num_value_heads":          2,
		"linear_key_head_dim":             8,
		"linear_value_head_dim":           8,
		"linear_conv_kernel_dim":          4,
		"num_experts":                     4,
		"num_experts_per_tok":             2,
		"moe_intermediate_size":           8,
		"shared_expert_intermediate_size": 8,
		"vocab_size":                      32,
		"rms_norm_eps":                    1e-6,
		"hidden_act":                      "silu",
	}
}

// newFixture builds the valid tiny checkpoint: three shards (embeddings and
// layers 0–1; layers 2–3 and the final norm; lm_head and the decoys), with
// model.visual.* and mtp.* tensors the text model must ignore.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{config: map[string]any{
		"model_type":          "qwen3_5_moe",
		"architectures":       []string{"Qwen3_5MoeForConditionalGeneration"},
		"tie_word_embeddings": false,
		"text_config":         tinyText(),
	}}
	cfg := f.parseConfig(t)
	rng := rand.New(rand.NewPCG(1, 2))
	f.files = []shardFile{{name: shard1}, {name: shard2}, {name: shard3}}
	files := map[string]*shardFile{shard1: &f.files[0], shard2: &f.files[1], shard3: &f.files[2]}
	for _, sp := range cfg.Tensors(arch.NestedPrefix) {
		file := shard1
		switch layer, _, ok := splitLayer(sp.Name, arch.NestedPrefix); {
		case sp.Name == arch.LMHead:
			file = shard3
		case ok && layer >= 2, sp.Name == arch.NestedPrefix+"norm.weight":
			file = shard2
		}
		files[file].tensors = append(files[file].tensors, randomTensor(rng, sp.Name, sp.DTypes[0], sp.Shape...))
	}
	files[shard3].tensors = append(files[shard3].tensors,
		randomTensor(rng, "model.visual.blocks.0.attn.qkv.weight", arch.BF16, 48, 16),
		randomTensor(rng, "model.visual.patch_embed.proj.weight", arch.F32, 16, 3, 2, 4, 4),
		randomTensor(rng, "mtp.fc.weight", arch.BF16, 16, 32),
		randomTensor(rng, "mtp.layers.0.mlp.experts.gate_up_proj", arch.BF16, 4, 16, 16),
	)
	return f
}

func (f *fixture) text() map[string]any { return f.config["text_config"].(map[string]any) }

func (f *fixture) parseConfig(t testing.TB) *arch.Config {
	t.Helper()
	cfg, err := arch.ParseConfig(f.configJSON(t))
	if err != nil {
		t.Fatalf("fixture config: %v", err)
	}
	return cfg
}

func (f *fixture) configJSON(t testing.TB) []byte {
	t.Helper()
	b, err := json.MarshalIndent(f.config, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// randomTensor fills a BF16 tensor with N(0, 0.02²) values, like trained
// weights, and any other dtype with random bytes.
func randomTensor(rng *rand.Rand, name string, dt arch.DType, shape ...int64) WriteTensor {
	n := int64(1)
	for _, d := range shape {
		n *= d
	}
	data := make([]byte, n*int64(DTypeSize(dt)))
	switch dt {
	case arch.BF16:
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64() * 0.02)
		}
		bf16.Encode(data, v)
	default:
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
	}
	return WriteTensor{Name: name, DType: dt, Shape: slices.Clone(shape), Data: data}
}

// find returns the shard and position of a tensor.
func (f *fixture) find(t testing.TB, name string) (*shardFile, int) {
	t.Helper()
	for i := range f.files {
		for j, w := range f.files[i].tensors {
			if w.Name == name {
				return &f.files[i], j
			}
		}
	}
	t.Fatalf("fixture has no tensor %s", name)
	return nil, 0
}

func (f *fixture) tensor(t testing.TB, name string) *WriteTensor {
	sf, i := f.find(t, name)
	return &sf.tensors[i]
}

func (f *fixture) remove(t testing.TB, name string) {
	sf, i := f.find(t, name)
	sf.tensors = slices.Delete(sf.tensors, i, i+1)
}

func (f *fixture) shard(name string) *shardFile {
	for i := range f.files {
		if f.files[i].name == name {
			return &f.files[i]
		}
	}
	return nil
}

// dataBytes is the size of a shard's data section.
func (f *fixture) dataBytes(name string) int64 {
	var n int64
	for _, w := range f.shard(name).tensors {
		n += int64(len(w.Data))
	}
	return n
}

// index is the weight map derived from files.
func (f *fixture) index() map[string]string {
	wm := map[string]string{}
	for _, sf := range f.files {
		for _, w := range sf.tensors {
			wm[w.Name] = sf.name
		}
	}
	return wm
}

// write writes the checkpoint into a fresh directory.
func (f *fixture) write(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	if f.config != nil {
		if err := os.WriteFile(filepath.Join(dir, ConfigFile), f.configJSON(t), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if f.noIndex {
		var all []WriteTensor
		for _, sf := range f.files {
			all = append(all, sf.tensors...)
		}
		if err := WriteFile(filepath.Join(dir, SingleFile), all, map[string]string{"format": "pt"}); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	var total int64
	for _, sf := range f.files {
		if err := WriteFile(filepath.Join(dir, sf.name), sf.tensors, map[string]string{"format": "pt"}); err != nil {
			t.Fatal(err)
		}
		total += f.dataBytes(sf.name)
	}
	wm := f.weightMap
	if wm == nil {
		wm = f.index()
	}
	if err := WriteIndex(filepath.Join(dir, IndexFile), total, wm); err != nil {
		t.Fatal(err)
	}
	return dir
}

// rawFile assembles a safetensors file from a literal header and data size.
func rawFile(header string, dataLen int) []byte {
	b := make([]byte, 8+len(header)+dataLen)
	n := uint64(len(header))
	for i := range 8 {
		b[i] = byte(n >> (8 * i))
	}
	copy(b[8:], header)
	return b
}
