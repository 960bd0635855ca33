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

// TestLongTokenPromptAllocs: a 128K-token prompt decodes in a few dozen
// allocations, none per token id (the tree once made a node, a path and a
// literal string for each: 655K allocations, ≈ 45 ms of CPU).
func TestLongTokenPromptAllocs(t *testing.T) {
	body, _ := longTokenBody(131072)
	allocs := testing.AllocsPerRun(3, func() {
		if _, err := DecodeCompletionRequest(body); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 100 {
		t.Errorf("%v allocations to decode a 128K-token prompt, want at most 100", allocs)
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

// dump writes a parsed tree with every number's value and literal, arrays
// through items, so that two parses compare as text.
func dump(b *strings.Builder, n *node) {
	switch n.kind {
	case kObject:
		b.WriteString("{")
		for _, m := range n.members {
			b.WriteString(strconv.Quote(m.key) + ":")
			dump(b, m.val)
			b.WriteString(",")
		}
		b.WriteString("}")
	case kArray:
		b.WriteString("[")
		for _, v := range n.items() {
			dump(b, v)
			b.WriteString(",")
		}
		b.WriteString("]")
	case kNumber:
		b.WriteString(string(n.raw) + "=" + strconv.FormatFloat(n.num, 'g', -1, 64))
	case kString:
		b.WriteString(strconv.Quote(n.str))
	default:
		b.WriteString(n.kind.String() + strconv.FormatBool(n.boolean))
	}
}

// FuzzIntegerArrays: a body parses to the same tree whether its arrays of
// plain integers are read in one pass (ints) or element by element, and an
// int array's length and items agree with its ints.
func FuzzIntegerArrays(f *testing.F) {
	for _, s := range []string{`[1,2,3]`, `[ -0 , 5 ]`, `[1.5,2]`, `[1e3, 4]`, `[123456789012345678]`,
		`[999999999999999, -999999999999999]`, `[[1,2],[3]]`, `{"a":[1, 2 ,3],"b":[]}`, `[]`, `[1,"x"]`, `[ 7 ]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, err := parseJSON(body)
		if err != nil {
			return
		}
		slow := parser{buf: body, nodes: true}
		ref, _ := slow.value(nil, 0)
		var a, b strings.Builder
		dump(&a, fast)
		dump(&b, ref)
		if a.String() != b.String() {
			t.Fatalf("one-pass integers %s, element by element %s", a.String(), b.String())
		}
	})
}
