package openai

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestTokenizeDecode checks both forms and their helpers.
func TestTokenizeDecode(t *testing.T) {
	r, err := DecodeTokenizeRequest([]byte(`{"model":"m","prompt":"hello","add_special_tokens":false}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&TokenizeRequest{Model: "m", Prompt: ptr("hello"), AddSpecialTokens: ptr(false)}, r, cmpopts.IgnoreUnexported(Tool{})); diff != "" {
		t.Error(diff)
	}
	r, err = DecodeTokenizeRequest([]byte(`{"messages":[{"role":"user","content":"q"}],"tools":[{"type":"function","function":{"name":"f"}}],"add_generation_prompt":false,"chat_template_kwargs":{"enable_thinking":false}}`))
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := r.TemplateMessages()
	if err != nil || string(msgs) != `[{"role":"user","content":"q"}]` {
		t.Errorf("TemplateMessages = %s, %v", msgs, err)
	}
	if got := string(r.TemplateTools()); got != `[{"type":"function","function":{"name":"f"}}]` {
		t.Errorf("TemplateTools = %s", got)
	}
	if diff := cmp.Diff([]any{ptr(false), false}, []any{r.EnableThinking(), r.WithGenerationPrompt()}); diff != "" {
		t.Error(diff)
	}
	r, _ = DecodeTokenizeRequest([]byte(`{"messages":[{"role":"user","content":"q"}]}`))
	if r.EnableThinking() != nil || !r.WithGenerationPrompt() {
		t.Errorf("defaults: %v %v", r.EnableThinking(), r.WithGenerationPrompt())
	}
}

// TestTokenizeValidation holds each rule to its code and param.
func TestTokenizeValidation(t *testing.T) {
	tests := []struct {
		name, body string
		want       wantErr
	}{
		{"neither", `{"model":"m"}`, wantErr{"invalid_request", "messages", "Send 'prompt' or a non-empty 'messages'"}},
		{"both", `{"prompt":"p","messages":[{"role":"user","content":"q"}]}`, wantErr{"invalid_request", "messages", "not both"}},
		{"tools with prompt", `{"prompt":"p","tools":[]}`, wantErr{"invalid_request", "tools", "only allowed with 'messages'"}},
		{"generation prompt with prompt", `{"prompt":"p","add_generation_prompt":true}`, wantErr{"invalid_request", "add_generation_prompt", "only allowed with 'messages'"}},
		{"kwargs with prompt", `{"prompt":"p","chat_template_kwargs":{}}`, wantErr{"invalid_request", "chat_template_kwargs", "only allowed with 'messages'"}},
		{"bad message", `{"messages":[{"role":"user"}]}`, wantErr{"invalid_request", "messages[0].content", "required"}},
		{"bad tool", `{"messages":[{"role":"user","content":"q"}],"tools":[{"type":"function","function":{"name":"a.b"}}]}`, wantErr{"invalid_request", "tools[0].function.name", "Invalid function name"}},
		{"bad kwargs", `{"messages":[{"role":"user","content":"q"}],"chat_template_kwargs":{"tools":[]}}`, wantErr{"invalid_request", "chat_template_kwargs.tools", "cannot be set"}},
		{"prompt number", `{"prompt":5}`, wantErr{"invalid_request", "prompt", "must be a string"}},
		{"unknown", `{"prompt":"p","return_token_strs":true}`, wantErr{"unsupported_parameter", "return_token_strs", "Unknown parameter"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeTokenizeRequest([]byte(tt.body))
			checkErr(t, err, &tt.want)
		})
	}
}

// TestDetokenize checks ids and their errors.
func TestDetokenize(t *testing.T) {
	r, err := DecodeDetokenizeRequest([]byte(`{"model":"m","tokens":[0,5,248046]}`))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&DetokenizeRequest{Model: "m", Tokens: []int32{0, 5, 248046}}, r); diff != "" {
		t.Error(diff)
	}
	if r, err := DecodeDetokenizeRequest([]byte(`{"tokens":[]}`)); err != nil || r.Tokens == nil {
		t.Errorf("empty tokens: %v %v", r, err)
	}
	tests := []struct {
		body string
		want wantErr
	}{
		{`{"model":"m"}`, wantErr{"invalid_request", "tokens", "required"}},
		{`{"tokens":null}`, wantErr{"invalid_request", "tokens", "required"}},
		{`{"tokens":[1,-1]}`, wantErr{"invalid_request", "tokens[1]", "Invalid token id"}},
		{`{"tokens":"1 2"}`, wantErr{"invalid_request", "tokens", "must be an array"}},
		{`{"tokens":[1],"skip_special_tokens":true}`, wantErr{"unsupported_parameter", "skip_special_tokens", "Unknown"}},
	}
	for _, tt := range tests {
		_, err := DecodeDetokenizeRequest([]byte(tt.body))
		checkErr(t, err, &tt.want)
	}
}
