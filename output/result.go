package output

// ToolCall is one complete (or, at Close, closed) tool call of a Result.
type ToolCall struct {
	Index        int
	ID, Name     string
	Arguments    string
	Unterminated bool // the model stopped inside the call; Close closed it
}

// Result is the whole assistant message, for non-streamed responses and for
// checking that streaming loses nothing.
type Result struct {
	Reasoning, Content string
	ToolCalls          []ToolCall
}

// Add accumulates events in the order the Parser returned them.
func (r *Result) Add(evs ...Event) {
	for _, e := range evs {
		switch e.Kind {
		case Reasoning:
			r.Reasoning += e.Text
		case Content:
			r.Content += e.Text
		case ToolCallStart:
			r.ToolCalls = append(r.ToolCalls, ToolCall{Index: e.Index, ID: e.ID, Name: e.Name})
		case ToolCallArguments:
			for i := len(r.ToolCalls) - 1; i >= 0; i-- {
				if c := &r.ToolCalls[i]; c.Index == e.Index {
					c.Arguments += e.Text
					c.Unterminated = c.Unterminated || e.Unterminated
					break
				}
			}
		}
	}
}
