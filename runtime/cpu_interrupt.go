package runtime

import (
	"github.com/aimaproject/aimac/ir"
)

// cpuBlockWork is about how many multiply-adds one block of a split CPU
// launch does before the interrupt check runs again: a few milliseconds.
const cpuBlockWork = 1 << 24

// rowWork is the multiply-adds per row of the families whose reference
// computes every row on its own — what the CPU backend may split into row
// blocks with the same bits as one call. They are the long launches: the
// projections and the experts.
var rowWork = map[ir.Kind]func(p ir.Params) int{
	ir.MatMul:    func(p ir.Params) int { return p.Int("k") * p.Int("n") },
	ir.MatMulAdd: func(p ir.Params) int { return p.Int("k") * p.Int("n") },
	ir.MoEGateUp: func(p ir.Params) int { return 2 * p.Int("k") * p.Int("inter") * p.Int("hidden") },
	ir.MoEDown:   func(p ir.Params) int { return p.Int("k") * p.Int("inter") * p.Int("hidden") },
}

// SetInterrupt installs the check the CPU backend calls before every launch
// and between the row blocks of its long ones (Interruptible). A backend
// serves one engine: the engine installs its own check.
func (c *CPU) SetInterrupt(check func() error) { c.interrupt = check }

// interrupted runs the installed check.
func (c *CPU) interrupted() error {
	if c.interrupt == nil {
		return nil
	}
	return c.interrupt()
}

// reference runs the family's reference on a, in row blocks of about
// cpuBlockWork multiply-adds for the families of rowWork, checking for an
// interrupt between blocks. An operand whose extent grows with the rows is
// cut at each block's first row; one whose extent does not is passed whole.
func (c *CPU) reference(f *ir.Family, a *ir.Args) error {
	work, ok := rowWork[f.Kind]
	if !ok || a.N <= 1 {
		return f.Reference(a)
	}
	stride := make([]int64, len(f.Operands)) // bytes per row; 0: the same for every row
	for i, o := range f.Operands {
		e0, e1 := o.Extent(a.Params, 0), o.Extent(a.Params, 1)
		switch {
		case e0 == 0 && e1 > 0:
			dt := o.DType
			if dt == ir.AnyFloat {
				dt = ir.F32
				if f.AnyFloatIsBF16(a.Params) {
					dt = ir.BF16
				}
			}
			stride[i] = e1 * int64(dt.Size())
		case e0 != e1:
			return f.Reference(a) // neither per row nor fixed: not split
		}
	}
	block := max(1, cpuBlockWork/max(work(a.Params), 1))
	for r0 := 0; r0 < a.N; r0 += block {
		if r0 > 0 {
			if err := c.interrupted(); err != nil {
				return err
			}
		}
		b := *a
		b.N = min(block, a.N-r0)
		b.Mem = make([][]byte, len(a.Mem))
		for i, m := range a.Mem {
			b.Mem[i] = m[int64(r0)*stride[i]:]
		}
		if err := f.Reference(&b); err != nil {
			return err
		}
	}
	return nil
}
