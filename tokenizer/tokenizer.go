// Package tokenizer encodes and decodes text with a HuggingFace
// tokenizer.json of the Qwen family (SPEC §6): byte-level BPE over NFC text,
// pre-tokenized by the file's Split regex, with added tokens matched whole in
// the raw text first. Encode gives the ids that HF tokenizers'
// encode(text, add_special_tokens=True) gives (no BOS); Decode and the
// incremental Decoder give HF's decode, invalid UTF-8 shown as U+FFFD.
//
// A Tokenizer is safe for concurrent use. Files using features outside SPEC
// §6 (other models, normalizers, pre-tokenizers, post-processors,
// truncation, padding, dropout, byte fallback) are rejected by Load rather
// than encoded differently from HF.
//
// The two Qwen split patterns run on a hand-written scanner, tested equal to
// regexp2 on the same pattern and, end to end, to HF on a corpus of many
// scripts; any other pattern runs on regexp2. Character classes and NFC come
// from Go's Unicode 15 tables, so text using characters assigned after the
// Unicode version of HF's own tables could split or normalize differently.
package tokenizer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"golang.org/x/text/unicode/norm"
)

// Tokenizer is a loaded tokenizer.json.
type Tokenizer struct {
	model *bpeModel
	// vocab is the model's vocabulary; added the added tokens by content.
	vocab map[string]int32
	added map[string]*addedToken
	// flags holds, per id, whether the id exists and whether it is special.
	flags []uint8
	// tokBytes[tokOff[id]:tokOff[id+1]] is what id decodes to.
	tokBytes []byte
	tokOff   []uint32
	nfc      bool
	// raw matches the added tokens with normalized=false in the raw text;
	// normed the others in normalized text. Either may be nil.
	raw, normed *addedMatcher
	split       splitter
}

const (
	flagKnown = 1 << iota
	flagSpecial
	flagAdded
)

// Load reads a HuggingFace tokenizer.json, so the engine can use the
// model's own vocabulary from its directory.
func Load(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := parse(data)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", path, err)
	}
	return t, nil
}

// LoadDir loads dir/tokenizer.json, the file's place in a model directory.
func LoadDir(dir string) (*Tokenizer, error) {
	return Load(filepath.Join(dir, "tokenizer.json"))
}

// parse builds a Tokenizer from tokenizer.json bytes, checking every part
// against what this package implements.
func parse(data []byte) (*Tokenizer, error) {
	var f fileJSON
	if err := json.Unmarshal(data, &f); err != nil {
		var syntax *json.SyntaxError
		if errors.As(err, &syntax) || errors.Is(err, io.ErrUnexpectedEOF) || len(bytes.TrimSpace(data)) == 0 {
			return nil, fmt.Errorf("invalid JSON: %w", err)
		}
		return nil, fmt.Errorf("not a tokenizer.json object: %w", err)
	}
	if f.Version != nil && *f.Version != "1.0" {
		return nil, fmt.Errorf("version %q is not supported (want 1.0)", *f.Version)
	}
	if !isNull(f.Truncation) {
		return nil, errors.New("truncation is set; encoding must not truncate")
	}
	if !isNull(f.Padding) {
		return nil, errors.New("padding is set; encoding must not pad")
	}
	t := &Tokenizer{}
	var err error
	if t.nfc, err = parseNormalizer(f.Normalizer); err != nil {
		return nil, err
	}
	pattern, err := parsePreTokenizer(f.PreTokenizer)
	if err != nil {
		return nil, err
	}
	if t.split, err = newSplitter(pattern); err != nil {
		return nil, err
	}
	if err := checkPostProcessor(f.PostProcessor); err != nil {
		return nil, err
	}
	if err := checkDecoder(f.Decoder); err != nil {
		return nil, err
	}
	if isNull(f.Model) {
		return nil, errors.New("model: missing")
	}
	var mj modelJSON
	if err := json.Unmarshal(f.Model, &mj); err != nil {
		// Other model types lay their fields out differently; name the type.
		if typ, terr := componentType(f.Model); terr == nil && typ != "BPE" {
			return nil, fmt.Errorf("model: type %q is not supported (only BPE)", typ)
		}
		return nil, fmt.Errorf("model: %w", err)
	}
	if err := t.buildModel(&mj); err != nil {
		return nil, err
	}
	if err := t.buildAdded(f.AddedTokens); err != nil {
		return nil, err
	}
	if err := t.buildTable(); err != nil {
		return nil, err
	}
	return t, nil
}

// buildModel checks the BPE options and builds the merge table.
func (t *Tokenizer) buildModel(mj *modelJSON) error {
	switch {
	case mj.Type == "":
		return errors.New(`model: missing "type" (want BPE)`)
	case mj.Type != "BPE":
		return fmt.Errorf("model: type %q is not supported (only BPE)", mj.Type)
	case mj.Dropout != nil:
		return errors.New("model: dropout is set; only deterministic BPE (dropout null) is supported")
	case mj.ContinuingSubwordPrefix != nil && *mj.ContinuingSubwordPrefix != "":
		return fmt.Errorf("model: continuing_subword_prefix %q is not supported", *mj.ContinuingSubwordPrefix)
	case mj.EndOfWordSuffix != nil && *mj.EndOfWordSuffix != "":
		return fmt.Errorf("model: end_of_word_suffix %q is not supported", *mj.EndOfWordSuffix)
	case mj.ByteFallback:
		return errors.New("model: byte_fallback is not supported")
	case mj.Vocab == nil:
		return errors.New("model.vocab: missing")
	}
	t.vocab = make(map[string]int32, len(mj.Vocab))
	for s, id := range mj.Vocab {
		if id < 0 || id > math.MaxInt32 {
			return fmt.Errorf("model.vocab: %q has id %d, outside 0…%d", s, id, math.MaxInt32)
		}
		t.vocab[s] = int32(id)
	}
	m := &bpeModel{unkID: -1, fuseUnk: mj.FuseUnk, ignoreMerges: mj.IgnoreMerges, vocab: t.vocab, cache: newWordCache()}
	if mj.UnkToken != nil {
		id, ok := t.vocab[*mj.UnkToken]
		if !ok {
			return fmt.Errorf("model: unk_token %q is not in the vocabulary", *mj.UnkToken)
		}
		m.unkID = id
	}
	for b := range m.byteID {
		id, ok := t.vocab[string(byteSymbol[b])]
		if !ok {
			id = -1
		}
		m.byteID[b] = id
	}
	merges, err := parseMerges(mj.Merges)
	if err != nil {
		return err
	}
	m.merges = make(map[uint64]uint64, len(merges))
	for rank, p := range merges {
		a, ok := t.vocab[p[0]]
		if !ok {
			return fmt.Errorf("model.merges: merge %d (%q %q): %q is not in the vocabulary", rank, p[0], p[1], p[0])
		}
		b, ok := t.vocab[p[1]]
		if !ok {
			return fmt.Errorf("model.merges: merge %d (%q %q): %q is not in the vocabulary", rank, p[0], p[1], p[1])
		}
		merged, ok := t.vocab[p[0]+p[1]]
		if !ok {
			return fmt.Errorf("model.merges: merge %d (%q %q): result %q is not in the vocabulary", rank, p[0], p[1], p[0]+p[1])
		}
		// A repeated pair keeps its last rank, as HF's map does.
		m.merges[pairKey(a, b)] = uint64(rank)<<32 | uint64(uint32(merged))
	}
	t.model = m
	return nil
}

// buildAdded registers the added tokens. Their ids must be the ones HF
// assigns when it loads the file (the vocabulary id of a content already in
// the vocabulary, otherwise the next free id); HF only warns on a mismatch
// and its versions differ on the outcome, so such a file is rejected.
func (t *Tokenizer) buildAdded(list []addedTokenJSON) error {
	t.added = make(map[string]*addedToken, len(list))
	vocabSize := int64(len(t.vocab))
	maxAdded := int64(-1)
	var specials, classic []*addedToken
	for i, a := range list {
		if a.Content == nil || a.ID == nil {
			return fmt.Errorf("added_tokens[%d]: missing content or id", i)
		}
		c := *a.Content
		if c == "" {
			return fmt.Errorf("added_tokens[%d]: empty content", i)
		}
		if _, dup := t.added[c]; dup {
			return fmt.Errorf("added_tokens[%d]: %q is listed twice", i, c)
		}
		var want int64
		if id, ok := t.vocab[c]; ok {
			want = int64(id)
		} else if maxAdded < 0 {
			want = vocabSize
		} else if maxAdded >= vocabSize || vocabSize == 0 {
			want = maxAdded + 1
		} else {
			want = vocabSize
		}
		if *a.ID != want {
			return fmt.Errorf("added_tokens[%d]: %q has id %d, but HuggingFace would give it id %d", i, c, *a.ID, want)
		}
		if want > math.MaxInt32 {
			return fmt.Errorf("added_tokens[%d]: id %d is too large", i, want)
		}
		maxAdded = max(maxAdded, want)
		flag := func(p *bool, def bool) bool {
			if p == nil {
				return def
			}
			return *p
		}
		tok := &addedToken{
			id:         int32(want),
			content:    c,
			special:    flag(a.Special, false),
			singleWord: flag(a.SingleWord, false),
			lstrip:     flag(a.LStrip, false),
			rstrip:     flag(a.RStrip, false),
		}
		tok.normalized = flag(a.Normalized, !tok.special)
		t.added[c] = tok
		if tok.special {
			specials = append(specials, tok)
		} else {
			classic = append(classic, tok)
		}
	}
	// HF builds its matchers from the special tokens, then the others.
	var raw, normed []*addedToken
	var rawPats, normedPats []string
	for _, tok := range append(specials, classic...) {
		if tok.normalized {
			// HF versions differ on what such a token's content becomes
			// (kept, or normalized too), which changes how it decodes.
			if t.nfc && !norm.NFC.IsNormalString(tok.content) {
				return fmt.Errorf("added token %q: normalized=true with content that is not in NFC is not supported", tok.content)
			}
			normed, normedPats = append(normed, tok), append(normedPats, tok.content)
		} else {
			raw, rawPats = append(raw, tok), append(rawPats, tok.content)
		}
	}
	t.raw = newAddedMatcher(raw, rawPats)
	t.normed = newAddedMatcher(normed, normedPats)
	return nil
}

// buildTable lays out every id's flags and decoded bytes. Ids may have
// gaps, but a file whose ids leave most of the range unused is rejected so
// a hostile file cannot force a huge table.
func (t *Tokenizer) buildTable() error {
	maxID := int32(-1)
	for _, id := range t.vocab {
		maxID = max(maxID, id)
	}
	for _, a := range t.added {
		maxID = max(maxID, a.id)
	}
	entries := len(t.vocab) + len(t.added)
	if int64(maxID) >= 2*int64(entries)+1024 {
		return fmt.Errorf("ids are too sparse: largest id %d for %d tokens", maxID, entries)
	}
	n := int(maxID) + 1
	strs := make([]string, n)
	t.flags = make([]uint8, n)
	for s, id := range t.vocab {
		if t.flags[id] != 0 {
			return fmt.Errorf("model.vocab: id %d is used by both %q and %q", id, strs[id], s)
		}
		strs[id] = s
		t.flags[id] = flagKnown
	}
	for _, a := range t.added {
		// Where an added token shares an id with a vocabulary entry it
		// wins, as in HF's id_to_token.
		strs[a.id] = a.content
		t.flags[a.id] = flagKnown | flagAdded
		if a.special {
			t.flags[a.id] |= flagSpecial
		}
	}
	t.tokOff = make([]uint32, n+1)
	for id, s := range strs {
		t.tokBytes = append(t.tokBytes, tokenStringBytes(s)...)
		if len(t.tokBytes) > math.MaxUint32 {
			return errors.New("vocabulary too large")
		}
		t.tokOff[id+1] = uint32(len(t.tokBytes))
	}
	return nil
}

// Encode returns the ids of text as HF's encode(text,
// add_special_tokens=True) does for these tokenizers: added tokens cut out
// of the raw text, the rest NFC-normalized, split into pre-tokens and
// BPE-merged. Invalid UTF-8 in text is first replaced by U+FFFD.
func (t *Tokenizer) Encode(text string) []int32 {
	text = lossyString(text)
	out := make([]int32, 0, len(text)/3+1)
	normalized := func(seg string) {
		if t.nfc {
			seg = norm.NFC.String(seg) // seg itself when already NFC
		}
		if t.normed == nil {
			out = t.encodeNormalized(seg, out)
			return
		}
		t.normed.split(seg, func(piece string, tok *addedToken) {
			if tok != nil {
				out = append(out, tok.id)
			} else {
				out = t.encodeNormalized(piece, out)
			}
		})
	}
	if t.raw == nil {
		normalized(text)
		return out
	}
	t.raw.split(text, func(seg string, tok *addedToken) {
		if tok != nil {
			out = append(out, tok.id)
		} else {
			normalized(seg)
		}
	})
	return out
}

// encodeNormalized pre-tokenizes normalized text and appends each
// pre-token's BPE ids.
func (t *Tokenizer) encodeNormalized(text string, out []int32) []int32 {
	t.split.split(text, func(piece string) {
		out = t.model.encodeWord(piece, out)
	})
	return out
}

// Size is one past the largest id, the logits width the vocabulary needs.
func (t *Tokenizer) Size() int { return len(t.flags) }

// ID looks a token up by its content (an added token) or its vocabulary
// string, so callers can find ids such as <|im_end|> by name.
func (t *Tokenizer) ID(token string) (int32, bool) {
	if a, ok := t.added[token]; ok {
		return a.id, true
	}
	id, ok := t.vocab[token]
	return id, ok
}

// Special reports whether id is an added token marked special, the ones
// Decode drops when asked to skip special tokens.
func (t *Tokenizer) Special(id int32) bool {
	return id >= 0 && int(id) < len(t.flags) && t.flags[id]&flagSpecial != 0
}

// Added reports whether id is one of the tokenizer's added tokens, special
// or not: for these checkpoints the control tokens (<|im_end|>, <think>,
// <tool_call>, <|fim_pad|>…), which stand for markup rather than text.
func (t *Tokenizer) Added(id int32) bool {
	return id >= 0 && int(id) < len(t.flags) && t.flags[id]&flagAdded != 0
}

// known reports whether id names a token.
// Known reports whether id is a token of the vocabulary (Decode accepts
// it): ids below Size may still be holes between the added tokens.
func (t *Tokenizer) Known(id int32) bool { return t.known(id) }

func (t *Tokenizer) known(id int32) bool {
	return id >= 0 && int(id) < len(t.flags) && t.flags[id]&flagKnown != 0
}

// TokenBytes returns the raw bytes id decodes to on its own (what logprobs
// report as "bytes"): a vocabulary token's bytes, and for the added tokens
// of these files their content (the ByteLevel decoder leaves ASCII alone);
// nil for an unknown id. The slice must not be modified.
func (t *Tokenizer) TokenBytes(id int32) []byte {
	if !t.known(id) {
		return nil
	}
	return t.tokBytes[t.tokOff[id]:t.tokOff[id+1]:t.tokOff[id+1]]
}
