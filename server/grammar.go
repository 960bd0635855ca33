package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/aimaproject/aimac/grammar"
	"github.com/aimaproject/aimac/openai"
	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/tokenizer"
)

// grammarConstraint is a Constraint from a compiled grammar: a JSON
// schema's (response_format) or a required tool call's.
type grammarConstraint struct {
	m *grammar.Matcher
}

// errNothingAllowed ends a generation whose grammar allows no next token
// (a schema no finite value satisfies within the grammar's bounds).
var errNothingAllowed = errors.New("the grammar allows no next token")

func (c grammarConstraint) Mask(mask runtime.Mask) (bool, error) {
	if c.m.Mask(mask) == 0 {
		return true, errNothingAllowed
	}
	return true, nil
}

func (c grammarConstraint) Advance(token int32) error { return c.m.Advance(token) }

// grammarVocabs holds each model's vocabulary trie, built on first use.
var grammarVocabs sync.Map // *Model → *vocabOnce

type vocabOnce struct {
	once sync.Once
	v    *grammar.Vocab
	err  error
}

// grammarVocab is m's vocabulary laid out for masks over the engine's
// logits, the stop ids allowed once the value is complete.
func grammarVocab(m *Model) (*grammar.Vocab, error) {
	e, _ := grammarVocabs.LoadOrStore(m, &vocabOnce{})
	vo := e.(*vocabOnce)
	vo.once.Do(func() { vo.v, vo.err = grammar.NewVocab(textTokens{m.Tokenizer}, m.Engine.Vocab(), m.StopIDs) })
	return vo.v, vo.err
}

// textTokens is the tokenizer as the grammar sees it: a control token
// (an added one) is never text the grammar can place, since the output
// drops it or reads it as markup — except <tool_call> and </tool_call>,
// which the tool-call parser reads exactly as their text, so a model may
// open and close a constrained call with the tokens it was trained on.
type textTokens struct{ *tokenizer.Tokenizer }

func (t textTokens) Special(id int32) bool {
	if !t.Added(id) {
		return false
	}
	switch string(t.TokenBytes(id)) {
	case "<tool_call>", "</tool_call>":
		return false
	}
	return true
}

// grammars keeps the last compiled grammars by what they were compiled
// from, so that a schema a client sends again reuses its compiled automaton
// and its cached masks (the first mask inside a free string walks the whole
// vocabulary; later ones hit the cache).
var grammars = struct {
	sync.Mutex
	keys  []string
	byKey map[string]*grammar.Grammar
}{byKey: map[string]*grammar.Grammar{}}

// grammarsKept bounds the compiled grammars kept (each up to a few tens of
// MiB of cached masks on a 150k-token vocabulary).
const grammarsKept = 8

// compiled returns the grammar for key, compiling it on a miss.
func compiled(m *Model, key string, compile func() (*grammar.Grammar, error)) (*grammar.Grammar, error) {
	key = fmt.Sprintf("%p\x00%s", m, key)
	grammars.Lock()
	g, ok := grammars.byKey[key]
	grammars.Unlock()
	if ok {
		return g, nil
	}
	g, err := compile()
	if err != nil {
		return nil, err
	}
	grammars.Lock()
	defer grammars.Unlock()
	if _, ok := grammars.byKey[key]; !ok {
		if len(grammars.keys) >= grammarsKept {
			delete(grammars.byKey, grammars.keys[0])
			grammars.keys = grammars.keys[1:]
		}
		grammars.keys = append(grammars.keys, key)
		grammars.byKey[key] = g
	}
	return g, nil
}

// schemaError maps a compile error to the request's 400.
func schemaError(param string, err error) *openai.Error {
	var ge *grammar.Error
	if errors.As(err, &ge) {
		where := param
		if ge.Path != "" {
			where = param + ge.Path
		}
		if ge.Unsupported() {
			return openai.UnsupportedSchemaKeyword(where, fmt.Sprintf("constrained decoding cannot enforce %q: %s", ge.Keyword, ge.Message))
		}
		return openai.InvalidRequest(where, "invalid schema: "+ge.Message)
	}
	return openai.Internal("compiling the grammar: " + err.Error())
}

// constrainFormat sets the constraint of a response format (given at
// param), which a forced tool call excludes.
func (p *genParams) constrainFormat(m *Model, rf *openai.ResponseFormat, param string) *openai.Error {
	if rf == nil || rf.Type == "text" {
		return nil
	}
	if p.constraint != nil {
		return openai.InvalidRequest(param, "a "+rf.Type+" format cannot be combined with a required or named tool_choice: the answer is a tool call")
	}
	schemaParam := param + ".schema"
	if rf.Type == "json_schema" && param == "response_format" {
		schemaParam = "response_format.json_schema.schema"
	}
	c, apiErr := formatConstraint(m, rf, schemaParam)
	if apiErr != nil {
		return apiErr
	}
	p.constraint = c
	return nil
}

// formatConstraint is the constraint of a response_format (nil for text);
// param is where the request gave it, for errors.
func formatConstraint(m *Model, rf *openai.ResponseFormat, param string) (Constraint, *openai.Error) {
	if rf == nil || rf.Type == "text" {
		return nil, nil
	}
	v, err := grammarVocab(m)
	if err != nil {
		return nil, openai.Internal(err.Error())
	}
	var g *grammar.Grammar
	switch rf.Type {
	case "json_object":
		g, _ = compiled(m, "json_object", func() (*grammar.Grammar, error) { return grammar.JSONObject(v), nil })
	case "json_schema":
		schema := rf.JSONSchema.Schema
		if g, err = compiled(m, "schema\x00"+string(schema), func() (*grammar.Grammar, error) { return grammar.JSONSchema(schema, v) }); err != nil {
			return nil, schemaError(param, err)
		}
	default:
		return nil, openai.InvalidRequest("response_format.type", "unknown response format "+rf.Type)
	}
	return grammarConstraint{g.NewMatcher()}, nil
}

// toolConstraint is the constraint of tool_choice "required" (any of defs)
// or a named function (that one).
func toolConstraint(m *Model, defs []openai.Tool, choice *openai.ToolChoice) (Constraint, *openai.Error) {
	var tools []grammar.Tool
	for _, d := range defs {
		if choice.Mode == openai.ToolChoiceFunction && d.Function.Name != choice.Name {
			continue
		}
		tools = append(tools, grammar.Tool{Name: d.Function.Name, Parameters: d.Function.Parameters})
	}
	v, err := grammarVocab(m)
	if err != nil {
		return nil, openai.Internal(err.Error())
	}
	key, err := json.Marshal(tools)
	if err != nil {
		return nil, openai.Internal(err.Error())
	}
	g, err := compiled(m, "tools\x00"+string(key), func() (*grammar.Grammar, error) { return grammar.ToolCall(tools, v) })
	if err != nil {
		e := schemaError("tools", err)
		e.Param = strings.Replace(e.Param, "tools/tools/", "tools/", 1)
		return nil, e
	}
	return grammarConstraint{g.NewMatcher()}, nil
}
