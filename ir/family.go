package ir

import (
	"fmt"
	"slices"
	"unsafe"
)

// Family declares one kernel family — an op kind at the granularity a
// kernel implements it — in one place: what the verifier checks, what the
// planner specializes and launches, what codegen renders and what the CPU
// backend runs. The table of every family is kernels.Families, next to the
// Go references; ir takes it as an argument (Catalogue) so that the graph
// and its verifier do not depend on the kernels.
type Family struct {
	Kind Kind
	// Operands are the kernel's arguments, in ABI order.
	Operands []OperandSpec
	// Params are its compile-time parameters, each with its type.
	Params []ParamSpec
	// Check enforces relations between parameters (nil: none); it runs
	// after every declared parameter was found with its kind.
	Check func(p Params) error
	// Slots are the parameter-block slots the kernel reads at run time.
	Slots []Slot
	// AnyFloatFlag names the flag that makes its AnyFloat operands bf16
	// ("" when it has none).
	AnyFloatFlag string
	// Launch is the launch rule on a GPU target: grid, block and dynamic
	// shared memory for a launch of rows rows, consulting the target's
	// launch configuration.
	Launch func(p Params, rows int, c LaunchConfig) LaunchShape
	// GridBarrier: every block of a launch waits for every other (a grid
	// barrier), so the whole grid must be resident at once. The runtime
	// checks it at load and runs the launch's fallback where it is not.
	GridBarrier bool
	// Reference is the Go reference kernel, its operands and parameters
	// bound by name (Args).
	Reference func(a *Args) error
	// Template is the kernel's template file in kernels/*.tmpl.
	Template string
	// TemplateData adds family-specific values to what the template sees
	// (nil: none): a []float32 is written as a list of float32 literals.
	TemplateData func(p Params) map[string]any
	// CUDAOnly: the template is written for the CUDA dialect alone (sm_90a
	// instructions with no counterpart elsewhere); codegen refuses to
	// render it for another, and the planner plans it on sm_90 (and the
	// cpu, which runs its reference) only.
	CUDAOnly bool
}

// OperandSpec is one argument of a family.
type OperandSpec struct {
	Name   string
	DType  DType
	Access Access
	// Extent is the number of elements the kernel may touch from the
	// operand's start, given its parameters and row count.
	Extent func(p Params, rows int64) int64
}

// Operand returns the index of the operand called name, or -1.
func (f *Family) Operand(name string) int {
	return slices.IndexFunc(f.Operands, func(o OperandSpec) bool { return o.Name == name })
}

// AnyFloatIsBF16 reports whether a kernel with these parameters takes its
// AnyFloat operands as bf16.
func (f *Family) AnyFloatIsBF16(p Params) bool { return f.AnyFloatFlag != "" && p.Flag(f.AnyFloatFlag) }

// Catalogue is the table of families by kind (kernels.Families).
type Catalogue map[Kind]*Family

// Family returns the family of kind, or an error naming it.
func (c Catalogue) Family(kind Kind) (*Family, error) {
	f, ok := c[kind]
	if !ok || f == nil {
		return nil, fmt.Errorf("unknown kernel family %q", kind)
	}
	return f, nil
}

// LaunchConfig is what a target's launch rules consult: one row of the
// per-target table (plan.Target.Launch).
type LaunchConfig struct {
	Threads        int // threads of every block (the templates are written for it)
	Warp           int // lanes of a warp (sm_90) or wave (gfx1151, wave32)
	MaxSharedBytes int // shared memory (LDS) a block may use, dynamic included
	Stages         int // software pipeline stages of tiled loops (1: none)
	// Multiprocessors is the number of SMs (CUs on gfx1151): what a grid
	// sized to fill the device counts, whatever the rows.
	Multiprocessors int
}

// Warps is the number of warps of a block.
func (c LaunchConfig) Warps() int { return c.Threads / c.Warp }

// LaunchShape is one launch's grid, block and dynamic shared memory, and
// the blocks of a thread-block cluster along x (sm_90: the blocks of a
// cluster run at once on one GPU processing cluster and reach each other's
// shared memory); 0 or 1 is no cluster.
type LaunchShape struct {
	Grid, Block [3]int
	SharedBytes int
	Cluster     int
}

// Blocks is a launch of the configuration's block over grid (x, y, z).
func (c LaunchConfig) Blocks(x, y, z int) LaunchShape {
	return LaunchShape{Grid: [3]int{x, y, z}, Block: [3]int{c.Threads, 1, 1}}
}

// Ceil is ⌈a / b⌉.
func Ceil(a, b int) int { return (a + b - 1) / b }

// Args is one run of a family's Go reference: the operands' memory (in
// declaration order), the parameters, the logical rows and the parameter
// block. References read operands and parameters by name.
type Args struct {
	Family *Family
	Params Params
	N      int
	Block  *[ParamSlots]int32
	Mem    [][]byte
}

// Sub is a run of family f with parameters p over operands of a, named in
// f's operand order (the same rows and parameter block): how a fused
// family's reference runs the references it is composed of.
func (a *Args) Sub(f *Family, p Params, operands ...string) *Args {
	if len(operands) != len(f.Operands) {
		panic(fmt.Sprintf("family %s: %d operands for %s's %d", a.Family.Kind, len(operands), f.Kind, len(f.Operands)))
	}
	s := &Args{Family: f, Params: p, N: a.N, Block: a.Block, Mem: make([][]byte, len(operands))}
	for i, name := range operands {
		j := a.Family.Operand(name)
		if j < 0 {
			panic(fmt.Sprintf("family %s has no operand %q", a.Family.Kind, name))
		}
		s.Mem[i] = a.Mem[j]
	}
	return s
}

// mem is the memory of the operand called name, checked against the
// declared dtype. A name the family does not declare is a bug of its
// reference, caught by the family tests.
func (a *Args) mem(name string, dt DType) []byte {
	i := a.Family.Operand(name)
	if i < 0 {
		panic(fmt.Sprintf("family %s has no operand %q", a.Family.Kind, name))
	}
	o := a.Family.Operands[i]
	got := o.DType
	if got == AnyFloat {
		got = F32
		if a.Family.AnyFloatIsBF16(a.Params) {
			got = BF16
		}
	}
	if got != dt {
		panic(fmt.Sprintf("family %s: operand %s is %s, read as %s", a.Family.Kind, name, got, dt))
	}
	return a.Mem[i]
}

// F32, BF16 and I32 view an operand's memory as its element type.
func (a *Args) F32(name string) []float32 {
	b := a.mem(name, F32)
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func (a *Args) BF16(name string) []uint16 {
	b := a.mem(name, BF16)
	if len(b) < 2 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

func (a *Args) I32(name string) []int32 {
	b := a.mem(name, I32)
	if len(b) < 4 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// I8 views an int8 operand's memory.
func (a *Args) I8(name string) []int8 {
	b := a.mem(name, I8)
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*int8)(unsafe.Pointer(&b[0])), len(b))
}

// Int, Real and Flag read a declared parameter; an undeclared name is a bug
// of the reference.
func (a *Args) Int(name string) int        { a.declared(name, IntParam); return a.Params.Int(name) }
func (a *Args) Real(name string) float64   { a.declared(name, RealParam); return a.Params.Real(name) }
func (a *Args) Real32(name string) float32 { return float32(a.Real(name)) }
func (a *Args) Flag(name string) bool      { a.declared(name, FlagParam); return a.Params.Flag(name) }

func (a *Args) declared(name string, k ParamKind) {
	for _, s := range a.Family.Params {
		if s.Name == name && s.Kind == k {
			return
		}
	}
	panic(fmt.Sprintf("family %s declares no %s parameter %q", a.Family.Kind, k, name))
}

// Slot reads a slot of the parameter block; the family must declare it.
func (a *Args) Slot(s Slot) int32 {
	if !slices.Contains(a.Family.Slots, s) {
		panic(fmt.Sprintf("family %s does not declare slot %s", a.Family.Kind, s))
	}
	return a.Block[s]
}

// Check requires every operand's memory to hold its extent for the
// launch's rows, so a reference never indexes past a buffer.
func (a *Args) Check() error {
	if len(a.Mem) != len(a.Family.Operands) {
		return fmt.Errorf("%d operands, family %s takes %d", len(a.Mem), a.Family.Kind, len(a.Family.Operands))
	}
	if a.Block == nil {
		return fmt.Errorf("family %s: no parameter block", a.Family.Kind)
	}
	for i, o := range a.Family.Operands {
		size := int64(o.DType.Size())
		if o.DType == AnyFloat {
			size = 4
			if a.Family.AnyFloatIsBF16(a.Params) {
				size = 2
			}
		}
		if need := o.Extent(a.Params, int64(a.N)) * size; int64(len(a.Mem[i])) < need {
			return fmt.Errorf("operand %s: %d bytes, %d rows need %d", o.Name, len(a.Mem[i]), a.N, need)
		}
	}
	return nil
}

// The extent rules of the operand declarations.

// PerRow is rows × the product of the named integer parameters.
func PerRow(keys ...string) func(Params, int64) int64 {
	return func(p Params, rows int64) int64 {
		n := rows
		for _, k := range keys {
			n *= int64(p.Int(k))
		}
		return n
	}
}

// Fixed is the product of the named integer parameters, whatever the rows.
func Fixed(keys ...string) func(Params, int64) int64 {
	return func(p Params, _ int64) int64 { return PerRow(keys...)(p, 1) }
}

// Const is n elements, whatever the rows.
func Const(n int64) func(Params, int64) int64 { return func(Params, int64) int64 { return n } }

// Strided is the extent of rows laid out with a row stride (an integer
// parameter): the last row starts at (rows-1)·stride and spans span(p).
func Strided(stride string, span func(Params) int64) func(Params, int64) int64 {
	return func(p Params, rows int64) int64 {
		if rows == 0 {
			return 0
		}
		return (rows-1)*int64(p.Int(stride)) + span(p)
	}
}

// Product is the product of the named integer parameters.
func Product(keys ...string) func(Params) int64 {
	return func(p Params) int64 { return Fixed(keys...)(p, 1) }
}
