package checkpoint

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/bf16"
	"github.com/google/go-cmp/cmp"
)

const np = arch.NestedPrefix

func TestOpenValid(t *testing.T) {
	f := newFixture(t)
	dir := f.write(t)
	c, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Prefix != arch.NestedPrefix {
		t.Errorf("Prefix = %q, want %q", c.Prefix, arch.NestedPrefix)
	}
	if diff := cmp.Diff(f.configJSON(t), c.ConfigJSON); diff != "" {
		t.Errorf("ConfigJSON (-want +got):\n%s", diff)
	}
	if c.IndexJSON == nil || c.Config.NumHiddenLayers != 4 {
		t.Errorf("IndexJSON %d bytes, NumHiddenLayers %d", len(c.IndexJSON), c.Config.NumHiddenLayers)
	}
	// Every tensor, decoys included, reads back byte for byte from its shard.
	n := 0
	for _, sf := range f.files {
		for _, w := range sf.tensors {
			n++
			info := c.Tensors[w.Name]
			if info.File != sf.name || info.DType != w.DType || !cmp.Equal(info.Shape, w.Shape) {
				t.Errorf("%s: info %+v, want file %s dtype %s shape %v", w.Name, info, sf.name, w.DType, w.Shape)
			}
			got, err := c.Bytes(w.Name)
			if err != nil || !bytes.Equal(got, w.Data) {
				t.Errorf("%s: Bytes differ from written data (err %v)", w.Name, err)
			}
			if cap(got) != len(got) {
				t.Errorf("%s: Bytes capacity %d exceeds length %d", w.Name, cap(got), len(got))
			}
		}
	}
	if len(c.Tensors) != n || n != 76 {
		t.Errorf("Tensors has %d entries, fixture %d, want 76", len(c.Tensors), n)
	}

	for rel, want := range map[string]string{
		"layers.3.self_attn.q_proj.weight": np + "layers.3.self_attn.q_proj.weight",
		"embed_tokens.weight":              np + "embed_tokens.weight",
		"lm_head.weight":                   arch.LMHead,
	} {
		info, err := c.Resolve(rel)
		if err != nil || info.Name != want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", rel, info.Name, err, want)
		}
	}
	if _, err := c.Resolve("layers.9.input_layernorm.weight"); err == nil {
		t.Error("Resolve of an absent tensor: no error")
	}

	info, _ := c.Resolve("norm.weight")
	raw, _ := c.Bytes(info.Name)
	got, err := Float32s(info, raw)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]float32, 16)
	bf16.Decode(want, f.tensor(t, np+"norm.weight").Data)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Float32s(norm.weight) (-want +got):\n%s", diff)
	}

	if _, err := c.Bytes("no.such.tensor"); err == nil {
		t.Error("Bytes of an unknown name: no error")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := c.Bytes(np + "norm.weight"); err == nil {
		t.Error("Bytes after Close: no error")
	}
}

// Layouts other than the default that must open cleanly.
func TestOpenVariants(t *testing.T) {
	tests := []struct {
		name       string
		damage     func(t *testing.T, f *fixture)
		prefix     string
		lmHead     string // what Resolve("lm_head.weight") names
		indexEmpty bool
	}{
		{name: "single file", damage: func(t *testing.T, f *fixture) { f.noIndex = true },
			prefix: np, lmHead: arch.LMHead, indexEmpty: true},
		{name: "flat text-only layout", damage: func(t *testing.T, f *fixture) {
			f.config = tinyText()
			for i := range f.files {
				for j := range f.files[i].tensors {
					w := &f.files[i].tensors[j]
					w.Name = strings.Replace(w.Name, np, arch.FlatPrefix, 1)
				}
			}
		}, prefix: arch.FlatPrefix, lmHead: arch.LMHead},
		{name: "tied embeddings", damage: func(t *testing.T, f *fixture) {
			f.config["tie_word_embeddings"] = true
			f.remove(t, arch.LMHead)
		}, prefix: np, lmHead: np + "embed_tokens.weight"},
		{name: "fp32 norms", damage: func(t *testing.T, f *fixture) {
			for _, n := range []string{"norm.weight", "layers.0.input_layernorm.weight", "layers.0.linear_attn.A_log"} {
				w := f.tensor(t, np+n)
				w.DType, w.Data = arch.F32, append(w.Data, w.Data...)
			}
		}, prefix: np, lmHead: arch.LMHead},
		{name: "no decoys", damage: func(t *testing.T, f *fixture) {
			for _, n := range []string{"model.visual.blocks.0.attn.qkv.weight", "model.visual.patch_embed.proj.weight", "mtp.fc.weight", "mtp.layers.0.mlp.experts.gate_up_proj"} {
				f.remove(t, n)
			}
		}, prefix: np, lmHead: arch.LMHead},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			tt.damage(t, f)
			c, err := Open(f.write(t))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			info, err := c.Resolve("lm_head.weight")
			if c.Prefix != tt.prefix || info.Name != tt.lmHead || err != nil || (c.IndexJSON == nil) != tt.indexEmpty {
				t.Errorf("Prefix %q, lm_head %q (%v), index %d bytes; want %q, %q", c.Prefix, info.Name, err, len(c.IndexJSON), tt.prefix, tt.lmHead)
			}
			for _, rel := range []string{"embed_tokens.weight", "layers.0.linear_attn.in_proj_qkv.weight", "norm.weight"} {
				info, err := c.Resolve(rel)
				if err != nil {
					t.Error(err)
					continue
				}
				if _, err := c.Bytes(info.Name); err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// TestOpenDamaged builds one damaged checkpoint per kind of damage and
// asserts the exact problem lines.
func TestOpenDamaged(t *testing.T) {
	base := newFixture(t)
	d2 := base.dataBytes(shard2)
	hdr2, err := encodeHeader(base.shard(shard2).tensors, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	size2 := 8 + int64(len(hdr2)) + d2
	s1 := shard1 + ": "
	s2 := shard2 + ": "
	s3 := shard3 + ": "
	ix := IndexFile + ": "

	tests := []struct {
		name   string
		damage func(t *testing.T, f *fixture)
		post   func(t *testing.T, dir string)
		want   []string
	}{
		{
			name: "missing config",
			post: func(t *testing.T, dir string) { remove(t, dir, ConfigFile) },
			want: []string{"config.json: missing"},
		},
		{
			name: "malformed config",
			post: func(t *testing.T, dir string) { writeFile(t, dir, ConfigFile, []byte(`{"text_config": [`)) },
			want: []string{`config.json: not a JSON object: field "text_config": unexpected EOF`},
		},
		{
			name:   "config field missing",
			damage: func(t *testing.T, f *fixture) { delete(f.text(), "hidden_size") },
			want:   []string{"config.json: text_config.hidden_size: missing"},
		},
		{
			name: "config problems all listed",
			damage: func(t *testing.T, f *fixture) {
				delete(f.text(), "vocab_size")
				f.text()["num_experts_per_tok"] = 1.5
			},
			want: []string{
				"config.json: text_config.vocab_size: missing",
				"config.json: text_config.num_experts_per_tok: not an integer: 1.5",
			},
		},
		{
			name:   "unusable config still reports shard headers",
			damage: func(t *testing.T, f *fixture) { f.config = nil },
			post: func(t *testing.T, dir string) {
				writeFile(t, dir, shard2, rawFile(`{"x":{"dtype":"BF16","shape":[2],"data_offsets":[0,2]}}`, 4))
			},
			want: []string{
				"config.json: missing",
				s2 + "tensor x: data_offsets [0 2] hold 2 bytes, shape [2] of BF16 needs 4",
			},
		},
		{
			name: "missing shard",
			post: func(t *testing.T, dir string) { remove(t, dir, shard3) },
			want: []string{s3 + "missing (named by model.safetensors.index.json for 5 tensors)"},
		},
		{
			name: "missing single file",
			damage: func(t *testing.T, f *fixture) {
				f.noIndex = true
			},
			post: func(t *testing.T, dir string) { remove(t, dir, SingleFile) },
			want: []string{"model.safetensors: missing (and no model.safetensors.index.json)"},
		},
		{
			name: "shard is a directory",
			post: func(t *testing.T, dir string) {
				remove(t, dir, shard3)
				if err := os.Mkdir(filepath.Join(dir, shard3), 0o755); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{s3 + "not a regular file"},
		},
		{
			name: "truncated data",
			post: func(t *testing.T, dir string) { truncate(t, dir, shard2, size2-100) },
			want: []string{fmt.Sprintf("%struncated: data section needs %d bytes, file has %d", s2, d2, d2-100)},
		},
		{
			name: "truncated header",
			post: func(t *testing.T, dir string) { truncate(t, dir, shard2, 20) },
			want: []string{fmt.Sprintf("%struncated: header needs %d bytes, file has 20", s2, 8+len(hdr2))},
		},
		{
			name: "truncated length",
			post: func(t *testing.T, dir string) { truncate(t, dir, shard2, 5) },
			want: []string{s2 + "file is 5 bytes, too short for the 8-byte header length"},
		},
		{
			name: "empty file",
			post: func(t *testing.T, dir string) { truncate(t, dir, shard2, 0) },
			want: []string{s2 + "file is 0 bytes, too short for the 8-byte header length"},
		},
		{
			name: "header length too large",
			post: func(t *testing.T, dir string) { patch(t, dir, shard1, 0, []byte{0, 0, 0, 0, 1, 0, 0, 0}) },
			want: []string{s1 + "header length 4294967296 exceeds the 100 MiB limit"},
		},
		{
			name: "header not JSON",
			post: func(t *testing.T, dir string) { patch(t, dir, shard1, 8, []byte("[")) },
			want: []string{s1 + "header: not a JSON object"},
		},
		{
			name: "header JSON broken",
			post: func(t *testing.T, dir string) { replace(t, dir, shard1, `"dtype":`, `"dtype";`) },
			want: []string{s1 + "header: not valid JSON at byte 80: invalid character ';' after object key"},
		},
		{
			name: "unsupported dtype",
			post: func(t *testing.T, dir string) { replace(t, dir, shard3, `"dtype":"BF16"`, `"dtype":"Q4_K"`) },
			want: []string{s3 + `tensor lm_head.weight: unsupported dtype "Q4_K"`},
		},
		{
			name: "shape disagrees with byte range",
			post: func(t *testing.T, dir string) { replace(t, dir, shard3, `"shape":[32,16]`, `"shape":[32,15]`) },
			want: []string{s3 + "tensor lm_head.weight: data_offsets [0 1024] hold 1024 bytes, shape [32 15] of BF16 needs 960"},
		},
		{
			name: "overlapping ranges",
			post: func(t *testing.T, dir string) {
				replace(t, dir, shard3, `"data_offsets":[1024,2560]`, `"data_offsets":[1000,2536]`)
			},
			want: []string{s3 + "tensor model.visual.blocks.0.attn.qkv.weight: data_offsets [1000 2536] overlap tensor lm_head.weight [0 1024]"},
		},
		{
			name:   "missing tensor",
			damage: func(t *testing.T, f *fixture) { f.remove(t, np+"layers.1.mlp.gate.weight") },
			want:   []string{ix + "tensor model.language_model.layers.1.mlp.gate.weight: missing"},
		},
		{
			name: "missing tensor single file",
			damage: func(t *testing.T, f *fixture) {
				f.noIndex = true
				f.remove(t, np+"embed_tokens.weight")
			},
			want: []string{"model.safetensors: tensor model.language_model.embed_tokens.weight: missing"},
		},
		{
			name: "wrong dtype",
			damage: func(t *testing.T, f *fixture) {
				f.tensor(t, np+"norm.weight").DType = arch.F16
				f.tensor(t, np+"layers.0.mlp.gate.weight").DType = arch.F16
			},
			want: []string{
				s1 + "tensor model.language_model.layers.0.mlp.gate.weight: dtype F16, want BF16",
				s2 + "tensor model.language_model.norm.weight: dtype F16, want BF16 or F32",
			},
		},
		{
			name: "wrong shape",
			damage: func(t *testing.T, f *fixture) {
				f.tensor(t, np+"layers.3.self_attn.q_proj.weight").Shape = []int64{16, 32}
			},
			want: []string{s2 + "tensor model.language_model.layers.3.self_attn.q_proj.weight: shape [16 32], want [32 16]"},
		},
		{
			name: "index maps to the wrong shard",
			damage: func(t *testing.T, f *fixture) {
				f.weightMap = f.index()
				f.weightMap[np+"norm.weight"] = shard1
			},
			want: []string{ix + "tensor model.language_model.norm.weight: mapped to model-00001-of-00003.safetensors, but stored in model-00002-of-00003.safetensors"},
		},
		{
			name: "shard tensor not in index",
			damage: func(t *testing.T, f *fixture) {
				f.weightMap = f.index()
				delete(f.weightMap, "mtp.fc.weight")
			},
			want: []string{s3 + "tensor mtp.fc.weight: not in model.safetensors.index.json"},
		},
		{
			name: "index names a tensor no shard holds",
			damage: func(t *testing.T, f *fixture) {
				f.weightMap = f.index()
				f.remove(t, np+"norm.weight")
			},
			want: []string{ix + "tensor model.language_model.norm.weight: missing from every shard"},
		},
		{
			name: "tensor in two shards",
			damage: func(t *testing.T, f *fixture) {
				w := *f.tensor(t, np+"norm.weight")
				f.shard(shard3).tensors = append(f.shard(shard3).tensors, w)
			},
			want: []string{s3 + "tensor model.language_model.norm.weight: also in model-00002-of-00003.safetensors"},
		},
		{
			name: "layer beyond num_hidden_layers",
			damage: func(t *testing.T, f *fixture) {
				w := *f.tensor(t, np+"layers.3.input_layernorm.weight")
				w.Name = np + "layers.4.input_layernorm.weight"
				f.shard(shard2).tensors = append(f.shard(shard2).tensors, w)
			},
			want: []string{s2 + "tensor model.language_model.layers.4.input_layernorm.weight: unexpected: layer 4 is beyond num_hidden_layers 4"},
		},
		{
			name: "unfused experts",
			damage: func(t *testing.T, f *fixture) {
				f.remove(t, np+"layers.0.mlp.experts.gate_up_proj")
				f.remove(t, np+"layers.0.mlp.experts.down_proj")
				sf := f.shard(shard1)
				for e := range 4 {
					for _, p := range []string{"gate_proj", "up_proj", "down_proj"} {
						sf.tensors = append(sf.tensors, WriteTensor{
							Name: fmt.Sprintf("%slayers.0.mlp.experts.%d.%s.weight", np, e, p), DType: arch.BF16,
							Shape: []int64{8, 16}, Data: make([]byte, 256),
						})
					}
				}
			},
			want: []string{
				ix + "tensor model.language_model.layers.0.mlp.experts.gate_up_proj: missing",
				ix + "tensor model.language_model.layers.0.mlp.experts.down_proj: missing",
				s1 + "tensor model.language_model.layers.0.mlp.experts.*: unexpected per-expert layout (12 tensors), want fused mlp.experts.gate_up_proj and mlp.experts.down_proj",
			},
		},
		{
			name: "unknown tensor",
			damage: func(t *testing.T, f *fixture) {
				sf := f.shard(shard1)
				sf.tensors = append(sf.tensors,
					WriteTensor{Name: np + "layers.0.mlp.bias", DType: arch.BF16, Shape: []int64{16}, Data: make([]byte, 32)},
					WriteTensor{Name: "model.embed_tokens.weight", DType: arch.BF16, Shape: []int64{}, Data: make([]byte, 2)})
			},
			want: []string{
				s1 + "tensor model.language_model.layers.0.mlp.bias: unexpected: not a tensor of the qwen3_5_moe text model",
				s1 + "tensor model.embed_tokens.weight: unexpected: not a tensor of the qwen3_5_moe text model",
			},
		},
		{
			name:   "lm_head with tied embeddings",
			damage: func(t *testing.T, f *fixture) { f.config["tie_word_embeddings"] = true },
			want:   []string{s3 + "tensor lm_head.weight: unexpected: tie_word_embeddings is true"},
		},
		{
			name: "index not JSON, shards still checked",
			post: func(t *testing.T, dir string) {
				writeFile(t, dir, IndexFile, []byte(`{"weight_map": {"a": "b",}}`))
				replace(t, dir, shard3, `"dtype":"BF16"`, `"dtype":"BF17"`)
			},
			want: []string{
				ix + "not valid JSON at byte 24: invalid character '}' looking for beginning of object key string",
				s3 + `tensor lm_head.weight: unsupported dtype "BF17"`,
			},
		},
		{
			name: "index points outside the directory",
			damage: func(t *testing.T, f *fixture) {
				f.weightMap = f.index()
				f.weightMap[np+"norm.weight"] = "../" + shard2
			},
			want: []string{ix + `weight_map: shard "../model-00002-of-00003.safetensors" (named for 1 tensors) is not a file name inside the checkpoint directory`},
		},
		{
			name: "many problems at once",
			damage: func(t *testing.T, f *fixture) {
				delete(f.text(), "head_dim")
				f.tensor(t, np+"layers.0.mlp.gate.weight").DType = arch.F16
			},
			post: func(t *testing.T, dir string) {
				remove(t, dir, shard3)
				truncate(t, dir, shard2, size2-1)
			},
			want: []string{
				"config.json: text_config.head_dim: missing",
				s2 + fmt.Sprintf("truncated: data section needs %d bytes, file has %d", d2, d2-1),
				s3 + "missing (named by model.safetensors.index.json for 5 tensors)",
			},
		},
		{
			name: "many problems with a usable config",
			damage: func(t *testing.T, f *fixture) {
				f.tensor(t, np+"layers.0.mlp.gate.weight").DType = arch.F16
				f.tensor(t, np+"layers.1.mlp.gate.weight").Shape = []int64{16, 4}
			},
			post: func(t *testing.T, dir string) { remove(t, dir, shard3) },
			want: []string{
				s3 + "missing (named by model.safetensors.index.json for 5 tensors)",
				s1 + "tensor model.language_model.layers.0.mlp.gate.weight: dtype F16, want BF16",
				s1 + "tensor model.language_model.layers.1.mlp.gate.weight: shape [16 4], want [4 16]",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t)
			if tt.damage != nil {
				tt.damage(t, f)
			}
			dir := f.write(t)
			if tt.post != nil {
				tt.post(t, dir)
			}
			c, err := Open(dir)
			if err == nil {
				c.Close()
				t.Fatal("Open succeeded")
			}
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("error %T is not *Error: %v", err, err)
			}
			if ce.Dir != dir {
				t.Errorf("Error.Dir = %q, want %q", ce.Dir, dir)
			}
			if diff := cmp.Diff(tt.want, ce.Problems); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestOpenNotADirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "absent")
	_, err := Open(dir)
	want := "checkpoint " + dir + ": not a readable directory"
	if err == nil || err.Error() != want {
		t.Errorf("Open(absent) = %v, want %q", err, want)
	}
}

func TestErrorString(t *testing.T) {
	one := &Error{Dir: "d", Problems: []string{"config.json: missing"}}
	if got, want := one.Error(), "checkpoint d: config.json: missing"; got != want {
		t.Errorf("one problem: %q, want %q", got, want)
	}
	two := &Error{Dir: "d", Problems: []string{"a: x", "b: y"}}
	if got, want := two.Error(), "checkpoint d: 2 problems:\n  a: x\n  b: y"; got != want {
		t.Errorf("two problems: %q, want %q", got, want)
	}
	many := &Error{Dir: "d", Problems: make([]string, maxErrorLines+5)}
	lines := strings.Split(many.Error(), "\n")
	if len(lines) != maxErrorLines+2 || lines[len(lines)-1] != "  … and 5 more" {
		t.Errorf("many problems: %d lines, last %q", len(lines), lines[len(lines)-1])
	}
}

func remove(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func truncate(t *testing.T, dir, name string, size int64) {
	t.Helper()
	if err := os.Truncate(filepath.Join(dir, name), size); err != nil {
		t.Fatal(err)
	}
}

// patch overwrites bytes at off.
func patch(t *testing.T, dir, name string, off int, b []byte) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	copy(data[off:], b)
	writeFile(t, dir, name, data)
}

// replace swaps the first occurrence of old for new, same length, so the
// header keeps its size and the data its offsets.
func replace(t *testing.T, dir, name, old, new string) {
	t.Helper()
	if len(old) != len(new) {
		t.Fatalf("replace %q by %q: lengths differ", old, new)
	}
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(data, []byte(old))
	if i < 0 {
		t.Fatalf("%s holds no %q", name, old)
	}
	patch(t, dir, name, i, []byte(new))
}
