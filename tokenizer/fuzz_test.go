package tokenizer

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// addCorpusSeeds seeds a fuzz target with the corpus texts short enough to
// mutate usefully.
func addCorpusSeeds(f *testing.F) {
	for _, text := range readCorpus(f) {
		if len(text) <= 256 {
			f.Add(text)
		}
	}
}

// FuzzEncodeRoundTrip: for any valid UTF-8 text, the synthetic tokenizer
// decodes its encoding back to the NFC text, the streaming Decoder agrees
// with Decode chunk by chunk, and nothing panics.
func FuzzEncodeRoundTrip(f *testing.F) {
	addCorpusSeeds(f)
	f.Add("a\xffb")
	tok, _ := testTokenizer(f, "synth")
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s) // any input, valid or not, must not panic
		if !utf8.ValidString(s) {
			return
		}
		want := norm.NFC.String(s)
		ids = tok.Encode(want)
		got, err := tok.Decode(ids, false)
		if err != nil || got != want {
			t.Fatalf("Decode(Encode(%q)) = %q, %v", want, got, err)
		}
		d := tok.NewDecoder(false)
		var b strings.Builder
		for _, id := range ids {
			chunk, err := d.Add(id)
			if err != nil || !utf8.ValidString(chunk) {
				t.Fatalf("Decoder.Add(%d) = %q, %v", id, chunk, err)
			}
			b.WriteString(chunk)
		}
		if b.WriteString(d.Flush()); b.String() != want {
			t.Fatalf("streamed decode of %q = %q", want, b.String())
		}
	})
}

// FuzzLoad: no tokenizer.json content makes Load, or using what it loads,
// panic.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"synth", "edge"} {
		data, err := os.ReadFile(filepath.Join("testdata", name, "tokenizer.json"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]},` +
		`"pre_tokenizer":{"type":"Sequence","pretokenizers":[{"type":"Split","pattern":{"Regex":"\\w+|\\W"},"behavior":"Isolated","invert":false},` +
		`{"type":"ByteLevel","add_prefix_space":false,"use_regex":false}]},"decoder":{"type":"ByteLevel"},` +
		`"added_tokens":[{"id":3,"content":"<x>","special":true,"lstrip":true,"rstrip":true,"single_word":true}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		tok, err := parse(data)
		if err != nil {
			return
		}
		for _, text := range []string{"", "ab <x> ab", "Hello, world! 123\n\n  \u00e9\u0301 <x>x<x>"} {
			ids := tok.Encode(text)
			if _, err := tok.Decode(ids, true); err != nil {
				t.Fatalf("Decode of Encode(%q) = %v", text, err)
			}
		}
		for id := int32(-1); id <= int32(tok.Size()); id++ {
			tok.TokenBytes(id)
			tok.Special(id)
		}
	})
}

// FuzzSplit: the scanner and regexp2 split any NFC text alike under both
// Qwen patterns, and the scanner's pieces tile the text. Texts with U+017F
// are left out (see TestSplitApostropheLongS).
func FuzzSplit(f *testing.F) {
	addCorpusSeeds(f)
	re2, err := compileRegexp2(patternQwen2)
	if err != nil {
		f.Fatal(err)
	}
	re35, err := compileRegexp2(patternQwen35)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if !utf8.ValidString(s) || strings.ContainsRune(s, 'ſ') {
			return
		}
		s = norm.NFC.String(s)
		for _, c := range []struct {
			re    regexSplitter
			marks bool
		}{{regexSplitter{re2}, false}, {regexSplitter{re35}, true}} {
			got := splitPieces(scanner{marksAreLetters: c.marks}, s)
			if strings.Join(got, "") != s {
				t.Fatalf("scanner pieces %q do not tile %q", got, s)
			}
			want := splitPieces(c.re, s)
			if strings.Join(got, "\x00") != strings.Join(want, "\x00") || len(got) != len(want) {
				t.Fatalf("marks %v: split(%q): scanner %q, regexp2 %q", c.marks, s, got, want)
			}
		}
	})
}
