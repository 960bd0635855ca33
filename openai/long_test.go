package openai

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// longTokenBody is a completion request whose prompt is n token ids, as a
// 128K-token exact-prefix request sends it.
func longTokenBody(n int) ([]byte, []int32) {
	r := rand.New(rand.NewPCG(1, 2))
	ids := make([]int32, n)
	var b strings.Builder
	b.WriteString(`{"model":"m","max_tokens":1,"stream":true,"prompt":[`)
	for i := range ids {
		ids[i] = int32(r.IntN(151000))
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(int(ids[i])))
	}
	b.WriteString("]}")
	return []byte(b.String()), ids
}

// TestLongTokenPrompt decodes a 128K-token prompt exactly.
func TestLongTokenPrompt(t *testing.T) {
	body, want := longTokenBody(131072)
	got, err := DecodeCompletionRequest(body)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got.Prompt.Tokens); diff != "" {
		t.Errorf("tokens (-want +got):\n%s", diff)
	}
}

// BenchmarkDecodeLongTokenPrompt is the parse a 128K-token request pays
// before its first token: it is on the path of every exact-prefix hit.
func BenchmarkDecodeLongTokenPrompt(b *testing.B) {
	body, _ := longTokenBody(131072)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeCompletionRequest(body); err != nil {
			b.Fatal(err)
		}
	}
}
