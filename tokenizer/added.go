package tokenizer

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// addedToken is one entry of tokenizer.json's "added_tokens" (SPEC §6):
// matched whole in the text before the model sees it.
type addedToken struct {
	id      int32
	content string
	// special tokens are dropped by Decode's skipSpecial.
	special bool
	// singleWord: only match when no word character touches either end.
	singleWord bool
	// lstrip/rstrip: the match swallows whitespace on that side.
	lstrip, rstrip bool
	// normalized: match in the normalized text rather than the raw text.
	normalized bool
}

// addedMatcher finds added tokens in a text the way HF's AddedVocabulary
// does: an Aho-Corasick search for leftmost-longest, non-overlapping matches,
// then the single_word / lstrip / rstrip rules applied to each match.
type addedMatcher struct {
	toks []*addedToken
	pats []string // what each token matches (content, or normalized content)
	// byFirst lists, per first byte, the indices of the patterns starting
	// with it, longest first (ties in the order HF builds its automaton).
	byFirst [256][]int
	// onlyFirst is the one first byte all patterns share, or -1; then the
	// search can jump between its occurrences.
	onlyFirst int
}

// newAddedMatcher builds a matcher for toks, each matched as pats[i]; nil
// when there is nothing to match.
func newAddedMatcher(toks []*addedToken, pats []string) *addedMatcher {
	if len(toks) == 0 {
		return nil
	}
	m := &addedMatcher{toks: toks, pats: pats, onlyFirst: int(pats[0][0])}
	for i, p := range pats {
		m.byFirst[p[0]] = append(m.byFirst[p[0]], i)
		if int(p[0]) != m.onlyFirst {
			m.onlyFirst = -1
		}
	}
	for b := range m.byFirst {
		l := m.byFirst[b]
		sort.SliceStable(l, func(x, y int) bool { return len(pats[l[x]]) > len(pats[l[y]]) })
	}
	return m
}

// find returns the leftmost-longest match at or after i: the pattern index
// and its start, or -1.
func (m *addedMatcher) find(s string, i int) (pat, start int) {
	for ; i < len(s); i++ {
		if m.onlyFirst >= 0 {
			k := strings.IndexByte(s[i:], byte(m.onlyFirst))
			if k < 0 {
				break
			}
			i += k
		}
		for _, p := range m.byFirst[s[i]] {
			if len(s)-i >= len(m.pats[p]) && s[i:i+len(m.pats[p])] == m.pats[p] {
				return p, i
			}
		}
	}
	return -1, -1
}

// split cuts s into text and added-token pieces, in order, calling yield
// with tok == nil for text. It follows HF's find_matches: a single_word
// match touching a word character is dropped (the search still resumes
// after it); lstrip pulls the start back over whitespace, not past the
// previous piece; rstrip pushes the end over whitespace.
func (m *addedMatcher) split(s string, yield func(text string, tok *addedToken)) {
	startOffset := 0
	for i := 0; i < len(s); {
		p, start := m.find(s, i)
		if p < 0 {
			break
		}
		stop := start + len(m.pats[p])
		i = stop
		tok := m.toks[p]
		if tok.singleWord && (endsWithWord(s[:start]) || startsWithWord(s[stop:])) {
			continue
		}
		if tok.lstrip {
			start = max(trailingSpaceStart(s[:start]), startOffset)
		}
		if tok.rstrip {
			stop += leadingSpaceLen(s[stop:])
		}
		if startOffset < start {
			yield(s[startOffset:start], nil)
		}
		yield("", tok)
		startOffset = stop
	}
	if startOffset < len(s) {
		yield(s[startOffset:], nil)
	}
}

// isWordRune is the Unicode \w of Rust's regex crate, which HF uses for
// single_word: Alphabetic, marks, decimal digits, connector punctuation
// and join controls.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) ||
		unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r) ||
		unicode.Is(unicode.Pc, r) || unicode.Is(unicode.Join_Control, r)
}

// endsWithWord reports whether s's last rune is a word rune.
func endsWithWord(s string) bool {
	r, n := utf8.DecodeLastRuneInString(s)
	return n > 0 && isWordRune(r)
}

// startsWithWord reports whether s's first rune is a word rune.
func startsWithWord(s string) bool {
	r, n := utf8.DecodeRuneInString(s)
	return n > 0 && isWordRune(r)
}

// trailingSpaceStart is where s's trailing whitespace begins.
func trailingSpaceStart(s string) int {
	for len(s) > 0 {
		r, n := utf8.DecodeLastRuneInString(s)
		if !unicode.IsSpace(r) {
			break
		}
		s = s[:len(s)-n]
	}
	return len(s)
}

// leadingSpaceLen is the byte length of s's leading whitespace.
func leadingSpaceLen(s string) int {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsSpace(r) {
			break
		}
		i += n
	}
	return i
}
