package kernels_test

import (
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
)

// splitArgs binds gdn_decode_split's operands: the float32 ones by name,
// arrivals as counters.
func splitArgs(t *testing.T, p ir.Params, rows int, ops map[string][]float32, arrivals []int32) *ir.Args {
	t.Helper()
	return tiledArgs(t, ir.GDNDecodeSplit, p, rows, ops, arrivals)
}

// tiledArgs binds the operands of a column-tiled GDN family (kind): the
// float32 ones by name, its last (arrivals or tags) as the counters.
func tiledArgs(t *testing.T, kind ir.Kind, p ir.Params, rows int, ops map[string][]float32, counters []int32) *ir.Args {
	t.Helper()
	f := kernels.Families[kind]
	var block [ir.ParamSlots]int32
	a := &ir.Args{Family: f, Params: p, N: rows, Block: &block, Mem: make([][]byte, len(f.Operands))}
	for i, o := range f.Operands {
		if o.DType == ir.I32 {
			a.Mem[i] = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(counters))), 4*len(counters))
			continue
		}
		v, ok := ops[o.Name]
		if !ok {
			t.Fatalf("no operand %s", o.Name)
		}
		a.Mem[i] = f32Bytes(v)
	}
	if err := a.Check(); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestGDNDecodeSplitComposed holds gdn_decode_split's reference to
// gdn_decode_step's (the chain's, TestGDNDecodeStepComposed): y and both
// states bit for bit, for one row and several, with GQA; the partial sums
// are Σo² of each tile of the recurrence's output (recovered from y's
// inputs by the unfused recurrence); the counters stay zero, and a
// counter left non-zero is an error naming the key head.
func TestGDNDecodeSplitComposed(t *testing.T) {
	const hk, hv, dk, dv, kw, tile = 2, 4, 8, 6, 4, 3
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
		sp := p.Clone()
		sp.SetInt("col_tile", tile)
		ops := func(y, cs, st []float32) map[string][]float32 {
			return map[string][]float32{"y": y, "mixed": mixed, "conv_w": convW, "conv_state": cs,
				"b": b, "a": a, "a_log": aLog, "dt_bias": dtBias, "z": z, "norm_w": normW, "state": st}
		}
		wy, wConv, wState := make([]float32, rows*hv*dv), append([]float32(nil), convState...), append([]float32(nil), state...)
		run(t, ir.GDNDecodeStep, p, rows, ops(wy, wConv, wState))

		sy, sConv, sState := make([]float32, rows*hv*dv), append([]float32(nil), convState...), append([]float32(nil), state...)
		partial := make([]float32, rows*hv*(dv/tile))
		o := ops(sy, sConv, sState)
		o["partial"] = partial
		arrivals := make([]int32, hk)
		sa := splitArgs(t, sp, rows, o, arrivals)
		if err := kernels.Families[ir.GDNDecodeSplit].Reference(sa); err != nil {
			t.Fatal(err)
		}
		bits := func(v []float32) []uint32 {
			u := make([]uint32, len(v))
			for i, x := range v {
				u[i] = math.Float32bits(x)
			}
			return u
		}
		for _, c := range []struct {
			name      string
			got, want []float32
		}{{"y", sy, wy}, {"conv_state", sConv, wConv}, {"state", sState, wState}} {
			if d := cmp.Diff(bits(c.want), bits(c.got)); d != "" {
				t.Errorf("%d rows: %s differs from gdn_decode_step's (-step +split):\n%s", rows, c.name, d)
			}
		}
		if d := cmp.Diff(make([]int32, hk), arrivals); d != "" {
			t.Errorf("%d rows: arrivals (-want +got):\n%s", rows, d)
		}

		// The recurrence's output rows of the same inputs, through the chain.
		out := make([]float32, rows*hv*dv)
		cv, beta, g := make([]float32, rows*channels), make([]float32, rows*hv), make([]float32, rows*hv)
		cs, st := append([]float32(nil), convState...), append([]float32(nil), state...)
		kernels.CausalConv1dSiLU(cv, mixed, convW, cs, rows, channels, kw)
		kernels.GDNGates(beta, g, b, a, aLog, dtBias, rows, hv)
		kernels.L2NormHeads(cv, channels, rows, hk, dk, 1e-6, float32(1/math.Sqrt(dk)))
		kernels.L2NormHeads(cv[hk*dk:], channels, rows, hk, dk, 1e-6, 1)
		kernels.GatedDeltaRecurrent(out, cv, cv[hk*dk:], cv[2*hk*dk:], channels, beta, g, st, rows, hk, hv, dk, dv)
		want := make([]float32, len(partial))
		for r := range rows * hv {
			for tl := range dv / tile {
				for _, x := range out[r*dv+tl*tile:][:tile] {
					want[r*(dv/tile)+tl] += x * x
				}
			}
		}
		if d := cmp.Diff(want, partial, cmp.Comparer(func(x, y float32) bool { return math.Abs(float64(x-y)) <= 1e-6*math.Abs(float64(x)) })); d != "" {
			t.Errorf("%d rows: partial sums (-want +got):\n%s", rows, d)
		}

		arrivals[1] = 3
		err := kernels.Families[ir.GDNDecodeSplit].Reference(splitArgs(t, sp, rows, o, arrivals))
		if err == nil || !strings.Contains(err.Error(), "key head 1 is 3") {
			t.Errorf("a counter left at 3: error %v", err)
		}
	}
}

// TestGDNDecodeSplitFits accepts the model's and the tiny fixtures' shapes
// at the tiles the planner picks, on both GPU launch configurations, and
// names what refuses the others.
func TestGDNDecodeSplitFits(t *testing.T) {
	c := ir.LaunchConfig{Threads: 256, Warp: 32, MaxSharedBytes: 48 << 10}
	shape := func(dk, dv, kw, tile int64) ir.Params {
		return ir.Params{Ints: map[string]int64{"k_heads": 2, "v_heads": 4, "k_dim": dk, "v_dim": dv, "kernel": kw, "col_tile": tile}}
	}
	for _, tt := range []struct {
		p    ir.Params
		want string
	}{
		{shape(128, 128, 4, 16), ""},
		{shape(128, 128, 4, 32), ""},
		{shape(128, 128, 4, 128), ""},
		{shape(16, 16, 4, 4), ""},
		{shape(16, 16, 4, 1), ""},
		{shape(12, 10, 4, 2), ""},
		{shape(20, 9, 4, 1), ""},
		{shape(128, 128, 4, 24), "col_tile 24 does not divide v_dim 128"},
		{shape(12, 10, 4, 5), "5 column groups, not a power of two"},
		{shape(128, 256, 4, 256), "64 column groups"},
		{shape(100, 16, 4, 16), "k_dim 100 does not split over 64 row parts"},
		{shape(2048, 128, 4, 128), "needs 1024 registers a thread"},
		{shape(128, 128, 9, 16), "conv kernel 9"},
	} {
		err := kernels.GDNDecodeSplitFits(tt.p, c)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%v: error %q, want %q", tt.p.Ints, got, tt.want)
		}
	}
}
