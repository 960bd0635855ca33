// Package openai is the wire format of the OpenAI-compatible server: the
// request and response types of /v1/chat/completions, /v1/completions,
// /v1/responses, /v1/models, /tokenize and /detokenize, their strict decoding
// and validation, the API error body with its stable codes, and the pure
// converters between the wire and the chat template.
//
// # Strict decoding
//
// Every Decode* function parses the body once into an order-preserving tree
// and then reads it field by field, so that nothing a client sends is silently
// dropped:
//
//   - malformed JSON, a body that is not valid UTF-8, NaN or Infinity, numbers
//     beyond float64, duplicate keys at any depth and a top level that is not an
//     object are 400 invalid_json (duplicate keys name their path in param);
//   - unknown fields at any depth are 400 unsupported_parameter whose param is
//     the JSON path ("messages[0].foo");
//   - OpenAI fields this server does not implement (n > 1, audio, logit_bias,
//     prediction, …) are 400 unsupported_parameter with a message saying so,
//     unless their value asks for nothing (null, n = 1, an empty logit_bias);
//   - a value of the wrong type or out of range is 400 invalid_request with the
//     field's path as param. The first problem found is reported.
//
// JSON null is treated as absent for every optional field, as the official
// clients send it.
//
// # Chat template input
//
// [TemplateMessages] and [TemplateTools] produce the JSON the chat template is
// rendered from, with the semantics the Hugging Face renderer gives a client's
// messages: developer becomes system, reasoning becomes reasoning_content, and
// a tool call's arguments string is embedded as the object it encodes, its
// key order kept, because the template iterates over it. Tools keep the bytes
// (and so the key order) the client sent, because the template prints them with
// tojson.
//
// # Output
//
// The response types marshal as OpenAI's do, null where OpenAI sends null and
// omitted where it omits; the tests decode them with the official Go client.
// [ChatChunker] makes the chunks of a streamed chat completion and
// [ResponseBuilder] assembles a Responses API response together with its
// numbered stream events, so that streamed and non-streamed output agree.
// [Marshal] encodes any of them without HTML escaping, as OpenAI does.
package openai
