package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// TemplateMessages returns msgs as the JSON array the chat template renders,
// with the semantics the Hugging Face renderer gives a client's messages:
//
//   - developer becomes system, and a system message may only come first (the
//     template rejects one anywhere else);
//   - content stays a string, null or the list of text parts the client sent
//     (the template concatenates a list);
//   - reasoning becomes reasoning_content;
//   - each tool call's arguments string becomes the JSON object it encodes,
//     its key order kept, since the template iterates over its items;
//   - fields the template does not use are dropped; name, tool call ids and
//     tool_call_id are kept as the client's dicts would carry them.
//
// The conversation must contain a user query (a user message that is not
// only a <tool_response> block), as the template requires.
func TemplateMessages(msgs []Message) (json.RawMessage, *Error) {
	if len(msgs) == 0 {
		return nil, InvalidRequest("messages", "'messages' must contain at least one message.")
	}
	if err := validateMessages(msgs, "messages"); err != nil {
		return nil, err
	}
	query := false
	for i, m := range msgs {
		switch m.Role {
		case "system", "developer":
			if i > 0 {
				p := join(at("messages", i), "role")
				return nil, InvalidRequest(p, fmt.Sprintf("A %s message must be the first message; the chat template accepts only one, at the start.", m.Role))
			}
		case "user":
			text := strings.TrimSpace(m.Content.String())
			if !(strings.HasPrefix(text, "<tool_response>") && strings.HasSuffix(text, "</tool_response>")) {
				query = true
			}
		}
	}
	if !query {
		return nil, InvalidRequest("messages", "The conversation must contain a user message (other than tool responses).")
	}
	var b bytes.Buffer
	b.WriteByte('[')
	for i, m := range msgs {
		if i > 0 {
			b.WriteByte(',')
		}
		role := m.Role
		if role == "developer" {
			role = "system"
		}
		b.WriteString(`{"role":`)
		writeString(&b, role)
		b.WriteString(`,"content":`)
		writeValue(&b, m.Content)
		if m.Name != "" {
			b.WriteString(`,"name":`)
			writeString(&b, m.Name)
		}
		reasoning := m.ReasoningContent
		if reasoning == nil {
			reasoning = m.Reasoning
		}
		if reasoning != nil {
			b.WriteString(`,"reasoning_content":`)
			writeString(&b, *reasoning)
		}
		if len(m.ToolCalls) > 0 {
			b.WriteString(`,"tool_calls":[`)
			for j, c := range m.ToolCalls {
				if j > 0 {
					b.WriteByte(',')
				}
				args, err := argumentsObject(c.Function.Arguments, join(at(join(at("messages", i), "tool_calls"), j), "function.arguments"))
				if err != nil {
					return nil, err
				}
				b.WriteByte('{')
				if c.ID != "" {
					b.WriteString(`"id":`)
					writeString(&b, c.ID)
					b.WriteByte(',')
				}
				b.WriteString(`"type":"function","function":{"name":`)
				writeString(&b, c.Function.Name)
				b.WriteString(`,"arguments":`)
				b.Write(args)
				b.WriteString("}}")
			}
			b.WriteByte(']')
		}
		if m.ToolCallID != "" {
			b.WriteString(`,"tool_call_id":`)
			writeString(&b, m.ToolCallID)
		}
		b.WriteByte('}')
	}
	b.WriteByte(']')
	return b.Bytes(), nil
}

// TemplateTools returns the tools as the JSON array the chat template prints,
// nil when there are none: each tool exactly as the client sent it (compact,
// key order kept) or, for tools built in code, in OpenAI's form
// {"type":"function","function":{"name","description","parameters"}}.
func TemplateTools(tools []Tool) json.RawMessage {
	if len(tools) == 0 {
		return nil
	}
	var b bytes.Buffer
	b.WriteByte('[')
	for i, t := range tools {
		if i > 0 {
			b.WriteByte(',')
		}
		raw, _ := t.MarshalJSON() // a raw copy, or a plain struct that always marshals
		b.Write(raw)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// writeString writes s as a JSON string without HTML escaping.
func writeString(b *bytes.Buffer, s string) { writeValue(b, s) }

// writeValue writes v, a value that always marshals (strings, content), as
// JSON without HTML escaping.
func writeValue(b *bytes.Buffer, v any) {
	raw, _ := marshalNoEscape(v)
	b.Write(raw)
}
