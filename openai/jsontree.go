package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"
)

// kind is the JSON type of a node.
type kind uint8

const (
	kNull kind = iota
	kBool
	kNumber
	kString
	kArray
	kObject
)

// String names the kind as error messages do.
func (k kind) String() string {
	return [...]string{"null", "a boolean", "a number", "a string", "an array", "an object"}[k]
}

// node is one parsed JSON value. Objects keep their members in document
// order, which is what lets the chat template see the client's key order.
type node struct {
	kind    kind
	raw     []byte   // the value's exact bytes in the body
	str     string   // kString: the decoded text (a number's literal is raw)
	num     float64  // kNumber
	boolean bool     // kBool
	members []member // kObject
	elems   []*node  // kArray; read through items
	// ints holds an array of plain integers (a prompt's token ids) without
	// a node for each: elems is made from raw when first asked for.
	ints []int64
}

// items returns an array's elements.
func (n *node) items() []*node {
	if n.elems == nil && n.ints != nil {
		q := parser{buf: n.raw, nodes: true}
		m, _ := q.value(nil, 0) // parsed once already: cannot fail
		n.elems = m.elems
	}
	return n.elems
}

// length is an array's element count.
func (n *node) length() int {
	if n.ints != nil {
		return len(n.ints)
	}
	return len(n.elems)
}

// member is one key of an object.
type member struct {
	key string
	val *node
}

// get returns the member named key, or nil.
func (n *node) get(key string) *node {
	for i := range n.members {
		if n.members[i].key == key {
			return n.members[i].val
		}
	}
	return nil
}

// isNull reports an absent (nil) or null value; the wire treats both alike.
func (n *node) isNull() bool { return n == nil || n.kind == kNull }

// pathSeg is one step of the path to a value, linked to its parent so that
// paths cost nothing until an error needs one.
type pathSeg struct {
	parent *pathSeg
	key    string
	index  int // used when key is ""
	isKey  bool
}

// String renders the path as "messages[0].content".
func (p *pathSeg) String() string {
	var segs []*pathSeg
	for s := p; s != nil; s = s.parent {
		segs = append(segs, s)
	}
	var b strings.Builder
	for i := len(segs) - 1; i >= 0; i-- {
		s := segs[i]
		if s.isKey {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.key)
		} else {
			fmt.Fprintf(&b, "[%d]", s.index)
		}
	}
	return b.String()
}

// MaxNesting is the deepest JSON a request may hold, counting every object
// and array from the body's top level (or from the top of an encoded
// tool-call arguments string): real tool schemas nest a few levels, and
// what is decoded reaches the chat template, whose rendering recurses.
const MaxNesting = 128

// parseJSON parses body into a tree, rejecting what strict decoding rejects
// at the syntax level: invalid JSON (with its byte offset), invalid UTF-8,
// NaN/Infinity, numbers beyond float64 and duplicate keys at any depth.
func parseJSON(body []byte) (*node, *Error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, InvalidJSON("The request body is empty; expected a JSON object.")
	}
	if !utf8.Valid(body) {
		off := 0
		for off < len(body) {
			r, size := utf8.DecodeRune(body[off:])
			if r == utf8.RuneError && size <= 1 {
				break
			}
			off += size
		}
		return nil, InvalidJSON(fmt.Sprintf("The request body is not valid UTF-8 (at byte offset %d).", off))
	}
	if !json.Valid(body) {
		// Only a body that fails pays for the decode that explains why.
		var raw json.RawMessage
		if err := json.Unmarshal(body, &raw); err != nil {
			return nil, syntaxError(body, err)
		}
	}
	p := parser{buf: body}
	return p.value(nil, 0)
}

// syntaxError turns encoding/json's complaint into an invalid_json error
// naming the byte offset, with a plain explanation for NaN and Infinity.
func syntaxError(body []byte, err error) *Error {
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return InvalidJSON("Invalid JSON: " + err.Error())
	}
	off := int(se.Offset) - 1
	if off < 0 {
		off = 0
	}
	if off < len(body) {
		rest := body[off:]
		if off > 0 && body[off-1] == '-' {
			rest = body[off-1:]
		}
		for _, lit := range []string{"NaN", "Infinity", "-Infinity"} {
			if bytes.HasPrefix(rest, []byte(lit)) {
				return InvalidJSON(fmt.Sprintf("Invalid JSON at byte offset %d: %s is not a JSON number (NaN and Infinity are not allowed).", off, lit))
			}
		}
	}
	if se.Offset >= int64(len(body)) {
		return InvalidJSON(fmt.Sprintf("Invalid JSON at byte offset %d: %s.", se.Offset, se.Error()))
	}
	return InvalidJSON(fmt.Sprintf("Invalid JSON at byte offset %d: %s.", off, se.Error()))
}

// parser walks a body already known to be valid JSON.
type parser struct {
	buf  []byte
	pos  int
	slab []node // nodes are carved from here, a block at a time
	// nodes makes a node of every array element (items does), never ints.
	nodes bool
}

// node returns a new node, allocated a block at a time.
func (p *parser) node(k kind) *node {
	if len(p.slab) == 0 {
		p.slab = make([]node, 256)
	}
	n := &p.slab[0]
	p.slab = p.slab[1:]
	n.kind = k
	return n
}

// ws skips whitespace.
func (p *parser) ws() {
	for p.pos < len(p.buf) {
		switch p.buf[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// value parses the value at p.pos; at is its path, for error messages.
func (p *parser) value(at *pathSeg, depth int) (*node, *Error) {
	if depth > MaxNesting {
		param := "body"
		if at != nil {
			param = at.String()
		}
		return nil, NestingTooDeep(param)
	}
	p.ws()
	start := p.pos
	var n *node
	switch c := p.buf[p.pos]; c {
	case '{':
		n = p.node(kObject)
		p.pos++
		p.ws()
		if p.buf[p.pos] == '}' {
			p.pos++
			break
		}
		var seen map[string]struct{}
		for {
			p.ws()
			key := p.string()
			p.ws()
			p.pos++ // ':'
			child := &pathSeg{parent: at, key: key, isKey: true}
			v, err := p.value(child, depth+1)
			if err != nil {
				return nil, err
			}
			if dup(n.members, &seen, key) {
				e := InvalidJSON(fmt.Sprintf("Duplicate key '%s'.", child))
				e.Param = child.String()
				return nil, e
			}
			n.members = append(n.members, member{key: key, val: v})
			p.ws()
			if p.buf[p.pos] == ',' {
				p.pos++
				continue
			}
			p.pos++ // '}'
			break
		}
	case '[':
		n = p.node(kArray)
		if !p.nodes {
			if ints, ok := p.integers(); ok {
				n.ints = ints
				break
			}
		}
		p.pos++
		p.ws()
		if p.buf[p.pos] == ']' {
			p.pos++
			break
		}
		for i := 0; ; i++ {
			var v *node
			var err *Error
			if p.ws(); isNumberStart(p.buf[p.pos]) {
				// A number needs its path only for an error: no segment
				// for each of a long prompt's token ids.
				v, err = p.number(func() *pathSeg { return &pathSeg{parent: at, index: i} })
			} else {
				v, err = p.value(&pathSeg{parent: at, index: i}, depth+1)
			}
			if err != nil {
				return nil, err
			}
			n.elems = append(n.elems, v)
			p.ws()
			if p.buf[p.pos] == ',' {
				p.pos++
				continue
			}
			p.pos++ // ']'
			break
		}
	case '"':
		n = p.node(kString)
		n.str = p.string()
	case 't':
		n = p.node(kBool)
		n.boolean = true
		p.pos += 4
	case 'f':
		n = p.node(kBool)
		p.pos += 5
	case 'n':
		n = p.node(kNull)
		p.pos += 4
	default:
		return p.number(func() *pathSeg { return at })
	}
	n.raw = p.buf[start:p.pos]
	return n, nil
}

// integers parses the array at p.pos when it holds only plain integers of
// at most 15 digits (exact in a float64, as the nodes' numbers are), such as
// a prompt's token ids; otherwise it leaves p.pos and returns false.
func (p *parser) integers() ([]int64, bool) {
	pos := p.pos + 1
	var out []int64
	for {
		for pos < len(p.buf) && (p.buf[pos] == ' ' || p.buf[pos] == '\t' || p.buf[pos] == '\n' || p.buf[pos] == '\r') {
			pos++
		}
		neg := p.buf[pos] == '-'
		if neg {
			pos++
		}
		start, v := pos, int64(0)
		for pos < len(p.buf) && p.buf[pos] >= '0' && p.buf[pos] <= '9' {
			v = 10*v + int64(p.buf[pos]-'0')
			pos++
		}
		if pos == start || pos-start > 15 {
			return nil, false // not an integer (or "[]"), or too long
		}
		if neg {
			v = -v
		}
		out = append(out, v)
		for pos < len(p.buf) && (p.buf[pos] == ' ' || p.buf[pos] == '\t' || p.buf[pos] == '\n' || p.buf[pos] == '\r') {
			pos++
		}
		switch p.buf[pos] {
		case ',':
			pos++
		case ']':
			p.pos = pos + 1
			return out, true
		default: // a fraction or an exponent
			return nil, false
		}
	}
}

// isNumberStart reports whether c begins a JSON number.
func isNumberStart(c byte) bool { return c == '-' || c >= '0' && c <= '9' }

// number parses the number at p.pos; at gives its path for an error.
func (p *parser) number(at func() *pathSeg) (*node, *Error) {
	start := p.pos
	plain := true // digits only, with at most a leading minus
	for p.pos < len(p.buf) {
		c := p.buf[p.pos]
		if c >= '0' && c <= '9' || c == '-' && p.pos == start {
			p.pos++
			continue
		}
		if strings.IndexByte("+-.eE", c) < 0 {
			break
		}
		plain = false
		p.pos++
	}
	lit := p.buf[start:p.pos]
	n := p.node(kNumber)
	n.raw = lit
	digits := lit
	if digits[0] == '-' {
		digits = digits[1:]
	}
	if plain && len(digits) <= 15 {
		// Exact in a float64: a token id needs no float parse.
		v := int64(0)
		for _, c := range digits {
			v = 10*v + int64(c-'0')
		}
		if lit[0] == '-' {
			v = -v
		}
		n.num = float64(v)
		return n, nil
	}
	f, err := strconv.ParseFloat(string(lit), 64)
	if err != nil || math.IsInf(f, 0) {
		e := InvalidJSON(fmt.Sprintf("Invalid JSON at byte offset %d: the number %s is out of range.", start, lit))
		e.Param = at().String()
		return nil, e
	}
	n.num = f
	return n, nil
}

// dup reports whether key is already among members; large objects get a set.
func dup(members []member, seen *map[string]struct{}, key string) bool {
	if len(members) < 16 {
		for i := range members {
			if members[i].key == key {
				return true
			}
		}
		return false
	}
	if *seen == nil {
		*seen = make(map[string]struct{}, 2*len(members))
		for i := range members {
			(*seen)[members[i].key] = struct{}{}
		}
	}
	if _, ok := (*seen)[key]; ok {
		return true
	}
	(*seen)[key] = struct{}{}
	return false
}

// string parses the string at p.pos (its opening quote) and returns its text.
func (p *parser) string() string {
	start := p.pos
	p.pos++
	escaped := false
	for {
		c := p.buf[p.pos]
		if c == '\\' {
			escaped = true
			p.pos += 2
			continue
		}
		p.pos++
		if c == '"' {
			break
		}
	}
	if !escaped {
		return string(p.buf[start+1 : p.pos-1])
	}
	var s string
	// The body is valid JSON, so this cannot fail.
	_ = json.Unmarshal(p.buf[start:p.pos], &s)
	return s
}

// compact returns the value's bytes without insignificant whitespace, key
// order untouched.
func (n *node) compact() json.RawMessage {
	var b bytes.Buffer
	if err := json.Compact(&b, n.raw); err != nil {
		return append(json.RawMessage(nil), n.raw...)
	}
	return b.Bytes()
}
