package loader

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/aimaproject/aimac/runtime"
)

// Generation is what generation_config.json says of generating: the ids
// that end a turn and the sampling defaults.
type Generation struct {
	EOS      []int32
	Sampling runtime.SamplerConfig
}

// GenerationConfig reads DIR/generation_config.json. A missing file gives
// greedy-free defaults (temperature 1) and no stop ids beyond what the
// caller adds.
func GenerationConfig(dir string) (Generation, error) {
	g := Generation{Sampling: runtime.SamplerConfig{Temperature: 1}}
	path := filepath.Join(dir, "generation_config.json")
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return g, nil
	}
	if err != nil {
		return g, err
	}
	var raw struct {
		EOS         json.RawMessage `json:"eos_token_id"`
		DoSample    *bool           `json:"do_sample"`
		Temperature *float64        `json:"temperature"`
		TopK        *int            `json:"top_k"`
		TopP        *float64        `json:"top_p"`
		MinP        *float64        `json:"min_p"`
		RepPenalty  *float64        `json:"repetition_penalty"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return g, fmt.Errorf("%s: %w", path, err)
	}
	if len(raw.EOS) > 0 && string(raw.EOS) != "null" {
		var one int32
		if json.Unmarshal(raw.EOS, &one) == nil {
			g.EOS = []int32{one}
		} else if err := json.Unmarshal(raw.EOS, &g.EOS); err != nil {
			return g, fmt.Errorf("%s: eos_token_id: want an id or a list of ids", path)
		}
	}
	if raw.DoSample != nil && !*raw.DoSample {
		g.Sampling.Temperature = 0
	} else if raw.Temperature != nil {
		g.Sampling.Temperature = *raw.Temperature
	}
	if raw.TopK != nil {
		g.Sampling.TopK = max(*raw.TopK, 0)
	}
	if raw.TopP != nil {
		g.Sampling.TopP = *raw.TopP
	}
	if raw.MinP != nil {
		g.Sampling.MinP = *raw.MinP
	}
	if raw.RepPenalty != nil {
		g.Sampling.RepetitionPenalty = *raw.RepPenalty
	}
	if _, err := runtime.NewSampler(g.Sampling); err != nil {
		return g, fmt.Errorf("%s: %w", path, err)
	}
	return g, nil
}
