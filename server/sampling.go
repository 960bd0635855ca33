package server

import (
	"crypto/rand"
	"encoding/binary"

	"github.com/aimaproject/aimac/runtime"
)

// samplingRequest is the sampling fields every endpoint shares.
type samplingRequest struct {
	temperature, topP, minP                              *float64
	presencePenalty, frequencyPenalty, repetitionPenalty *float64
	topK                                                 *int
	seed                                                 *int64
}

// samplerConfig fills what the request leaves out from the model's
// generation defaults; without a seed each request draws its own.
func samplerConfig(m *Model, r samplingRequest) runtime.SamplerConfig {
	c := m.Sampling
	c.VocabLimit = m.VocabLimit
	set := func(dst *float64, v *float64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&c.Temperature, r.temperature)
	set(&c.TopP, r.topP)
	set(&c.MinP, r.minP)
	set(&c.PresencePenalty, r.presencePenalty)
	set(&c.FrequencyPenalty, r.frequencyPenalty)
	set(&c.RepetitionPenalty, r.repetitionPenalty)
	if r.topK != nil {
		c.TopK = max(*r.topK, 0) // -1 and 0 both mean no limit
	}
	if r.seed != nil {
		c.Seed = uint64(*r.seed)
	} else {
		var b [8]byte
		rand.Read(b[:])
		c.Seed = binary.LittleEndian.Uint64(b[:])
	}
	return c
}
