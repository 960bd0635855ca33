package server

import (
	"context"
	"log/slog"
	"time"

	"github.com/aimaproject/aimac/runtime"
)

// ttftParts is where one request's time to first token went, in the order
// the request meets them: a prefix-cache hit should cost its restore and
// the first draw, a long prompt's parse should cost little. The parts are
// exported as aima_ttft_part_seconds{part} and logged with the request.
type ttftParts struct {
	arrived time.Time
	at      time.Time // the end of the part last marked
	d       [numParts]time.Duration

	cached   int // prompt tokens restored
	restored runtime.Restored
	done     bool // the first token is out: the parts are final
}

// part is one part of the time to first token.
type part int

const (
	partRead     part = iota // the body read and decoded (a 128K-token prompt is 0.6–1 MB of JSON)
	partPrepare              // template, tokenization, validation; the stream's headers
	partQueue                // waiting for the engine
	partRestore              // the prefix cache's lookup and the engine's restore (a miss: its reset)
	partPrefill              // the prompt past the cached prefix
	partSnapshot             // snapshots taken for the cache
	partFirst                // from the prompt's logits to the first token drawn
	numParts
)

// partNames label the parts in the metric and the log.
var partNames = [numParts]string{"read", "prepare", "queue", "restore", "prefill", "snapshot", "first"}

// mark ends the current part, adding its time to part, and starts the
// next one.
func (p *ttftParts) mark(pt part) {
	if p == nil || p.done {
		return
	}
	now := time.Now()
	p.d[pt] += now.Sub(p.at)
	p.at = now
}

// finish marks the first part and freezes the parts; false if they were
// already final (or there are none).
func (p *ttftParts) finish() bool {
	if p == nil || p.done {
		return false
	}
	p.mark(partFirst)
	p.done = true
	return true
}

// partsOf returns the request's parts, nil for requests without them.
func partsOf(ctx context.Context) *ttftParts {
	p, _ := ctx.Value(partsKey).(*ttftParts)
	return p
}

// withParts starts the parts of a request that arrived now.
func withParts(ctx context.Context, arrived time.Time) context.Context {
	return context.WithValue(ctx, partsKey, &ttftParts{arrived: arrived, at: arrived})
}

// logAttrs are the parts as request log attributes, in milliseconds.
func (p *ttftParts) logAttrs() []any {
	if p == nil || !p.done {
		return nil
	}
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }
	attrs := []slog.Attr{slog.Float64("ttft_ms", ms(p.at.Sub(p.arrived)))}
	for i, d := range p.d {
		attrs = append(attrs, slog.Float64(partNames[i], ms(d)))
	}
	if p.cached > 0 {
		attrs = append(attrs, slog.Int("cached", p.cached), slog.String("tier", string(p.restored.Tier)),
			slog.Int64("copied", p.restored.Copied), slog.Int64("adopted", p.restored.Adopted))
	}
	return []any{slog.GroupAttrs("ttft", attrs...)}
}
