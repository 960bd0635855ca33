package synth

import (
	_ "embed"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unicode"
)

// corpus is the text the tokenizer's merges are learned from: English
// prose, chat transcripts in the model's own format, code, numbers and a
// little text in other scripts, so that every kind of input meets merges.
//
//go:embed corpus.txt
var corpus string

// pretokenizePattern is the Qwen3.5/3.6 split regex (Oniguruma syntax, as
// tokenizer.json stores it): the Qwen2 pattern with combining marks (\p{M})
// kept inside words, single digits.
const pretokenizePattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// regularVocab is the number of ordinary (byte-level BPE) tokens: 256 byte
// symbols plus learned merges. The added tokens follow at regularVocab….
const regularVocab = 900

// addedToken is one entry of the added-token list: matched atomically in raw
// text before normalisation; special ones are dropped by skip_special_tokens.
type addedToken struct {
	content string
	special bool
}

// addedTokens mirrors the real tokenizer's added tokens, in the same order
// and with the same special flags, so ids relate the same way (<|im_start|>
// = <|endoftext|> + 1, …).
var addedTokens = []addedToken{
	{"<|endoftext|>", true}, {"<|im_start|>", true}, {"<|im_end|>", true},
	{"<|object_ref_start|>", true}, {"<|object_ref_end|>", true},
	{"<|box_start|>", true}, {"<|box_end|>", true},
	{"<|quad_start|>", true}, {"<|quad_end|>", true},
	{"<|vision_start|>", true}, {"<|vision_end|>", true}, {"<|vision_pad|>", true},
	{"<|image_pad|>", true}, {"<|video_pad|>", true},
	{"<tool_call>", false}, {"</tool_call>", false},
	{"<|fim_prefix|>", false}, {"<|fim_middle|>", false}, {"<|fim_suffix|>", false}, {"<|fim_pad|>", false},
	{"<|repo_name|>", false}, {"<|file_sep|>", false},
	{"<tool_response>", false}, {"</tool_response>", false},
	{"<think>", false}, {"</think>", false},
	{"<|audio_start|>", true}, {"<|audio_end|>", true},
	{"<tts_pad>", true}, {"<tts_text_bos>", true}, {"<tts_text_eod>", true}, {"<tts_text_bos_single>", true},
	{"<|audio_pad|>", true},
}

// tokenizer is the synthetic byte-level BPE tokenizer: vocab[i] is the
// byte-level string of regular token i, merges in rank order, then the
// added tokens at ids len(vocab)….
type tokenizer struct {
	vocab  []string
	merges [][2]string
	ids    map[string]int // regular and added tokens
}

// id returns a token's id; the callers only ask for tokens that exist.
func (t *tokenizer) id(content string) int { return t.ids[content] }

// size is the number of ids the tokenizer uses (regular + added).
func (t *tokenizer) size() int { return len(t.vocab) + len(addedTokens) }

var (
	tokOnce sync.Once
	tokVal  *tokenizer
	tokErr  error
)

// theTokenizer trains the tokenizer once per process: training is
// deterministic, so every Write and ConfigJSON sees the same ids.
func theTokenizer() (*tokenizer, error) {
	tokOnce.Do(func() { tokVal, tokErr = trainTokenizer(corpus, regularVocab) })
	return tokVal, tokErr
}

// byteSymbols is GPT-2's bytes_to_unicode: byte b is written as rune
// byteSymbols[b] so every byte string becomes printable text.
var byteSymbols = func() [256]rune {
	var m [256]rune
	printable := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	n := 0
	for b := 0; b < 256; b++ {
		if printable(b) {
			m[b] = rune(b)
		} else {
			m[b] = rune(256 + n)
			n++
		}
	}
	return m
}()

// byteLevel maps raw bytes to their byte-level string.
func byteLevel(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteRune(byteSymbols[s[i]])
	}
	return b.String()
}

// trainTokenizer learns byte-level BPE merges over text until the regular
// vocabulary has size entries. Ties between equally frequent pairs go to the
// lowest pair of ids, so the result depends only on the text.
func trainTokenizer(text string, size int) (*tokenizer, error) {
	t := &tokenizer{ids: map[string]int{}}
	// Ids 0…255: the byte symbols in code point order, as in GPT-2 and Qwen
	// ("!" = 0, "\n" = 198, " " = 220).
	syms := make([]rune, 256)
	copy(syms, byteSymbols[:])
	slices.Sort(syms)
	for _, r := range syms {
		t.ids[string(r)] = len(t.vocab)
		t.vocab = append(t.vocab, string(r))
	}

	// Words: pre-tokens of the text with added tokens cut out (they never
	// reach the model's BPE), as symbol-id sequences with counts.
	counts := map[string]int{}
	for _, piece := range splitAdded(text) {
		for _, w := range pretokenize(piece) {
			counts[w]++
		}
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	type word struct {
		syms  []int
		count int
	}
	words := make([]word, len(keys))
	for i, k := range keys {
		s := make([]int, 0, len(k))
		for _, r := range byteLevel(k) {
			s = append(s, t.ids[string(r)])
		}
		words[i] = word{s, counts[k]}
	}

	for len(t.vocab) < size {
		pairs := map[[2]int]int{}
		for _, w := range words {
			for j := 0; j+1 < len(w.syms); j++ {
				pairs[[2]int{w.syms[j], w.syms[j+1]}] += w.count
			}
		}
		best, bestN := [2]int{}, 0
		for p, n := range pairs {
			if n > bestN || (n == bestN && (p[0] < best[0] || (p[0] == best[0] && p[1] < best[1]))) {
				best, bestN = p, n
			}
		}
		if bestN == 0 {
			return nil, fmt.Errorf("synth: tokenizer corpus too small: %d tokens, want %d", len(t.vocab), size)
		}
		a, b := t.vocab[best[0]], t.vocab[best[1]]
		t.merges = append(t.merges, [2]string{a, b})
		merged, ok := t.ids[a+b]
		if !ok {
			merged = len(t.vocab)
			t.ids[a+b] = merged
			t.vocab = append(t.vocab, a+b)
		}
		for i := range words {
			s := words[i].syms
			out := s[:0]
			for j := 0; j < len(s); j++ {
				if j+1 < len(s) && s[j] == best[0] && s[j+1] == best[1] {
					out = append(out, merged)
					j++
				} else {
					out = append(out, s[j])
				}
			}
			words[i].syms = out
		}
	}
	for i, a := range addedTokens {
		t.ids[a.content] = len(t.vocab) + i
	}
	return t, nil
}

// splitAdded cuts every added token out of text, leaving the pieces between
// them, as the tokenizer does before normalisation and pre-tokenisation.
func splitAdded(text string) []string {
	pieces := []string{text}
	for _, a := range addedTokens {
		var next []string
		for _, p := range pieces {
			for _, q := range strings.Split(p, a.content) {
				if q != "" {
					next = append(next, q)
				}
			}
		}
		pieces = next
	}
	return pieces
}

// pretokenize splits text the way pretokenizePattern does (leftmost
// alternative first, with the backtracking the regex engine would do), so
// merges are learned within the same pieces the tokenizer will see.
func pretokenize(text string) []string {
	rs := []rune(text)
	var out []string
	for i := 0; i < len(rs); {
		n := matchPiece(rs, i)
		out = append(out, string(rs[i:i+n]))
		i += n
	}
	return out
}

// isLetterOrMark is the pattern's [\p{L}\p{M}] class.
func isLetterOrMark(r rune) bool { return unicode.IsLetter(r) || unicode.IsMark(r) }

// isNewline is the pattern's [\r\n] class.
func isNewline(r rune) bool { return r == '\r' || r == '\n' }

// matchPiece returns the length (in runes, ≥ 1) of the pattern's match at rs[i:].
func matchPiece(rs []rune, i int) int {
	n := len(rs)
	run := func(j int, f func(rune) bool) int {
		k := j
		for k < n && f(rs[k]) {
			k++
		}
		return k - j
	}
	lower := func(r rune) rune {
		if r >= 'A' && r <= 'Z' {
			return r + 'a' - 'A'
		}
		return r
	}
	c := rs[i]
	// (?i:'s|'t|'re|'ve|'m|'ll|'d)
	if c == '\'' && i+1 < n {
		switch lower(rs[i+1]) {
		case 's', 't', 'm', 'd':
			return 2
		}
		if i+2 < n {
			switch string([]rune{lower(rs[i+1]), lower(rs[i+2])}) {
			case "re", "ve", "ll":
				return 3
			}
		}
	}
	// [^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+
	if !isNewline(c) && !unicode.IsLetter(c) && !unicode.IsNumber(c) {
		if k := run(i+1, isLetterOrMark); k > 0 {
			return 1 + k
		}
	}
	if k := run(i, isLetterOrMark); k > 0 {
		return k
	}
	// \p{N}
	if unicode.IsNumber(c) {
		return 1
	}
	// ' ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*'
	other := func(r rune) bool {
		return !unicode.IsSpace(r) && !isLetterOrMark(r) && !unicode.IsNumber(r)
	}
	j := i
	if c == ' ' {
		j++
	}
	if k := run(j, other); k > 0 {
		j += k
		return j + run(j, isNewline) - i
	}
	w := run(i, unicode.IsSpace)
	if w > 0 {
		// \s*[\r\n]+ : up to the last newline of the whitespace run.
		for p := i + w - 1; p >= i; p-- {
			if isNewline(rs[p]) {
				return p + 1 - i
			}
		}
		// \s+(?!\S) : the run, less its last space when text follows.
		if i+w == n {
			return w
		}
		if w > 1 {
			return w - 1
		}
		// \s+
		return w
	}
	return 1
}

// tokenizerJSON is tokenizer.json in the Hugging Face tokenizers format,
// laid out as Qwen's: byte-level BPE, NFC, the Qwen3.5 split regex.
func (t *tokenizer) tokenizerJSON() ([]byte, error) {
	added := make([]any, len(addedTokens))
	for i, a := range addedTokens {
		added[i] = object{
			{"id", len(t.vocab) + i}, {"content", a.content},
			{"single_word", false}, {"lstrip", false}, {"rstrip", false},
			{"normalized", false}, {"special", a.special},
		}
	}
	byteLevelOpts := func() object {
		return object{{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}
	}
	vocab := make(object, len(t.vocab))
	for i, s := range t.vocab {
		vocab[i] = member{s, i}
	}
	doc := object{
		{"version", "1.0"},
		{"truncation", nil},
		{"padding", nil},
		{"added_tokens", added},
		{"normalizer", object{{"type", "NFC"}}},
		{"pre_tokenizer", object{
			{"type", "Sequence"},
			{"pretokenizers", []any{
				object{
					{"type", "Split"},
					{"pattern", object{{"Regex", pretokenizePattern}}},
					{"behavior", "Isolated"},
					{"invert", false},
				},
				byteLevelOpts(),
			}},
		}},
		{"post_processor", byteLevelOpts()},
		{"decoder", byteLevelOpts()},
		{"model", object{
			{"type", "BPE"},
			{"dropout", nil},
			{"unk_token", nil},
			{"continuing_subword_prefix", ""},
			{"end_of_word_suffix", ""},
			{"fuse_unk", false},
			{"byte_fallback", false},
			{"ignore_merges", false},
			{"vocab", vocab},
			{"merges", t.merges},
		}},
	}
	return prettyJSON(doc)
}

// tokenizerConfigJSON is tokenizer_config.json as transformers writes it
// for Qwen (sorted keys): the added tokens by id, eos <|im_end|>, pad
// <|endoftext|>, no bos.
func (t *tokenizer) tokenizerConfigJSON() ([]byte, error) {
	decoder := map[string]any{}
	var extra []string
	for i, a := range addedTokens {
		decoder[strconv.Itoa(len(t.vocab)+i)] = map[string]any{
			"content": a.content, "lstrip": false, "normalized": false,
			"rstrip": false, "single_word": false, "special": a.special,
		}
		if a.special && a.content != "<|endoftext|>" {
			extra = append(extra, a.content)
		}
	}
	return prettyJSON(map[string]any{
		"add_bos_token":                false,
		"add_prefix_space":             false,
		"added_tokens_decoder":         decoder,
		"additional_special_tokens":    extra,
		"bos_token":                    nil,
		"clean_up_tokenization_spaces": false,
		"eos_token":                    "<|im_end|>",
		"errors":                       "replace",
		"model_max_length":             262144,
		"pad_token":                    "<|endoftext|>",
		"split_special_tokens":         false,
		"tokenizer_class":              "Qwen2Tokenizer",
		"unk_token":                    nil,
	})
}

// generationConfigJSON is generation_config.json: Qwen3.6's sampling
// defaults, stopping on <|im_end|> and <|endoftext|>.
func (t *tokenizer) generationConfigJSON() ([]byte, error) {
	eot := t.id("<|endoftext|>")
	return prettyJSON(map[string]any{
		"bos_token_id": eot,
		"do_sample":    true,
		"eos_token_id": []int{t.id("<|im_end|>"), eot},
		"pad_token_id": eot,
		"temperature":  num("0.6"),
		"top_k":        20,
		"top_p":        num("0.95"),
	})
}
