package grammar

// frame is a node and its progress: one level of the pushdown automaton's
// stack. It is a comparable value, so a frame on top of the stack keys the
// cache of the masks it allows (the tokens that stay inside it never see
// the frames below).
type frame struct {
	n    *node
	st   uint8 // phase
	ws   uint8 // whitespace bytes in the current gap; kRaw: terminator progress
	esc  uint8 // string lexer: 0 plain, 1 after '\\', 2…5 hex digits, 10+k UTF-8 bytes to come
	lead uint8 // the UTF-8 sequence's first byte
	k    uint8 // kRaw: progress through a forbidden "</parameter>"
	neg  bool  // kNumber: a minus sign
	i    int32 // characters, items, literal position, next child
	d    int32 // dfa state; kObject: the key's property index + 1
	r    int32 // the rune being decoded
	v    uint64
}

// maxWS bounds each run of JSON whitespace, so that no model can loop on it.
const maxWS = 20

func isWS(c byte) bool { return c == ' ' || c == '\n' || c == '\t' || c == '\r' }

// outcome is what one byte did to a frame.
type outcome uint8

const (
	rejected outcome = iota
	consumed         // the frame took the byte
	pushed           // the frame moved on and a child starts with the byte
)

// fresh is a node's frame before its first byte.
func fresh(n *node) frame {
	f := frame{n: n}
	if n.chars != nil {
		f.d = 0
	}
	return f
}

// canPop reports whether the frame's value is complete.
func (f *frame) canPop() bool {
	switch f.n.kind {
	case kObject, kArray:
		return f.st == phClosed
	case kString:
		return f.st == 2
	case kRaw, kParams:
		return f.st == 2
	case kNumber:
		return f.numberDone()
	case kLiteral:
		return int(f.i) == len(f.n.lit)
	case kSeq:
		return int(f.i) == len(f.n.seq)
	}
	return false
}

// step feeds c to f (kAny is dispatched by the walker). On pushed, child
// is the node whose fresh frame takes c.
func (f *frame) step(c byte) (outcome, *node) {
	n := f.n
	switch n.kind {
	case kLiteral:
		if int(f.i) < len(n.lit) && n.lit[f.i] == c {
			f.i++
			return consumed, nil
		}
	case kSeq:
		if f.i == 0 && n.leadWS && isWS(c) && f.ws < maxWS {
			f.ws++
			return consumed, nil
		}
		if int(f.i) < len(n.seq) {
			f.i++
			return pushed, n.seq[f.i-1]
		}
	case kString:
		return f.stepString(c), nil
	case kRaw:
		return f.stepRaw(c), nil
	case kNumber:
		return f.stepNumber(c), nil
	case kObject:
		return f.stepObject(c)
	case kArray:
		return f.stepArray(c)
	case kParams:
		return f.stepParams(c)
	}
	return rejected, nil
}

// resume is the parent's side of a child's pop.
func (f *frame) resume(child *frame) {
	switch f.n.kind {
	case kObject:
		if f.st == phKey || f.st == phNextKey {
			t := int32(-1)
			if d := child.n.chars; d != nil {
				t = d.tag[child.d]
			}
			if t >= 0 {
				f.v |= 1 << uint(t)
			}
			f.d = t + 1
			f.st, f.ws = phColon, 0
			return
		}
		f.st, f.ws = phComma, 0
	case kArray:
		f.i++
		f.st, f.ws = phComma, 0
	case kParams:
		f.st, f.d = 0, 0
	}
}

// Object and array phases.
const (
	phOpen    = 0 // before '{' or '['
	phKey     = 1 // after the opening: a key (an item) or the close
	phColon   = 2 // after a key: ':'
	phValue   = 3 // after ':': the value
	phComma   = 4 // after a value: ',' or the close
	phNextKey = 5 // after ',': a key (an item)
	phClosed  = 6
)

func (f *frame) gap(c byte) bool {
	if isWS(c) && f.ws < maxWS {
		f.ws++
		return true
	}
	return false
}

func (f *frame) stepObject(c byte) (outcome, *node) {
	n := f.n
	switch f.st {
	case phOpen:
		if c == '{' {
			f.st = phKey
			return consumed, nil
		}
	case phKey, phNextKey:
		if f.gap(c) {
			return consumed, nil
		}
		if c == '"' {
			return pushed, n.key
		}
		if c == '}' && f.st == phKey && f.v&n.required == n.required {
			f.st = phClosed
			return consumed, nil
		}
	case phColon:
		if f.gap(c) {
			return consumed, nil
		}
		if c == ':' {
			f.st, f.ws = phValue, 0
			return consumed, nil
		}
	case phValue:
		if f.gap(c) {
			return consumed, nil
		}
		v := n.extra
		if f.d > 0 {
			v = n.props[f.d-1]
		}
		f.st = phComma
		return pushed, v
	case phComma:
		if f.gap(c) {
			return consumed, nil
		}
		if c == ',' && f.moreKeys() {
			f.st, f.ws = phNextKey, 0
			return consumed, nil
		}
		if c == '}' && f.v&n.required == n.required {
			f.st = phClosed
			return consumed, nil
		}
	}
	return rejected, nil
}

// moreKeys reports whether another key can follow.
func (f *frame) moreKeys() bool {
	all := uint64(1)<<uint(len(f.n.props)) - 1
	return f.n.extra != nil || f.v&all != all
}

func (f *frame) stepArray(c byte) (outcome, *node) {
	n := f.n
	switch f.st {
	case phOpen:
		if c == '[' {
			f.st = phKey
			return consumed, nil
		}
	case phKey, phNextKey:
		if f.gap(c) {
			return consumed, nil
		}
		if c == ']' && f.st == phKey && n.minItems <= 0 {
			f.st = phClosed
			return consumed, nil
		}
		if n.maxItems < 0 || f.i < n.maxItems {
			f.st = phComma
			return pushed, n.items
		}
	case phComma:
		if f.gap(c) {
			return consumed, nil
		}
		if c == ',' && (n.maxItems < 0 || f.i < n.maxItems) {
			f.st, f.ws = phNextKey, 0
			return consumed, nil
		}
		if c == ']' && f.i >= n.minItems {
			f.st = phClosed
			return consumed, nil
		}
	}
	return rejected, nil
}

// stepParams reads a tool call's tags: "<parameter=NAME>\n" then the value,
// or "</function>\n" once every required parameter is given.
func (f *frame) stepParams(c byte) (outcome, *node) {
	n := f.n
	switch f.st {
	case 0: // in a tag
		r, ok := f.utf8(c)
		if !ok {
			return rejected, nil
		}
		taken := f.v
		closeTag := len(n.props)
		if f.v&n.required != n.required {
			taken |= 1 << uint(closeTag)
		}
		if r < 0 { // more bytes to come: some tag must still be reachable
			lo, hi := f.partialRange()
			if !n.tags.anyIn(f.d, lo, hi, -1, taken) {
				return rejected, nil
			}
			return consumed, nil
		}
		d := n.tags.next(f.d, r)
		if d < 0 || !n.tags.live(d, -1, taken) {
			return rejected, nil
		}
		f.d = d
		if n.tags.accept[d] {
			t := int(n.tags.tag[d])
			if t == closeTag {
				f.st = 2
			} else {
				f.v |= 1 << uint(t)
				f.st, f.i = 1, int32(t)
			}
		}
		return consumed, nil
	case 1: // the tag is complete: its value starts
		f.st = 3
		return pushed, n.props[f.i]
	}
	return rejected, nil
}

// utf8 feeds a byte of raw UTF-8 text: r ≥ 0 is a completed rune, r < 0
// means more bytes are needed (f.r, f.lead, f.esc hold the progress).
func (f *frame) utf8(c byte) (rune, bool) {
	if f.esc >= 10 {
		left := f.esc - 10
		lo, hi := byte(0x80), byte(0xBF)
		if first := utf8Len(f.lead) - 1; int(left) == first {
			switch f.lead {
			case 0xE0:
				lo = 0xA0
			case 0xED:
				hi = 0x9F
			case 0xF0:
				lo = 0x90
			case 0xF4:
				hi = 0x8F
			}
		}
		if c < lo || c > hi {
			return 0, false
		}
		f.r = f.r<<6 | int32(c&0x3F)
		left--
		if left == 0 {
			f.esc, f.lead = 0, 0
			r := f.r
			f.r = 0
			return r, true
		}
		f.esc = 10 + left
		return -1, true
	}
	switch {
	case c < 0x80:
		return rune(c), true
	case c >= 0xC2 && c <= 0xDF:
		f.r = int32(c & 0x1F)
	case c >= 0xE0 && c <= 0xEF:
		f.r = int32(c & 0x0F)
	case c >= 0xF0 && c <= 0xF4:
		f.r = int32(c & 0x07)
	default:
		return 0, false
	}
	f.lead = c
	f.esc = 10 + uint8(utf8Len(c)-1)
	return -1, true
}

func utf8Len(lead byte) int {
	switch {
	case lead >= 0xF0:
		return 4
	case lead >= 0xE0:
		return 3
	}
	return 2
}

// partialRange is the range of runes the UTF-8 bytes so far can still
// become.
func (f *frame) partialRange() (rune, rune) {
	left := uint(f.esc - 10)
	lo := rune(f.r) << (6 * left)
	hi := lo | (1<<(6*left) - 1)
	switch f.lead {
	case 0xE0:
		lo = max(lo, 0x800)
	case 0xED:
		hi = min(hi, 0xD7FF)
	case 0xF0:
		lo = max(lo, 0x10000)
	case 0xF4:
		hi = min(hi, 0x10FFFF)
	}
	return lo, hi
}

// room is how many more characters a counted string may take (-1: any).
func (f *frame) room() int32 {
	if f.n.maxLen < 0 {
		return -1
	}
	return f.n.maxLen - f.i
}

// canTake reports whether some rune in [lo, hi] (surrogates excluded) can
// be the string's next character.
func (f *frame) canTake(lo, hi rune) bool {
	room := f.room()
	if room == 0 {
		return false
	}
	d := f.n.chars
	if d == nil {
		return true
	}
	taken := f.v
	if hi < 0xD800 || lo > 0xDFFF {
		return d.anyIn(f.d, lo, hi, room, taken)
	}
	return (lo < 0xD800 && d.anyIn(f.d, lo, 0xD7FF, room, taken)) || (hi > 0xDFFF && d.anyIn(f.d, 0xE000, hi, room, taken))
}

// take adds character r to a string.
func (f *frame) take(r rune) bool {
	if r >= 0xD800 && r <= 0xDFFF {
		return false
	}
	room := f.room()
	if room == 0 {
		return false
	}
	if d := f.n.chars; d != nil {
		next := d.next(f.d, r)
		if next < 0 || !d.live(next, room-1, f.v) {
			return false
		}
		f.d = next
	}
	if f.n.counted {
		f.i++
	}
	return true
}

// endOK reports whether the characters so far are a complete value.
func (f *frame) endOK() bool {
	if f.n.counted && f.i < f.n.minLen {
		return false
	}
	d := f.n.chars
	if d == nil {
		return true
	}
	if !d.accept[f.d] {
		return false
	}
	t := d.tag[f.d]
	return t < 0 || f.v&(1<<uint(t)) == 0
}

func hexVal(c byte) int32 {
	switch {
	case c >= '0' && c <= '9':
		return int32(c - '0')
	case c >= 'a' && c <= 'f':
		return int32(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int32(c-'A') + 10
	}
	return -1
}

// stepString reads a JSON string: '"', characters (raw UTF-8 or escapes)
// each checked against the dfa and the length, '"'.
func (f *frame) stepString(c byte) outcome {
	switch f.st {
	case 0:
		if c == '"' {
			f.st = 1
			return consumed
		}
		return rejected
	case 2:
		return rejected
	}
	switch {
	case f.esc == 1:
		var r rune
		switch c {
		case '"', '\\', '/':
			r = rune(c)
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'u':
			if !f.canTake(0, 0xFFFF) {
				return rejected
			}
			f.esc, f.r = 2, 0
			return consumed
		default:
			return rejected
		}
		if !f.take(r) {
			return rejected
		}
		f.esc = 0
		return consumed
	case f.esc >= 2 && f.esc <= 5:
		h := hexVal(c)
		if h < 0 {
			return rejected
		}
		f.r = f.r<<4 | h
		left := uint(5 - f.esc)
		if left > 0 {
			lo := rune(f.r) << (4 * left)
			if !f.canTake(lo, lo|(1<<(4*left)-1)) {
				return rejected
			}
			f.esc++
			return consumed
		}
		r := rune(f.r)
		f.esc, f.r = 0, 0
		if !f.take(r) {
			return rejected
		}
		return consumed
	case f.esc >= 10:
		r, ok := f.utf8(c)
		if !ok {
			return rejected
		}
		if r < 0 {
			lo, hi := f.partialRange()
			if !f.canTake(lo, hi) {
				return rejected
			}
			return consumed
		}
		if !f.take(r) {
			return rejected
		}
		return consumed
	}
	switch {
	case c == '"':
		if !f.endOK() {
			return rejected
		}
		f.st = 2
		return consumed
	case c == '\\':
		if !f.canTake(0, 0xFFFF) {
			return rejected
		}
		f.esc = 1
		return consumed
	case c < 0x20:
		return rejected
	}
	r, ok := f.utf8(c)
	if !ok {
		return rejected
	}
	if r < 0 {
		lo, hi := f.partialRange()
		if !f.canTake(lo, hi) {
			return rejected
		}
		return consumed
	}
	if !f.take(r) {
		return rejected
	}
	return consumed
}

// rawEnd ends a tool-call string value; rawBanned may not occur in it,
// since the tool-call parser would end the value there.
const (
	rawEnd    = "\n</parameter>"
	rawBanned = "</parameter>"
)

// stepRaw reads a tool-call string value: raw text (checked against the
// dfa and the length) up to "\n</parameter>". A '\n' is held as the start
// of the end while the text so far is complete; if the end does not
// follow, the held bytes are text.
func (f *frame) stepRaw(c byte) outcome {
	if f.st == 2 {
		return rejected
	}
	if f.ws > 0 {
		if rawEnd[f.ws] == c {
			f.ws++
			if int(f.ws) == len(rawEnd) {
				f.st = 2
			}
			return consumed
		}
		held := rawEnd[:f.ws]
		f.ws = 0
		for i := 0; i < len(held); i++ {
			if !f.rawText(held[i]) {
				return rejected
			}
		}
	}
	if c == '\n' && f.esc < 10 && f.endOK() {
		f.ws = 1
		return consumed
	}
	if !f.rawText(c) {
		return rejected
	}
	return consumed
}

// rawText adds one byte of text to a raw value.
func (f *frame) rawText(c byte) bool {
	r, ok := f.utf8(c)
	if !ok {
		return false
	}
	if r < 0 {
		f.k = 0
		lo, hi := f.partialRange()
		return f.canTake(lo, hi)
	}
	switch {
	case r < 0x80 && byte(r) == rawBanned[f.k]:
		f.k++
		if int(f.k) == len(rawBanned) {
			return false
		}
	case r == '<':
		f.k = 1
	default:
		f.k = 0
	}
	return f.take(r)
}

// Number phases.
const (
	nStart   = iota
	nMinus   // after '-'
	nZero    // the integer part is "0"
	nInt     // integer digits
	nDot     // after '.'
	nFrac    // fraction digits
	nExp     // after 'e'
	nExpSign // after the exponent's sign
	nExpDig  // exponent digits
)

func (f *frame) stepNumber(c byte) outcome {
	q := f.n.num
	digit := c >= '0' && c <= '9'
	switch f.st {
	case nStart, nMinus:
		if c == '-' && f.st == nStart {
			if !q.signOK(true) {
				return rejected
			}
			f.st, f.neg = nMinus, true
			return consumed
		}
		if !digit {
			return rejected
		}
		m := uint64(c - '0')
		if q.bounded {
			// Only a bounded number tracks its value: an unbounded one's
			// frame stays the same from digit to digit (one cache entry).
			if !q.live(f.neg, m, 1) {
				return rejected
			}
			f.v, f.i = m, 1
		}
		if m == 0 {
			f.st = nZero
		} else {
			f.st = nInt
		}
		return consumed
	case nZero, nInt:
		if digit && f.st == nInt {
			if q.bounded {
				if f.i >= maxDigits {
					return rejected
				}
				m := f.v*10 + uint64(c-'0')
				if !q.live(f.neg, m, int(f.i)+1) {
					return rejected
				}
				f.v, f.i = m, f.i+1
			}
			return consumed
		}
		if c == '.' && !q.integer && (!q.bounded || q.okFrac(f.neg, f.v)) {
			f.st = nDot
			return consumed
		}
		if c == '.' && q.bounded && q.fracNonZero(f.neg, f.v) {
			f.st, f.k = nDot, 1 // ends only after a non-zero digit
			return consumed
		}
		if (c == 'e' || c == 'E') && !q.integer && !q.bounded {
			f.st = nExp
			return consumed
		}
	case nDot, nFrac:
		if digit {
			f.st = nFrac
			if c != '0' {
				f.k = 0
			}
			return consumed
		}
		if (c == 'e' || c == 'E') && f.st == nFrac && !q.bounded {
			f.st = nExp
			return consumed
		}
	case nExp:
		if c == '+' || c == '-' {
			f.st = nExpSign
			return consumed
		}
		if digit {
			f.st = nExpDig
			return consumed
		}
	case nExpSign, nExpDig:
		if digit {
			f.st = nExpDig
			return consumed
		}
	}
	return rejected
}

func (f *frame) numberDone() bool {
	switch f.st {
	case nZero, nInt:
		return !f.n.num.bounded || f.n.num.okInt(f.neg, f.v)
	case nFrac:
		return f.k == 0
	case nExpDig:
		return true
	}
	return false
}
