package openai

import (
	"encoding/json"
	"slices"
)

// Response statuses.
const (
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusIncomplete = "incomplete"
	StatusFailed     = "failed"
)

// Response is a Responses API response object.
type Response struct {
	ID                 string              `json:"id"`
	Object             string              `json:"object"`
	CreatedAt          int64               `json:"created_at"`
	Status             string              `json:"status"`
	Error              *ResponseError      `json:"error"`
	IncompleteDetails  *IncompleteDetails  `json:"incomplete_details"`
	Instructions       *string             `json:"instructions"`
	MaxOutputTokens    *int                `json:"max_output_tokens"`
	Model              string              `json:"model"`
	Output             []OutputItem        `json:"output"`
	ParallelToolCalls  bool                `json:"parallel_tool_calls"`
	PreviousResponseID *string             `json:"previous_response_id"`
	Reasoning          ResponseReasoning   `json:"reasoning"`
	Store              bool                `json:"store"`
	Temperature        float64             `json:"temperature"`
	Text               TextConfig          `json:"text"`
	ToolChoice         ResponsesToolChoice `json:"tool_choice"`
	Tools              []ResponsesTool     `json:"tools"`
	TopP               float64             `json:"top_p"`
	Truncation         string              `json:"truncation"`
	Usage              *ResponseUsage      `json:"usage"` // null until finished
	Metadata           json.RawMessage     `json:"metadata"`
}

// ResponseError is why a response failed.
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// IncompleteDetails is why a response is incomplete ("max_output_tokens").
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// ResponseReasoning echoes the reasoning option; null members when unset.
type ResponseReasoning struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

// ResponseUsage is the token usage of a response.
type ResponseUsage struct {
	InputTokens         int                 `json:"input_tokens"`
	InputTokensDetails  InputTokensDetails  `json:"input_tokens_details"`
	OutputTokens        int                 `json:"output_tokens"`
	OutputTokensDetails OutputTokensDetails `json:"output_tokens_details"`
	TotalTokens         int                 `json:"total_tokens"`
}

// InputTokensDetails breaks the input tokens down.
type InputTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// OutputTokensDetails breaks the output tokens down.
type OutputTokensDetails struct {
	ReasoningTokens int `json:"reasoning_tokens"`
}

// NewResponseUsage returns the usage of input and output tokens.
func NewResponseUsage(input, output, cached, reasoning int) ResponseUsage {
	return ResponseUsage{
		InputTokens: input, InputTokensDetails: InputTokensDetails{CachedTokens: cached},
		OutputTokens: output, OutputTokensDetails: OutputTokensDetails{ReasoningTokens: reasoning},
		TotalTokens: input + output,
	}
}

// MarshalJSON writes the response with empty lists and metadata as [] and {}
// rather than null.
func (r Response) MarshalJSON() ([]byte, error) {
	type plain Response
	if r.Output == nil {
		r.Output = []OutputItem{}
	}
	if r.Tools == nil {
		r.Tools = []ResponsesTool{}
	}
	if r.Metadata == nil {
		r.Metadata = json.RawMessage("{}")
	}
	return marshalNoEscape(plain(r))
}

// NewResponse returns an in-progress response to req, echoing its options
// with OpenAI's defaults for what it left out (temperature and top_p 1,
// tool_choice auto, parallel tool calls and store on).
func NewResponse(id, model string, createdAt int64, req *ResponsesRequest) *Response {
	r := &Response{
		ID: id, Object: ObjectResponse, CreatedAt: createdAt, Status: StatusInProgress, Model: model,
		Output: []OutputItem{}, ParallelToolCalls: true, Store: true, Temperature: 1, TopP: 1,
		Text:       TextConfig{Format: &TextFormat{Type: "text"}},
		ToolChoice: ResponsesToolChoice{Mode: ToolChoiceAuto}, Truncation: "disabled",
		Tools: append([]ResponsesTool{}, req.Tools...), Metadata: req.Metadata,
		MaxOutputTokens: req.MaxOutputTokens,
	}
	if req.Text != nil && req.Text.Format != nil {
		r.Text.Format = req.Text.Format
	}
	if req.Instructions != "" {
		s := req.Instructions
		r.Instructions = &s
	}
	if req.PreviousResponseID != "" {
		s := req.PreviousResponseID
		r.PreviousResponseID = &s
	}
	if req.ParallelToolCalls != nil {
		r.ParallelToolCalls = *req.ParallelToolCalls
	}
	if req.Store != nil {
		r.Store = *req.Store
	}
	if req.Temperature != nil {
		r.Temperature = *req.Temperature
	}
	if req.TopP != nil {
		r.TopP = *req.TopP
	}
	if req.ToolChoice != nil {
		r.ToolChoice = *req.ToolChoice
	}
	if req.Reasoning != nil {
		if e := req.Reasoning.Effort; e != "" {
			r.Reasoning.Effort = &e
		}
		if s := req.Reasoning.Summary; s != "" {
			r.Reasoning.Summary = &s
		}
	}
	return r
}

// Output item types.
const (
	OutputMessage      = "message"
	OutputReasoning    = "reasoning"
	OutputFunctionCall = "function_call"
)

// OutputItem is one item of a response's output; Type decides its fields:
//
//	reasoning      ID, Summary, Content (reasoning_text parts)
//	message        ID, Status, Content (output_text parts); role assistant
//	function_call  ID, Status, CallID, Name, Arguments
type OutputItem struct {
	Type      string
	ID        string
	Status    string
	Content   []OutputContent
	Summary   []OutputContent
	CallID    string
	Name      string
	Arguments string
}

// OutputContent is one content part of an output item: output_text,
// reasoning_text or summary_text.
type OutputContent struct {
	Type string
	Text string
}

// Output content types.
const (
	ContentOutputText    = "output_text"
	ContentReasoningText = "reasoning_text"
	ContentSummaryText   = "summary_text"
)

// MarshalJSON writes the part; output_text carries its (empty) annotations.
func (c OutputContent) MarshalJSON() ([]byte, error) {
	o := orderedObject{}
	o.add("type", c.Type)
	o.add("text", c.Text)
	if c.Type == ContentOutputText {
		o.add("annotations", []struct{}{})
	}
	return o.marshal()
}

// MarshalJSON writes the item in its type's wire form.
func (it OutputItem) MarshalJSON() ([]byte, error) {
	o := orderedObject{}
	o.add("id", it.ID)
	o.add("type", it.Type)
	content := it.Content
	if content == nil {
		content = []OutputContent{}
	}
	switch it.Type {
	case OutputReasoning:
		summary := it.Summary
		if summary == nil {
			summary = []OutputContent{}
		}
		o.add("summary", summary)
		o.add("content", content)
	case OutputMessage:
		o.add("status", it.Status)
		o.add("role", "assistant")
		o.add("content", content)
	case OutputFunctionCall:
		o.add("status", it.Status)
		o.add("call_id", it.CallID)
		o.add("name", it.Name)
		o.add("arguments", it.Arguments)
	}
	return o.marshal()
}

// clone returns a deep copy of the item.
func (it OutputItem) clone() OutputItem {
	it.Content = slices.Clone(it.Content)
	it.Summary = slices.Clone(it.Summary)
	return it
}

// OutputMessages converts a response's output into the assistant message the
// conversation continues from: reasoning as reasoning_content, text as
// content, function calls as tool calls. It returns nil for empty output.
func OutputMessages(output []OutputItem) []Message {
	if len(output) == 0 {
		return nil
	}
	m := Message{Role: "assistant"}
	for _, it := range output {
		switch it.Type {
		case OutputReasoning:
			text := ""
			if m.ReasoningContent != nil {
				text = *m.ReasoningContent
			}
			for _, c := range it.Content {
				text += c.Text
			}
			m.ReasoningContent = &text
		case OutputMessage:
			text := m.Content.String()
			for _, c := range it.Content {
				text += c.Text
			}
			m.Content = TextContent(text)
		case OutputFunctionCall:
			m.ToolCalls = append(m.ToolCalls, ToolCall{ID: it.CallID, Type: "function", Function: FunctionCall{Name: it.Name, Arguments: it.Arguments}})
		}
	}
	return []Message{m}
}

// Responses stream event types.
const (
	EventCreated              = "response.created"
	EventInProgress           = "response.in_progress"
	EventCompleted            = "response.completed"
	EventIncomplete           = "response.incomplete"
	EventFailed               = "response.failed"
	EventOutputItemAdded      = "response.output_item.added"
	EventOutputItemDone       = "response.output_item.done"
	EventContentPartAdded     = "response.content_part.added"
	EventContentPartDone      = "response.content_part.done"
	EventOutputTextDelta      = "response.output_text.delta"
	EventOutputTextDone       = "response.output_text.done"
	EventReasoningTextDelta   = "response.reasoning_text.delta"
	EventReasoningTextDone    = "response.reasoning_text.done"
	EventFunctionCallArgDelta = "response.function_call_arguments.delta"
	EventFunctionCallArgDone  = "response.function_call_arguments.done"
)

// ResponseEvent is one Responses stream event; sent as "event: TYPE" and
// "data: JSON". Only the fields of its type are set.
type ResponseEvent struct {
	Type           string         `json:"type"`
	SequenceNumber int            `json:"sequence_number"`
	Response       *Response      `json:"response,omitempty"`
	OutputIndex    *int           `json:"output_index,omitempty"`
	ItemID         string         `json:"item_id,omitempty"`
	ContentIndex   *int           `json:"content_index,omitempty"`
	Item           *OutputItem    `json:"item,omitempty"`
	Part           *OutputContent `json:"part,omitempty"`
	Delta          *string        `json:"delta,omitempty"`
	Text           *string        `json:"text,omitempty"`
	Arguments      *string        `json:"arguments,omitempty"`
	Logprobs       *[]struct{}    `json:"logprobs,omitempty"` // [] on output_text events
}

// ResponseBuilder assembles a response from the decoded output and returns
// the stream events that announce each step, numbered in order. A server
// that does not stream uses it the same way and drops the events, so both
// paths produce the same response.
type ResponseBuilder struct {
	// NewID makes item ids; NewID (the package function) when nil.
	NewID func(prefix string) string

	resp Response
	seq  int
	open int // index of the open output item, -1 when none
}

// NewResponseBuilder starts building resp (from NewResponse).
func NewResponseBuilder(resp *Response) *ResponseBuilder {
	b := &ResponseBuilder{resp: *resp, open: -1}
	b.resp.Status = StatusInProgress
	b.resp.Output = []OutputItem{}
	b.resp.Usage = nil
	return b
}

// Response returns a copy of the response as built so far.
func (b *ResponseBuilder) Response() *Response {
	r := b.resp
	r.Output = make([]OutputItem, len(b.resp.Output))
	for i, it := range b.resp.Output {
		r.Output[i] = it.clone()
	}
	return &r
}

// event numbers a new event of type t.
func (b *ResponseBuilder) event(t string) ResponseEvent {
	e := ResponseEvent{Type: t, SequenceNumber: b.seq}
	b.seq++
	return e
}

// itemEvent numbers an event about output item i; the output_item events
// carry the item itself, the others its id.
func (b *ResponseBuilder) itemEvent(t string, i int) ResponseEvent {
	e := b.event(t)
	e.OutputIndex = &i
	if t != EventOutputItemAdded && t != EventOutputItemDone {
		e.ItemID = b.resp.Output[i].ID
	}
	return e
}

// partEvent numbers an event about the first content part of output item i.
func (b *ResponseBuilder) partEvent(t string, i int) ResponseEvent {
	e := b.itemEvent(t, i)
	zero := 0
	e.ContentIndex = &zero
	return e
}

// id makes an item id.
func (b *ResponseBuilder) id(prefix string) string {
	if b.NewID != nil {
		return b.NewID(prefix)
	}
	return NewID(prefix)
}

// Start returns response.created and response.in_progress.
func (b *ResponseBuilder) Start() []ResponseEvent {
	created := b.event(EventCreated)
	created.Response = b.Response()
	progress := b.event(EventInProgress)
	progress.Response = b.Response()
	return []ResponseEvent{created, progress}
}

// openItem makes sure a text item of type t (reasoning or message) is open:
// it keeps an open one of that type, else closes the open item and opens a
// new one with its content part, returning the events that announce this.
func (b *ResponseBuilder) openItem(t string) []ResponseEvent {
	if b.open >= 0 && b.resp.Output[b.open].Type == t {
		return nil
	}
	events := b.closeItem(StatusCompleted)
	it := OutputItem{Type: t}
	switch t {
	case OutputReasoning:
		it.ID = b.id(PrefixReasoning)
		it.Summary = []OutputContent{}
	case OutputMessage:
		it.ID = b.id(PrefixMessage)
		it.Status = StatusInProgress
	}
	b.resp.Output = append(b.resp.Output, it)
	b.open = len(b.resp.Output) - 1
	added := b.itemEvent(EventOutputItemAdded, b.open)
	item := it.clone()
	added.Item = &item
	events = append(events, added)
	part := OutputContent{Type: ContentReasoningText}
	if t == OutputMessage {
		part.Type = ContentOutputText
	}
	b.resp.Output[b.open].Content = []OutputContent{part}
	partAdded := b.partEvent(EventContentPartAdded, b.open)
	partAdded.Part = &part
	return append(events, partAdded)
}

// Reasoning adds reasoning text, opening a reasoning item if needed.
func (b *ResponseBuilder) Reasoning(delta string) []ResponseEvent {
	if delta == "" {
		return nil
	}
	events := b.openItem(OutputReasoning)
	b.resp.Output[b.open].Content[0].Text += delta
	e := b.partEvent(EventReasoningTextDelta, b.open)
	e.Delta = &delta
	return append(events, e)
}

// Text adds answer text, opening a message item if needed.
func (b *ResponseBuilder) Text(delta string) []ResponseEvent {
	if delta == "" {
		return nil
	}
	events := b.openItem(OutputMessage)
	b.resp.Output[b.open].Content[0].Text += delta
	e := b.partEvent(EventOutputTextDelta, b.open)
	e.Delta = &delta
	e.Logprobs = &[]struct{}{}
	return append(events, e)
}

// FunctionCall opens a function call item for a call to name with id callID.
func (b *ResponseBuilder) FunctionCall(callID, name string) []ResponseEvent {
	events := b.closeItem(StatusCompleted)
	it := OutputItem{Type: OutputFunctionCall, ID: b.id(PrefixFunctionCall), Status: StatusInProgress, CallID: callID, Name: name}
	b.resp.Output = append(b.resp.Output, it)
	b.open = len(b.resp.Output) - 1
	added := b.itemEvent(EventOutputItemAdded, b.open)
	item := it.clone()
	added.Item = &item
	return append(events, added)
}

// Arguments adds a fragment of the open function call's arguments; it does
// nothing when no function call is open.
func (b *ResponseBuilder) Arguments(delta string) []ResponseEvent {
	if delta == "" || b.open < 0 || b.resp.Output[b.open].Type != OutputFunctionCall {
		return nil
	}
	b.resp.Output[b.open].Arguments += delta
	e := b.itemEvent(EventFunctionCallArgDelta, b.open)
	e.Delta = &delta
	return []ResponseEvent{e}
}

// closeItem finishes the open item with the given status and returns the
// events that announce it.
func (b *ResponseBuilder) closeItem(status string) []ResponseEvent {
	if b.open < 0 {
		return nil
	}
	i := b.open
	b.open = -1
	it := &b.resp.Output[i]
	var events []ResponseEvent
	switch it.Type {
	case OutputReasoning, OutputMessage:
		text := it.Content[0].Text
		done := EventReasoningTextDone
		if it.Type == OutputMessage {
			done = EventOutputTextDone
		}
		e := b.partEvent(done, i)
		e.Text = &text
		if it.Type == OutputMessage {
			e.Logprobs = &[]struct{}{}
		}
		part := it.Content[0]
		pe := b.partEvent(EventContentPartDone, i)
		pe.Part = &part
		events = append(events, e, pe)
		if it.Type == OutputMessage {
			it.Status = status
		}
	case OutputFunctionCall:
		args := it.Arguments
		e := b.itemEvent(EventFunctionCallArgDone, i)
		e.Arguments = &args
		events = append(events, e)
		it.Status = status
	}
	done := b.itemEvent(EventOutputItemDone, i)
	item := it.clone()
	done.Item = &item
	return append(events, done)
}

// Finish closes the open item and completes the response with its usage;
// with a non-empty incompleteReason ("max_output_tokens") the response, and a
// message cut short, are incomplete instead.
func (b *ResponseBuilder) Finish(usage ResponseUsage, incompleteReason string) []ResponseEvent {
	status := StatusCompleted
	if incompleteReason != "" {
		status = StatusIncomplete
	}
	events := b.closeItem(status)
	b.resp.Status = status
	b.resp.Usage = &usage
	t := EventCompleted
	if incompleteReason != "" {
		b.resp.IncompleteDetails = &IncompleteDetails{Reason: incompleteReason}
		t = EventIncomplete
	}
	e := b.event(t)
	e.Response = b.Response()
	return append(events, e)
}

// Fail closes the open item as incomplete and fails the response with err.
func (b *ResponseBuilder) Fail(err *Error) []ResponseEvent {
	events := b.closeItem(StatusIncomplete)
	b.resp.Status = StatusFailed
	b.resp.Error = &ResponseError{Code: err.Code, Message: err.Message}
	e := b.event(EventFailed)
	e.Response = b.Response()
	return append(events, e)
}
