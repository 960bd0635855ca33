package runtime

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"unsafe"

	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/plan"
)

// Weights supplies the plan's weight buffers.
type Weights interface {
	bind(e *Engine) error
}

// CheckpointWeights loads weights from a validated checkpoint.
func CheckpointWeights(ck *checkpoint.Checkpoint) Weights { return ckWeights{ck} }

type ckWeights struct{ ck *checkpoint.Checkpoint }

// bind checks every weight buffer of the plan against the checkpoint
// (name, dtype, shape, byte range), all problems at once, before any
// upload; then binds BF16 matrices in place where the backend can, copies
// them otherwise, and widens small parameters to f32.
func (w ckWeights) bind(e *Engine) error {
	var errs []error
	type job struct {
		b    plan.Buffer
		info checkpoint.TensorInfo
	}
	var jobs []job
	for _, b := range e.plan.Buffers {
		if b.Role != "weight" {
			continue
		}
		info, err := w.ck.Resolve(b.Tensor)
		if err != nil {
			errs = append(errs, fmt.Errorf("weight %s: %w", b.Name, err))
			continue
		}
		if !slices.Equal(info.Shape, b.Shape) {
			errs = append(errs, fmt.Errorf("weight %s: checkpoint shape %v, plan wants %v", b.Name, info.Shape, b.Shape))
			continue
		}
		want := "BF16"
		if b.DType == "f32" {
			want = b.SourceDType
			if want == "" {
				want = "F32"
			}
		}
		if string(info.DType) != want {
			errs = append(errs, fmt.Errorf("weight %s: checkpoint dtype %s, plan wants %s", b.Name, info.DType, want))
			continue
		}
		jobs = append(jobs, job{b, info})
	}
	if len(errs) > 0 {
		return fmt.Errorf("checkpoint does not match the plan: %w", errors.Join(errs...))
	}
	binder, canBind := e.be.(HostBinder)
	for _, j := range jobs {
		raw, err := w.ck.Bytes(j.info.Name)
		if err != nil {
			return err
		}
		var m Mem
		switch {
		case j.b.DType == "f32":
			vals, err := checkpoint.Float32s(j.info, raw)
			if err != nil {
				return fmt.Errorf("weight %s: %w", j.b.Name, err)
			}
			if m, err = e.upload(f32Bytes(vals)); err != nil {
				return fmt.Errorf("weight %s: %w", j.b.Name, err)
			}
		case canBind && aligned(raw):
			if m, err = binder.Bind(raw); err != nil {
				return fmt.Errorf("weight %s: %w", j.b.Name, err)
			}
		default:
			if m, err = e.upload(raw); err != nil {
				return fmt.Errorf("weight %s: %w", j.b.Name, err)
			}
		}
		e.globals[j.b.Name] = m
		e.weights = append(e.weights, m)
	}
	return nil
}

func (e *Engine) upload(data []byte) (Mem, error) {
	m, err := e.be.Alloc(int64(len(data)))
	if err != nil {
		return nil, err
	}
	if err := e.be.Upload(Ref{Mem: m}, data); err != nil {
		e.be.Free(m)
		return nil, err
	}
	return m, nil
}

func aligned(b []byte) bool {
	return len(b) == 0 || uintptr(unsafe.Pointer(&b[0]))%4 == 0
}

func f32Bytes(v []float32) []byte {
	out := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(f))
	}
	return out
}
