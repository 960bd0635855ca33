package kernels_test

import (
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
)

// bindMixed binds a family's operands from float32, uint16 (BF16) and
// int32 slices by name.
func bindMixed(t *testing.T, kind ir.Kind, p ir.Params, rows int, ops map[string]any) *ir.Args {
	t.Helper()
	f := kernels.Families[kind]
	var block [ir.ParamSlots]int32
	a := &ir.Args{Family: f, Params: p, N: rows, Block: &block, Mem: make([][]byte, len(f.Operands))}
	for i, o := range f.Operands {
		switch v := ops[o.Name].(type) {
		case []float32:
			a.Mem[i] = f32Bytes(v)
		case []uint16:
			a.Mem[i] = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 2*len(v))
		case []int32:
			a.Mem[i] = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
		default:
			t.Fatalf("%s: no operand %s", kind, o.Name)
		}
	}
	if err := a.Check(); err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	return a
}

// TestGDNDecodeOutComposed holds gdn_decode_out's reference to the pair it
// replaces (gdn_decode_split, then matmul_add on its output): the residual
// h, the partial sums and both states bit for bit, for one row and
// several, with GQA and an odd hidden width; the partial rows, scaled by
// their heads' norms and summed in block order, give the projection of the
// normed output (to float rounding); the barrier count flips, and a count
// left half-way is an error.
func TestGDNDecodeOutComposed(t *testing.T) {
	const hk, hv, dk, dv, kw, tile, hidden = 2, 4, 8, 6, 4, 3, 7
	const channels = 2*hk*dk + hv*dv
	fill := func(n int, seed int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.Sin(float64(seed*131 + i*7)))
		}
		return v
	}
	w := make([]uint16, hidden*hv*dv)
	for i, v := range fill(len(w), 12) {
		w[i] = bf16.FromFloat32(v / 4)
	}
	for _, rows := range []int{1, 3} {
		mixed, convW, b, a := fill(rows*channels, 1), fill(channels*kw, 2), fill(rows*hv, 3), fill(rows*hv, 4)
		aLog, dtBias, z, normW := fill(hv, 5), fill(hv, 6), fill(rows*hv*dv, 7), fill(dv, 8)
		convState, state, h0 := fill((kw-1)*channels, 9), fill(hv*dk*dv, 10), fill(rows*hidden, 11)
		p := ir.Params{Ints: map[string]int64{"k_heads": hk, "v_heads": hv, "k_dim": dk, "v_dim": dv, "kernel": kw, "col_tile": tile}}
		p.SetReal("l2_eps", 1e-6)
		p.SetReal("q_scale", 1/math.Sqrt(dk))
		p.SetReal("k_scale", 1)
		p.SetReal("eps", 1e-6)
		// The pair.
		tiles := dv / tile
		y, partial := make([]float32, rows*hv*dv), make([]float32, rows*hv*tiles)
		sConv, sState := append([]float32(nil), convState...), append([]float32(nil), state...)
		arrivals := make([]int32, hk)
		split := bindMixed(t, ir.GDNDecodeSplit, p, rows, map[string]any{"y": y, "partial": partial, "mixed": mixed, "conv_w": convW,
			"conv_state": sConv, "b": b, "a": a, "a_log": aLog, "dt_bias": dtBias, "z": z, "norm_w": normW, "state": sState, "arrivals": arrivals})
		if err := split.Family.Reference(split); err != nil {
			t.Fatal(err)
		}
		wantH := append([]float32(nil), h0...)
		mp := ir.Params{Ints: map[string]int64{"k": hv * dv, "n": hidden}}
		madd := bindMixed(t, ir.MatMulAdd, mp, rows, map[string]any{"y": wantH, "x": y, "w": w})
		if err := madd.Family.Reference(madd); err != nil {
			t.Fatal(err)
		}
		// The fused launch, twice (the barrier flips and flips back).
		op := p.Clone()
		op.SetInt("hidden", hidden)
		op.SetFlag("stage", false)
		gotH, gotPartial := append([]float32(nil), h0...), make([]float32, rows*hv*tiles)
		part := make([]float32, rows*hv*tiles*hidden)
		fConv, fState := append([]float32(nil), convState...), append([]float32(nil), state...)
		barrier, gotArrivals, gotY := []int32{0}, make([]int32, hk), make([]float32, rows*hv*dv)
		args := bindMixed(t, ir.GDNDecodeOut, op, rows, map[string]any{"h": gotH, "y": gotY, "arrivals": gotArrivals, "part": part, "partial": gotPartial, "mixed": mixed,
			"conv_w": convW, "conv_state": fConv, "b": b, "a": a, "a_log": aLog, "dt_bias": dtBias, "z": z, "norm_w": normW,
			"state": fState, "out_w": w, "barrier": barrier})
		if err := args.Family.Reference(args); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			what      string
			got, want []float32
		}{{"h", gotH, wantH}, {"y", gotY, y}, {"partial", gotPartial, partial}, {"conv_state", fConv, sConv}, {"state", fState, sState}} {
			if d := cmp.Diff(c.want, c.got); d != "" {
				t.Errorf("rows %d: %s differs from the pair's (-pair +fused):\n%s", rows, c.what, d)
			}
		}
		if uint32(barrier[0]) != kernels.GDNOutBarrierFlip {
			t.Errorf("rows %d: barrier %#x after one launch, want 2³¹", rows, uint32(barrier[0]))
		}
		// Σ_b inv(head b) · part[t][b] is the projection of the normed output.
		for tt := range rows {
			proj := make([]float64, hidden)
			for bk := range hv * tiles {
				j := bk / tiles
				var ss float64
				for tl := range tiles {
					ss += float64(gotPartial[(tt*hv+j)*tiles+tl])
				}
				inv := 1 / math.Sqrt(ss/dv+1e-6)
				for q := range hidden {
					proj[q] += inv * float64(part[(tt*hv*tiles+bk)*hidden+q])
				}
			}
			for q := range hidden {
				want := float64(wantH[tt*hidden+q] - h0[tt*hidden+q])
				if math.Abs(proj[q]-want) > 1e-5+1e-4*math.Abs(want) {
					t.Errorf("rows %d: row %d column %d: the partial rows give %g, the projection %g", rows, tt, q, proj[q], want)
				}
			}
		}
		if err := args.Family.Reference(args); err != nil {
			t.Fatal(err)
		}
		if barrier[0] != 0 {
			t.Errorf("rows %d: barrier %#x after two launches, want 0", rows, uint32(barrier[0]))
		}
		barrier[0] = 5
		if err := args.Family.Reference(args); err == nil || !strings.Contains(err.Error(), "barrier count") {
			t.Errorf("rows %d: a half-way barrier count: err %v, want one naming the barrier count", rows, err)
		}
	}
}
