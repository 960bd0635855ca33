package tokenizer

import "unicode/utf8"

// byteSymbol is GPT-2's bytes_to_unicode table (SPEC §6, byte-level BPE):
// byte b is written in vocabulary strings as the rune byteSymbol[b], so that
// every byte has a printable stand-in. Printable Latin-1 bytes stand for
// themselves; the others take 256, 257, … in byte order.
var byteSymbol = func() [256]rune {
	var m [256]rune
	n := 0
	for b := 0; b < 256; b++ {
		if (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF) {
			m[b] = rune(b)
		} else {
			m[b] = rune(256 + n)
			n++
		}
	}
	return m
}()

// symbolByte inverts byteSymbol; runes outside it are absent.
var symbolByte = func() map[rune]byte {
	m := make(map[rune]byte, 256)
	for b, r := range byteSymbol {
		m[r] = byte(b)
	}
	return m
}()

// byteLevelString writes s's bytes as their byte symbols, the form in
// which the vocabulary stores them.
func byteLevelString(s string) string {
	out := make([]rune, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = byteSymbol[s[i]]
	}
	return string(out)
}

// tokenStringBytes is what the ByteLevel decoder makes of one token string:
// each rune mapped back to its byte, or, when any rune is not a byte
// symbol, the string's own UTF-8 bytes (as HF's decoder falls back per token).
func tokenStringBytes(tok string) []byte {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		b, ok := symbolByte[r]
		if !ok {
			return []byte(tok)
		}
		out = append(out, b)
	}
	return out
}

// replacement is U+FFFD in UTF-8.
const replacement = "\uFFFD"

// validSeqLen reports how src starts: n > 0 is a complete valid UTF-8
// sequence of n bytes; n < 0 means the first -n bytes are the maximal
// subpart of an ill-formed sequence (one U+FFFD replaces them, as Rust's
// String::from_utf8_lossy and the Unicode "maximal subpart" practice do);
// n == 0 means src is a valid but unfinished prefix that more bytes could
// complete.
func validSeqLen(src []byte) int {
	b0 := src[0]
	if b0 < 0x80 {
		return 1
	}
	var need int
	lo, hi := byte(0x80), byte(0xBF) // range of the second byte
	switch {
	case b0 >= 0xC2 && b0 <= 0xDF:
		need = 1
	case b0 == 0xE0:
		need, lo = 2, 0xA0
	case b0 >= 0xE1 && b0 <= 0xEC, b0 == 0xEE, b0 == 0xEF:
		need = 2
	case b0 == 0xED:
		need, hi = 2, 0x9F
	case b0 == 0xF0:
		need, lo = 3, 0x90
	case b0 >= 0xF1 && b0 <= 0xF3:
		need = 3
	case b0 == 0xF4:
		need, hi = 3, 0x8F
	default:
		return -1
	}
	for k := 1; k <= need; k++ {
		if k >= len(src) {
			return 0
		}
		c := src[k]
		if k == 1 {
			if c < lo || c > hi {
				return -1
			}
		} else if c < 0x80 || c > 0xBF {
			return -k
		}
	}
	return need + 1
}

// appendLossy appends src to dst as text, each ill-formed maximal subpart
// replaced by U+FFFD. When final is false, a trailing sequence that more
// bytes could still complete is left unconsumed; the result's second value
// is how many bytes of src were used.
func appendLossy(dst []byte, src []byte, final bool) ([]byte, int) {
	i := 0
	for i < len(src) {
		// Fast path over ASCII and already-valid runs.
		if src[i] < utf8.RuneSelf {
			dst = append(dst, src[i])
			i++
			continue
		}
		n := validSeqLen(src[i:])
		switch {
		case n > 0:
			dst = append(dst, src[i:i+n]...)
			i += n
		case n < 0:
			dst = append(dst, replacement...)
			i += -n
		default: // unfinished at the end of src
			if !final {
				return dst, i
			}
			dst = append(dst, replacement...)
			i = len(src)
		}
	}
	return dst, i
}

// lossyString is from_utf8_lossy for a Go string: s itself when valid.
func lossyString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	out, _ := appendLossy(make([]byte, 0, len(s)+8), []byte(s), true)
	return string(out)
}
