package output

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
)

// stepCallOpen waits for "<function=NAME>" after "<tool_call>" and starts the
// call; anything else makes the block plain content.
func (p *Parser) stepCallOpen() bool {
	b := strings.TrimLeft(p.buf, whitespace)
	if len(b) < len(funcOpen) {
		if strings.HasPrefix(funcOpen, b) {
			return false
		}
		return p.malformed()
	}
	if !strings.HasPrefix(b, funcOpen) {
		return p.malformed()
	}
	rest := b[len(funcOpen):]
	gt := strings.IndexByte(rest, '>')
	if gt < 0 {
		if strings.ContainsAny(rest, "\n<") {
			return p.malformed()
		}
		return false
	}
	name := strings.Trim(rest[:gt], whitespace)
	if name == "" || strings.ContainsAny(rest[:gt], "\n<") {
		return p.malformed()
	}
	p.buf = rest[gt+1:]
	p.startCall(name)
	return true
}

// malformed emits "<tool_call>" (and the whitespace before it) as content and
// goes on parsing what follows as content.
func (p *Parser) malformed() bool {
	p.content(p.pre + callOpen)
	p.pre = ""
	p.st = stContent
	return true
}

// startCall emits ToolCallStart and the opening brace of the arguments.
func (p *Parser) startCall(name string) {
	p.flushContent()
	id := "call_" + strconv.Itoa(p.calls)
	if p.newCallID != nil {
		id = p.newCallID()
	}
	p.emit(Event{Kind: ToolCallStart, Index: p.calls, ID: id, Name: name})
	p.calls++
	p.params = p.tools[name]
	p.first = true
	p.pre = ""
	p.args("{")
	p.st = stCallBody
}

// stepCallBody reads the tags between parameters: "<parameter=KEY>",
// "</function>" or, when "</function>" is missing, "</tool_call>". Other text
// there cannot be placed in the arguments and is dropped.
func (p *Parser) stepCallBody() bool {
	p.buf = strings.TrimLeft(p.buf, whitespace)
	b := p.buf
	switch {
	case b == "":
		return false
	case strings.HasPrefix(b, paramOpen):
		rest := b[len(paramOpen):]
		gt := strings.IndexByte(rest, '>')
		if gt < 0 && !strings.ContainsAny(rest, "\n<") {
			return false
		}
		if gt < 0 || strings.ContainsAny(rest[:gt], "\n<") {
			p.buf = b[1:] // not a tag
			return true
		}
		p.startParam(strings.Trim(rest[:gt], whitespace))
		p.buf = rest[gt+1:]
		return true
	case strings.HasPrefix(b, funcClose):
		p.args("}")
		p.buf = b[len(funcClose):]
		p.st = stCallEnd
		return true
	case strings.HasPrefix(b, callClose):
		p.args("}")
		p.buf = b[len(callClose):]
		p.startContent(whitespace)
		return true
	case strings.HasPrefix(paramOpen, b) || strings.HasPrefix(funcClose, b) || strings.HasPrefix(callClose, b):
		return false
	}
	if i := strings.IndexByte(b[1:], '<'); i >= 0 {
		p.buf = b[1+i:]
	} else {
		p.buf = ""
	}
	return true
}

// startParam emits `"KEY": ` and enters the value, streamed as a JSON string
// or buffered for JSON decoding according to the schema.
func (p *Parser) startParam(key string) {
	sep := ", "
	if p.first {
		sep = ""
	}
	p.first = false
	isString, known := p.params[key]
	if isString || !known {
		p.args(sep + quote(key) + `: "`)
		p.st, p.valueStart = stParamString, true
		return
	}
	p.args(sep + quote(key) + ": ")
	p.st, p.scanned = stParamRaw, 0
}

// stepParamString streams a string value's escaped text up to
// "</parameter>", dropping one leading and one trailing newline and holding
// back a possible "\n</parameter>" prefix and an incomplete UTF-8 sequence.
func (p *Parser) stepParamString() bool {
	if p.valueStart {
		if p.buf == "" {
			return false
		}
		p.buf = strings.TrimPrefix(p.buf, "\n")
		p.valueStart = false
	}
	if i := strings.Index(p.buf, paramClose); i >= 0 {
		p.args(escape(strings.TrimSuffix(p.buf[:i], "\n")) + `"`)
		p.buf = p.buf[i+len(paramClose):]
		p.st = stCallBody
		return true
	}
	h := len(p.buf) - closeTail(p.buf)
	if h == len(p.buf) {
		h -= incompleteRune(p.buf)
	}
	if h > 0 {
		p.args(escape(p.buf[:h]))
		p.buf = p.buf[h:]
	}
	return false
}

// stepParamRaw buffers a non-string value until "</parameter>" and emits it
// converted.
func (p *Parser) stepParamRaw() bool {
	from := max(0, p.scanned-len(paramClose)+1)
	i := strings.Index(p.buf[from:], paramClose)
	if i < 0 {
		p.scanned = len(p.buf)
		return false
	}
	i += from
	p.args(jsonValue(p.buf[:i]))
	p.buf = p.buf[i+len(paramClose):]
	p.st = stCallBody
	return true
}

// stepCallEnd consumes "</tool_call>" after "</function>"; other text ends the
// call without it and is content.
func (p *Parser) stepCallEnd() bool {
	p.buf = strings.TrimLeft(p.buf, whitespace)
	if len(p.buf) < len(callClose) && strings.HasPrefix(callClose, p.buf) {
		return false // empty or a prefix of </tool_call>
	}
	p.buf = strings.TrimPrefix(p.buf, callClose)
	p.startContent(whitespace)
	return true
}

// finishCall closes, at Close, a call the model left open: the value being
// read keeps its text before a cut-off "</parameter>", and the object is
// closed with a fragment marked Unterminated.
func (p *Parser) finishCall() {
	b := p.buf
	switch p.st {
	case stCallEnd:
		return // arguments complete; only </tool_call> is missing
	case stParamString:
		if p.valueStart {
			b = strings.TrimPrefix(b, "\n")
		}
		p.args(escape(b[:len(b)-closeTail(b)]) + `"`)
	case stParamRaw:
		p.args(jsonValue(b[:len(b)-closeTail(b)]))
	}
	p.emit(Event{Kind: ToolCallArguments, Index: p.calls - 1, Text: "}", Unterminated: true})
}

// args emits a fragment of the current call's arguments.
func (p *Parser) args(s string) {
	p.emit(Event{Kind: ToolCallArguments, Index: p.calls - 1, Text: s})
}

// closeTail returns the length of the longest suffix of s that may still
// become the end of a value: a prefix of "\n</parameter>" or "</parameter>".
func closeTail(s string) int {
	return max(partialSuffix(s, paramClose), partialSuffix(s, paramCloseNL))
}

// incompleteRune returns the length of a UTF-8 sequence cut off at the end of
// s, which the next piece may complete.
func incompleteRune(s string) int {
	for n := 1; n <= utf8.UTFMax-1 && n <= len(s); n++ {
		c := s[len(s)-n]
		switch {
		case c < utf8.RuneSelf:
			return 0
		case utf8.RuneStart(c):
			if utf8.FullRuneInString(s[len(s)-n:]) {
				return 0
			}
			return n
		}
	}
	return 0
}

// jsonValue converts a complete non-string value: the raw text compacted when
// it is valid JSON, otherwise the text as a JSON string, so the arguments stay
// valid JSON whatever the model wrote.
func jsonValue(v string) string {
	v = strings.TrimSuffix(strings.TrimPrefix(v, "\n"), "\n")
	t := strings.Trim(v, whitespace)
	if t != "" && utf8.ValidString(t) && json.Valid([]byte(t)) {
		var b bytes.Buffer
		if json.Compact(&b, []byte(t)) == nil {
			return b.String()
		}
	}
	return quote(v)
}

// quote returns s as a JSON string.
func quote(s string) string { return `"` + escape(s) + `"` }

// escape returns the body of s as a JSON string: non-ASCII text stays as is
// (as the chat template's tojson writes it), invalid UTF-8 becomes U+FFFD.
func escape(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			i++
			switch {
			case c == '"':
				b.WriteString(`\"`)
			case c == '\\':
				b.WriteString(`\\`)
			case c == '\n':
				b.WriteString(`\n`)
			case c == '\r':
				b.WriteString(`\r`)
			case c == '\t':
				b.WriteString(`\t`)
			case c < 0x20:
				b.WriteString(`\u00`)
				b.WriteByte("0123456789abcdef"[c>>4])
				b.WriteByte("0123456789abcdef"[c&0xf])
			default:
				b.WriteByte(c)
			}
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\ufffd`)
		case r == '\u2028':
			b.WriteString(`\u2028`) // valid JSON either way; escaped for JavaScript readers
		case r == '\u2029':
			b.WriteString(`\u2029`)
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// stringParams maps each parameter of a function's schema to whether its
// value is streamed as a JSON string. A schema that does not decode gives
// none, so every parameter is a string.
func stringParams(schema json.RawMessage) map[string]bool {
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if len(schema) == 0 || json.Unmarshal(schema, &s) != nil {
		return nil
	}
	m := make(map[string]bool, len(s.Properties))
	for k, v := range s.Properties {
		m[k] = StringValued(v)
	}
	return m
}

// StringValued reports whether a parameter with this schema is written as
// raw text (and streamed as a JSON string) rather than as JSON: when the
// schema allows strings only, or says nothing of its type. Constrained
// decoding writes tool calls by the same rule.
func StringValued(schema json.RawMessage) bool {
	types := schemaTypes(schema, 0)
	return len(types) == 0 || len(types) == 1 && types["string"]
}

// schemaTypes collects the JSON types a parameter schema allows, from "type"
// (a name or a list), from the alternatives of anyOf/oneOf, or from the
// values of enum/const. None found means unconstrained.
func schemaTypes(schema json.RawMessage, depth int) map[string]bool {
	var s struct {
		Type  json.RawMessage   `json:"type"`
		AnyOf []json.RawMessage `json:"anyOf"`
		OneOf []json.RawMessage `json:"oneOf"`
		Enum  []json.RawMessage `json:"enum"`
		Const json.RawMessage   `json:"const"`
	}
	if depth > 8 || json.Unmarshal(schema, &s) != nil {
		return nil
	}
	types := map[string]bool{}
	var one string
	var list []string
	switch {
	case json.Unmarshal(s.Type, &one) == nil:
		types[one] = true
	case json.Unmarshal(s.Type, &list) == nil:
		for _, t := range list {
			types[t] = true
		}
	}
	if len(types) > 0 {
		return types
	}
	for _, alt := range append(s.AnyOf, s.OneOf...) {
		for t := range schemaTypes(alt, depth+1) {
			types[t] = true
		}
	}
	if len(types) > 0 {
		return types
	}
	if len(s.Const) > 0 {
		s.Enum = append(s.Enum, s.Const)
	}
	for _, v := range s.Enum {
		if t := bytes.TrimLeft(v, whitespace); len(t) > 0 && t[0] == '"' {
			types["string"] = true
		} else {
			types["other"] = true
		}
	}
	return types
}
