package tokenizer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/text/unicode/norm"
)

// vector is one reference result of HuggingFace tokenizers for a corpus
// text (testdata/make_vectors.py or .mjs).
type vector struct {
	Text               string  `json:"text"`
	IDs                []int32 `json:"ids"`
	Decoded            string  `json:"decoded"`
	DecodedSkipSpecial string  `json:"decoded_skip_special"`
}

// vectorFile is a vectors_*.json file.
type vectorFile struct {
	TokenizerSHA256 string   `json:"tokenizer_sha256"`
	Vectors         []vector `json:"vectors"`
}

// The reference tokenizers, loaded once per test binary.
var (
	loadOnce sync.Map // name → *loaded
)

// loaded is a tokenizer with its file's hash, or the error loading it.
type loaded struct {
	once sync.Once
	tok  *Tokenizer
	sha  string
	err  error
}

// testTokenizer loads testdata/NAME/tokenizer.json. A missing Qwen3 file
// fails the test (it is fetched, not committed) with the command to run.
func testTokenizer(t testing.TB, name string) (*Tokenizer, string) {
	t.Helper()
	v, _ := loadOnce.LoadOrStore(name, &loaded{})
	l := v.(*loaded)
	path := filepath.Join("testdata", name, "tokenizer.json")
	l.once.Do(func() {
		data, err := os.ReadFile(path)
		if err != nil {
			l.err = err
			return
		}
		sum := sha256.Sum256(data)
		l.sha = hex.EncodeToString(sum[:])
		l.tok, l.err = Load(path)
	})
	if errors.Is(l.err, fs.ErrNotExist) && name == "qwen3" {
		t.Fatalf("%s is missing: run tokenizer/testdata/fetch.sh (make test runs it first)", path)
	}
	if l.err != nil {
		t.Fatalf("load %s: %v", path, l.err)
	}
	return l.tok, l.sha
}

// readVectors reads testdata/vectors_NAME.json.
func readVectors(t *testing.T, name string) vectorFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "vectors_"+name+".json"))
	if err != nil {
		t.Fatal(err)
	}
	var vf vectorFile
	if err := json.Unmarshal(data, &vf); err != nil {
		t.Fatalf("vectors_%s.json: %v", name, err)
	}
	return vf
}

// readCorpus reads testdata/corpus.json.
func readCorpus(t testing.TB) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "corpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	if err := json.Unmarshal(data, &texts); err != nil {
		t.Fatalf("corpus.json: %v", err)
	}
	return texts
}

// short quotes s for a failure message, cut to its first 120 runes.
func short(s string) string {
	if r := []rune(s); len(r) > 120 {
		return fmt.Sprintf("%q…(%d runes)", string(r[:120]), len(r))
	}
	return fmt.Sprintf("%q", s)
}

// decodeStream feeds ids one at a time to a Decoder and returns the
// concatenated output, failing on any chunk that is not whole UTF-8.
func decodeStream(t *testing.T, tok *Tokenizer, ids []int32, skipSpecial bool) string {
	t.Helper()
	d := tok.NewDecoder(skipSpecial)
	var b strings.Builder
	for _, id := range ids {
		chunk, err := d.Add(id)
		if err != nil {
			t.Fatalf("Decoder.Add(%d): %v", id, err)
		}
		if !utf8.ValidString(chunk) {
			t.Fatalf("Decoder.Add(%d) returned %q, not whole UTF-8", id, chunk)
		}
		b.WriteString(chunk)
	}
	b.WriteString(d.Flush())
	return b.String()
}

// checkVectors compares Encode, Decode and the streaming Decoder with HF's
// results on every corpus text.
func checkVectors(t *testing.T, name string) {
	tok, sha := testTokenizer(t, name)
	vf := readVectors(t, name)
	if vf.TokenizerSHA256 != sha {
		t.Fatalf("vectors_%s.json was made from a tokenizer.json with sha256 %s, testdata/%s/tokenizer.json has %s: regenerate with make_vectors.py",
			name, vf.TokenizerSHA256, name, sha)
	}
	corpus := readCorpus(t)
	if len(vf.Vectors) != len(corpus) {
		t.Fatalf("vectors_%s.json has %d vectors, corpus.json %d texts: regenerate", name, len(vf.Vectors), len(corpus))
	}
	failures := 0
	fail := func(format string, args ...any) {
		t.Helper()
		t.Errorf(format, args...)
		if failures++; failures >= 10 {
			t.Fatal("too many failures")
		}
	}
	for i, v := range vf.Vectors {
		if v.Text != corpus[i] {
			t.Fatalf("vector %d is for %s, corpus.json has %s: regenerate", i, short(v.Text), short(corpus[i]))
		}
		if diff := cmp.Diff(v.IDs, tok.Encode(v.Text)); diff != "" {
			fail("Encode(%s) (text %d) differs from HF (-hf +got):\n%s", short(v.Text), i, diff)
			continue
		}
		for _, skip := range []bool{false, true} {
			want := v.Decoded
			if skip {
				want = v.DecodedSkipSpecial
			}
			got, err := tok.Decode(v.IDs, skip)
			if err != nil || got != want {
				fail("Decode(ids of text %d, skip %v) = %s, %v; HF: %s", i, skip, short(got), err, short(want))
			}
			if got := decodeStream(t, tok, v.IDs, skip); got != want {
				fail("streamed decode (text %d, skip %v) = %s; HF: %s", i, skip, short(got), short(want))
			}
		}
	}
	t.Logf("%s: %d texts, ids and decodes identical to HF", name, len(vf.Vectors))
}

func TestVectorsQwen3(t *testing.T) { checkVectors(t, "qwen3") }
func TestVectorsSynth(t *testing.T) { checkVectors(t, "synth") }
func TestVectorsEdge(t *testing.T)  { checkVectors(t, "edge") }

// TestRoundTrip: decoding an encoding gives back the text, NFC-normalized
// as HF's normalizer leaves it (identical for text already in NFC).
func TestRoundTrip(t *testing.T) {
	for _, name := range []string{"qwen3", "synth"} {
		tok, _ := testTokenizer(t, name)
		for i, text := range readCorpus(t) {
			want := norm.NFC.String(text)
			got, err := tok.Decode(tok.Encode(text), false)
			if err != nil || got != want {
				t.Errorf("%s: Decode(Encode(text %d %s)) = %s, %v; want %s", name, i, short(text), short(got), err, short(want))
			}
		}
	}
}

// TestSpecGroundTruth checks SPEC §6's chat prompt against the ids the
// Qwen3 file gives (its added tokens start at 151643 where Qwen3.6's start
// at 248044; "Hello" is 9707 there).
func TestSpecGroundTruth(t *testing.T) {
	tok, _ := testTokenizer(t, "qwen3")
	const prompt = "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
	want := []int32{151644, 872, 198, 9707, 151645, 198, 151644, 77091, 198, 151667, 271, 151668, 271}
	if diff := cmp.Diff(want, tok.Encode(prompt)); diff != "" {
		t.Errorf("Encode(SPEC §6 prompt) (-want +got):\n%s", diff)
	}
	for _, c := range []struct {
		tok     string
		id      int32
		special bool
	}{
		{"<|endoftext|>", 151643, true},
		{"<|im_start|>", 151644, true},
		{"<|im_end|>", 151645, true},
		{"<tool_call>", 151657, false},
		{"<think>", 151667, false},
		{"</think>", 151668, false},
		{"Hello", 9707, false},
		{"\n", 198, false},
		{"Ċ", 198, false},
	} {
		id, ok := tok.ID(c.tok)
		if c.tok == "\n" {
			// "\n" is stored byte-level as "Ċ"; ID takes vocabulary strings.
			if ok {
				t.Errorf("ID(%q) = %d, want not found", c.tok, id)
			}
			continue
		}
		if !ok || id != c.id {
			t.Errorf("ID(%q) = %d, %v; want %d", c.tok, id, ok, c.id)
		}
		if got := tok.Special(c.id); got != c.special {
			t.Errorf("Special(%d) = %v, want %v", c.id, got, c.special)
		}
	}
	if got := tok.Size(); got != 151669 {
		t.Errorf("Size() = %d, want 151669", got)
	}
	got, err := tok.Decode(want, true)
	if err != nil || got != "user\nHello\nassistant\n<think>\n\n</think>\n\n" {
		t.Errorf("Decode(skip special) = %q, %v", got, err)
	}
}

// TestSynthLayout checks the synthetic tokenizer's ids line up with SPEC
// §6's list: 900 regular tokens, then the added tokens in the real order.
func TestSynthLayout(t *testing.T) {
	tok, _ := testTokenizer(t, "synth")
	for i, c := range []string{"<|endoftext|>", "<|im_start|>", "<|im_end|>"} {
		if id, ok := tok.ID(c); !ok || id != int32(900+i) {
			t.Errorf("ID(%q) = %d, %v; want %d", c, id, ok, 900+i)
		}
	}
	if got := tok.Size(); got != 933 {
		t.Errorf("Size() = %d, want 933", got)
	}
	think, _ := tok.ID("<think>")
	if tok.Special(think) {
		t.Error("<think> is special; SPEC §6 has it as a plain added token")
	}
	ids := tok.Encode("<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
	if ids[0] != 901 || ids[len(ids)-4] != think {
		t.Errorf("chat prompt ids %v do not start with <|im_start|> and end with <think>…", ids)
	}
}
