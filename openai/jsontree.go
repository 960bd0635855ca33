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
	str     string   // kString: the decoded text; kNumber: the literal
	num     float64  // kNumber
	boolean bool     // kBool
	members []member // kObject
	elems   []*node  // kArray
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
	var raw json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, syntaxError(body, err)
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
	buf []byte
	pos int
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
		n = &node{kind: kObject}
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
		n = &node{kind: kArray}
		p.pos++
		p.ws()
		if p.buf[p.pos] == ']' {
			p.pos++
			break
		}
		for i := 0; ; i++ {
			v, err := p.value(&pathSeg{parent: at, index: i}, depth+1)
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
		n = &node{kind: kString, str: p.string()}
	case 't':
		n = &node{kind: kBool, boolean: true}
		p.pos += 4
	case 'f':
		n = &node{kind: kBool}
		p.pos += 5
	case 'n':
		n = &node{kind: kNull}
		p.pos += 4
	default:
		for p.pos < len(p.buf) && strings.IndexByte("+-0123456789.eE", p.buf[p.pos]) >= 0 {
			p.pos++
		}
		lit := string(p.buf[start:p.pos])
		f, err := strconv.ParseFloat(lit, 64)
		if err != nil || math.IsInf(f, 0) {
			e := InvalidJSON(fmt.Sprintf("Invalid JSON at byte offset %d: the number %s is out of range.", start, lit))
			e.Param = at.String()
			return nil, e
		}
		n = &node{kind: kNumber, str: lit, num: f}
	}
	n.raw = p.buf[start:p.pos]
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
