package chat

import (
	"strings"
	"unicode"
)

// The template engine looks filters up in its own built-in table first and
// in the render's variables only for names it does not know, and it prints
// {{ }} values with Go formatting. To give templates transformers' tojson and
// Python's str()/strip(), the source is rewritten before it is compiled:
//
//   - "| tojson", "| string" and "| trim" name the replacements below
//     (passed to every render as variables), and
//   - every {{ expr }} becomes {{ (expr) | print }} with print = str().
//
// Text, comments and {% raw %} blocks are copied untouched; string literals
// inside tags are skipped, so a '|' in a literal is never taken for a filter.

// Names the rewritten template uses; no chat template uses them itself.
const (
	printFilter = "__chat_print"
	filterPfx   = "__chat_"
)

// overridden lists the filters replaced by Python-exact versions.
var overridden = map[string]bool{"tojson": true, "string": true, "trim": true}

// rewrite returns src with the changes above, scanning tags exactly as the
// engine's scanner does (same delimiters, same quote handling), so both agree
// where every tag starts and ends. A tag left open is copied as is for the
// engine to report.
func rewrite(src string) string {
	var out strings.Builder
	out.Grow(len(src) + len(src)/8)
	inRaw := false
	i := 0
	for i < len(src) {
		if src[i] != '{' || i+1 >= len(src) || (src[i+1] != '{' && src[i+1] != '%' && src[i+1] != '#') {
			out.WriteByte(src[i])
			i++
			continue
		}
		kind := src[i+1]
		closer := map[byte]string{'{': "}}", '%': "%}", '#': "#}"}[kind]
		start := i
		i += 2
		if i < len(src) && src[i] == '-' {
			i++
		}
		contentStart := i
		contentEnd, end := -1, -1
		for i < len(src) {
			c := src[i]
			if kind != '#' && (c == '\'' || c == '"') {
				i = skipQuoted(src, i)
				continue
			}
			if c == '-' && i+2 < len(src) && src[i+1] == closer[0] && src[i+2] == closer[1] {
				contentEnd, end = i, i+3
				break
			}
			if i+1 < len(src) && c == closer[0] && src[i+1] == closer[1] {
				contentEnd, end = i, i+2
				break
			}
			i++
		}
		if end < 0 { // unclosed: let the engine report it
			out.WriteString(src[start:])
			break
		}
		content := src[contentStart:contentEnd]
		switch {
		case kind == '%' && inRaw:
			inRaw = stmtKeyword(content) != "endraw"
			out.WriteString(src[start:end])
		case inRaw || kind == '#':
			out.WriteString(src[start:end])
		case kind == '%':
			inRaw = stmtKeyword(content) == "raw"
			out.WriteString(src[start:contentStart])
			out.WriteString(renameFilters(content))
			out.WriteString(src[contentEnd:end])
		default: // {{ }}
			out.WriteString(src[start:contentStart])
			if strings.TrimSpace(content) == "" {
				out.WriteString(content)
			} else {
				out.WriteString("(")
				out.WriteString(renameFilters(content))
				out.WriteString(")|" + printFilter)
			}
			out.WriteString(src[contentEnd:end])
		}
		i = end
	}
	return out.String()
}

// skipQuoted returns the index just past the string literal that opens at
// src[i], honouring backslash escapes as the engine does; an unterminated
// literal runs to the end of src.
func skipQuoted(src string, i int) int {
	quote := src[i]
	i++
	for i < len(src) && src[i] != quote {
		if src[i] == '\\' && i+1 < len(src) {
			i++
		}
		i++
	}
	if i < len(src) {
		i++
	}
	return i
}

// renameFilters replaces the names of overridden filters after a '|' in the
// tag content s, outside string literals.
func renameFilters(s string) string {
	var out strings.Builder
	i := 0
	for i < len(s) {
		c := s[i]
		if c == '\'' || c == '"' {
			j := skipQuoted(s, i)
			out.WriteString(s[i:j])
			i = j
			continue
		}
		out.WriteByte(c)
		i++
		if c != '|' {
			continue
		}
		for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
			out.WriteByte(s[i])
			i++
		}
		j := i
		for j < len(s) && isIdentByte(s[j], j > i) {
			j++
		}
		if name := s[i:j]; overridden[name] {
			out.WriteString(filterPfx)
		}
		out.WriteString(s[i:j])
		i = j
	}
	return out.String()
}

// isIdentByte reports whether c can be part of a name (digits only after
// the first byte), as the engine's tokenizer reads names.
func isIdentByte(c byte, notFirst bool) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (notFirst && c >= '0' && c <= '9')
}

// stmtKeyword is the first word of a statement tag, as the engine reads it.
func stmtKeyword(content string) string {
	content = strings.TrimSpace(content)
	for i, r := range content {
		if !unicode.IsLetter(r) && r != '_' {
			return content[:i]
		}
	}
	return content
}
