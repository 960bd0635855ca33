package openai

import (
	"fmt"
	"strings"
)

// Content is a message's content: absent or null (both fields nil), a string
// (Text set) or a list of text parts (Parts non-nil, possibly empty).
type Content struct {
	Text  *string
	Parts []ContentPart
}

// ContentPart is one text part of a content list. Type is "text" in chat
// messages and "input_text", "output_text" or "reasoning_text" in Responses
// items.
type ContentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// TextContent returns string content.
func TextContent(s string) Content { return Content{Text: &s} }

// IsNull reports content that is absent or null.
func (c Content) IsNull() bool { return c.Text == nil && c.Parts == nil }

// String returns the text: the string, or the parts' texts concatenated as the
// chat template concatenates them.
func (c Content) String() string {
	if c.Text != nil {
		return *c.Text
	}
	var b strings.Builder
	for _, p := range c.Parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

// MarshalJSON writes null, the string or the list of parts.
func (c Content) MarshalJSON() ([]byte, error) {
	switch {
	case c.Text != nil:
		return marshalNoEscape(*c.Text)
	case c.Parts != nil:
		return marshalNoEscape(c.Parts)
	}
	return []byte("null"), nil
}

// partKinds says, for a content list, which part types carry text and what
// each other known type is (a media type this text-only model lacks).
type partKinds struct {
	text  map[string]bool   // accepted text part types
	extra map[string]bool   // accepted extra keys of text parts, which must ask for nothing
	media map[string]string // known unsupported types → why
}

// chatParts are the content parts of chat messages.
var chatParts = partKinds{
	text: map[string]bool{"text": true},
	media: map[string]string{
		"image_url":   "images are not supported: this server runs a text-only model",
		"input_audio": "audio input is not supported: this server runs a text-only model",
		"video_url":   "video is not supported: this server runs a text-only model",
		"file":        "file inputs are not supported",
		"refusal":     "refusal parts are not supported",
	},
}

// decodeContent reads a string, null or a list of text parts.
func decodeContent(n *node, path string, kinds partKinds) (Content, *Error) {
	switch n.kind {
	case kNull:
		return Content{}, nil
	case kString:
		s := n.str
		return Content{Text: &s}, nil
	case kArray:
		parts := make([]ContentPart, 0, n.length())
		err := elems(n, path, func(i int, v *node, p string) *Error {
			part, err := decodePart(v, p, kinds)
			parts = append(parts, part)
			return err
		})
		return Content{Parts: parts}, err
	}
	return Content{}, typeError(path, "a string, null or an array of text parts", n)
}

// decodePart reads one content part; its type decides which keys it may have.
func decodePart(n *node, path string, kinds partKinds) (ContentPart, *Error) {
	t, err := typeOf(n, path)
	if err != nil {
		return ContentPart{}, err
	}
	tp := join(path, "type")
	if why, ok := kinds.media[t]; ok {
		return ContentPart{}, Unsupported(tp, fmt.Sprintf("Content part type '%s' is not supported: %s.", t, why))
	}
	if !kinds.text[t] {
		if t == "" {
			return ContentPart{}, InvalidRequest(tp, fmt.Sprintf("'%s' is required.", tp))
		}
		return ContentPart{}, InvalidRequest(tp, fmt.Sprintf("Unknown content part type '%s'.", t))
	}
	part := ContentPart{Type: t}
	hasText := false
	err = fields(n, path, func(key string, v *node, p string) *Error {
		switch key {
		case "type":
			return nil
		case "text":
			if v.kind != kString {
				return typeError(p, "a string", v)
			}
			part.Text, hasText = v.str, true
			return nil
		}
		if kinds.extra[key] {
			return emptyOnly("only plain text is supported")(v, p)
		}
		return unknownParam(p)
	})
	if err == nil && !hasText {
		p := join(path, "text")
		err = InvalidRequest(p, fmt.Sprintf("'%s' is required.", p))
	}
	return part, err
}
