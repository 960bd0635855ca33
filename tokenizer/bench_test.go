package tokenizer

import (
	"strings"
	"testing"
)

// benchText is a large mixed text: the whole corpus (prose in many
// scripts, code, whitespace runs, emoji, added tokens) repeated to ~1 MB.
func benchText(b *testing.B) string {
	corpus := strings.Join(readCorpus(b), "\n")
	return strings.Repeat(corpus, 1<<20/len(corpus)+1)
}

// benchmarkEncode reports Encode's throughput in MB/s of input text.
func benchmarkEncode(b *testing.B, name string) {
	tok, _ := testTokenizer(b, name)
	text := benchText(b)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		tok.Encode(text)
	}
}

func BenchmarkEncode(b *testing.B)      { benchmarkEncode(b, "qwen3") }
func BenchmarkEncodeSynth(b *testing.B) { benchmarkEncode(b, "synth") }

// BenchmarkEncodeCold encodes text whose pre-tokens are new each time, the
// worst case for the cache: every word goes through the merge loop.
func BenchmarkEncodeCold(b *testing.B) {
	tok, _ := testTokenizer(b, "qwen3")
	text := benchText(b)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		tok.model.cache = newWordCache()
		tok.Encode(text)
	}
}

// BenchmarkDecode reports Decode's throughput in MB/s of output text.
func BenchmarkDecode(b *testing.B) {
	tok, _ := testTokenizer(b, "qwen3")
	text := benchText(b)
	ids := tok.Encode(text)
	b.SetBytes(int64(len(text)))
	b.ResetTimer()
	for b.Loop() {
		if _, err := tok.Decode(ids, false); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLoad reports how long loading the Qwen3 tokenizer.json takes.
func BenchmarkLoad(b *testing.B) {
	for b.Loop() {
		if _, err := Load("testdata/qwen3/tokenizer.json"); err != nil {
			b.Fatal(err)
		}
	}
}
