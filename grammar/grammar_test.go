package grammar

import (
	"testing"
)

// byteTokens is a vocabulary of the 256 single bytes and a stop token 256.
type byteTokens struct{}

func (byteTokens) Size() int { return 257 }
func (byteTokens) TokenBytes(id int32) []byte {
	if id < 256 {
		return []byte{byte(id)}
	}
	return []byte("<|end|>")
}
func (byteTokens) Special(id int32) bool { return id == 256 }

func byteVocab(t testing.TB) *Vocab {
	v, err := NewVocab(byteTokens{}, 260, []int32{256})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// accepts feeds s byte by byte, checking each byte against the mask first,
// and reports whether all of s is taken and ends a complete value.
func accepts(t *testing.T, g *Grammar, s string) bool {
	t.Helper()
	m := g.NewMatcher()
	mask := make([]uint32, g.vocab.Words())
	for i := 0; i < len(s); i++ {
		m.Mask(mask)
		allowed := mask[s[i]/32]>>(s[i]%32)&1 == 1
		err := m.Advance(int32(s[i]))
		if allowed != (err == nil) {
			t.Fatalf("%q at %d: mask says %v, Advance says %v", s, i, allowed, err)
		}
		if err != nil {
			return false
		}
	}
	m.Mask(mask)
	end := mask[256/32]>>(256%32)&1 == 1
	if end != m.Accepting() {
		t.Fatalf("%q: end allowed %v, accepting %v", s, end, m.Accepting())
	}
	return end
}

func TestSmoke(t *testing.T) {
	v := byteVocab(t)
	g, err := JSONSchema([]byte(`{"type":"object","properties":{"a":{"type":"integer","minimum":3,"maximum":120},"b":{"type":"string","maxLength":3}},"required":["a"],"additionalProperties":false}`), v)
	if err != nil {
		t.Fatal(err)
	}
	for s, want := range map[string]bool{
		`{"a":3}`: true, `{"a":121}`: false, `{"a": 12, "b": "xyz"}`: true, `{"b":"x"}`: false,
		`{"a":5,"b":"abcd"}`: false, `{"a":5,"a":6}`: false, `{"a":07}`: false, `{"a":100}`: true,
	} {
		if got := accepts(t, g, s); got != want {
			t.Errorf("%s: got %v, want %v", s, got, want)
		}
	}
}
