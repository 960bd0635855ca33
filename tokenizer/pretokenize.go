package tokenizer

import (
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// Split patterns this package matches with a hand-written scanner (SPEC §6).
// Both are stored in tokenizer.json in Oniguruma syntax.
const (
	// patternQwen2 is the Qwen2/Qwen3 pattern: letters \p{L} only, so
	// combining marks fall in the punctuation class.
	patternQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// patternQwen35 is the Qwen3.5/3.6 pattern: combining marks (\p{M})
	// stay inside words.
	patternQwen35 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// splitter cuts normalized text into pre-tokens, calling yield for each in
// order; the pre-tokens cover the text exactly (Split, behavior Isolated).
type splitter interface {
	split(text string, yield func(piece string))
}

// newSplitter picks the scanner for the two known patterns and falls back
// to a regexp2 translation of any other pattern.
func newSplitter(pattern string) (splitter, error) {
	switch pattern {
	case patternQwen2:
		return scanner{marksAreLetters: false}, nil
	case patternQwen35:
		return scanner{marksAreLetters: true}, nil
	}
	re, err := compileRegexp2(pattern)
	if err != nil {
		return nil, err
	}
	return regexSplitter{re}, nil
}

// compileRegexp2 compiles an Oniguruma pattern with regexp2's .NET syntax,
// which agrees with it on the constructs HF files use (\p{..} classes,
// (?i:..), look-ahead) except for rare case foldings: under (?i) Oniguruma
// matches U+017F for 's', regexp2 does not, one reason the Qwen patterns
// use the scanner. A panic inside the third-party parser on a hostile
// pattern is turned into an error so Load never panics.
func compileRegexp2(pattern string) (re *regexp2.Regexp, err error) {
	defer func() {
		if r := recover(); r != nil {
			re, err = nil, fmt.Errorf("pre_tokenizer: Split pattern %q: %v", pattern, r)
		}
	}()
	re, err = regexp2.Compile(pattern, regexp2.None)
	if err != nil {
		return nil, fmt.Errorf("pre_tokenizer: Split pattern %q: %w", pattern, err)
	}
	// A pattern that backtracks catastrophically is cut off rather than
	// hanging Encode; the rest of the text then becomes one pre-token.
	re.MatchTimeout = 10 * time.Second
	return re, nil
}

// regexSplitter is Split(Regex, Isolated) for patterns without a scanner:
// every match is a pre-token and so is every gap between matches. An empty
// match yields nothing but still ends the gap before it, as in HF.
type regexSplitter struct {
	re *regexp2.Regexp
}

// split yields the gaps and matches of a regexp2 search over text.
func (r regexSplitter) split(text string, yield func(string)) {
	if text == "" {
		return
	}
	runes := []rune(text)
	// regexp2 reports rune indices; off maps them to byte offsets.
	off := make([]int, len(runes)+1)
	b := 0
	for i, c := range runes {
		off[i] = b
		b += utf8.RuneLen(c)
	}
	off[len(runes)] = b
	prev := 0
	m, err := r.re.FindRunesMatch(runes)
	for m != nil && err == nil {
		start, end := m.Index, m.Index+m.Length
		if start > prev {
			yield(text[off[prev]:off[start]])
		}
		if end > start {
			yield(text[off[start]:off[end]])
		}
		prev = end
		m, err = r.re.FindNextMatch(m)
	}
	if prev < len(runes) {
		yield(text[off[prev]:])
	}
}

// charClass is the scanner's partition of runes: the pattern's classes
// \p{L}, \p{M}, \p{N}, \s without [\r\n], [\r\n], and everything else.
type charClass uint8

const (
	classOther charClass = iota
	classLetter
	classMark
	classNumber
	classSpace
	classNewline
)

// asciiClass is classify for ASCII, by table.
var asciiClass = func() [utf8.RuneSelf]charClass {
	var t [utf8.RuneSelf]charClass
	for r := rune(0); r < utf8.RuneSelf; r++ {
		t[r] = classifySlow(r)
	}
	return t
}()

// classify returns r's class. \s is Unicode White_Space, as in Oniguruma
// (U+0009–U+000D, U+0085, and the Z separators), which unicode.IsSpace is.
func classify(r rune) charClass {
	if r < utf8.RuneSelf {
		return asciiClass[r]
	}
	return classifySlow(r)
}

// classifySlow classifies any rune through the unicode tables.
func classifySlow(r rune) charClass {
	switch {
	case r == '\r' || r == '\n':
		return classNewline
	case unicode.IsLetter(r):
		return classLetter
	case unicode.IsMark(r):
		return classMark
	case unicode.IsNumber(r):
		return classNumber
	case unicode.IsSpace(r):
		return classSpace
	}
	return classOther
}

// scanner is a hand-written matcher for the Qwen split patterns, equal to
// Oniguruma's leftmost-first, backtracking search for them (see match).
// With marksAreLetters it is patternQwen35, otherwise patternQwen2.
type scanner struct {
	marksAreLetters bool
}

// split yields the pattern's successive matches, which tile the text.
func (s scanner) split(text string, yield func(string)) {
	for i := 0; i < len(text); {
		end := s.match(text, i)
		yield(text[i:end])
		i = end
	}
}

// wordSet is the pattern's letter run class, [\p{L}\p{M}] or \p{L}.
func (s scanner) wordSet() uint8 {
	if s.marksAreLetters {
		return 1<<classLetter | 1<<classMark
	}
	return 1 << classLetter
}

// punctSet is [^\s\p{L}\p{M}\p{N}] (or [^\s\p{L}\p{N}]).
func (s scanner) punctSet() uint8 {
	if s.marksAreLetters {
		return 1 << classOther
	}
	return 1<<classOther | 1<<classMark
}

// runWhile returns the end of the longest run of runes from i whose class
// is in the set (a bit mask of 1<<charClass).
func runWhile(text string, i int, set uint8) int {
	for i < len(text) {
		c := text[i]
		if c < utf8.RuneSelf {
			if set&(1<<asciiClass[c]) == 0 {
				break
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(text[i:])
		if set&(1<<classifySlow(r)) == 0 {
			break
		}
		i += n
	}
	return i
}

// foldContraction is Oniguruma's case folding for the letters of the
// contraction alternatives: ASCII case, plus U+017F LATIN SMALL LETTER LONG
// S, which folds to 's' (checked against HF: "'ſa" splits as "'ſ" + "a").
func foldContraction(r rune) rune {
	switch {
	case r >= 'A' && r <= 'Z':
		return r + 'a' - 'A'
	case r == 'ſ':
		return 's'
	}
	return r
}

// contraction matches (?i:'s|'t|'re|'ve|'m|'ll|'d) after the apostrophe at
// i-1, returning the match end or -1.
func contraction(text string, i int) int {
	if i >= len(text) {
		return -1
	}
	r1, n1 := utf8.DecodeRuneInString(text[i:])
	switch foldContraction(r1) {
	case 's', 't', 'm', 'd':
		return i + n1
	case 'r', 'v', 'l':
		j := i + n1
		if j >= len(text) {
			return -1
		}
		r2, n2 := utf8.DecodeRuneInString(text[j:])
		want := 'e'
		if foldContraction(r1) == 'l' {
			want = 'l'
		}
		if foldContraction(r2) == want {
			return j + n2
		}
	}
	return -1
}

// match returns the end of the pattern's match at i (text[i:] non-empty).
// The alternatives are tried in order, each with the backtracking the
// regex engine would do:
//
//  1. (?i:'s|'t|'re|'ve|'m|'ll|'d)
//  2. [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+ — with one leading non-letter,
//     non-digit, non-newline rune if a letter run follows it, else the run
//  3. \p{N} — one rune
//  4. ' ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*'
//  5. \s*[\r\n]+ — the whitespace run up to and including its last newline
//  6. \s+(?!\S) — the whitespace run, less its last rune when a non-space
//     follows and the run has more than one rune
//  7. \s+ — a lone whitespace rune before a non-space
//
// Every rune is matched by some alternative, so the pre-tokens tile the text.
func (s scanner) match(text string, i int) int {
	r0, n0 := utf8.DecodeRuneInString(text[i:])
	c0 := classify(r0)
	if r0 == '\'' {
		if end := contraction(text, i+n0); end > 0 {
			return end
		}
	}
	word := s.wordSet()
	if c0 != classNewline && c0 != classLetter && c0 != classNumber {
		if end := runWhile(text, i+n0, word); end > i+n0 {
			return end
		}
	}
	if word&(1<<c0) != 0 {
		return runWhile(text, i, word)
	}
	if c0 == classNumber {
		return i + n0
	}
	j := i
	if r0 == ' ' {
		j += n0
	}
	if end := runWhile(text, j, s.punctSet()); end > j {
		return runWhile(text, end, 1<<classNewline)
	}
	if c0 == classSpace || c0 == classNewline {
		end, lastNewline, lastStart := i, -1, i
		for end < len(text) {
			r, n := utf8.DecodeRuneInString(text[end:])
			c := classify(r)
			if c != classSpace && c != classNewline {
				break
			}
			if c == classNewline {
				lastNewline = end + n
			}
			lastStart = end
			end += n
		}
		switch {
		case lastNewline >= 0:
			return lastNewline
		case end == len(text) || lastStart == i:
			return end
		default:
			return lastStart
		}
	}
	return i + n0
}
