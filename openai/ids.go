package openai

import "crypto/rand"

// ID prefixes of the objects this server creates, as OpenAI spells them.
const (
	PrefixChatCompletion = "chatcmpl-"
	PrefixCompletion     = "cmpl-"
	PrefixResponse       = "resp_"
	PrefixMessage        = "msg_"
	PrefixReasoning      = "rs_"
	PrefixFunctionCall   = "fc_"
	PrefixToolCall       = "call_"
)

// idAlphabet is the alphabet of random id suffixes.
const idAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// NewID returns prefix followed by 24 random alphanumeric characters.
func NewID(prefix string) string {
	var buf [24]byte
	_, _ = rand.Read(buf[:]) // crypto/rand.Read never fails
	out := make([]byte, len(prefix)+len(buf))
	copy(out, prefix)
	for i, c := range buf {
		out[len(prefix)+i] = idAlphabet[int(c)%len(idAlphabet)]
	}
	return string(out)
}
