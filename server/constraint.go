package server

import "github.com/aimaproject/aimac/runtime"

// Constraint restricts which tokens a generation may produce: constrained
// decoding (a grammar compiled from a response format or from the tools of
// a required call) plugs into the generation here, one Constraint per
// request; a nil Constraint leaves the generation free.
//
// The generation consults it for the tokens of the answer only — after the
// reasoning has closed when thinking is on — in this order at every step:
// Mask for the tokens allowed next, then the draw among them, then Advance
// with the token drawn. While the reasoning of a constrained request runs,
// its stop tokens are masked: the constrained answer must follow. Stop
// tokens (<|im_end|>, <|endoftext|>) are tokens like any other: a constraint that allows none of them keeps the answer
// going until it does (or until max_tokens). The mask reaches the sampler
// where the logits are: the device sampler's mask operand
// (runtime.DeviceSampling.Mask), or the host Sampler's SampleMasked when the
// request samples on the host.
type Constraint interface {
	// Mask sets in mask the bits of the tokens allowed next (mask arrives
	// cleared, runtime.MaskWords(vocab) words over the logits' width) and
	// reports restricted true; false means every token is allowed and mask
	// is not read.
	Mask(mask runtime.Mask) (restricted bool, err error)
	// Advance moves the constraint past the token drawn.
	Advance(token int32) error
}
