package runtime

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unsafe"

	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/plan"
)

// Weights supplies the plan's weight buffers.
type Weights interface {
	bind(e *Engine) error
}

// CheckpointWeights loads weights from a validated checkpoint.
func CheckpointWeights(ck *checkpoint.Checkpoint) Weights { return ckWeights{ck: ck} }

// CheckpointWeightsProgress is CheckpointWeights reporting how far loading
// is: progress gets the bytes of weights in place on the backend so far and
// the bytes of all of them (weights bound in place count at once). Calls
// come one at a time while the engine is made, done never decreasing, the
// last with done == total once every weight is there.
func CheckpointWeightsProgress(ck *checkpoint.Checkpoint, progress func(done, total int64)) Weights {
	return ckWeights{ck: ck, progress: progress}
}

type ckWeights struct {
	ck       *checkpoint.Checkpoint
	progress func(done, total int64)
}

// bind checks every weight buffer of the plan against the checkpoint
// (name, dtype, shape, byte range), all problems at once, before any
// upload; then binds BF16 matrices in place where the backend can, widens
// small parameters to f32, allocates every other buffer and copies them all:
// with one BulkUploader call (BF16 matrices straight from the mapping, so
// the disk reads run in parallel) where the backend has it, with Upload one
// at a time otherwise.
func (w ckWeights) bind(e *Engine) error {
	var errs []error
	// part is one checkpoint tensor of a weight buffer: the whole buffer,
	// or its rows [row, row+rows) of a concatenated weight (plan.Part).
	type part struct {
		info checkpoint.TensorInfo
		row  int64
	}
	type weight struct {
		b     plan.Buffer
		parts []part
	}
	var weights []weight
	for _, b := range e.plan.Buffers {
		if b.Role != "weight" || b.Derive != nil {
			continue // derived weights are made after loading (deriveWeights)
		}
		want := "BF16"
		if b.DType == "f32" {
			want = b.SourceDType
			if want == "" {
				want = "F32"
			}
		}
		wt := weight{b: b}
		for _, src := range b.Sources() {
			where := "weight " + b.Name
			if len(b.Parts) > 0 {
				where += " part " + src.Tensor
			}
			info, err := w.ck.Resolve(src.Tensor)
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", where, err))
				continue
			}
			shape := partShape(&b, src)
			if !slices.Equal(info.Shape, shape) {
				errs = append(errs, fmt.Errorf("%s: checkpoint shape %v, plan wants %v", where, info.Shape, shape))
				continue
			}
			if string(info.DType) != want {
				errs = append(errs, fmt.Errorf("%s: checkpoint dtype %s, plan wants %s", where, info.DType, want))
				continue
			}
			wt.parts = append(wt.parts, part{info, src.Rows[0]})
		}
		weights = append(weights, wt)
	}
	if len(errs) > 0 {
		return fmt.Errorf("checkpoint does not match the plan: %w", errors.Join(errs...))
	}

	// Bind what the backend uses in place, allocate the rest; the engine
	// owns (and Close frees) every buffer from the moment it exists. A
	// concatenated weight is allocated whole, each part copied to its rows.
	binder, canBind := e.be.(HostBinder)
	var jobs []UploadJob
	var order []checkpoint.TensorInfo // where each job's source lies, for reading in file order
	var bound, total int64
	for _, wt := range weights {
		srcs := make([][]byte, len(wt.parts))
		raws := make([][]byte, len(wt.parts))
		for i, pt := range wt.parts {
			raw, err := w.ck.Bytes(pt.info.Name)
			if err != nil {
				return err
			}
			src := raw
			if wt.b.DType == "f32" {
				vals, err := checkpoint.Float32s(pt.info, raw)
				if err != nil {
					return fmt.Errorf("weight %s: %w", wt.b.Name, err)
				}
				src = f32Bytes(vals)
			}
			raws[i], srcs[i] = raw, src
			total += int64(len(src))
		}
		var m Mem
		var err error
		if len(wt.b.Parts) == 0 && wt.b.DType != "f32" && canBind && aligned(raws[0]) {
			if m, err = binder.Bind(raws[0]); err != nil {
				return fmt.Errorf("weight %s: %w", wt.b.Name, err)
			}
			bound += int64(len(raws[0]))
		} else {
			if m, err = e.be.Alloc(wt.b.Bytes); err != nil {
				return fmt.Errorf("weight %s: allocate %d bytes: %w", wt.b.Name, wt.b.Bytes, err)
			}
			rowBytes := wt.b.Bytes / wt.b.Rows()
			for i, pt := range wt.parts {
				jobs = append(jobs, UploadJob{Name: wt.b.Name, Dst: Ref{Mem: m, Offset: pt.row * rowBytes}, Src: srcs[i]})
				order = append(order, pt.info)
			}
		}
		e.globals[wt.b.Name] = m
		e.weights = append(e.weights, m)
	}
	sortByFile(jobs, order)

	report := func(done int64) {
		if w.progress != nil {
			w.progress(done, total)
		}
	}
	report(bound)
	if bulk, ok := e.be.(BulkUploader); ok && len(jobs) > 0 {
		last := int64(-1)
		err := bulk.UploadAll(jobs, func(done int64) {
			if done > last {
				last = done
				report(bound + done)
			}
		})
		if err != nil {
			return fmt.Errorf("upload weights: %w", err)
		}
		if bound+last < total {
			report(total)
		}
		return nil
	}
	done := bound
	for _, j := range jobs {
		if err := e.be.Upload(j.Dst, j.Src); err != nil {
			return fmt.Errorf("weight %s: %w", j.Name, err)
		}
		done += int64(len(j.Src))
		report(done)
	}
	return nil
}

// sortByFile orders upload jobs by where their sources lie in the
// checkpoint (shard, then offset), so that the reads go through each file
// front to back.
func sortByFile(jobs []UploadJob, at []checkpoint.TensorInfo) {
	idx := make([]int, len(jobs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if c := strings.Compare(at[a].File, at[b].File); c != 0 {
			return c
		}
		return cmp.Compare(at[a].Begin, at[b].Begin)
	})
	sorted := make([]UploadJob, len(jobs))
	for i, k := range idx {
		sorted[i] = jobs[k]
	}
	copy(jobs, sorted)
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
