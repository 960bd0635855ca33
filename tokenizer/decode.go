package tokenizer

import "fmt"

// Decode returns the text of ids as HF's decode(ids, skip_special_tokens)
// does with the ByteLevel decoder: the tokens' bytes joined, then read as
// UTF-8 with each ill-formed part replaced by U+FFFD. Unlike HF, which
// silently drops unknown ids, an unknown id is an error, since it means the
// caller and the vocabulary disagree.
func (t *Tokenizer) Decode(ids []int32, skipSpecial bool) (string, error) {
	buf := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		if !t.known(id) {
			return "", fmt.Errorf("tokenizer: decode: unknown id %d (size %d)", id, t.Size())
		}
		if skipSpecial && t.Special(id) {
			continue
		}
		buf = append(buf, t.TokenBytes(id)...)
	}
	out, _ := appendLossy(make([]byte, 0, len(buf)), buf, true)
	return string(out), nil
}

// Decoder turns a stream of ids into text as it is generated. The
// concatenation of everything Add and Flush return equals Decode of all the
// ids; a UTF-8 sequence split across tokens is held back until complete.
type Decoder struct {
	t           *Tokenizer
	skipSpecial bool
	pending     []byte
}

// NewDecoder starts an incremental decode, for streaming responses.
func (t *Tokenizer) NewDecoder(skipSpecial bool) *Decoder {
	return &Decoder{t: t, skipSpecial: skipSpecial}
}

// Add feeds one id and returns the text it completes: never a partial
// UTF-8 sequence, and an ill-formed one as U+FFFD as soon as it can no
// longer be completed. An unknown id is an error and changes nothing.
func (d *Decoder) Add(id int32) (string, error) {
	if !d.t.known(id) {
		return "", fmt.Errorf("tokenizer: decode: unknown id %d (size %d)", id, d.t.Size())
	}
	if d.skipSpecial && d.t.Special(id) {
		return "", nil
	}
	d.pending = append(d.pending, d.t.TokenBytes(id)...)
	out, used := appendLossy(nil, d.pending, false)
	d.pending = d.pending[:copy(d.pending, d.pending[used:])]
	return string(out), nil
}

// Flush returns whatever is held back, an unfinished sequence as U+FFFD,
// and leaves the Decoder empty for reuse.
func (d *Decoder) Flush() string {
	out, _ := appendLossy(nil, d.pending, true)
	d.pending = d.pending[:0]
	return string(out)
}
