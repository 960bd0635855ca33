package synth

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/loader"
)

// writeTiny writes a tiny checkpoint into a fresh directory and returns it.
func writeTiny(t *testing.T, opts Options) string {
	t.Helper()
	opts.Preset = PresetTiny
	if opts.Out == "" {
		opts.Out = filepath.Join(t.TempDir(), "out")
	}
	if err := Write(opts); err != nil {
		t.Fatalf("Write(%+v): %v", opts, err)
	}
	return opts.Out
}

// readDir returns every file of dir by name.
func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func TestDeterminism(t *testing.T) {
	a := readDir(t, writeTiny(t, Options{Seed: 7}))
	b := readDir(t, writeTiny(t, Options{Seed: 7}))
	c := readDir(t, writeTiny(t, Options{Seed: 8}))
	names := func(m map[string][]byte) []string {
		var s []string
		for k := range m {
			s = append(s, k)
		}
		slices.Sort(s)
		return s
	}
	if diff := cmp.Diff(names(a), names(b)); diff != "" {
		t.Fatalf("file lists differ (-seed 7 +seed 7):\n%s", diff)
	}
	if diff := cmp.Diff(names(a), names(c)); diff != "" {
		t.Fatalf("a different seed changed the file list (-7 +8):\n%s", diff)
	}
	for _, name := range names(a) {
		if !bytes.Equal(a[name], b[name]) {
			t.Errorf("%s differs between two writes with the same seed", name)
		}
		weights := strings.HasSuffix(name, ".safetensors")
		if same := bytes.Equal(a[name], c[name]); same == weights {
			t.Errorf("%s: identical across seeds = %v, want %v", name, same, !weights)
		}
	}
}

// TestChunkedGeneration checks that a tensor spanning several generation
// chunks is the same whatever the worker count, and that chunks differ.
func TestChunkedGeneration(t *testing.T) {
	tp := tensorPlan{name: "x", dtype: arch.BF16, shape: []int64{3*chunkElems + 5}, init: initSpec{uniformInit, 0, 1}}
	a := make([]byte, tp.bytes())
	fillTensor(a, 1, tp)
	b := make([]byte, tp.bytes())
	n := tp.elements()
	for c := int64(0); c*chunkElems < n; c++ {
		fillChunk(b, 1^nameHash("x"), c, n, tp.init)
	}
	if !bytes.Equal(a, b) {
		t.Fatal("parallel and serial generation differ")
	}
	if bytes.Equal(a[:1024], a[2*chunkElems:2*chunkElems+1024]) {
		t.Fatal("chunks 0 and 1 start with the same values")
	}
}

func TestTinyOpens(t *testing.T) {
	for _, layers := range []int{0, 1, 8} {
		var calls []int64
		var total int64
		dir := writeTiny(t, Options{Seed: 1, Layers: layers, Progress: func(done, tot int64) {
			calls = append(calls, done)
			total = tot
		}})
		ck, err := checkpoint.Open(dir)
		if err != nil {
			t.Fatalf("layers %d: checkpoint.Open: %v", layers, err)
		}
		want := layers
		if want == 0 {
			want = 4
		}
		if ck.Config.NumHiddenLayers != want {
			t.Errorf("layers %d: config has %d layers, want %d", layers, ck.Config.NumHiddenLayers, want)
		}
		if ck.Prefix != arch.NestedPrefix {
			t.Errorf("layers %d: prefix %q, want %q", layers, ck.Prefix, arch.NestedPrefix)
		}
		var sum int64
		shards := map[string]bool{}
		for _, info := range ck.Tensors {
			sum += info.End - info.Begin
			shards[info.File] = true
		}
		for _, p := range []string{"model.visual.", "mtp."} {
			found := false
			for name := range ck.Tensors {
				found = found || strings.HasPrefix(name, p)
			}
			if !found {
				t.Errorf("layers %d: no decoy tensor under %s", layers, p)
			}
		}
		if len(shards) < 3 {
			t.Errorf("layers %d: %d shards, want at least 3", layers, len(shards))
		}
		var idx struct {
			Metadata struct {
				TotalSize int64 `json:"total_size"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal(ck.IndexJSON, &idx); err != nil {
			t.Fatal(err)
		}
		if idx.Metadata.TotalSize != sum {
			t.Errorf("layers %d: total_size %d, tensors hold %d bytes", layers, idx.Metadata.TotalSize, sum)
		}
		if len(calls) == 0 || calls[len(calls)-1] != total || total != sum || !slices.IsSorted(calls) {
			t.Errorf("layers %d: progress calls %v with total %d, want increasing up to %d", layers, calls, total, sum)
		}
		ck.Close()
	}
}

// stats returns mean and standard deviation of a BF16 tensor.
func stats(t *testing.T, ck *checkpoint.Checkpoint, name string) (mean, std float64) {
	t.Helper()
	b, err := ck.Bytes(name)
	if err != nil {
		t.Fatal(err)
	}
	n := len(b) / 2
	var s, s2 float64
	for i := 0; i < n; i++ {
		v := float64(bf16.ToFloat32(binary.LittleEndian.Uint16(b[2*i:])))
		s += v
		s2 += v * v
	}
	mean = s / float64(n)
	return mean, math.Sqrt(s2/float64(n) - mean*mean)
}

func TestTinyWeightScales(t *testing.T) {
	ck, err := checkpoint.Open(writeTiny(t, Options{Seed: 3}))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	p := arch.NestedPrefix
	for _, tc := range []struct {
		name      string
		mean, std float64
	}{
		{p + "embed_tokens.weight", 0, 1},
		{arch.LMHead, 0, 2.0 / 8},
		{p + "layers.0.input_layernorm.weight", 0, 0.1},
		{p + "layers.0.linear_attn.norm.weight", 1, 0.1},
		{p + "layers.0.linear_attn.in_proj_qkv.weight", 0, 1.0 / 8},
		{p + "layers.0.linear_attn.conv1d.weight", 0, 0.5},
		{p + "layers.0.linear_attn.dt_bias", 0, 0.5},
		{p + "layers.0.mlp.gate.weight", 0, 2.0 / 8},
		{p + "layers.0.mlp.experts.down_proj", 0, 1 / math.Sqrt(32)},
		{p + "layers.3.self_attn.o_proj.weight", 0, 1 / math.Sqrt(128)},
		{p + "norm.weight", 0, 0.1},
	} {
		mean, std := stats(t, ck, tc.name)
		// Loose bounds: the smallest tensors have 16 values.
		if math.Abs(mean-tc.mean) > 0.6*tc.std || math.Abs(std-tc.std) > 0.5*tc.std {
			t.Errorf("%s: mean %.4f std %.4f, want ≈ %.4f, %.4f", tc.name, mean, std, tc.mean, tc.std)
		}
	}
	// A_log = log(U[1,16]): every value in [0, log 16].
	b, err := ck.Bytes(p + "layers.0.linear_attn.A_log")
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(b); i += 2 {
		if v := bf16.ToFloat32(binary.LittleEndian.Uint16(b[i:])); v < 0 || v > float32(math.Log(16))+0.02 {
			t.Errorf("A_log value %g outside [0, log 16]", v)
		}
	}
}

func TestConfig(t *testing.T) {
	tok, err := theTokenizer()
	if err != nil {
		t.Fatal(err)
	}
	lin, full := arch.LinearAttention, arch.FullAttention
	real := arch.Real()
	for _, tc := range []struct {
		preset string
		layers int
		want   func() *arch.Config
	}{
		{PresetTiny, 0, func() *arch.Config { return tinyWant([]string{lin, lin, lin, full}, tok) }},
		{PresetTiny, 8, func() *arch.Config {
			return tinyWant([]string{lin, lin, lin, full, lin, lin, lin, full}, tok)
		}},
		{PresetTiny, 2, func() *arch.Config { return tinyWant([]string{lin, lin}, tok) }},
		{PresetFull, 0, func() *arch.Config { return real }},
		{PresetFull, 1, func() *arch.Config {
			c := *real
			c.NumHiddenLayers, c.LayerTypes = 1, []string{lin}
			return &c
		}},
		{PresetFull, 5, func() *arch.Config {
			c := *real
			c.NumHiddenLayers, c.LayerTypes = 5, []string{lin, lin, lin, full, lin}
			return &c
		}},
	} {
		data, err := ConfigJSON(tc.preset, tc.layers)
		if err != nil {
			t.Fatalf("ConfigJSON(%q, %d): %v", tc.preset, tc.layers, err)
		}
		got, err := arch.ParseConfig(data)
		if err != nil {
			t.Fatalf("ConfigJSON(%q, %d) does not parse: %v", tc.preset, tc.layers, err)
		}
		if diff := cmp.Diff(tc.want(), got); diff != "" {
			t.Errorf("ConfigJSON(%q, %d) (-want +got):\n%s", tc.preset, tc.layers, diff)
		}
		var top map[string]any
		if err := json.Unmarshal(data, &top); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"architectures", "model_type", "text_config", "tie_word_embeddings", "vision_config"} {
			if _, ok := top[k]; !ok {
				t.Errorf("ConfigJSON(%q, %d): no top-level %q", tc.preset, tc.layers, k)
			}
		}
		if got, want := top["model_type"], "qwen3_5_moe"; got != want {
			t.Errorf("ConfigJSON(%q, %d): model_type %v, want %v", tc.preset, tc.layers, got, want)
		}
	}
}

// tinyWant is the tiny preset's configuration as arch sees it.
func tinyWant(layerTypes []string, tok *tokenizer) *arch.Config {
	eot := tok.id("<|endoftext|>")
	return &arch.Config{
		ModelType: "qwen3_5_moe_text", HiddenSize: 64, NumHiddenLayers: len(layerTypes), LayerTypes: layerTypes,
		VocabSize: 1024, RMSNormEps: 1e-6, MaxPositionEmbeddings: 262144,
		NumAttentionHeads: 4, NumKeyValueHeads: 2, HeadDim: 32, RopeTheta: 1e7, PartialRotaryFactor: 0.25,
		LinearNumKeyHeads: 2, LinearNumValueHeads: 4, LinearKeyHeadDim: 16, LinearValueHeadDim: 16, LinearConvKernelDim: 4,
		NumExperts: 8, NumExpertsPerTok: 2, MoeIntermediateSize: 32, SharedExpertIntermediateSize: 32,
		BOSTokenID: eot, EOSTokenID: eot,
	}
}

func TestFullConfigKeepsRealFields(t *testing.T) {
	data, err := ConfigJSON(PresetFull, 2)
	if err != nil {
		t.Fatal(err)
	}
	var got, real map[string]any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(arch.RealConfigJSON, &real); err != nil {
		t.Fatal(err)
	}
	rt := real["text_config"].(map[string]any)
	rt["num_hidden_layers"] = 2.0
	rt["layer_types"] = []any{arch.LinearAttention, arch.LinearAttention}
	delete(real, "vision_config")
	delete(got, "vision_config")
	if diff := cmp.Diff(real, got); diff != "" {
		t.Errorf("full config differs from the real one beyond layers and vision_config (-want +got):\n%s", diff)
	}
}

// tokenizerFile is tokenizer.json as the test reads it.
type tokenizerFile struct {
	AddedTokens []struct {
		ID         int    `json:"id"`
		Content    string `json:"content"`
		Special    bool   `json:"special"`
		Normalized bool   `json:"normalized"`
	} `json:"added_tokens"`
	Normalizer struct {
		Type string `json:"type"`
	} `json:"normalizer"`
	PreTokenizer struct {
		Type          string `json:"type"`
		Pretokenizers []struct {
			Type    string `json:"type"`
			Pattern struct {
				Regex string `json:"Regex"`
			} `json:"pattern"`
			Behavior string `json:"behavior"`
		} `json:"pretokenizers"`
	} `json:"pre_tokenizer"`
	Decoder struct {
		Type string `json:"type"`
	} `json:"decoder"`
	Model struct {
		Type   string         `json:"type"`
		Vocab  map[string]int `json:"vocab"`
		Merges [][2]string    `json:"merges"`
	} `json:"model"`
}

func TestTokenizerFiles(t *testing.T) {
	files := readDir(t, writeTiny(t, Options{Seed: 1, Layers: 1}))
	var tf tokenizerFile
	if err := json.Unmarshal(files["tokenizer.json"], &tf); err != nil {
		t.Fatalf("tokenizer.json: %v", err)
	}
	cfg, err := arch.ParseConfig(files["config.json"])
	if err != nil {
		t.Fatal(err)
	}
	if got := []string{tf.Model.Type, tf.Normalizer.Type, tf.PreTokenizer.Type, tf.Decoder.Type}; !slices.Equal(got, []string{"BPE", "NFC", "Sequence", "ByteLevel"}) {
		t.Errorf("model/normalizer/pre_tokenizer/decoder types %v", got)
	}
	if len(tf.PreTokenizer.Pretokenizers) != 2 || tf.PreTokenizer.Pretokenizers[0].Pattern.Regex != pretokenizePattern ||
		tf.PreTokenizer.Pretokenizers[0].Behavior != "Isolated" || tf.PreTokenizer.Pretokenizers[1].Type != "ByteLevel" {
		t.Errorf("pre_tokenizer %+v", tf.PreTokenizer)
	}

	// Ids: unique, dense from 0, below vocab_size, added tokens right after the vocab.
	byID := map[int]string{}
	add := func(id int, content string) {
		if prev, dup := byID[id]; dup {
			t.Errorf("id %d used by %q and %q", id, prev, content)
		}
		if id < 0 || id >= cfg.VocabSize {
			t.Errorf("token %q: id %d outside [0, %d)", content, id, cfg.VocabSize)
		}
		byID[id] = content
	}
	for s, id := range tf.Model.Vocab {
		add(id, s)
	}
	var gotAdded []addedToken
	for i, a := range tf.AddedTokens {
		add(a.ID, a.Content)
		if a.ID != len(tf.Model.Vocab)+i || a.Normalized {
			t.Errorf("added token %q: id %d normalized %v, want id %d, not normalized", a.Content, a.ID, a.Normalized, len(tf.Model.Vocab)+i)
		}
		gotAdded = append(gotAdded, addedToken{a.Content, a.Special})
	}
	if diff := cmp.Diff(addedTokens, gotAdded, cmp.AllowUnexported(addedToken{})); diff != "" {
		t.Errorf("added tokens (-want +got):\n%s", diff)
	}
	if len(byID) != regularVocab+len(addedTokens) || len(byID) >= cfg.VocabSize {
		t.Errorf("%d ids for vocab_size %d, want %d, leaving padding rows", len(byID), cfg.VocabSize, regularVocab+len(addedTokens))
	}
	for id := range len(byID) {
		if _, ok := byID[id]; !ok {
			t.Errorf("id %d unused below the last id", id)
		}
	}
	// Every byte has a symbol and merges join existing tokens into existing tokens.
	for b := 0; b < 256; b++ {
		if _, ok := tf.Model.Vocab[string(byteSymbols[b])]; !ok {
			t.Errorf("byte %#x has no token", b)
		}
	}
	for i, m := range tf.Model.Merges {
		_, okA := tf.Model.Vocab[m[0]]
		_, okB := tf.Model.Vocab[m[1]]
		_, okAB := tf.Model.Vocab[m[0]+m[1]]
		if !okA || !okB || !okAB {
			t.Errorf("merge %d %q references a token not in the vocab", i, m)
		}
	}
	// Qwen's byte ids and the tokens the chat format leans on.
	for _, w := range []struct {
		tok string
		id  int
	}{{"\u010a", 198}, {"\u0120", 220}, {"!", 0}} {
		if got := tf.Model.Vocab[w.tok]; got != w.id {
			t.Errorf("token %q has id %d, want %d", w.tok, got, w.id)
		}
	}
	for _, w := range []string{"user", "assistant", "\u010a\u010a"} {
		if _, ok := tf.Model.Vocab[w]; !ok {
			t.Errorf("no single token for %q", w)
		}
	}

	var tc struct {
		AddedTokensDecoder map[string]struct {
			Content string `json:"content"`
			Special bool   `json:"special"`
		} `json:"added_tokens_decoder"`
	}
	if err := json.Unmarshal(files["tokenizer_config.json"], &tc); err != nil {
		t.Fatalf("tokenizer_config.json: %v", err)
	}
	var tcRaw map[string]any
	if err := json.Unmarshal(files["tokenizer_config.json"], &tcRaw); err != nil {
		t.Fatal(err)
	}
	if got := []any{tcRaw["eos_token"], tcRaw["pad_token"], tcRaw["bos_token"], tcRaw["tokenizer_class"]}; !cmp.Equal(got, []any{"<|im_end|>", "<|endoftext|>", nil, "Qwen2Tokenizer"}) {
		t.Errorf("tokenizer_config eos/pad/bos/class = %v", got)
	}
	if len(tc.AddedTokensDecoder) != len(addedTokens) {
		t.Errorf("added_tokens_decoder has %d entries, want %d", len(tc.AddedTokensDecoder), len(addedTokens))
	}
	tok, _ := theTokenizer()
	var gen map[string]any
	if err := json.Unmarshal(files["generation_config.json"], &gen); err != nil {
		t.Fatalf("generation_config.json: %v", err)
	}
	eot, imEnd := float64(tok.id("<|endoftext|>")), float64(tok.id("<|im_end|>"))
	wantGen := map[string]any{
		"bos_token_id": eot, "eos_token_id": []any{imEnd, eot}, "pad_token_id": eot,
		"do_sample": true, "temperature": 0.6, "top_k": 20.0, "top_p": 0.95,
	}
	if diff := cmp.Diff(wantGen, gen); diff != "" {
		t.Errorf("generation_config.json (-want +got):\n%s", diff)
	}
	if string(files["chat_template.jinja"]) != chatTemplate || !strings.Contains(chatTemplate, "preserve_thinking") {
		t.Error("chat_template.jinja is not the embedded template")
	}
	for _, name := range []string{"config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"} {
		if bytes.Contains(files[name], []byte(`\u003c`)) {
			t.Errorf("%s has HTML-escaped characters", name)
		}
	}
}

func TestPretokenize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"Hello world!", []string{"Hello", " world", "!"}},
		{"It's 2025...", []string{"It", "'s", " ", "2", "0", "2", "5", "..."}},
		{"I'LL go", []string{"I", "'LL", " go"}},
		{" 'll", []string{" '", "ll"}},
		{"a  b", []string{"a", " ", " b"}},
		{"x  \n\n  y", []string{"x", "  \n\n", " ", " y"}},
		{"end  ", []string{"end", "  "}},
		{"\t\tz", []string{"\t", "\tz"}},
		{"¿qué?\r\n", []string{"¿qué", "?\r\n"}},
		{"e\u0301t\u00e9", []string{"e\u0301t\u00e9"}},
		{"a\n", []string{"a", "\n"}},
	} {
		if diff := cmp.Diff(tc.want, pretokenize(tc.in)); diff != "" {
			t.Errorf("pretokenize(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestBadOptions(t *testing.T) {
	dir := t.TempDir()
	nonEmpty := filepath.Join(dir, "full")
	if err := os.MkdirAll(nonEmpty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(nonEmpty, "keep.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts Options
		want string // a fragment of the error
	}{
		{"unknown preset", Options{Preset: "huge", Out: filepath.Join(dir, "a")}, `unknown preset "huge"`},
		{"empty preset", Options{Out: filepath.Join(dir, "a")}, "unknown preset"},
		{"negative layers", Options{Preset: PresetTiny, Layers: -1, Out: filepath.Join(dir, "a")}, "layers -1 out of range"},
		{"too many layers", Options{Preset: PresetFull, Layers: 1025, Out: filepath.Join(dir, "a")}, "layers 1025 out of range"},
		{"no output", Options{Preset: PresetTiny}, "no output directory"},
		{"negative shard size", Options{Preset: PresetTiny, ShardBytes: -1, Out: filepath.Join(dir, "a")}, "negative"},
		{"non-empty output", Options{Preset: PresetTiny, Out: nonEmpty}, nonEmpty + " is not empty"},
		{"output is a file", Options{Preset: PresetTiny, Out: file}, file + " exists and is not a directory"},
	} {
		err := Write(tc.opts)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Write error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "a")); !os.IsNotExist(err) {
		t.Errorf("a refused Write created its output directory (stat: %v)", err)
	}
	if got, err := os.ReadFile(filepath.Join(nonEmpty, "keep.txt")); err != nil || string(got) != "mine" {
		t.Errorf("the non-empty directory was touched: %q, %v", got, err)
	}
	for _, tc := range []struct {
		preset string
		layers int
	}{{"", 0}, {"Tiny", 0}, {PresetTiny, -3}, {PresetFull, 2000}} {
		if _, err := ConfigJSON(tc.preset, tc.layers); err == nil {
			t.Errorf("ConfigJSON(%q, %d) succeeded", tc.preset, tc.layers)
		}
	}
}

func TestEmptyOutputDirectoryAccepted(t *testing.T) {
	dir := t.TempDir() // exists, empty
	writeTiny(t, Options{Out: dir, ShardBytes: 1 << 30})
	files := readDir(t, dir)
	if _, ok := files["model-00001-of-00001.safetensors"]; !ok {
		t.Errorf("one shard expected with a 1 GiB shard size, got files %v", slices.Sorted(maps.Keys(files)))
	}
}

func TestPresets(t *testing.T) {
	if diff := cmp.Diff([]string{"full", "tiny"}, Presets()); diff != "" {
		t.Errorf("Presets() (-want +got):\n%s", diff)
	}
}

// TestChatTemplateCases checks the cases file kept for other renderers is
// well-formed; testdata/check_chat_template.py renders them with Jinja2.
func TestChatTemplateCases(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "chat_template_cases.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cases []struct {
		Name  string         `json:"name"`
		Input map[string]any `json:"input"`
		Want  *string        `json:"want"`
		Error *string        `json:"error"`
	}
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 5 {
		t.Fatalf("%d cases", len(cases))
	}
	for _, c := range cases {
		if (c.Want == nil) == (c.Error == nil) || c.Input["messages"] == nil {
			t.Errorf("case %q: want exactly one of want/error, and messages", c.Name)
		}
	}
}

// TestConfigOnly: --config-only writes every model file but no tensor, and
// an engine with generated weights runs from that directory.
func TestConfigOnly(t *testing.T) {
	for _, preset := range []string{PresetTiny, PresetFull} {
		dir := t.TempDir()
		if err := Write(Options{Preset: preset, Seed: 1, Out: dir, ConfigOnly: true}); err != nil {
			t.Fatal(err)
		}
		want := []string{"chat_template.jinja", "config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json"}
		if diff := cmp.Diff(want, slices.Sorted(maps.Keys(readDir(t, dir)))); diff != "" {
			t.Errorf("%s: files (-want +got):\n%s", preset, diff)
		}
		if preset != PresetTiny {
			continue
		}
		l, err := loader.Open(loader.Options{ModelDir: dir, Buckets: []int{8}, ContextTokens: 32, Synthetic: true, SyntheticSeed: 3})
		if err != nil {
			t.Fatal(err)
		}
		logits, err := l.Engine.Prefill(context.Background(), []int32{1, 2, 3}, nil)
		l.Close()
		if err != nil || len(logits) == 0 {
			t.Errorf("prefill on generated weights: %d logits, %v", len(logits), err)
		}
	}
}
