package runtime

import (
	"context"
	"errors"
	"fmt"
)

// Snapshot is the engine's sequence state at one position: the GDN
// recurrent and conv states, the KV cache rows written so far and the
// logits that predict the next token. It is an immutable copy: restoring
// it never changes it, so one snapshot can seed many requests.
type Snapshot struct {
	pos     int
	buffers map[string][]byte
	logits  []float32
	bytes   int64
}

// Position is the number of tokens the snapshot holds.
func (s *Snapshot) Position() int { return s.pos }

// Bytes is the host memory the snapshot takes.
func (s *Snapshot) Bytes() int64 { return s.bytes }

// Logits predict the token after the snapshot's last one.
func (s *Snapshot) Logits() []float32 { return s.logits }

// kvRowBytes is the size of one position of a KV buffer.
func kvRowBytes(shape []int64, bytes int64) int64 {
	if len(shape) == 0 || shape[0] == 0 {
		return 0
	}
	return bytes / shape[0]
}

// Snapshot copies the sequence state. logits are the ones the last step
// returned (they predict the next token).
func (e *Engine) Snapshot(logits []float32) (*Snapshot, error) {
	_, end, err := e.begin(context.Background())
	if err != nil {
		return nil, err
	}
	defer end()
	if e.broken {
		return nil, ErrBroken
	}
	if e.pos == 0 {
		return nil, errors.New("snapshot of an empty sequence")
	}
	s := &Snapshot{pos: e.pos, buffers: map[string][]byte{}, logits: append([]float32(nil), logits...)}
	for _, b := range e.plan.Buffers {
		n := b.Bytes
		switch b.Role {
		case "state":
		case "kv":
			n = int64(e.pos) * kvRowBytes(b.Shape, b.Bytes)
		default:
			continue
		}
		buf := make([]byte, n)
		if err := e.be.Download(buf, Ref{Mem: e.globals[b.Name]}); err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", b.Name, err)
		}
		s.buffers[b.Name] = buf
		s.bytes += n
	}
	s.bytes += int64(4 * len(s.logits))
	return s, nil
}

// Restore puts the engine at the snapshot's position with its state; the
// KV rows past it are left as they are, never read before being written.
func (e *Engine) Restore(s *Snapshot) error {
	_, end, err := e.begin(context.Background())
	if err != nil {
		return err
	}
	defer end()
	if s.pos > e.plan.ContextTokens {
		return fmt.Errorf("snapshot of %d tokens exceeds the %d-token context", s.pos, e.plan.ContextTokens)
	}
	for _, b := range e.plan.Buffers {
		if b.Role != "state" && b.Role != "kv" {
			continue
		}
		data, ok := s.buffers[b.Name]
		if !ok {
			e.broken = true
			return fmt.Errorf("snapshot lacks buffer %s (made by another plan?)", b.Name)
		}
		if err := e.be.Upload(Ref{Mem: e.globals[b.Name]}, data); err != nil {
			e.broken = true
			return fmt.Errorf("restore %s: %w", b.Name, err)
		}
	}
	e.pos, e.broken = s.pos, false
	return nil
}
