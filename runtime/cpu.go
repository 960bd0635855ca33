package runtime

import (
	"fmt"
	"unsafe"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// CPU is the reference backend: host memory and the Go kernels.
type CPU struct {
	interrupt func() error // the engine's interrupt check (SetInterrupt)
}

// NewCPU returns the CPU backend.
func NewCPU() *CPU { return &CPU{} }

type hostMem struct{ b []byte }

func (m *hostMem) Size() int64 { return int64(len(m.b)) }

func (*CPU) Name() string { return string(plan.CPU) }

func (*CPU) Alloc(n int64) (Mem, error) {
	if n < 0 || n > 1<<40 {
		return nil, fmt.Errorf("cpu: cannot allocate %d bytes", n)
	}
	// Backed by uint64s so every view is 8-byte aligned.
	words := make([]uint64, (n+7)/8)
	return &hostMem{b: unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), n)[:n:n]}, nil
}

// Bind uses host bytes (an mmapped weight) as backend memory.
func (*CPU) Bind(data []byte) (Mem, error) {
	if len(data) > 0 && uintptr(unsafe.Pointer(&data[0]))%4 != 0 {
		return nil, fmt.Errorf("cpu: host data is not 4-byte aligned")
	}
	return &hostMem{b: data}, nil
}

func (*CPU) Free(Mem) {}

func host(r Ref) ([]byte, error) {
	m, ok := r.Mem.(*hostMem)
	if !ok {
		return nil, fmt.Errorf("cpu: memory from another backend")
	}
	if r.Offset < 0 || r.Offset > int64(len(m.b)) {
		return nil, fmt.Errorf("cpu: offset %d outside %d bytes", r.Offset, len(m.b))
	}
	return m.b[r.Offset:], nil
}

func (*CPU) Upload(dst Ref, src []byte) error {
	b, err := host(dst)
	if err != nil {
		return err
	}
	if len(src) > len(b) {
		return fmt.Errorf("cpu: upload of %d bytes overruns the buffer", len(src))
	}
	copy(b, src)
	return nil
}

func (*CPU) Download(dst []byte, src Ref) error {
	b, err := host(src)
	if err != nil {
		return err
	}
	if len(dst) > len(b) {
		return fmt.Errorf("cpu: download of %d bytes overruns the buffer", len(dst))
	}
	copy(dst, b)
	return nil
}

// Copy copies n bytes between buffers (the device copy of GPU backends:
// the prefix cache's device tier runs the same on the CPU).
func (*CPU) Copy(dst, src Ref, n int64) error {
	d, err := host(dst)
	if err != nil {
		return err
	}
	s, err := host(src)
	if err != nil {
		return err
	}
	if n < 0 || n > int64(len(d)) || n > int64(len(s)) {
		return fmt.Errorf("cpu: copy of %d bytes overruns a buffer", n)
	}
	copy(d[:n], s[:n])
	return nil
}

func (*CPU) Zero(dst Ref, n int64) error {
	b, err := host(dst)
	if err != nil {
		return err
	}
	if n > int64(len(b)) {
		return fmt.Errorf("cpu: zeroing %d bytes overruns the buffer", n)
	}
	clear(b[:n])
	return nil
}

// Load checks that every kernel's family has a reference implementation.
func (*CPU) Load(ks []plan.Kernel) error {
	for _, k := range ks {
		f, err := kernels.Families.Family(ir.Kind(k.Family))
		if err != nil {
			return fmt.Errorf("cpu: kernel %s: %w", k.Name, err)
		}
		if f.Reference == nil {
			return fmt.Errorf("cpu: no reference kernel for family %q", k.Family)
		}
	}
	return nil
}

func (*CPU) Sync() error  { return nil }
func (*CPU) Close() error { return nil }

// SetParams does nothing: the CPU kernels read the parameter block Launch
// is given.
func (*CPU) SetParams(*Params) error { return nil }

// Launch runs the family's Go reference with the launch's operands bound by
// the family's declaration, after checking each operand's memory holds its
// extent for rows.
func (c *CPU) Launch(k *plan.Kernel, l *plan.Launch, args []Ref, rows int, p *Params) error {
	if err := c.interrupted(); err != nil {
		return err
	}
	f, err := kernels.Families.Family(ir.Kind(k.Family))
	if err != nil {
		return fmt.Errorf("cpu: kernel %s: %w", k.Name, err)
	}
	if rows < 0 { // the count is in a slot, as GPU kernels read it (KernelABI 5)
		s := -rows - 1
		if s >= ir.ParamSlots || p == nil {
			return fmt.Errorf("cpu: kernel %s: row count from slot %d, outside the parameter block", k.Name, s)
		}
		rows = int(p[s])
	}
	a := &ir.Args{Family: f, Params: k.Params, N: rows, Block: (*[ir.ParamSlots]int32)(p), Mem: make([][]byte, len(args))}
	for i, r := range args {
		b, err := host(r)
		if err != nil {
			return fmt.Errorf("%s: argument %d: %w", k.Name, i, err)
		}
		a.Mem[i] = b
	}
	if err := a.Check(); err != nil {
		return fmt.Errorf("cpu: kernel %s: %w", k.Name, err)
	}
	return c.reference(f, a)
}

func asF32(b []byte) []float32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func asU16(b []byte) []uint16 {
	if len(b) < 2 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

func asI32(b []byte) []int32 {
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(b)/4)
}
