package runtime

import (
	"fmt"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// deriveWeights makes the plan's derived weights (plan.Buffer.Derive: the
// certified LM head's int8 rows and scales) on the device from the weights
// already bound, whatever supplied those (a checkpoint or SyntheticWeights):
// each derivation kernel launched once, with one row, its written operands
// the derived buffers and its read operand the source weight.
func (e *Engine) deriveWeights() error {
	type job struct {
		k    *plan.Kernel
		from string
		into map[string]Mem // operand → derived buffer
	}
	var jobs []*job
	byKey := map[[2]string]*job{}
	kernelsByName := map[string]*plan.Kernel{}
	for i := range e.plan.Kernels {
		kernelsByName[e.plan.Kernels[i].Name] = &e.plan.Kernels[i]
	}
	for _, b := range e.plan.Buffers {
		d := b.Derive
		if d == nil {
			continue
		}
		key := [2]string{d.Kernel, d.From}
		j := byKey[key]
		if j == nil {
			k := kernelsByName[d.Kernel]
			if k == nil {
				return fmt.Errorf("weight %s: derived by kernel %s, which the plan lacks", b.Name, d.Kernel)
			}
			j = &job{k: k, from: d.From, into: map[string]Mem{}}
			byKey[key] = j
			jobs = append(jobs, j)
		}
		m, err := e.be.Alloc(b.Bytes)
		if err != nil {
			return fmt.Errorf("weight %s: allocate %d bytes: %w", b.Name, b.Bytes, err)
		}
		e.globals[b.Name] = m
		e.weights = append(e.weights, m)
		j.into[d.Operand] = m
	}
	for _, j := range jobs {
		f, err := kernels.Families.Family(ir.Kind(j.k.Family))
		if err != nil {
			return err
		}
		src := e.globals[j.from]
		if src == nil {
			return fmt.Errorf("kernel %s derives from %s, which is not bound", j.k.Name, j.from)
		}
		var refs []Ref
		for _, o := range f.Operands {
			m := j.into[o.Name]
			if o.Access == ir.Read {
				m = src
			}
			if m == nil {
				return fmt.Errorf("kernel %s: operand %s of the derivation from %s has no buffer", j.k.Name, o.Name, j.from)
			}
			refs = append(refs, Ref{Mem: m})
		}
		var prm Params
		if err := e.be.SetParams(&prm); err != nil {
			return err
		}
		l := &plan.Launch{Kernel: j.k.Name, Layer: -1}
		if e.plan.Target.GPU() {
			s := f.Launch(j.k.Params, 1, e.plan.Target.Launch())
			l.Grid, l.Block, l.SharedBytes = s.Grid[:], s.Block[:], s.SharedBytes
		}
		if err := e.be.Launch(j.k, l, refs, 1, &prm); err != nil {
			return fmt.Errorf("derive from %s: %w", j.from, err)
		}
	}
	return e.be.Sync()
}
