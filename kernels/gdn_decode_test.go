package kernels_test

import (
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
)

// f32Bytes views a float32 slice as the bytes an ir.Args operand holds.
func f32Bytes(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// run calls kind's reference on the named float32 operands.
func run(t *testing.T, kind ir.Kind, p ir.Params, rows int, ops map[string][]float32) {
	t.Helper()
	f := kernels.Families[kind]
	var block [ir.ParamSlots]int32
	a := &ir.Args{Family: f, Params: p, N: rows, Block: &block, Mem: make([][]byte, len(f.Operands))}
	for i, o := range f.Operands {
		v, ok := ops[o.Name]
		if !ok {
			t.Fatalf("%s: no operand %s", kind, o.Name)
		}
		a.Mem[i] = f32Bytes(v)
	}
	if err := a.Check(); err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	if err := f.Reference(a); err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
}

// TestGDNDecodeStepComposed holds gdn_decode_step's reference to the
// unfused chain, each family run through its own declaration on shared
// buffers as the lowering binds them: y, the conv state and the GDN state
// equal bit for bit, for one row (decode) and several, with GQA.
func TestGDNDecodeStepComposed(t *testing.T) {
	const hk, hv, dk, dv, kw = 2, 4, 8, 4, 4
	const channels = 2*hk*dk + hv*dv
	fill := func(n int, seed int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.Sin(float64(seed*131 + i*7)))
		}
		return v
	}
	for _, rows := range []int{1, 3} {
		mixed, convW, b, a := fill(rows*channels, 1), fill(channels*kw, 2), fill(rows*hv, 3), fill(rows*hv, 4)
		aLog, dtBias, z, normW := fill(hv, 5), fill(hv, 6), fill(rows*hv*dv, 7), fill(dv, 8)
		convState, state := fill((kw-1)*channels, 9), fill(hv*dk*dv, 10)
		p := ir.Params{Ints: map[string]int64{"k_heads": hk, "v_heads": hv, "k_dim": dk, "v_dim": dv, "kernel": kw}}
		p.SetReal("l2_eps", 1e-6)
		p.SetReal("q_scale", 1/math.Sqrt(dk))
		p.SetReal("k_scale", 1)
		p.SetReal("eps", 1e-6)
		fy, fConv, fState := make([]float32, rows*hv*dv), append([]float32(nil), convState...), append([]float32(nil), state...)
		run(t, ir.GDNDecodeStep, p, rows, map[string][]float32{"y": fy, "mixed": mixed, "conv_w": convW, "conv_state": fConv,
			"b": b, "a": a, "a_log": aLog, "dt_bias": dtBias, "z": z, "norm_w": normW, "state": fState})

		y, cv, beta, g, o := make([]float32, rows*hv*dv), make([]float32, rows*channels), make([]float32, rows*hv), make([]float32, rows*hv), make([]float32, rows*hv*dv)
		ints := func(m map[string]int64) ir.Params { return ir.Params{Ints: m} }
		run(t, ir.CausalConv1dSiLU, ints(map[string]int64{"channels": channels, "kernel": kw}), rows,
			map[string][]float32{"out": cv, "in": mixed, "w": convW, "state": convState})
		run(t, ir.GDNGates, ints(map[string]int64{"heads": hv}), rows,
			map[string][]float32{"beta": beta, "g": g, "b": b, "a": a, "a_log": aLog, "dt_bias": dtBias})
		for _, l := range []struct {
			off   int
			scale float64
		}{{0, 1 / math.Sqrt(dk)}, {hk * dk, 1}} {
			lp := ints(map[string]int64{"row_stride": channels, "heads": hk, "dim": dk})
			lp.SetReal("eps", 1e-6)
			lp.SetReal("scale", l.scale)
			run(t, ir.L2NormHeads, lp, rows, map[string][]float32{"x": cv[l.off:]})
		}
		run(t, ir.GatedDeltaRecurrent, ints(map[string]int64{"row_stride": channels, "k_heads": hk, "v_heads": hv, "k_dim": dk, "v_dim": dv}), rows,
			map[string][]float32{"out": o, "q": cv, "k": cv[hk*dk:], "v": cv[2*hk*dk:], "beta": beta, "g": g, "state": state})
		np := ints(map[string]int64{"heads": hv, "dim": dv})
		np.SetReal("eps", 1e-6)
		run(t, ir.GatedRMSNorm, np, rows, map[string][]float32{"y": y, "o": o, "z": z, "w": normW})

		for _, c := range []struct {
			name        string
			fused, want []float32
		}{{"y", fy, y}, {"conv_state", fConv, convState}, {"state", fState, state}} {
			for i := range c.want {
				if math.Float32bits(c.fused[i]) != math.Float32bits(c.want[i]) {
					t.Fatalf("%d rows: %s[%d] = %v, the chain gives %v", rows, c.name, i, c.fused[i], c.want[i])
				}
			}
		}
	}
}

// TestGDNDecodeStepFits accepts the model's and the tiny fixtures' shapes
// on both GPU launch configurations and names what refuses the others.
func TestGDNDecodeStepFits(t *testing.T) {
	c := ir.LaunchConfig{Threads: 256, Warp: 32, MaxSharedBytes: 48 << 10}
	shape := func(dk, dv, kw int64) ir.Params {
		return ir.Params{Ints: map[string]int64{"k_heads": 2, "v_heads": 4, "k_dim": dk, "v_dim": dv, "kernel": kw}}
	}
	for _, tt := range []struct {
		p    ir.Params
		want string
	}{
		{shape(128, 128, 4), ""},
		{shape(16, 16, 4), ""},
		{shape(256, 128, 4), "needs 128 registers a thread"},
		{shape(128, 96, 4), "v_dim 96 does not divide"},
		{shape(8, 16, 4), "k_dim 8 does not split over 16 column groups"},
		{shape(128, 512, 4), "v_dim 512 does not divide"},
		{shape(128, 128, 9), "conv kernel 9"},
	} {
		err := kernels.GDNDecodeStepFits(tt.p, c)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%v: error %q, want %q", tt.p.Ints, got, tt.want)
		}
	}
}
