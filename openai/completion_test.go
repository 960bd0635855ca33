package openai

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCompletionDecode checks prompt forms and fields of valid requests.
func TestCompletionDecode(t *testing.T) {
	tests := []struct {
		name, body string
		want       CompletionRequest
	}{
		{"string", `{"model":"m","prompt":"Once"}`, CompletionRequest{Model: "m", Prompt: Prompt{Text: "Once"}}},
		{"tokens", `{"model":"m","prompt":[1,2,3.0]}`, CompletionRequest{Model: "m", Prompt: Prompt{Tokens: []int32{1, 2, 3}}}},
		{"one string in a list", `{"model":"m","prompt":["Once"]}`, CompletionRequest{Model: "m", Prompt: Prompt{Text: "Once"}}},
		{"one token list in a list", `{"model":"m","prompt":[[7,8]]}`, CompletionRequest{Model: "m", Prompt: Prompt{Tokens: []int32{7, 8}}}},
		{"everything", `{"model":"m","prompt":"p","max_tokens":16,"temperature":0.5,"top_p":0.9,"min_p":0.1,"top_k":40,"presence_penalty":0.1,"frequency_penalty":0.2,"repetition_penalty":1.05,"seed":7,"n":1,"best_of":1,"stop":["\n"],"stream":true,"stream_options":{"include_usage":true},"logprobs":5,"echo":true,"user":"u","suffix":null,"logit_bias":null}`,
			CompletionRequest{Model: "m", Prompt: Prompt{Text: "p"}, MaxTokens: ptr(16), Sampling: Sampling{Temperature: ptr(0.5), TopP: ptr(0.9), MinP: ptr(0.1), TopK: ptr(40),
				PresencePenalty: ptr(0.1), FrequencyPenalty: ptr(0.2), RepetitionPenalty: ptr(1.05), Seed: ptr(int64(7)), N: ptr(1)}, BestOf: ptr(1),
				Stop: Stop{"\n"}, Stream: true, StreamOptions: &StreamOptions{IncludeUsage: true}, Logprobs: ptr(5), Echo: true, User: "u"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecodeCompletionRequest([]byte(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
	r, _ := DecodeCompletionRequest([]byte(`{"model":"m","prompt":"p","max_tokens":3,"stop":"s"}`))
	if n, set := r.MaxNewTokens(); n != 3 || !set {
		t.Errorf("MaxNewTokens = %d, %v", n, set)
	}
	if diff := cmp.Diff([]string{"s"}, r.StopStrings()); diff != "" {
		t.Error(diff)
	}
	r, _ = DecodeCompletionRequest([]byte(`{"model":"m","prompt":"p"}`))
	if n, set := r.MaxNewTokens(); n != 0 || set || r.StopStrings() != nil {
		t.Errorf("defaults: %d %v %v", n, set, r.StopStrings())
	}
}

// TestCompletionValidation holds each rule to its code and param.
func TestCompletionValidation(t *testing.T) {
	tests := []struct {
		name, body string
		want       wantErr
	}{
		{"model missing", `{"prompt":"p"}`, wantErr{"invalid_request", "model", "required"}},
		{"prompt missing", `{"model":"m"}`, wantErr{"invalid_request", "prompt", "required"}},
		{"prompt empty string", `{"model":"m","prompt":""}`, wantErr{"invalid_request", "prompt", "must not be empty"}},
		{"prompt empty list", `{"model":"m","prompt":[]}`, wantErr{"invalid_request", "prompt", "must not be empty"}},
		{"prompt empty inner list", `{"model":"m","prompt":[[]]}`, wantErr{"invalid_request", "prompt[0]", "must not be empty"}},
		{"prompt batch of strings", `{"model":"m","prompt":["a","b"]}`, wantErr{"unsupported_parameter", "prompt", "Batched prompts"}},
		{"prompt batch of tokens", `{"model":"m","prompt":[[1],[2]]}`, wantErr{"unsupported_parameter", "prompt", "got 2"}},
		{"prompt negative id", `{"model":"m","prompt":[1,-2]}`, wantErr{"invalid_request", "prompt[1]", "Invalid token id -2"}},
		{"prompt huge id", `{"model":"m","prompt":[4294967296]}`, wantErr{"invalid_request", "prompt[0]", "Invalid token id"}},
		{"prompt mixed", `{"model":"m","prompt":[1,"a"]}`, wantErr{"invalid_request", "prompt[1]", "token id"}},
		{"prompt fraction", `{"model":"m","prompt":[1.5]}`, wantErr{"invalid_request", "prompt[0]", "token id"}},
		{"prompt object", `{"model":"m","prompt":{}}`, wantErr{"invalid_request", "prompt", "a string or an array of token ids"}},
		{"max_tokens zero", `{"model":"m","prompt":"p","max_tokens":0}`, wantErr{"invalid_request", "max_tokens", "at least 1"}},
		{"temperature", `{"model":"m","prompt":"p","temperature":3}`, wantErr{"invalid_request", "temperature", "[0, 2]"}},
		{"n", `{"model":"m","prompt":"p","n":3}`, wantErr{"unsupported_parameter", "n", "must be 1"}},
		{"best_of", `{"model":"m","prompt":"p","best_of":2}`, wantErr{"unsupported_parameter", "best_of", "must be 1"}},
		{"best_of zero", `{"model":"m","prompt":"p","best_of":0}`, wantErr{"invalid_request", "best_of", "must be 1"}},
		{"suffix", `{"model":"m","prompt":"p","suffix":"end"}`, wantErr{"unsupported_parameter", "suffix", "suffix"}},
		{"logit_bias", `{"model":"m","prompt":"p","logit_bias":{"1":5}}`, wantErr{"unsupported_parameter", "logit_bias", "logit_bias"}},
		{"logprobs high", `{"model":"m","prompt":"p","logprobs":21}`, wantErr{"invalid_request", "logprobs", "between 0 and 20"}},
		{"logprobs bool", `{"model":"m","prompt":"p","logprobs":true}`, wantErr{"invalid_request", "logprobs", "integer"}},
		{"stop", `{"model":"m","prompt":"p","stop":["a","b","c","d","e"]}`, wantErr{"invalid_request", "stop", "at most 4"}},
		{"stream_options", `{"model":"m","prompt":"p","stream_options":{"include_usage":true}}`, wantErr{"invalid_request", "stream_options", "'stream' is true"}},
		{"echo string", `{"model":"m","prompt":"p","echo":"yes"}`, wantErr{"invalid_request", "echo", "boolean"}},
		{"unknown", `{"model":"m","prompt":"p","prompt_logprobs":1}`, wantErr{"unsupported_parameter", "prompt_logprobs", "Unknown parameter"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeCompletionRequest([]byte(tt.body))
			checkErr(t, err, &tt.want)
		})
	}
}
