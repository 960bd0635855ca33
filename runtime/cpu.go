package runtime

import (
	"fmt"
	"unsafe"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// CPU is the reference backend: host memory and the Go kernels.
type CPU struct{}

// NewCPU returns the CPU backend.
func NewCPU() *CPU { return &CPU{} }

type hostMem struct{ b []byte }

func (m *hostMem) Size() int64 { return int64(len(m.b)) }

func (*CPU) Name() string { return "cpu" }

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
		if _, ok := ir.Catalogue[ir.Kind(k.Family)]; !ok {
			return fmt.Errorf("cpu: no reference kernel for family %q", k.Family)
		}
	}
	return nil
}

func (*CPU) Sync() error  { return nil }
func (*CPU) Close() error { return nil }

// Launch calls the reference kernel of the launch's family.
// SetParams does nothing: the CPU kernels take the dynamic scalars from
// Launch's dyn.
func (*CPU) SetParams(*Params) error { return nil }

func (c *CPU) Launch(k *plan.Kernel, l *plan.Launch, args []Ref, rows int, dyn map[string]int64) error {
	views := make([][]byte, len(args))
	for i, a := range args {
		b, err := host(a)
		if err != nil {
			return fmt.Errorf("%s: argument %d: %w", k.Name, i, err)
		}
		views[i] = b
	}
	f32 := func(i int) []float32 { return asF32(views[i]) }
	u16 := func(i int) []uint16 { return asU16(views[i]) }
	i32 := func(i int) []int32 { return asI32(views[i]) }
	p := func(name string) int { return int(k.Params[name]) }
	pf := func(name string) float32 { return float32(k.Params[name]) }
	n := rows
	switch ir.Kind(k.Family) {
	case ir.Embedding:
		ids := i32(2)[:n]
		for t, id := range ids {
			if id < 0 || int(id) >= p("vocab") {
				return fmt.Errorf("token %d at row %d is outside the vocabulary of %d", id, t, p("vocab"))
			}
		}
		kernels.Embedding(f32(0), u16(1), ids, n, p("hidden"))
	case ir.RMSNorm:
		kernels.RMSNorm(f32(0), p("y_stride"), f32(1), p("x_stride"), f32(2), n*p("heads"), p("width"), pf("eps"), k.Params["one_plus"] != 0)
	case ir.MatMul:
		kernels.MatMul(f32(0), f32(1), u16(2), n, p("k"), p("n"))
	case ir.CausalConv1dSiLU:
		kernels.CausalConv1dSiLU(f32(0), f32(1), f32(2), f32(3), n, p("channels"), p("kernel"))
	case ir.GDNGates:
		kernels.GDNGates(f32(0), f32(1), f32(2), f32(3), f32(4), f32(5), n, p("heads"))
	case ir.L2NormHeads:
		kernels.L2NormHeads(f32(0), p("row_stride"), n, p("heads"), p("dim"), pf("eps"), pf("scale"))
	case ir.GatedDeltaChunked:
		kernels.GatedDeltaChunked(f32(0), f32(1), f32(2), f32(3), p("row_stride"), f32(4), f32(5), f32(6),
			n, p("k_heads"), p("v_heads"), p("k_dim"), p("v_dim"), p("chunk"))
	case ir.GatedDeltaRecurrent:
		kernels.GatedDeltaRecurrent(f32(0), f32(1), f32(2), f32(3), p("row_stride"), f32(4), f32(5), f32(6),
			n, p("k_heads"), p("v_heads"), p("k_dim"), p("v_dim"))
	case ir.GatedRMSNorm:
		kernels.GatedRMSNorm(f32(0), f32(1), f32(2), f32(3), n*p("heads"), p("dim"), pf("eps"))
	case ir.RoPE:
		kernels.RoPE(f32(0), p("row_stride"), n, p("heads"), p("head_dim"), p("rot_dim"), int(dyn["pos"]), k.Params["theta"])
	case ir.KVAppend:
		if int(dyn["pos"])+n > p("capacity") {
			return fmt.Errorf("KV cache full: %d + %d tokens exceed %d", dyn["pos"], n, p("capacity"))
		}
		kernels.KVAppend(f32(0), f32(1), f32(2), f32(3), n, int(dyn["pos"]), p("width"))
	case ir.Attention:
		kernels.Attention(f32(0), f32(1), f32(2), f32(3), n, int(dyn["pos"]), p("q_heads"), p("kv_heads"), p("head_dim"), pf("scale"))
	case ir.AttnOutputGate:
		kernels.AttnOutputGate(f32(0), f32(1), n, p("heads"), p("head_dim"))
	case ir.RouterTopK:
		kernels.RouterTopK(i32(0), f32(1), f32(2), n, p("experts"), p("k"))
	case ir.MoEGateUp:
		kernels.MoEGateUp(f32(0), f32(1), i32(2), u16(3), n, p("hidden"), p("inter"), p("k"), p("experts"))
	case ir.MoEDown:
		kernels.MoEDown(f32(0), f32(1), i32(2), f32(3), u16(4), n, p("hidden"), p("inter"), p("k"), p("experts"))
	case ir.SiLUMul:
		kernels.SiLUMul(f32(0), f32(1), f32(2), n*p("width"))
	case ir.Add:
		kernels.Add(f32(0), f32(1), n*p("width"))
	case ir.SharedExpertCombine:
		kernels.SharedExpertCombine(f32(0), f32(1), f32(2), f32(3), n, p("hidden"))
	case ir.FillUniform:
		seed, key, lo, scale := fillArgs(dyn)
		if k.Params["bf16"] != 0 {
			if len(u16(0)) < n {
				return fmt.Errorf("cpu: fill of %d elements overruns the buffer", n)
			}
			kernels.FillUniformBF16(u16(0), n, seed, key, lo, scale)
		} else {
			if len(f32(0)) < n {
				return fmt.Errorf("cpu: fill of %d elements overruns the buffer", n)
			}
			kernels.FillUniformF32(f32(0), n, seed, key, lo, scale)
		}
	case ir.Sample:
		// The sampling values come in dyn under their slot names
		// (sampleArgs, devsample.go), as the GPU kernels read the block.
		if len(f32(0)) < p("vocab") || len(i32(1)) < 1 || len(i32(2)) < 2 {
			return fmt.Errorf("cpu: sample over %d logits overruns a buffer", p("vocab"))
		}
		kernels.Sample(i32(1), i32(2), f32(0), p("vocab"), sampleArgs(dyn))
	default:
		return fmt.Errorf("cpu: no reference kernel for family %q", k.Family)
	}
	return nil
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
