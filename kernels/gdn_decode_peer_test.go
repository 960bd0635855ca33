package kernels_test

import (
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
)

// TestGDNDecodePeerComposed holds gdn_decode_peer's reference to
// gdn_decode_split's (itself the chain's, TestGDNDecodeSplitComposed): y
// and both states bit for bit, for one row and several, with GQA; each row
// raises the tags of its parity's slots by one, wrapping at the int32
// limit, and leaves its tiles' Σo² (split's partial sums) beside them;
// tags that differ within a key head are an error naming it.
func TestGDNDecodePeerComposed(t *testing.T) {
	const hk, hv, dk, dv, kw, tile = 2, 4, 8, 6, 4, 3
	const channels, tiles = 2*hk*dk + hv*dv, dv / tile
	const peers, blocks = hv / hk * tiles, hv * tiles
	fill := func(n int, seed int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(math.Cos(float64(seed*97 + i*5)))
		}
		return v
	}
	for _, rows := range []int{1, 3} {
		mixed, convW, b, a := fill(rows*channels, 1), fill(channels*kw, 2), fill(rows*hv, 3), fill(rows*hv, 4)
		aLog, dtBias, z, normW := fill(hv, 5), fill(hv, 6), fill(rows*hv*dv, 7), fill(dv, 8)
		convState, state := fill((kw-1)*channels, 9), fill(hv*dk*dv, 10)
		p := ir.Params{Ints: map[string]int64{"k_heads": hk, "v_heads": hv, "k_dim": dk, "v_dim": dv, "kernel": kw, "col_tile": tile}}
		p.SetReal("l2_eps", 1e-6)
		p.SetReal("q_scale", 1/math.Sqrt(dk))
		p.SetReal("k_scale", 1)
		p.SetReal("eps", 1e-6)
		type result struct{ y, partial, conv, state []float32 }
		launch := func(kind ir.Kind, counters []int32) (result, error) {
			r := result{make([]float32, rows*hv*dv), make([]float32, rows*blocks), append([]float32(nil), convState...), append([]float32(nil), state...)}
			ops := map[string][]float32{"y": r.y, "partial": r.partial, "mixed": mixed, "conv_w": convW, "conv_state": r.conv,
				"b": b, "a": a, "a_log": aLog, "dt_bias": dtBias, "z": z, "norm_w": normW, "state": r.state}
			return r, kernels.Families[kind].Reference(tiledArgs(t, kind, p, rows, ops, counters))
		}
		want, err := launch(ir.GDNDecodeSplit, make([]int32, hk))
		if err != nil {
			t.Fatal(err)
		}
		// Tags: 17 in parity 0, the int32 limit in parity 1 (the second
		// key head's parity 1 too: the wrap); sums of an earlier launch.
		tag := func(par int) int32 { return []int32{17, math.MaxInt32}[par] }
		slots := make([]int32, kernels.GDNPeerSlotWords*blocks)
		for par := range 2 {
			for blk := range blocks {
				slots[2*(par*blocks+blk)], slots[2*(par*blocks+blk)+1] = tag(par), -3
			}
		}
		got, err := launch(ir.GDNDecodePeer, slots)
		if err != nil {
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
		}{{"y", got.y, want.y}, {"conv_state", got.conv, want.conv}, {"state", got.state, want.state}} {
			if d := cmp.Diff(bits(c.want), bits(c.got)); d != "" {
				t.Errorf("%d rows: %s differs from gdn_decode_split's (-split +peer):\n%s", rows, c.name, d)
			}
		}
		wantSlots := make([]int32, len(slots))
		for par := range 2 {
			writes := int32((rows + 1 - par) / 2) // rows par, par+2, ...
			last := rows - 1
			if last%2 != par {
				last--
			}
			for blk := range blocks {
				s := 2 * (par*blocks + blk)
				wantSlots[s], wantSlots[s+1] = tag(par)+writes, -3
				if writes > 0 {
					wantSlots[s+1] = int32(math.Float32bits(want.partial[last*blocks+blk]))
				}
			}
		}
		if d := cmp.Diff(wantSlots, slots); d != "" {
			t.Errorf("%d rows: slots (-want +got):\n%s", rows, d)
		}

		slots[2*(blocks+peers+2)]++
		if _, err := launch(ir.GDNDecodePeer, slots); err == nil || !strings.Contains(err.Error(), "key head 1 differ (parity 1, block 2") {
			t.Errorf("a tag left one launch behind: error %v", err)
		}
	}
}

// TestGDNDecodePeerFits accepts the model's shape at the tiles the planner
// picks on the H200 (32 columns: 128 blocks) and gfx1151 (128: 32) and
// the tiny fixtures', and names what refuses the others.
func TestGDNDecodePeerFits(t *testing.T) {
	h200 := ir.LaunchConfig{Threads: 256, Warp: 32, MaxSharedBytes: 227 << 10, Multiprocessors: 132}
	gfx := ir.LaunchConfig{Threads: 256, Warp: 32, MaxSharedBytes: 64 << 10, Multiprocessors: 40}
	shape := func(hk, hv, dk, dv, kw, tile int64) ir.Params {
		return ir.Params{Ints: map[string]int64{"k_heads": hk, "v_heads": hv, "k_dim": dk, "v_dim": dv, "kernel": kw, "col_tile": tile}}
	}
	for _, tt := range []struct {
		p    ir.Params
		c    ir.LaunchConfig
		want string
	}{
		{shape(16, 32, 128, 128, 4, 32), h200, ""},
		{shape(16, 32, 128, 128, 4, 64), h200, ""},
		{shape(16, 32, 128, 128, 4, 128), gfx, ""},
		{shape(2, 4, 16, 16, 4, 1), h200, ""},
		{shape(2, 4, 16, 16, 4, 2), gfx, ""},
		{shape(1, 3, 20, 9, 4, 1), h200, ""},
		{shape(16, 32, 128, 128, 4, 16), h200, "256 blocks, more than the 132 multiprocessors"},
		{shape(16, 32, 128, 128, 4, 32), gfx, "128 blocks, more than the 40 multiprocessors"},
		{shape(2, 4, 16, 16, 4, 1), gfx, "64 blocks, more than the 40"},
		{shape(1, 4, 16, 16, 4, 1), h200, "64 blocks a key head (4 value heads × 16 tiles), more than the 32 lanes"},
		{shape(1, 1, 192, 16, 4, 16), h200, "k_dim 192: 384 q and k channels"},
		{shape(16, 32, 128, 128, 4, 24), h200, "col_tile 24 does not divide v_dim 128"},
		{shape(16, 32, 128, 128, 9, 32), h200, "conv kernel 9"},
	} {
		err := kernels.GDNDecodePeerFits(tt.p, tt.c)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%v on %d multiprocessors: error %q, want %q", tt.p.Ints, tt.c.Multiprocessors, got, tt.want)
		}
	}
}
