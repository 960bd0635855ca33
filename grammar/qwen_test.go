package grammar

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/aimaproject/aimac/tokenizer"
)

var (
	qwenOnce  sync.Once
	qwenVocab *Vocab
	qwenTok   *tokenizer.Tokenizer
	qwenErr   error
)

// qwen loads the real Qwen3 vocabulary (make testdata fetches it).
func qwen(t testing.TB) (*Vocab, *tokenizer.Tokenizer) {
	path := filepath.Join("..", "tokenizer", "testdata", "qwen3", "tokenizer.json")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("%s is missing: run make testdata", path)
	}
	qwenOnce.Do(func() {
		qwenTok, qwenErr = tokenizer.Load(path)
		if qwenErr != nil {
			return
		}
		end, _ := qwenTok.ID("<|im_end|>")
		qwenVocab, qwenErr = NewVocab(qwenTok, qwenTok.Size(), []int32{end})
	})
	if qwenErr != nil {
		t.Fatal(qwenErr)
	}
	return qwenVocab, qwenTok
}

// nestedSchema is the benchmark's schema: objects in arrays in objects,
// bounded and free strings, numbers, enums, a pattern.
const nestedSchema = `{
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 40},
    "id": {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "score": {"type": "number", "minimum": -10, "maximum": 10},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
    "address": {
      "type": "object",
      "properties": {
        "street": {"type": "string"},
        "city": {"type": "string", "minLength": 2, "maxLength": 30},
        "zip": {"type": ["string", "null"]},
        "geo": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}}, "required": ["lat", "lon"], "additionalProperties": false}
      },
      "required": ["city", "geo"],
      "additionalProperties": false
    },
    "orders": {
      "type": "array", "minItems": 1, "maxItems": 3,
      "items": {
        "type": "object",
        "properties": {
          "sku": {"type": "string"},
          "qty": {"type": "integer", "minimum": 1, "maximum": 99},
          "status": {"enum": ["new", "paid", "shipped", null]},
          "notes": {"anyOf": [{"type": "string", "maxLength": 20}, {"type": "null"}]}
        },
        "required": ["sku", "qty", "status"],
        "additionalProperties": false
      }
    },
    "active": {"type": "boolean"}
  },
  "required": ["name", "id", "age", "address", "orders", "active"],
  "additionalProperties": false
}`

// randomWalk picks a random allowed token at every step until the end is
// allowed and drawn, or cap steps; it returns the text and each step's
// mask time.
func randomWalk(t testing.TB, g *Grammar, rng *rand.Rand, limit int, endBias float64) (string, []time.Duration, bool) {
	m := g.NewMatcher()
	mask := make([]uint32, g.vocab.Words())
	var out []byte
	var times []time.Duration
	for range limit {
		start := time.Now()
		n := m.Mask(mask)
		times = append(times, time.Since(start))
		if n == 0 {
			t.Fatalf("no token allowed after %q", out)
		}
		var allowed []int32
		for w, x := range mask {
			for ; x != 0; x &= x - 1 {
				allowed = append(allowed, int32(w*32+trailing(x)))
			}
		}
		id := allowed[rng.IntN(len(allowed))]
		// A random token rarely closes a string; lean towards tokens that
		// do, as a model would, so values finish within the cap.
		if rng.Float64() < endBias {
			var closing []int32
			for _, a := range allowed {
				if g.vocab.Stop(a) {
					closing = append(closing[:0], a)
					break
				}
				if b := g.vocab.bytes[a]; len(b) > 0 && slices.ContainsFunc(b, func(c byte) bool { return c == '"' || c == '}' || c == ']' || c == ',' }) {
					closing = append(closing, a)
				}
			}
			if len(closing) > 0 {
				id = closing[rng.IntN(len(closing))]
			}
		}
		if err := m.Advance(id); err != nil {
			t.Fatalf("after %q: %v", out, err)
		}
		if m.Done() {
			return string(out), times, true
		}
		out = append(out, g.vocab.bytes[id]...)
	}
	return string(out), times, false
}

func trailing(x uint32) int {
	n := 0
	for x&1 == 0 {
		x >>= 1
		n++
	}
	return n
}

func BenchmarkMaskNested(b *testing.B) {
	v, _ := qwen(b)
	g, err := JSONSchema([]byte(nestedSchema), v)
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	var all []time.Duration
	b.ResetTimer()
	steps := 0
	for b.Loop() {
		_, times, _ := randomWalk(b, g, rng, 400, 0.3)
		all = append(all, times...)
		steps += len(times)
	}
	slices.Sort(all)
	b.ReportMetric(float64(all[len(all)/2].Nanoseconds()), "median-ns/mask")
	b.ReportMetric(float64(all[len(all)*9/10].Nanoseconds()), "p90-ns/mask")
	b.ReportMetric(float64(all[len(all)-1].Nanoseconds()), "max-ns/mask")
	b.ReportMetric(float64(steps)/float64(b.N), "masks/op")
}
