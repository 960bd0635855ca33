package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/aimaproject/aimac/output"
)

// Tool is a function a tool call may name, with the JSON schema of its
// parameters (nil: none).
type Tool struct {
	Name       string
	Parameters json.RawMessage
}

// ToolCall compiles the answer of a tool_choice "required" or named call:
// one call in the chat template's format,
//
//	<tool_call>
//	<function=NAME>
//	<parameter=KEY>
//	VALUE
//	</parameter>
//	</function>
//	</tool_call>
//
// naming one of tools, each parameter at most once, the required ones all
// given, and every value valid against its schema: string-valued
// parameters (output.StringValued) as raw text, the others as JSON.
func ToolCall(tools []Tool, v *Vocab) (*Grammar, error) {
	if len(tools) == 0 {
		return nil, &Error{Message: "no tool to call"}
	}
	choice := &node{kind: kAny}
	for i, t := range tools {
		path := fmt.Sprintf("/tools/%d/function", i)
		if t.Name == "" || strings.ContainsAny(t.Name, "<>\n") || strings.TrimSpace(t.Name) != t.Name {
			return nil, &Error{Path: path + "/name", Message: fmt.Sprintf("function name %q cannot be written in a tool call", t.Name)}
		}
		params, err := toolParams(t.Parameters, path+"/parameters")
		if err != nil {
			return nil, err
		}
		choice.alts = append(choice.alts, &node{kind: kSeq, seq: []*node{literal(t.Name + ">\n"), params, literal("</tool_call>")}})
	}
	root := &node{kind: kSeq, seq: []*node{literal("<tool_call>\n<function="), choice}}
	if len(choice.alts) == 1 {
		root.seq[1] = choice.alts[0]
	}
	return newGrammar(root, v), nil
}

// toolParams compiles a parameters schema into the <parameter=…> blocks.
func toolParams(schema json.RawMessage, path string) (*node, error) {
	n := &node{kind: kParams}
	tags := []string{}
	if t := bytes.TrimSpace(schema); len(t) > 0 && string(t) != "null" {
		c, err := newCompiler(t)
		if err != nil {
			if ge, ok := err.(*Error); ok {
				ge.Path = path + ge.Path
			}
			return nil, err
		}
		var s map[string]json.RawMessage
		if json.Unmarshal(t, &s) != nil {
			return nil, invalid(path, "parameters must be a JSON Schema object")
		}
		for k := range s {
			switch {
			case annotations[k], k == "properties", k == "required", k == "additionalProperties":
			case k == "type":
				var typ string
				if json.Unmarshal(s[k], &typ) != nil || typ != "object" {
					return nil, invalid(path+"/type", `parameters must be of type "object"`)
				}
			default:
				return nil, unsupported(path+"/"+k, k, fmt.Sprintf("the keyword %q of a tool's parameters cannot be enforced", k))
			}
		}
		var props map[string]json.RawMessage
		if raw, ok := s["properties"]; ok && json.Unmarshal(raw, &props) != nil {
			return nil, invalid(path+"/properties", "must be an object of schemas")
		}
		var required []string
		if raw, ok := s["required"]; ok && json.Unmarshal(raw, &required) != nil {
			return nil, invalid(path+"/required", "must be an array of strings")
		}
		names := make([]string, 0, len(props))
		for k := range props {
			names = append(names, k)
		}
		slices.Sort(names)
		for _, r := range required {
			if _, ok := props[r]; !ok {
				return nil, invalid(path+"/required", fmt.Sprintf("%q is required but not among the properties", r))
			}
		}
		if len(names) >= maxProps {
			return nil, unsupported(path+"/properties", "properties", fmt.Sprintf("more than %d parameters", maxProps-1))
		}
		for i, name := range names {
			p := path + "/properties/" + escapePointer(name)
			if name == "" || strings.ContainsAny(name, "<>\n") || strings.TrimSpace(name) != name {
				return nil, &Error{Path: p, Message: fmt.Sprintf("parameter name %q cannot be written in a tool call", name)}
			}
			val, err := c.value(props[name], p, 1)
			if err != nil {
				if ge, ok := err.(*Error); ok && !strings.HasPrefix(ge.Path, path) {
					ge.Path = path + ge.Path // inside a $defs entry of the parameters
				}
				return nil, err
			}
			if output.StringValued(props[name]) {
				raw, err := rawValue(val, p)
				if err != nil {
					return nil, err
				}
				val = &node{kind: kSeq, seq: []*node{raw, literal("\n")}}
			} else {
				val = &node{kind: kSeq, seq: []*node{val, literal("\n</parameter>\n")}}
			}
			n.props = append(n.props, val)
			tags = append(tags, "<parameter="+name+">\n")
			if slices.Contains(required, name) {
				n.required |= 1 << uint(i)
			}
		}
	}
	tags = append(tags, "</function>\n")
	n.tags = trieDFA(tags, false)
	return n, nil
}

// rawValue turns the string node of a string-valued parameter into raw
// text with the same characters and length.
func rawValue(n *node, path string) (*node, error) {
	if n.kind == kAny {
		var strs []*node
		for _, a := range n.alts {
			if a.kind == kString {
				strs = append(strs, a)
			}
		}
		if len(strs) != 1 {
			return nil, unsupported(path, "anyOf", "a string parameter with several string alternatives cannot be enforced")
		}
		n = strs[0]
	}
	if n.kind != kString {
		return nil, unsupported(path, "type", "a string parameter whose schema is not a string cannot be enforced")
	}
	return &node{kind: kRaw, chars: n.chars, minLen: n.minLen, maxLen: n.maxLen, counted: n.counted}, nil
}
