// Package output turns the model's decoded text into OpenAI chat events as it
// is generated: reasoning deltas, content deltas and tool calls, cut at the
// request's stop strings.
//
// The model writes (SPEC §7 items 7 and 8) its reasoning first when thinking is
// on (the prompt ends with "<think>\n"), then "</think>", usually "\n\n", and
// the answer. The answer may contain tool calls in the Qwen3-Coder XML form
//
//	<tool_call>
//	<function=NAME>
//	<parameter=KEY>
//	VALUE
//	</parameter>
//	</function>
//	</tool_call>
//
// which the Parser turns into ToolCallStart and ToolCallArguments events: the
// arguments are a JSON object built incrementally, each parameter converted by
// the tool's JSON schema (string parameters stream live, other types are
// JSON-decoded once complete).
//
// The Parser holds back only what it cannot classify yet: a possible prefix of
// a marker ("</think>", "<tool_call>", "</parameter>", a leading "<think>"), a
// possible prefix of a stop string, whitespace that is dropped if a marker
// follows, an incomplete UTF-8 sequence inside a JSON string, and a tool call
// until its function name is known. Everything else is emitted at once.
// Splitting the same text differently across Write calls never changes the
// accumulated Result, so streamed and non-streamed responses agree.
//
// Choices made where the format leaves room:
//   - A call to a function that is not in Options.Tools is still emitted as a
//     call with that name (all its parameters as strings); the server decides
//     what to do with it.
//   - Stop strings are matched in the content as emitted: not in reasoning, not
//     inside tool calls, not in the newlines dropped after "</think>". Among
//     overlapping stop strings the one that ends first wins (the one a
//     token-by-token stream would see first), so the cut does not depend on
//     how the text was split.
//   - A tool call left open at Close is closed ("}") with the parameters parsed
//     so far; a value cut inside its "</parameter>" tag keeps the text before
//     the tag; the closing fragment and the ToolCall carry Unterminated.
//   - Text between parameters that is not a tag is dropped; text after
//     "</function>" that is not "</tool_call>" ends the call and is content.
//   - Whitespace around tool calls is dropped: content before a call loses its
//     trailing whitespace, content after a call its leading whitespace.
//   - Reasoning is trimmed of surrounding whitespace, content of leading
//     newlines, as the chat template does when it renders a message back.
package output

import (
	"encoding/json"
	"strconv"
	"strings"
)

// ToolSchema is one function the request offers: its name and the JSON schema
// object of its parameters (nil when it has none).
type ToolSchema struct {
	Name       string
	Parameters json.RawMessage
}

// Options configures one generation's Parser.
type Options struct {
	// StartInReasoning says the prompt ended inside "<think>" (thinking on),
	// so the output starts as reasoning.
	StartInReasoning bool
	// Tools enables tool-call parsing; nil leaves tool-call text as content.
	Tools []ToolSchema
	// Stop strings end the generation when they appear in content.
	Stop []string
	// NewCallID returns the id of each tool call; nil numbers them "call_0",
	// "call_1", ….
	NewCallID func() string
	// Raw passes the text through as content, untrimmed, with no reasoning
	// or tool-call parsing — only stop strings apply (text completions).
	Raw bool
}

// Kind says what an Event carries.
type Kind int

const (
	// Reasoning is a reasoning_content delta.
	Reasoning Kind = iota
	// Content is a content delta.
	Content
	// ToolCallStart opens tool call Index with its ID and Name.
	ToolCallStart
	// ToolCallArguments is a fragment of tool call Index's arguments JSON.
	ToolCallArguments
)

// String names the kind, for logs and test diffs.
func (k Kind) String() string {
	switch k {
	case Reasoning:
		return "Reasoning"
	case Content:
		return "Content"
	case ToolCallStart:
		return "ToolCallStart"
	case ToolCallArguments:
		return "ToolCallArguments"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one delta of the assistant message.
type Event struct {
	Kind Kind
	// Text is the delta for Reasoning and Content, a fragment of the arguments
	// JSON for ToolCallArguments.
	Text string
	// Index is the tool call's position (0, 1, …) for tool events.
	Index int
	// ID and Name are set on ToolCallStart only.
	ID, Name string
	// Unterminated marks the ToolCallArguments fragment that Close added to
	// finish a call the model did not finish.
	Unterminated bool
}

// state is where the parser is in the output's grammar.
type state int

const (
	stReasoning   state = iota // inside <think>
	stContent                  // the answer
	stCallOpen                 // after <tool_call>, before <function=NAME>
	stCallBody                 // inside <function=…>, between parameters
	stParamString              // inside a parameter streamed as a JSON string
	stParamRaw                 // inside a parameter decoded as JSON at its end
	stCallEnd                  // after </function>, before </tool_call>
)

const (
	thinkOpen    = "<think>"
	thinkClose   = "</think>"
	callOpen     = "<tool_call>"
	callClose    = "</tool_call>"
	funcOpen     = "<function="
	funcClose    = "</function>"
	paramOpen    = "<parameter="
	paramClose   = "</parameter>"
	paramCloseNL = "\n" + paramClose
	whitespace   = " \t\r\n"
)

// Parser is the streaming state machine of one generation. It is not safe for
// concurrent use.
type Parser struct {
	tools     map[string]map[string]bool // function → parameter → streamed as a string
	toolsOn   bool
	raw       bool
	newCallID func() string

	st  state
	buf string // input received but not yet emitted or dropped
	// trimLead drops leading characters in trimSet at the start of reasoning or
	// content; firstOutput lets a leading "<think>" open reasoning.
	trimLead    bool
	trimSet     string
	firstOutput bool

	stop    stopMatcher
	stopped bool
	closed  bool

	// The tool call being parsed.
	calls      int    // calls started so far; the current one is calls-1
	pre        string // whitespace before <tool_call>, restored if the block is malformed
	params     map[string]bool
	first      bool // no parameter emitted yet
	valueStart bool // the value's leading "\n" is still to be stripped
	scanned    int  // bytes of buf already searched for </parameter> in stParamRaw

	evs []Event
}

// New returns a Parser for one generation.
func New(o Options) *Parser {
	p := &Parser{
		toolsOn:   o.Tools != nil,
		newCallID: o.NewCallID,
		stop:      newStopMatcher(o.Stop),
		trimLead:  true,
	}
	if p.toolsOn {
		p.tools = make(map[string]map[string]bool, len(o.Tools))
		for _, t := range o.Tools {
			if _, dup := p.tools[t.Name]; !dup { // the first definition wins
				p.tools[t.Name] = stringParams(t.Parameters)
			}
		}
	}
	switch {
	case o.Raw:
		p.toolsOn, p.tools, p.st, p.trimLead, p.raw = false, nil, stContent, false, true
	case o.StartInReasoning:
		p.st, p.trimSet = stReasoning, whitespace
	default:
		p.st, p.trimSet, p.firstOutput = stContent, "\n", true
	}
	return p
}

// Write consumes the next decoded text piece and returns the events it
// completes; after a stop string matched or Close it returns nothing.
func (p *Parser) Write(text string) []Event {
	if p.stopped || p.closed {
		return nil
	}
	p.buf += text
	p.run()
	return p.take()
}

// Control consumes a control token of the vocabulary (an added token such
// as "</think>" or "<|fim_pad|>"). The output's own markup goes on as
// Write would take it: "<tool_call>" and "</tool_call>" always (a call, or
// readable text where calls are not parsed), "<think>" and "</think>" where
// the grammar reads them — a stray one in the answer is dropped — and as
// text in Raw mode, which continues a prompt verbatim. Every other control
// token is dropped, so that none reaches the text.
func (p *Parser) Control(token string) []Event {
	switch {
	case p.stopped || p.closed:
		return nil
	case token == callOpen || token == callClose:
	case token == thinkOpen || token == thinkClose:
		if !p.raw && !p.readsThink(token) {
			return nil
		}
	default:
		return nil
	}
	return p.Write(token)
}

// readsThink reports whether the grammar reads a reasoning tag where the
// parser is: "</think>" inside the reasoning, "<think>" opening the output.
func (p *Parser) readsThink(token string) bool {
	switch p.st {
	case stReasoning:
		return token == thinkClose
	case stContent:
		return p.firstOutput && token == thinkOpen && strings.TrimLeft(p.buf, p.trimSet) == ""
	}
	return false
}

// Close flushes what is held back at the end of generation: text that turned
// out not to be a marker is emitted as what it is, and an open tool call is
// closed.
func (p *Parser) Close() []Event {
	if p.stopped || p.closed {
		return nil
	}
	p.closed = true
	switch p.st {
	case stReasoning:
		p.reasoning(strings.TrimRight(p.buf, whitespace))
	case stContent:
		p.content(p.buf)
	case stCallOpen:
		// No function name yet: the block was never a call.
		p.content(p.pre + callOpen + p.buf)
	default:
		p.finishCall()
	}
	p.buf = ""
	if !p.stopped {
		p.flushContent()
	}
	return p.take()
}

// Stopped reports that a stop string matched: the caller must stop generating.
func (p *Parser) Stopped() bool { return p.stopped }

// InReasoning reports that the output is inside the reasoning: "<think>"
// is open and "</think>" has not come yet.
func (p *Parser) InReasoning() bool { return p.st == stReasoning }

// HasToolCalls reports whether any tool call was emitted, which makes the
// finish_reason "tool_calls".
func (p *Parser) HasToolCalls() bool { return p.calls > 0 }

// held returns how many bytes of input are held back, for tests.
func (p *Parser) held() int {
	n := len(p.buf) + len(p.stop.held)
	if p.st == stCallOpen {
		n += len(p.pre) + len(callOpen)
	}
	return n
}

// run advances the state machine as far as the buffered input allows.
func (p *Parser) run() {
	for !p.stopped && p.step() {
	}
	if p.stopped {
		p.buf = ""
	}
}

// step makes one move and reports whether another may follow.
func (p *Parser) step() bool {
	if p.trimLead {
		p.buf = strings.TrimLeft(p.buf, p.trimSet)
		if p.buf == "" {
			return false
		}
		p.trimLead = false
	}
	switch p.st {
	case stReasoning:
		return p.stepReasoning()
	case stContent:
		return p.stepContent()
	case stCallOpen:
		return p.stepCallOpen()
	case stCallBody:
		return p.stepCallBody()
	case stParamString:
		return p.stepParamString()
	case stParamRaw:
		return p.stepParamRaw()
	case stCallEnd:
		return p.stepCallEnd()
	}
	panic("output: unknown state " + strconv.Itoa(int(p.st)))
}

// stepReasoning emits reasoning up to "</think>", holding back trailing
// whitespace (trimmed if "</think>" follows) and a possible "</think>" prefix.
func (p *Parser) stepReasoning() bool {
	if i := strings.Index(p.buf, thinkClose); i >= 0 {
		p.reasoning(strings.TrimRight(p.buf[:i], whitespace))
		p.buf = p.buf[i+len(thinkClose):]
		p.startContent("\n")
		return true
	}
	h := backOverSpace(p.buf, len(p.buf)-partialSuffix(p.buf, thinkClose))
	p.reasoning(p.buf[:h])
	p.buf = p.buf[h:]
	return false
}

// startContent enters content, dropping its leading characters in trim.
func (p *Parser) startContent(trim string) {
	p.st, p.trimLead, p.trimSet, p.firstOutput = stContent, true, trim, false
}

// stepContent emits content up to a "<tool_call>" when tools are on, holding
// back a possible "<tool_call>" prefix and the whitespace before it.
func (p *Parser) stepContent() bool {
	if p.firstOutput {
		// Thinking was off but the model opened <think> anyway.
		if strings.HasPrefix(p.buf, thinkOpen) {
			p.buf = p.buf[len(thinkOpen):]
			p.st, p.trimLead, p.trimSet, p.firstOutput = stReasoning, true, whitespace, false
			return true
		}
		if strings.HasPrefix(thinkOpen, p.buf) {
			return false
		}
		p.firstOutput = false
	}
	if !p.toolsOn {
		p.content(p.buf)
		p.buf = ""
		return false
	}
	if i := strings.Index(p.buf, callOpen); i >= 0 {
		before := strings.TrimRight(p.buf[:i], whitespace)
		p.content(before)
		p.pre = p.buf[len(before):i]
		p.buf = p.buf[i+len(callOpen):]
		p.st = stCallOpen
		return true
	}
	h := backOverSpace(p.buf, len(p.buf)-partialSuffix(p.buf, callOpen))
	p.content(p.buf[:h])
	p.buf = p.buf[h:]
	return false
}

// reasoning emits a reasoning delta.
func (p *Parser) reasoning(s string) {
	if s != "" {
		p.emit(Event{Kind: Reasoning, Text: s})
	}
}

// content passes a content delta through the stop matcher.
func (p *Parser) content(s string) {
	out, hit := p.stop.write(s)
	if out != "" {
		p.emit(Event{Kind: Content, Text: out})
	}
	if hit {
		p.stopped = true
	}
}

// flushContent emits what the stop matcher held: the content run has ended.
func (p *Parser) flushContent() {
	if s := p.stop.flush(); s != "" {
		p.emit(Event{Kind: Content, Text: s})
	}
}

// emit appends an event, merging it into the previous one of the same stream
// so one Write yields one delta per stream.
func (p *Parser) emit(e Event) {
	if n := len(p.evs); n > 0 && e.Kind != ToolCallStart {
		last := &p.evs[n-1]
		if last.Kind == e.Kind && last.Index == e.Index {
			last.Text += e.Text
			last.Unterminated = last.Unterminated || e.Unterminated
			return
		}
	}
	p.evs = append(p.evs, e)
}

// take hands the pending events to the caller.
func (p *Parser) take() []Event {
	evs := p.evs
	p.evs = nil
	return evs
}

// partialSuffix returns the length of the longest suffix of s that is a proper
// prefix of marker: the part that may still become the marker.
func partialSuffix(s, marker string) int {
	for n := min(len(s), len(marker)-1); n > 0; n-- {
		if strings.HasSuffix(s, marker[:n]) {
			return n
		}
	}
	return 0
}

// backOverSpace moves i back over the whitespace that precedes it in s.
func backOverSpace(s string, i int) int {
	for i > 0 && strings.IndexByte(whitespace, s[i-1]) >= 0 {
		i--
	}
	return i
}
