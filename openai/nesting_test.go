package openai

import (
	"strings"
	"testing"
)

// nested is a JSON object nested depth levels: {"a":{"a":…{}}}.
func nested(depth int) string {
	return strings.Repeat(`{"a":`, depth-1) + "{}" + strings.Repeat("}", depth-1)
}

// TestNestingLimit checks that JSON nested beyond MaxNesting is refused
// with nesting_too_deep naming where, in the body and inside tool-call
// arguments, and that what fits is accepted.
func TestNestingLimit(t *testing.T) {
	tool := func(params string) string {
		return `{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":` + params + `}}}]}`
	}
	call := func(args string) string {
		args = strings.ReplaceAll(args, `"`, `\"`)
		return `{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"` + args + `"}}]}]}`
	}
	tests := []struct {
		name, body, param string // param "" : accepted
	}{
		{"tool parameters that fit", tool(nested(MaxNesting - 5)), ""},
		{"tool parameters too deep", tool(nested(MaxNesting)), "tools[0].function.parameters.properties" + strings.Repeat(".a", MaxNesting-4)},
		{"tool parameters 1000 deep", tool(nested(1000)), "tools[0].function.parameters.properties" + strings.Repeat(".a", MaxNesting-4)},
		{"arguments that fit", call(nested(MaxNesting)), ""},
		{"arguments too deep", call(nested(MaxNesting + 2)), "messages[1].tool_calls[0].function.arguments"},
		{"arrays too deep", `{"model":"m","messages":` + strings.Repeat("[", 2000) + strings.Repeat("]", 2000) + `}`, "messages" + strings.Repeat("[0]", MaxNesting)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeChatRequest([]byte(tt.body))
			switch {
			case tt.param == "" && err != nil:
				t.Errorf("refused: %v", err.Message)
			case tt.param != "" && (err == nil || err.Code != CodeNestingTooDeep || err.Status != 400 || err.Param != tt.param):
				t.Errorf("got %+v, want nesting_too_deep at %s", err, tt.param)
			}
		})
	}
}
