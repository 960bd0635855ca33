package server

import (
	"crypto/rand"
	"encoding/binary"

	"github.com/aimaproject/aimac/openai"
	"github.com/aimaproject/aimac/runtime"
)

// samplerConfig fills what the request leaves out from the model's
// generation defaults; without a seed each request draws its own.
func samplerConfig(m *Model, r openai.Sampling) runtime.SamplerConfig {
	c := m.Sampling
	c.VocabLimit = m.VocabLimit
	set := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&c.Temperature, r.Temperature)
	set(&c.TopP, r.TopP)
	set(&c.MinP, r.MinP)
	set(&c.PresencePenalty, r.PresencePenalty)
	set(&c.FrequencyPenalty, r.FrequencyPenalty)
	set(&c.RepetitionPenalty, r.RepetitionPenalty)
	if r.TopK != nil {
		c.TopK = max(*r.TopK, 0) // -1 and 0 both mean no limit
	}
	if r.Seed != nil {
		c.Seed = uint64(*r.Seed)
	} else {
		var b [8]byte
		rand.Read(b[:])
		c.Seed = binary.LittleEndian.Uint64(b[:])
	}
	return c
}
