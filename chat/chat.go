// Package chat renders a checkpoint's own chat template (chat_template.jinja,
// or the chat_template of tokenizer_config.json) into the prompt text, with
// HuggingFace transformers' semantics (SPEC §7): what
// tokenizer.apply_chat_template(messages, tools=..., add_generation_prompt=...,
// **chat_template_kwargs) returns, byte for byte.
//
// transformers compiles templates in a Jinja2 ImmutableSandboxedEnvironment
// with trim_blocks, lstrip_blocks and the loopcontrols extension, replaces
// tojson by json.dumps(x, ensure_ascii=False) (", " and ": " separators,
// insertion key order, no HTML escaping, non-ASCII kept), adds the globals
// raise_exception and strftime_now, and renders with the variables messages,
// tools (None when absent), documents (None), add_generation_prompt, the
// tokenizer's special tokens (bos_token, eos_token; a token the tokenizer
// lacks is undefined) and then every chat_template_kwargs key.
//
// Templates run on github.com/ardanlabs/jinja. Request JSON becomes template
// values as Python's json.loads builds them: objects keep their key order,
// integer literals are ints, other numbers floats. Where the engine's
// formatting differs from Python's, the template source is rewritten to call
// Python-exact replacements (see rewrite.go): {{ }} output is str(x), and
// tojson, string and trim are json.dumps, str and str.strip.
//
// Known remaining differences from Jinja2, none of which the Qwen templates
// meet with a normalized request: integers outside int64 become floats
// (Python keeps every digit); '~' and '+' format non-string operands with
// Go's %g and '+' concatenates where Python raises a TypeError; an attribute
// of an undefined value is undefined instead of an UndefinedError; string
// methods (.strip() and the like) without arguments use Go's idea of
// whitespace; the sandbox's ban on mutating methods (list.append,
// dict.update) is not enforced; lone UTF-16 surrogates in request JSON become
// U+FFFD.
package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ardanlabs/jinja"
)

// Template is a compiled chat template, safe for concurrent Render calls.
type Template struct {
	compiled *jinja.Template
}

// Input is one rendering request: the conversation and everything the
// template may read besides it.
type Input struct {
	// Messages is a JSON array of message objects, already normalized by
	// the caller (roles system/user/assistant/tool; content a string or a
	// list of parts; assistant tool_calls with function.arguments as a JSON
	// object; reasoning_content).
	Messages json.RawMessage
	// Tools is a JSON array of tool objects ({"type":"function",
	// "function":{…}}), or nil (the template then sees tools = None).
	Tools json.RawMessage
	// AddGenerationPrompt ends the prompt with the assistant turn opener.
	AddGenerationPrompt bool
	// Kwargs is a JSON object of extra template variables
	// (chat_template_kwargs: enable_thinking, preserve_thinking, …), or nil.
	Kwargs json.RawMessage
	// BOSToken and EOSToken are exposed as bos_token and eos_token; an
	// empty one is left undefined, as transformers leaves a missing
	// special token out.
	BOSToken, EOSToken string
}

// RenderError is an error raised while the template ran: its
// raise_exception (no user query, a misplaced system message, an unknown
// role) or a runtime error such as a filter given the wrong type. Message is
// the template's own text, as Python would report it.
type RenderError struct{ Message string }

// Error makes RenderError an error, prefixed so logs say where it came from.
func (e *RenderError) Error() string { return "chat template: " + e.Message }

// Load reads the chat template of the checkpoint directory dir, the way
// transformers picks it: dir/chat_template.jinja if present, else the
// "chat_template" of dir/tokenizer_config.json (a string, or a list of
// {"name", "template"} entries of which the one named "default" is used).
func Load(dir string) (*Template, error) {
	jinjaPath := filepath.Join(dir, "chat_template.jinja")
	src, err := os.ReadFile(jinjaPath)
	if err == nil {
		t, err := Parse(string(src))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", jinjaPath, err)
		}
		return t, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("chat: %w", err)
	}

	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	data, err := os.ReadFile(cfgPath)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("chat: no chat template in %s: neither chat_template.jinja nor tokenizer_config.json exists", dir)
	}
	if err != nil {
		return nil, fmt.Errorf("chat: %w", err)
	}
	text, err := templateFromConfig(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cfgPath, err)
	}
	t, err := Parse(text)
	if err != nil {
		return nil, fmt.Errorf("%s: chat_template: %w", cfgPath, err)
	}
	return t, nil
}

// templateFromConfig extracts the chat template from tokenizer_config.json
// bytes.
func templateFromConfig(data []byte) (string, error) {
	var cfg struct {
		ChatTemplate json.RawMessage `json:"chat_template"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return "", fmt.Errorf("invalid JSON: %w", err)
	}
	if len(cfg.ChatTemplate) == 0 || string(cfg.ChatTemplate) == "null" {
		return "", errors.New("no chat_template (and no chat_template.jinja beside it)")
	}
	var s string
	if err := json.Unmarshal(cfg.ChatTemplate, &s); err == nil {
		return s, nil
	}
	var named []struct {
		Name     *string `json:"name"`
		Template *string `json:"template"`
	}
	if err := json.Unmarshal(cfg.ChatTemplate, &named); err != nil {
		return "", errors.New("chat_template is neither a string nor a list of {\"name\", \"template\"} objects")
	}
	var names []string
	for _, n := range named {
		if n.Name == nil || n.Template == nil {
			return "", errors.New("chat_template list entry without a string name and template")
		}
		if *n.Name == "default" {
			return *n.Template, nil
		}
		names = append(names, *n.Name)
	}
	return "", fmt.Errorf("chat_template has several templates and none named \"default\" (names: %q)", names)
}

// Parse compiles a template source once for any number of renders;
// syntax errors are reported here rather than at the first request.
func Parse(src string) (*Template, error) {
	compiled, err := jinja.Compile(rewrite(normalizeNewlines(src)))
	if err != nil {
		return nil, fmt.Errorf("chat template syntax: %w", err)
	}
	return &Template{compiled: compiled}, nil
}

// normalizeNewlines does what Jinja2's lexer does to a source before
// anything else: every "\r\n", "\r" and "\n" becomes "\n", and one
// trailing newline is dropped (keep_trailing_newline=False).
func normalizeNewlines(src string) string {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.ReplaceAll(src, "\r", "\n")
	return strings.TrimSuffix(src, "\n")
}

// reserved are the variables transformers passes itself; a kwarg of the same
// name would make its render call fail ("multiple values for keyword
// argument"), so it is refused.
var reserved = []string{"messages", "tools", "documents", "add_generation_prompt"}

// errPanic marks a panic inside the template engine, turned into an error
// so one odd request cannot take the server down (the fuzz test fails on it).
var errPanic = errors.New("chat: template engine panicked")

// Render produces the prompt for in. Malformed Input JSON is a plain error;
// anything that goes wrong while the template runs is a *RenderError (and a
// panic inside the engine a plain error too).
func (t *Template) Render(in Input) (out string, err error) {
	vars, err := in.variables()
	if err != nil {
		return "", err
	}
	defer func() {
		if p := recover(); p != nil {
			out, err = "", fmt.Errorf("%w: %v", errPanic, p)
		}
	}()
	out, err = t.compiled.RenderValues(vars)
	if err != nil {
		var r *raised
		if errors.As(err, &r) {
			return "", &RenderError{Message: r.msg}
		}
		return "", &RenderError{Message: err.Error()}
	}
	return out, nil
}

// variables builds the render variables in transformers' order: its own,
// then the special tokens, then the kwargs (which may shadow the tokens and
// globals), then this package's filter replacements.
func (in Input) variables() (map[string]jinja.Value, error) {
	vars := map[string]jinja.Value{
		"raise_exception":       jinja.NewCallable("raise_exception", raiseException),
		"documents":             jinja.None(),
		"add_generation_prompt": jinja.NewBool(in.AddGenerationPrompt),
	}

	if len(in.Messages) == 0 {
		return nil, errors.New("chat: no messages given")
	}
	msgs, err := decodeJSON(in.Messages)
	if err != nil {
		return nil, fmt.Errorf("chat: messages: %w", err)
	}
	if !msgs.IsList() {
		return nil, errors.New("chat: messages is not a JSON array")
	}
	vars["messages"] = msgs

	vars["tools"] = jinja.None()
	if len(in.Tools) > 0 {
		tools, err := decodeJSON(in.Tools)
		if err != nil {
			return nil, fmt.Errorf("chat: tools: %w", err)
		}
		switch {
		case tools.IsNone():
		case tools.IsList():
			for _, tool := range tools.AsList().Items {
				if !tool.IsDict() {
					return nil, errors.New("chat: tools: every tool must be a JSON object")
				}
			}
			vars["tools"] = tools
		default:
			return nil, errors.New("chat: tools is not a JSON array")
		}
	}

	if in.BOSToken != "" {
		vars["bos_token"] = jinja.NewString(in.BOSToken)
	}
	if in.EOSToken != "" {
		vars["eos_token"] = jinja.NewString(in.EOSToken)
	}

	if len(in.Kwargs) > 0 {
		kw, err := decodeJSON(in.Kwargs)
		if err != nil {
			return nil, fmt.Errorf("chat: kwargs: %w", err)
		}
		switch {
		case kw.IsNone():
		case kw.IsDict():
			d := kw.AsDict()
			for _, k := range d.Keys {
				if slices.Contains(reserved, k) {
					return nil, fmt.Errorf("chat: kwargs may not set %q", k)
				}
				vars[k] = d.Data[k]
			}
		default:
			return nil, errors.New("chat: kwargs is not a JSON object")
		}
	}

	vars[printFilter] = jinja.NewCallable("str", filterPrint)
	vars[filterPfx+"tojson"] = jinja.NewCallable("tojson", filterToJSON)
	vars[filterPfx+"string"] = jinja.NewCallable("string", filterString)
	vars[filterPfx+"trim"] = jinja.NewCallable("trim", filterTrim)
	return vars, nil
}

// raised is the error raise_exception returns, so Render can hand back the
// template's message unchanged.
type raised struct{ msg string }

// Error makes raised an error.
func (r *raised) Error() string { return r.msg }

// raiseException is transformers' raise_exception(message) global.
func raiseException(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), &raised{msg: "raise_exception() missing 1 required positional argument: 'message'"}
	}
	return jinja.Undefined(), &raised{msg: pyStr(args[0])}
}
