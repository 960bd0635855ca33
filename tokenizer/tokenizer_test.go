package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/text/unicode/norm"
)

// synthDoc returns the synthetic tokenizer.json as a generic JSON tree to
// mutate.
func synthDoc(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "synth", "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// writeDoc writes doc as dir/tokenizer.json and returns the path.
func writeDoc(t *testing.T, dir string, doc any) string {
	t.Helper()
	data, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "tokenizer.json")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestLoadErrors: every unsupported or malformed part is rejected with an
// error naming the file and the part.
func TestLoadErrors(t *testing.T) {
	model := func(d map[string]any) map[string]any { return d["model"].(map[string]any) }
	pre := func(d map[string]any, i int) map[string]any {
		return d["pre_tokenizer"].(map[string]any)["pretokenizers"].([]any)[i].(map[string]any)
	}
	added := func(d map[string]any, i int) map[string]any { return d["added_tokens"].([]any)[i].(map[string]any) }
	for _, c := range []struct {
		name   string
		mutate func(d map[string]any)
		want   string
	}{
		{"model type", func(d map[string]any) { model(d)["type"] = "WordPiece" }, `model: type "WordPiece" is not supported`},
		{"model type with other layout", func(d map[string]any) {
			model(d)["type"] = "Unigram"
			model(d)["vocab"] = []any{[]any{"a", -1.5}}
		}, `model: type "Unigram" is not supported`},
		{"model type missing", func(d map[string]any) { delete(model(d), "type") }, `model: missing "type"`},
		{"model missing", func(d map[string]any) { delete(d, "model") }, "model: missing"},
		{"dropout", func(d map[string]any) { model(d)["dropout"] = 0.1 }, "dropout"},
		{"byte fallback", func(d map[string]any) { model(d)["byte_fallback"] = true }, "byte_fallback"},
		{"subword prefix", func(d map[string]any) { model(d)["continuing_subword_prefix"] = "##" }, "continuing_subword_prefix"},
		{"unk not in vocab", func(d map[string]any) { model(d)["unk_token"] = "<nope>" }, `unk_token "<nope>"`},
		{"vocab missing", func(d map[string]any) { delete(model(d), "vocab") }, "model.vocab: missing"},
		{"vocab negative id", func(d map[string]any) { model(d)["vocab"].(map[string]any)["!"] = -1 }, "outside"},
		{"vocab fractional id", func(d map[string]any) { model(d)["vocab"].(map[string]any)["!"] = 1.5 }, "model"},
		{"vocab duplicate id", func(d map[string]any) {
			d["added_tokens"] = []any{}
			model(d)["vocab"].(map[string]any)["zzz"] = 5
		}, "id 5 is used by both"},
		{"vocab sparse", func(d map[string]any) {
			d["added_tokens"] = []any{}
			model(d)["vocab"].(map[string]any)["zzz"] = 1 << 30
		}, "too sparse"},
		{"merge token unknown", func(d map[string]any) {
			model(d)["merges"] = append(model(d)["merges"].([]any), []any{"!", "@@@"})
		}, `"@@@" is not in the vocabulary`},
		{"merge result unknown", func(d map[string]any) { model(d)["merges"] = []any{[]any{"!", "!"}} }, `result "!!" is not in the vocabulary`},
		{"merge not a pair", func(d map[string]any) { model(d)["merges"] = []any{[]any{"a", "b", "c"}} }, "want a pair"},
		{"legacy merge three parts", func(d map[string]any) { model(d)["merges"] = []any{"a b c"} }, "not two tokens"},
		{"merges mixed", func(d map[string]any) { model(d)["merges"] = []any{"a b", []any{"a", "b"}} }, "model.merges"},
		{"merges missing", func(d map[string]any) { delete(model(d), "merges") }, "model.merges: missing"},
		{"normalizer", func(d map[string]any) { d["normalizer"] = map[string]any{"type": "NFD"} }, `normalizer: type "NFD"`},
		{"normalizer in sequence", func(d map[string]any) {
			d["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFC"}, map[string]any{"type": "Lowercase"}}}
		}, `type "Lowercase"`},
		{"pre-tokenizer missing", func(d map[string]any) { d["pre_tokenizer"] = nil }, "pre_tokenizer"},
		{"split behavior", func(d map[string]any) { pre(d, 0)["behavior"] = "Removed" }, `behavior "Removed"`},
		{"split invert", func(d map[string]any) { pre(d, 0)["invert"] = true }, "invert"},
		{"split string pattern", func(d map[string]any) { pre(d, 0)["pattern"] = map[string]any{"String": " "} }, "only a Regex pattern"},
		{"split bad regex", func(d map[string]any) { pre(d, 0)["pattern"] = map[string]any{"Regex": "(unclosed"} }, "Split pattern"},
		{"byte level prefix space", func(d map[string]any) { pre(d, 1)["add_prefix_space"] = true }, "add_prefix_space"},
		{"byte level regex default", func(d map[string]any) { delete(pre(d, 1), "use_regex") }, "use_regex"},
		{"post processor", func(d map[string]any) { d["post_processor"] = map[string]any{"type": "TemplateProcessing"} }, `post_processor: type "TemplateProcessing"`},
		{"decoder null", func(d map[string]any) { d["decoder"] = nil }, "decoder: null"},
		{"decoder type", func(d map[string]any) { d["decoder"] = map[string]any{"type": "WordPiece"} }, `decoder: type "WordPiece"`},
		{"truncation", func(d map[string]any) { d["truncation"] = map[string]any{"max_length": 8} }, "truncation"},
		{"padding", func(d map[string]any) { d["padding"] = map[string]any{} }, "padding"},
		{"version", func(d map[string]any) { d["version"] = "2.0" }, `version "2.0"`},
		{"added id mismatch", func(d map[string]any) { added(d, 1)["id"] = 5000.0 }, "HuggingFace would give it id 901"},
		{"added duplicate", func(d map[string]any) { added(d, 1)["content"] = "<|endoftext|>" }, "listed twice"},
		{"added empty", func(d map[string]any) { added(d, 0)["content"] = "" }, "empty content"},
		{"added not NFC", func(d map[string]any) {
			added(d, 0)["content"] = "e\u0301"
			added(d, 0)["normalized"] = true
		}, "not in NFC"},
	} {
		t.Run(c.name, func(t *testing.T) {
			doc := synthDoc(t)
			c.mutate(doc)
			path := writeDoc(t, t.TempDir(), doc)
			tok, err := Load(path)
			if err == nil {
				t.Fatalf("Load succeeded (size %d), want error containing %q", tok.Size(), c.want)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("Load error %q does not name the file and contain %q", err, c.want)
			}
		})
	}
}

// TestLoadBadFiles: unreadable and non-JSON files give errors naming them.
func TestLoadBadFiles(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct{ name, content, want string }{
		{"empty", "", "invalid JSON"},
		{"truncated", `{"version": "1.0", "model": {`, "invalid JSON"},
		{"array", `[1, 2]`, "not a tokenizer.json object"},
		{"null", `null`, "pre_tokenizer"},
		{"empty object", `{}`, "pre_tokenizer"},
	} {
		path := filepath.Join(dir, c.name+".json")
		if err := os.WriteFile(path, []byte(c.content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(path); err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("Load(%s) error = %v, want one naming the file and containing %q", c.name, err, c.want)
		}
	}
	missing := filepath.Join(dir, "nope", "tokenizer.json")
	if _, err := Load(missing); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("Load(missing) error = %v", err)
	}
	if _, err := LoadDir(filepath.Join(dir, "nope")); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("LoadDir(missing) error = %v", err)
	}
}

// TestLoadDir loads a model directory's tokenizer.json.
func TestLoadDir(t *testing.T) {
	tok, err := LoadDir(filepath.Join("testdata", "synth"))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Size() != 933 {
		t.Errorf("Size() = %d, want 933", tok.Size())
	}
}

// TestLegacyMerges: the "a b" string layout of merges (with a #version
// line) loads to the same tokenizer as the pair layout.
func TestLegacyMerges(t *testing.T) {
	doc := synthDoc(t)
	m := doc["model"].(map[string]any)
	legacy := []any{"#version: 0.2"}
	for _, p := range m["merges"].([]any) {
		pair := p.([]any)
		legacy = append(legacy, pair[0].(string)+" "+pair[1].(string))
	}
	m["merges"] = legacy
	tok, err := Load(writeDoc(t, t.TempDir(), doc))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := testTokenizer(t, "synth")
	for _, text := range readCorpus(t) {
		if diff := cmp.Diff(want.Encode(text), tok.Encode(text)); diff != "" {
			t.Fatalf("legacy merges encode %s differently:\n%s", short(text), diff)
		}
	}
}

// TestNormalizerVariants: a Sequence holding NFC behaves as NFC, and no
// normalizer leaves NFD text as it is.
func TestNormalizerVariants(t *testing.T) {
	const nfd = "cafe\u0301 A\u030angstro\u0308m"
	base, _ := testTokenizer(t, "synth")

	doc := synthDoc(t)
	doc["normalizer"] = map[string]any{"type": "Sequence", "normalizers": []any{map[string]any{"type": "NFC"}}}
	seq, err := Load(writeDoc(t, t.TempDir(), doc))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(base.Encode(nfd), seq.Encode(nfd)); diff != "" {
		t.Errorf("Sequence[NFC] encodes differently from NFC:\n%s", diff)
	}

	doc = synthDoc(t)
	doc["normalizer"] = nil
	none, err := Load(writeDoc(t, t.TempDir(), doc))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := none.Decode(none.Encode(nfd), false); got != nfd {
		t.Errorf("without a normalizer, round trip of NFD text = %q, want it unchanged", got)
	}
	if got, _ := base.Decode(base.Encode(nfd), false); got != norm.NFC.String(nfd) {
		t.Errorf("with NFC, round trip of NFD text = %q, want its NFC form", got)
	}
}

// byteID returns the id of the single-byte token for b.
func byteID(t *testing.T, tok *Tokenizer, b byte) int32 {
	t.Helper()
	id, ok := tok.ID(string(byteSymbol[b]))
	if !ok {
		t.Fatalf("no token for byte %#x", b)
	}
	return id
}

// TestDecodeBytes: byte tokens that split a character are joined before
// UTF-8 decoding, and ill-formed bytes become U+FFFD as in Rust's
// from_utf8_lossy (one per maximal ill-formed subpart).
func TestDecodeBytes(t *testing.T) {
	tok, _ := testTokenizer(t, "synth")
	ids := func(bs ...byte) []int32 {
		out := make([]int32, len(bs))
		for i, b := range bs {
			out[i] = byteID(t, tok, b)
		}
		return out
	}
	for _, c := range []struct {
		bytes  []byte
		want   string
		stream []string // what each Add returns, then Flush
	}{
		{[]byte("😀"), "😀", []string{"", "", "", "😀", ""}},
		{[]byte("é!"), "é!", []string{"", "é", "!", ""}},
		{[]byte{0xE2, 0x82, 'A'}, "\uFFFDA", []string{"", "", "\uFFFDA", ""}},
		{[]byte{0xF0, 0x9F, 0x98}, "\uFFFD", []string{"", "", "", "\uFFFD"}},
		{[]byte{0xC0, 0x80}, "\uFFFD\uFFFD", []string{"\uFFFD", "\uFFFD", ""}},
		{[]byte{0xED, 0xA0, 0x80}, "\uFFFD\uFFFD\uFFFD", []string{"", "\uFFFD\uFFFD", "\uFFFD", ""}},
		{[]byte{0xF4, 0x90, 0x80, 0x80}, "\uFFFD\uFFFD\uFFFD\uFFFD", []string{"", "\uFFFD\uFFFD", "\uFFFD", "\uFFFD", ""}},
		{[]byte{0xFF, 'x'}, "\uFFFDx", []string{"\uFFFD", "x", ""}},
		{[]byte{0xE0, 0xA0}, "\uFFFD", []string{"", "", "\uFFFD"}},
	} {
		got, err := tok.Decode(ids(c.bytes...), false)
		if err != nil || got != c.want {
			t.Errorf("Decode(% x) = %q, %v; want %q", c.bytes, got, err, c.want)
		}
		d := tok.NewDecoder(false)
		var stream []string
		for _, id := range ids(c.bytes...) {
			s, err := d.Add(id)
			if err != nil {
				t.Fatal(err)
			}
			stream = append(stream, s)
		}
		stream = append(stream, d.Flush())
		if diff := cmp.Diff(c.stream, stream); diff != "" {
			t.Errorf("Decoder on % x (-want +got):\n%s", c.bytes, diff)
		}
	}
	// A skipped special token adds no bytes, so it does not break a
	// character; kept, it does.
	end, _ := tok.ID("<|im_end|>")
	split := append(append(ids(0xC3), end), ids(0xA9)...)
	if got, _ := tok.Decode(split, true); got != "é" {
		t.Errorf("Decode(skip) across a special token = %q, want %q", got, "é")
	}
	if got, _ := tok.Decode(split, false); got != "\uFFFD<|im_end|>\uFFFD" {
		t.Errorf("Decode across a special token = %q", got)
	}
}

// TestDecodeErrors: unknown ids are errors; the Decoder is unchanged by one.
func TestDecodeErrors(t *testing.T) {
	tok, _ := testTokenizer(t, "synth")
	for _, id := range []int32{-1, int32(tok.Size()), 1 << 30} {
		if _, err := tok.Decode([]int32{0, id}, false); err == nil || !strings.Contains(err.Error(), "unknown id") {
			t.Errorf("Decode(id %d) error = %v", id, err)
		}
		if tok.TokenBytes(id) != nil || tok.Special(id) {
			t.Errorf("TokenBytes/Special(%d) report a token", id)
		}
	}
	d := tok.NewDecoder(false)
	if _, err := d.Add(byteID(t, tok, 0xC3)); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Add(-5); err == nil {
		t.Error("Decoder.Add(-5) succeeded")
	}
	if s, err := d.Add(byteID(t, tok, 0xA9)); err != nil || s != "é" {
		t.Errorf("Decoder after an error: Add = %q, %v; want \"é\"", s, err)
	}
}

// TestTokenBytes: vocabulary tokens give their bytes, added tokens their
// content.
func TestTokenBytes(t *testing.T) {
	tok, _ := testTokenizer(t, "qwen3")
	for tokStr, want := range map[string]string{
		"ĠHello":       " Hello",
		"Ċ":            "\n",
		"<|im_start|>": "<|im_start|>",
		"<think>":      "<think>",
		"é":            "\xe9",
	} {
		id, ok := tok.ID(tokStr)
		if !ok {
			t.Fatalf("ID(%q) not found", tokStr)
		}
		if got := string(tok.TokenBytes(id)); got != want {
			t.Errorf("TokenBytes(%q) = %q, want %q", tokStr, got, want)
		}
	}
	if _, ok := tok.ID("no such token"); ok {
		t.Error("ID found a token that does not exist")
	}
}

// TestEncodeInvalidUTF8: invalid bytes are encoded as U+FFFD, one per
// maximal ill-formed subpart, as Python's errors="replace" decoding would
// hand them to HF.
func TestEncodeInvalidUTF8(t *testing.T) {
	tok, _ := testTokenizer(t, "synth")
	for in, want := range map[string]string{
		"a\xffb":         "a\uFFFDb",
		"\xe2\x82A":      "\uFFFDA",
		"x\xf0\x9f\x98":  "x\uFFFD",
		"\xed\xa0\x80ok": "\uFFFD\uFFFD\uFFFDok",
	} {
		if diff := cmp.Diff(tok.Encode(want), tok.Encode(in)); diff != "" {
			t.Errorf("Encode(%q) differs from Encode(%q):\n%s", in, want, diff)
		}
	}
}

// TestSplitApostropheLongS: Oniguruma's (?i) folds U+017F to 's', so "'ſ"
// is a contraction (HF splits "'ſa" as "'ſ" + "a"); regexp2 does not fold
// it, which is why the Qwen patterns use the scanner.
func TestSplitApostropheLongS(t *testing.T) {
	for _, marks := range []bool{false, true} {
		var got []string
		scanner{marksAreLetters: marks}.split("x'ſa", func(p string) { got = append(got, p) })
		if diff := cmp.Diff([]string{"x", "'ſ", "a"}, got); diff != "" {
			t.Errorf("split (marks %v) (-want +got):\n%s", marks, diff)
		}
	}
}

// splitPieces collects a splitter's pre-tokens.
func splitPieces(s splitter, text string) []string {
	var out []string
	s.split(text, func(p string) { out = append(out, p) })
	return out
}

// TestScannerMatchesRegexp2: on every corpus text, the scanner splits as
// regexp2 running the same pattern does (texts with U+017F aside, see
// TestSplitApostropheLongS). Together with the HF vectors this shows the
// scanner equal to the pattern.
func TestScannerMatchesRegexp2(t *testing.T) {
	for _, c := range []struct {
		pattern string
		marks   bool
	}{{patternQwen2, false}, {patternQwen35, true}} {
		re, err := compileRegexp2(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range readCorpus(t) {
			text = norm.NFC.String(text)
			if strings.ContainsRune(text, 'ſ') {
				continue
			}
			want := splitPieces(regexSplitter{re}, text)
			if diff := cmp.Diff(want, splitPieces(scanner{marksAreLetters: c.marks}, text)); diff != "" {
				t.Fatalf("marks %v: scanner and regexp2 split %s differently (-regexp2 +scanner):\n%s", c.marks, short(text), diff)
			}
		}
	}
}

// TestConcurrentEncode: the shared cache gives every goroutine the same
// ids as a single caller gets.
func TestConcurrentEncode(t *testing.T) {
	tok, _ := testTokenizer(t, "synth")
	corpus := readCorpus(t)
	want := make([][]int32, len(corpus))
	for i, text := range corpus {
		want[i] = tok.Encode(text)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range corpus {
				j := (i + g*97) % len(corpus)
				if diff := cmp.Diff(want[j], tok.Encode(corpus[j])); diff != "" {
					t.Errorf("goroutine %d: text %d differs:\n%s", g, j, diff)
					return
				}
			}
		})
	}
	wg.Wait()
}
