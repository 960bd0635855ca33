package openai

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestErrorConstructors holds every constructor to its status, type and code.
func TestErrorConstructors(t *testing.T) {
	type want struct {
		Status      int
		Type, Code  string
		Param       string
		MessageSays bool
	}
	tests := []struct {
		name string
		err  *Error
		want want
	}{
		{"InvalidJSON", InvalidJSON("bad"), want{400, "invalid_request_error", "invalid_json", "", true}},
		{"InvalidRequest", InvalidRequest("temperature", "bad"), want{400, "invalid_request_error", "invalid_request", "temperature", true}},
		{"Unsupported", Unsupported("n", "bad"), want{400, "invalid_request_error", "unsupported_parameter", "n", true}},
		{"ContextLengthExceeded", ContextLengthExceeded("bad"), want{400, "invalid_request_error", "context_length_exceeded", "", true}},
		{"Unauthorized", Unauthorized(), want{401, "authentication_error", "invalid_api_key", "", true}},
		{"ModelNotFound", ModelNotFound("gpt-x"), want{404, "invalid_request_error", "model_not_found", "model", true}},
		{"NotFound", NotFound("bad"), want{404, "invalid_request_error", "not_found", "", true}},
		{"MethodNotAllowed", MethodNotAllowed(), want{405, "invalid_request_error", "method_not_allowed", "", true}},
		{"BodyTooLarge", BodyTooLarge(4 << 20), want{413, "invalid_request_error", "request_too_large", "", true}},
		{"UnsupportedMediaType", UnsupportedMediaType(), want{415, "invalid_request_error", "unsupported_media_type", "", true}},
		{"QueueFull", QueueFull(), want{429, "rate_limit_error", "queue_full", "", true}},
		{"QueueTimeout", QueueTimeout(), want{503, "server_error", "queue_timeout", "", true}},
		{"ShuttingDown", ShuttingDown(), want{503, "server_error", "service_shutting_down", "", true}},
		{"RequestTimeout", RequestTimeout(), want{504, "server_error", "request_timeout", "", true}},
		{"Internal", Internal("bad"), want{500, "server_error", "internal_error", "", true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := want{tt.err.Status, tt.err.Type, tt.err.Code, tt.err.Param, tt.err.Message != ""}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got)\n%s", diff)
			}
		})
	}
}

// TestErrorMarshal checks the wire body: param null when empty, no HTML
// escaping surprises, and the Error string.
func TestErrorMarshal(t *testing.T) {
	tests := []struct {
		err  *Error
		want string
		str  string
	}{
		{InvalidJSON("Invalid JSON at byte offset 3."),
			`{"error":{"message":"Invalid JSON at byte offset 3.","type":"invalid_request_error","param":null,"code":"invalid_json"}}`,
			"400 invalid_json: Invalid JSON at byte offset 3."},
		{InvalidRequest("messages[0].role", "Invalid role 'x'."),
			`{"error":{"message":"Invalid role 'x'.","type":"invalid_request_error","param":"messages[0].role","code":"invalid_request"}}`,
			"400 invalid_request (messages[0].role): Invalid role 'x'."},
		{ModelNotFound("m"),
			`{"error":{"message":"The model 'm' does not exist.","type":"invalid_request_error","param":"model","code":"model_not_found"}}`,
			"404 model_not_found (model): The model 'm' does not exist."},
	}
	for _, tt := range tests {
		got, err := json.Marshal(tt.err)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tt.want {
			t.Errorf("Marshal:\n got %s\nwant %s", got, tt.want)
		}
		if tt.err.Error() != tt.str {
			t.Errorf("Error() = %q, want %q", tt.err.Error(), tt.str)
		}
	}
}
