package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// fileJSON is the top level of a HuggingFace tokenizer.json. Parts whose
// shape depends on their "type" stay raw until the type is known.
type fileJSON struct {
	Version       *string          `json:"version"`
	Truncation    json.RawMessage  `json:"truncation"`
	Padding       json.RawMessage  `json:"padding"`
	AddedTokens   []addedTokenJSON `json:"added_tokens"`
	Normalizer    json.RawMessage  `json:"normalizer"`
	PreTokenizer  json.RawMessage  `json:"pre_tokenizer"`
	PostProcessor json.RawMessage  `json:"post_processor"`
	Decoder       json.RawMessage  `json:"decoder"`
	Model         json.RawMessage  `json:"model"`
}

// addedTokenJSON is one "added_tokens" entry. Flags are pointers so that a
// missing one takes HF's default rather than false.
type addedTokenJSON struct {
	ID         *int64  `json:"id"`
	Content    *string `json:"content"`
	SingleWord *bool   `json:"single_word"`
	LStrip     *bool   `json:"lstrip"`
	RStrip     *bool   `json:"rstrip"`
	Normalized *bool   `json:"normalized"`
	Special    *bool   `json:"special"`
}

// modelJSON is the "model" object of a BPE tokenizer.
type modelJSON struct {
	Type                    string           `json:"type"`
	Dropout                 *float64         `json:"dropout"`
	UnkToken                *string          `json:"unk_token"`
	ContinuingSubwordPrefix *string          `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string          `json:"end_of_word_suffix"`
	FuseUnk                 bool             `json:"fuse_unk"`
	ByteFallback            bool             `json:"byte_fallback"`
	IgnoreMerges            bool             `json:"ignore_merges"`
	Vocab                   map[string]int64 `json:"vocab"`
	Merges                  json.RawMessage  `json:"merges"`
}

// typed reads just the "type" of a tagged component.
type typed struct {
	Type string `json:"type"`
}

// isNull reports whether a raw component is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return len(t) == 0 || string(t) == "null"
}

// componentType reads the "type" tag of a component object.
func componentType(raw json.RawMessage) (string, error) {
	var t typed
	if err := json.Unmarshal(raw, &t); err != nil {
		return "", err
	}
	if t.Type == "" {
		return "", errors.New(`no "type"`)
	}
	return t.Type, nil
}

// parseNormalizer accepts null, NFC, and Sequences made only of those
// (SPEC §6: the Qwen normalizer is NFC); it reports whether NFC applies.
func parseNormalizer(raw json.RawMessage) (nfc bool, err error) {
	if isNull(raw) {
		return false, nil
	}
	typ, err := componentType(raw)
	if err != nil {
		return false, fmt.Errorf("normalizer: %w", err)
	}
	switch typ {
	case "NFC":
		return true, nil
	case "Sequence":
		var seq struct {
			Normalizers []json.RawMessage `json:"normalizers"`
		}
		if err := json.Unmarshal(raw, &seq); err != nil {
			return false, fmt.Errorf("normalizer: Sequence: %w", err)
		}
		for i, n := range seq.Normalizers {
			if isNull(n) {
				return false, fmt.Errorf("normalizer: Sequence[%d] is null", i)
			}
			sub, err := parseNormalizer(n)
			if err != nil {
				return false, fmt.Errorf("Sequence[%d]: %w", i, err)
			}
			nfc = nfc || sub
		}
		return nfc, nil
	}
	return false, fmt.Errorf("normalizer: type %q is not supported (only NFC, a Sequence of NFC, or null)", typ)
}

// parsePreTokenizer accepts exactly SPEC §6's chain, Sequence[Split(Regex,
// Isolated, invert false), ByteLevel(add_prefix_space false, use_regex
// false)], and returns the split pattern.
func parsePreTokenizer(raw json.RawMessage) (string, error) {
	const want = "pre_tokenizer: want Sequence[Split(Regex, Isolated), ByteLevel(add_prefix_space=false, use_regex=false)]"
	if isNull(raw) {
		return "", fmt.Errorf("%s, got null", want)
	}
	typ, err := componentType(raw)
	if err != nil {
		return "", fmt.Errorf("pre_tokenizer: %w", err)
	}
	if typ != "Sequence" {
		return "", fmt.Errorf("%s, got type %q", want, typ)
	}
	var seq struct {
		PreTokenizers []json.RawMessage `json:"pretokenizers"`
	}
	if err := json.Unmarshal(raw, &seq); err != nil {
		return "", fmt.Errorf("pre_tokenizer: %w", err)
	}
	if len(seq.PreTokenizers) != 2 {
		return "", fmt.Errorf("%s, got %d steps", want, len(seq.PreTokenizers))
	}
	var split struct {
		Type    string `json:"type"`
		Pattern struct {
			Regex  *string `json:"Regex"`
			String *string `json:"String"`
		} `json:"pattern"`
		Behavior string `json:"behavior"`
		Invert   bool   `json:"invert"`
	}
	if err := json.Unmarshal(seq.PreTokenizers[0], &split); err != nil {
		return "", fmt.Errorf("pre_tokenizer: step 0: %w", err)
	}
	switch {
	case split.Type != "Split":
		return "", fmt.Errorf("%s, step 0 is %q", want, split.Type)
	case split.Pattern.Regex == nil:
		return "", errors.New("pre_tokenizer: Split: only a Regex pattern is supported")
	case split.Behavior != "Isolated":
		return "", fmt.Errorf("pre_tokenizer: Split: behavior %q is not supported (only Isolated)", split.Behavior)
	case split.Invert:
		return "", errors.New("pre_tokenizer: Split: invert=true is not supported")
	}
	// HF's ByteLevel defaults both flags to true, so they must be present.
	var bl struct {
		Type           string `json:"type"`
		AddPrefixSpace *bool  `json:"add_prefix_space"`
		UseRegex       *bool  `json:"use_regex"`
	}
	if err := json.Unmarshal(seq.PreTokenizers[1], &bl); err != nil {
		return "", fmt.Errorf("pre_tokenizer: step 1: %w", err)
	}
	switch {
	case bl.Type != "ByteLevel":
		return "", fmt.Errorf("%s, step 1 is %q", want, bl.Type)
	case bl.AddPrefixSpace == nil || *bl.AddPrefixSpace:
		return "", errors.New("pre_tokenizer: ByteLevel: add_prefix_space must be false")
	case bl.UseRegex == nil || *bl.UseRegex:
		return "", errors.New("pre_tokenizer: ByteLevel: use_regex must be false")
	}
	return *split.Pattern.Regex, nil
}

// checkPostProcessor accepts null and ByteLevel, which add no tokens (SPEC
// §6: no BOS); anything else would change encode(add_special_tokens=True).
func checkPostProcessor(raw json.RawMessage) error {
	if isNull(raw) {
		return nil
	}
	typ, err := componentType(raw)
	if err != nil {
		return fmt.Errorf("post_processor: %w", err)
	}
	if typ != "ByteLevel" {
		return fmt.Errorf("post_processor: type %q is not supported (only ByteLevel or null)", typ)
	}
	return nil
}

// checkDecoder accepts the ByteLevel decoder only (SPEC §6).
func checkDecoder(raw json.RawMessage) error {
	if isNull(raw) {
		return errors.New("decoder: null is not supported (want ByteLevel)")
	}
	typ, err := componentType(raw)
	if err != nil {
		return fmt.Errorf("decoder: %w", err)
	}
	if typ != "ByteLevel" {
		return fmt.Errorf("decoder: type %q is not supported (only ByteLevel)", typ)
	}
	return nil
}

// parseMerges reads merges in either of HF's layouts: a list of pairs
// [["a","b"], …] or the legacy list of "a b" strings, where lines starting
// with "#version" are skipped and any other line must split on ' ' into
// exactly two parts. The list index is the merge's rank.
func parseMerges(raw json.RawMessage) ([][2]string, error) {
	if isNull(raw) {
		return nil, errors.New("model.merges: missing")
	}
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || t[0] != '[' {
		return nil, errors.New("model.merges: not a list")
	}
	// The first entry's kind decides the layout; a mixed list then fails to
	// decode as either.
	legacy := bytes.HasPrefix(bytes.TrimSpace(t[1:]), []byte{'"'})
	if legacy {
		var lines []string
		if err := json.Unmarshal(t, &lines); err != nil {
			return nil, fmt.Errorf("model.merges: %w", err)
		}
		out := make([][2]string, 0, len(lines))
		for i, s := range lines {
			if strings.HasPrefix(s, "#version") {
				continue
			}
			a, b, ok := strings.Cut(s, " ")
			if !ok || strings.Contains(b, " ") {
				return nil, fmt.Errorf("model.merges[%d]: %q is not two tokens separated by one space", i, s)
			}
			out = append(out, [2]string{a, b})
		}
		return out, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(t, &pairs); err != nil {
		return nil, fmt.Errorf("model.merges: %w", err)
	}
	out := make([][2]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("model.merges[%d]: want a pair, got %d strings", i, len(p))
		}
		out[i] = [2]string{p[0], p[1]}
	}
	return out, nil
}
