package output

import (
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// allCases gathers every table, for the properties that hold for any input.
func allCases() []parseCase {
	var all []parseCase
	for _, cs := range [][]parseCase{reasoningCases, toolCases, stopCases} {
		all = append(all, cs...)
	}
	return all
}

// splits returns ways to cut in into pieces: every single cut, one byte at a
// time, one rune at a time, every pair of cuts for short inputs and random
// cuts for long ones.
func splits(in string, rng *rand.Rand) [][]string {
	var out [][]string
	for i := 0; i <= len(in); i++ {
		out = append(out, []string{in[:i], in[i:]})
	}
	var bytes, runes []string
	for i := range len(in) {
		bytes = append(bytes, in[i:i+1])
	}
	for i, w := 0, 0; i < len(in); i += w {
		_, w = utf8.DecodeRuneInString(in[i:])
		runes = append(runes, in[i:i+w])
	}
	out = append(out, bytes, runes)
	if len(in) <= 48 {
		for i := 0; i <= len(in); i++ {
			for j := i; j <= len(in); j++ {
				out = append(out, []string{in[:i], in[i:j], in[j:]})
			}
		}
		return out
	}
	for range 200 {
		out = append(out, randomPieces(in, rng))
	}
	return out
}

// randomPieces cuts in into pieces of 1 to 8 bytes, like tokens.
func randomPieces(in string, rng *rand.Rand) []string {
	var ps []string
	for len(in) > 0 {
		n := min(len(in), 1+rng.IntN(8))
		ps = append(ps, in[:n])
		in = in[n:]
	}
	return ps
}

// TestSplitAnywhere is the streaming property: however the text is cut into
// Write calls, the accumulated Result, Stopped and HasToolCalls are those of
// one Write.
func TestSplitAnywhere(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, c := range allCases() {
		t.Run(c.name, func(t *testing.T) {
			want, wantStopped, _ := parse(c.opts, c.in)
			for _, pieces := range splits(c.in, rng) {
				got, stopped, evs := parse(c.opts, pieces...)
				if d := cmp.Diff(want, got); d != "" || stopped != wantStopped {
					t.Fatalf("pieces %q: Result (-one write +pieces):\n%s\nStopped %v, want %v", pieces, d, stopped, wantStopped)
				}
				checkEvents(t, evs)
			}
		})
	}
}

// FuzzParser feeds arbitrary text cut at arbitrary points: the parser must
// not panic, the cuts must not change the Result, and tool-call arguments
// must always be valid JSON.
func FuzzParser(f *testing.F) {
	for i, c := range allCases() {
		f.Add(c.in, []byte{byte(i), 3, 1, 7}, uint8(i))
	}
	f.Add("<tool_call>\n<function=get_weather>\n<parameter=days>\n[1,\n</parameter>", []byte{1}, uint8(2))
	f.Fuzz(func(t *testing.T, in string, cuts []byte, flags uint8) {
		o := Options{StartInReasoning: flags&1 != 0}
		if flags&2 != 0 {
			o.Tools = weatherTools
		}
		if flags&4 != 0 {
			o.Stop = []string{"STOP", "\n\n", "<t"}
		}
		want, wantStopped, evs := parse(o, in)
		checkEvents(t, evs)
		if o.Stop != nil && len(want.ToolCalls) == 0 {
			for _, s := range o.Stop {
				if strings.Contains(want.Content, s) {
					t.Fatalf("content %q holds stop string %q", want.Content, s)
				}
			}
		}
		var pieces []string
		rest := in
		for i := 0; len(rest) > 0; i++ {
			n := len(rest)
			if i < len(cuts) {
				n = min(n, int(cuts[i])%16)
			}
			pieces = append(pieces, rest[:n])
			rest = rest[n:]
		}
		got, stopped, evs := parse(o, pieces...)
		checkEvents(t, evs)
		if d := cmp.Diff(want, got); d != "" || stopped != wantStopped {
			t.Fatalf("pieces %q: Result (-one write +pieces):\n%s\nStopped %v, want %v", pieces, d, stopped, wantStopped)
		}
		for _, tc := range got.ToolCalls {
			if !json.Valid([]byte(tc.Arguments)) {
				t.Fatalf("invalid arguments %q", tc.Arguments)
			}
		}
	})
}
