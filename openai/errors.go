package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// Error types of the OpenAI error body.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeAuthentication = "authentication_error"
	TypeRateLimit      = "rate_limit_error"
	TypeServer         = "server_error"
)

// Stable error codes, one per kind of failure.
const (
	CodeInvalidJSON          = "invalid_json"
	CodeInvalidRequest       = "invalid_request"
	CodeNestingTooDeep       = "nesting_too_deep"
	CodeUnsupportedParameter = "unsupported_parameter"
	// CodeUnsupportedSchemaKeyword: a JSON schema keyword that constrained
	// decoding cannot enforce (refused rather than ignored).
	CodeUnsupportedSchemaKeyword = "unsupported_schema_keyword"
	CodeContextLengthExceeded    = "context_length_exceeded"
	CodeInvalidAPIKey            = "invalid_api_key"
	CodeModelNotFound            = "model_not_found"
	CodeNotFound                 = "not_found"
	CodeMethodNotAllowed         = "method_not_allowed"
	CodeRequestTooLarge          = "request_too_large"
	CodeUnsupportedMediaType     = "unsupported_media_type"
	CodeQueueFull                = "queue_full"
	CodeQueueTimeout             = "queue_timeout"
	CodeShuttingDown             = "service_shutting_down"
	CodeRequestTimeout           = "request_timeout"
	CodeInternal                 = "internal_error"
)

// Error is an API error: the HTTP status and the OpenAI error body
// {"error":{"message","type","param","code"}}.
type Error struct {
	Status  int
	Message string
	Type    string
	Param   string // "" is sent as null
	Code    string
}

// Error renders the error for logs: code, param when known, message.
func (e *Error) Error() string {
	if e.Param != "" {
		return fmt.Sprintf("%d %s (%s): %s", e.Status, e.Code, e.Param, e.Message)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

// errorBody is the inner object of the wire form.
type errorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// body returns the inner object, param null when empty.
func (e *Error) body() errorBody {
	b := errorBody{Message: e.Message, Type: e.Type, Code: e.Code}
	if e.Param != "" {
		p := e.Param
		b.Param = &p
	}
	return b
}

// MarshalJSON writes the whole error body {"error":{...}}, as OpenAI sends it
// both as a response and as an SSE data line.
func (e *Error) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Error errorBody `json:"error"`
	}{e.body()})
}

// newError builds an Error; every constructor below goes through it.
func newError(status int, typ, code, param, msg string) *Error {
	return &Error{Status: status, Message: msg, Type: typ, Param: param, Code: code}
}

// InvalidJSON reports a body that is not acceptable JSON (400).
func InvalidJSON(msg string) *Error {
	return newError(http.StatusBadRequest, TypeInvalidRequest, CodeInvalidJSON, "", msg)
}

// NestingTooDeep reports JSON nested deeper than MaxNesting (400): tool
// schemas, tool-call arguments and template variables reach the chat
// template, which must never be handed unbounded recursion.
func NestingTooDeep(param string) *Error {
	return newError(http.StatusBadRequest, TypeInvalidRequest, CodeNestingTooDeep, param,
		fmt.Sprintf("'%s' nests JSON deeper than %d levels.", param, MaxNesting))
}

// InvalidRequest reports a field with a wrong type or value (400).
func InvalidRequest(param, msg string) *Error {
	return newError(http.StatusBadRequest, TypeInvalidRequest, CodeInvalidRequest, param, msg)
}

// Unsupported reports an unknown field or a feature this server lacks (400).
func Unsupported(param, msg string) *Error {
	return newError(http.StatusBadRequest, TypeInvalidRequest, CodeUnsupportedParameter, param, msg)
}

// UnsupportedSchemaKeyword reports a schema keyword constrained decoding
// cannot enforce (400); param is where in the request the schema is.
func UnsupportedSchemaKeyword(param, msg string) *Error {
	return newError(http.StatusBadRequest, TypeInvalidRequest, CodeUnsupportedSchemaKeyword, param, msg)
}

// ContextLengthExceeded reports a prompt plus max tokens beyond the context (400).
func ContextLengthExceeded(msg string) *Error {
	return newError(http.StatusBadRequest, TypeInvalidRequest, CodeContextLengthExceeded, "", msg)
}

// Unauthorized reports a missing or wrong API key (401).
func Unauthorized() *Error {
	return newError(http.StatusUnauthorized, TypeAuthentication, CodeInvalidAPIKey, "",
		"Incorrect or missing API key: send it as 'Authorization: Bearer KEY'.")
}

// ModelNotFound reports a model id this server does not serve (404).
func ModelNotFound(model string) *Error {
	return newError(http.StatusNotFound, TypeInvalidRequest, CodeModelNotFound, "model",
		fmt.Sprintf("The model '%s' does not exist.", model))
}

// NotFound reports an unknown path or object (404).
func NotFound(msg string) *Error {
	return newError(http.StatusNotFound, TypeInvalidRequest, CodeNotFound, "", msg)
}

// MethodNotAllowed reports a known path called with the wrong method (405).
func MethodNotAllowed() *Error {
	return newError(http.StatusMethodNotAllowed, TypeInvalidRequest, CodeMethodNotAllowed, "",
		"Method not allowed for this endpoint.")
}

// BodyTooLarge reports a request body over limit bytes (413).
func BodyTooLarge(limit int64) *Error {
	return newError(http.StatusRequestEntityTooLarge, TypeInvalidRequest, CodeRequestTooLarge, "",
		fmt.Sprintf("Request body is larger than the limit of %d bytes.", limit))
}

// UnsupportedMediaType reports a body that is not application/json (415).
func UnsupportedMediaType() *Error {
	return newError(http.StatusUnsupportedMediaType, TypeInvalidRequest, CodeUnsupportedMediaType, "",
		"Content-Type must be application/json.")
}

// QueueFull reports that the admission queue is full (429); send Retry-After.
func QueueFull() *Error {
	return newError(http.StatusTooManyRequests, TypeRateLimit, CodeQueueFull, "",
		"The server is busy: the request queue is full. Retry later.")
}

// QueueTimeout reports a request that waited too long for its turn (503).
func QueueTimeout() *Error {
	return newError(http.StatusServiceUnavailable, TypeServer, CodeQueueTimeout, "",
		"The request waited too long in the queue. Retry later.")
}

// ShuttingDown reports that the server no longer admits requests (503).
func ShuttingDown() *Error {
	return newError(http.StatusServiceUnavailable, TypeServer, CodeShuttingDown, "",
		"The server is shutting down.")
}

// RequestTimeout reports a request that ran past its deadline (504).
func RequestTimeout() *Error {
	return newError(http.StatusGatewayTimeout, TypeServer, CodeRequestTimeout, "",
		"The request did not finish within its deadline.")
}

// Internal reports a fault of the server itself (500).
func Internal(msg string) *Error {
	return newError(http.StatusInternalServerError, TypeServer, CodeInternal, "", msg)
}
