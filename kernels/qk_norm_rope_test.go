package kernels

import (
	"fmt"
	"slices"
	"testing"
	"unsafe"

	"github.com/aimaproject/aimac/ir"
	"github.com/google/go-cmp/cmp"
)

// runFamily runs family kind's reference on the operands (float32 slices
// viewed as bytes) with params p, n rows and position pos.
func runFamily(t *testing.T, kind ir.Kind, p ir.Params, n, pos int, ops ...[]float32) {
	t.Helper()
	f := Families[kind]
	var block [ir.ParamSlots]int32
	block[ir.ParamPos] = int32(pos)
	a := &ir.Args{Family: f, Params: p, N: n, Block: &block}
	for _, o := range ops {
		a.Mem = append(a.Mem, unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(o))), 4*len(o)))
	}
	if err := f.CheckParams(p); err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	if err := a.Check(); err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	if err := f.Reference(a); err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
}

// TestQKNormRoPEAppendIsTheChain runs the lowering's chain (rmsnorm of the
// q heads out of qg, rmsnorm of k in place, rope of q and of k, kv_append)
// through the families' references and the fused family's reference on
// the same inputs: q and both caches agree bit for bit, the fused op
// leaves k as it was, and cache positions other than pos..pos+n-1 keep
// their contents. Sizes: the real model's heads, the tiny fixtures', full
// rotary, odd head counts.
func TestQKNormRoPEAppendIsTheChain(t *testing.T) {
	type shape struct{ hq, hkv, d, rot int }
	r := newRand(3)
	for _, sh := range []shape{{16, 2, 256, 64}, {4, 2, 32, 8}, {3, 1, 16, 16}, {2, 2, 8, 2}} {
		for _, c := range []struct{ n, pos int }{{1, 0}, {1, 37}, {3, 5}} {
			t.Run(fmt.Sprintf("%v n=%d pos=%d", sh, c.n, c.pos), func(t *testing.T) {
				const capacity, eps, theta = 48, 1e-6, 1e7
				n, d, width := c.n, sh.d, sh.hkv*sh.d
				qg := randVec(r, n*2*sh.hq*d, 1)
				k := randVec(r, n*width, 1)
				v := randVec(r, n*width, 1)
				qw, kw := randVec(r, d, 0.1), randVec(r, d, 0.1)
				kc0, vc0 := randVec(r, capacity*width, 1), randVec(r, capacity*width, 1)

				// The chain, as the planner lowers it.
				q1, k1 := make([]float32, n*sh.hq*d), slices.Clone(k)
				kc1, vc1 := slices.Clone(kc0), slices.Clone(vc0)
				norm := func(heads, xs, ys int) ir.Params {
					p := ir.Params{Ints: map[string]int64{"width": int64(d), "heads": int64(heads), "x_stride": int64(xs), "y_stride": int64(ys)}}
					p.SetReal("eps", eps)
					p.SetFlag("one_plus", true)
					return p
				}
				rope := func(heads int) ir.Params {
					p := ir.Params{Ints: map[string]int64{"row_stride": int64(heads * d), "heads": int64(heads), "head_dim": int64(d), "rot_dim": int64(sh.rot)}}
					p.SetReal("theta", theta)
					return p
				}
				runFamily(t, ir.RMSNorm, norm(sh.hq, 2*d, d), n, c.pos, q1, qg, qw)
				runFamily(t, ir.RMSNorm, norm(sh.hkv, d, d), n, c.pos, k1, k1, kw)
				runFamily(t, ir.RoPE, rope(sh.hq), n, c.pos, q1)
				runFamily(t, ir.RoPE, rope(sh.hkv), n, c.pos, k1)
				app := ir.Params{Ints: map[string]int64{"width": int64(width), "capacity": capacity}}
				app.SetFlag("kv_bf16", false)
				runFamily(t, ir.KVAppend, app, n, c.pos, kc1, vc1, k1, v)

				// The fused family.
				q2, k2 := make([]float32, n*sh.hq*d), slices.Clone(k)
				kc2, vc2 := slices.Clone(kc0), slices.Clone(vc0)
				p := ir.Params{Ints: map[string]int64{"q_heads": int64(sh.hq), "kv_heads": int64(sh.hkv), "head_dim": int64(d),
					"rot_dim": int64(sh.rot), "capacity": capacity, "width": int64(width)}}
				p.SetReal("eps", eps)
				p.SetReal("theta", theta)
				p.SetFlag("one_plus", true)
				p.SetFlag("kv_bf16", false)
				runFamily(t, ir.QKNormRoPEAppend, p, n, c.pos, q2, kc2, vc2, qg, k2, v, qw, kw)

				for _, x := range []struct {
					name      string
					got, want []float32
				}{{"q", q2, q1}, {"k_cache", kc2, kc1}, {"v_cache", vc2, vc1}, {"k", k2, k}} {
					if diff := cmp.Diff(x.want, x.got); diff != "" {
						t.Errorf("%s (-chain +fused):\n%s", x.name, diff)
					}
				}
				if c.pos > 0 && !slices.Equal(kc2[:c.pos*width], kc0[:c.pos*width]) {
					t.Error("the fused op wrote cache positions before pos")
				}
			})
		}
	}
}

// TestCombineGateIsCombineThenGate holds attention_combine_gate's
// reference to the two families it fuses, run in turn.
func TestCombineGateIsCombineThenGate(t *testing.T) {
	r := newRand(4)
	for _, c := range []struct{ hq, d, splits, n int }{{16, 256, 66, 1}, {4, 32, 3, 2}, {3, 8, 1, 3}} {
		rec := PartialStride(c.d)
		partial := make([]float32, c.n*c.hq*c.splits*rec)
		for i := 0; i < len(partial); i += rec {
			copy(partial[i:i+c.d], randVec(r, c.d, 3))
			partial[i+c.d], partial[i+c.d+1] = float32(r.NormFloat64()), float32(1+r.Float64()*5)
		}
		qg := randVec(r, c.n*2*c.hq*c.d, 2)
		p := ir.Params{Ints: map[string]int64{"q_heads": int64(c.hq), "head_dim": int64(c.d), "splits": int64(c.splits)}}
		want := make([]float32, c.n*c.hq*c.d)
		runFamily(t, ir.AttentionCombine, p, c.n, 0, want, partial)
		g := ir.Params{Ints: map[string]int64{"heads": int64(c.hq), "head_dim": int64(c.d)}}
		runFamily(t, ir.AttnOutputGate, g, c.n, 0, want, qg)
		got := make([]float32, c.n*c.hq*c.d)
		runFamily(t, ir.AttentionCombineGate, p, c.n, 0, got, partial, qg)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%+v (-combine, gate +fused):\n%s", c, diff)
		}
	}
}

// TestDecodeStreamFits: the real model's heads with either KV dtype and
// the tiny fixtures' fit, and a 1024-dim bf16 head; a head_dim off the warp and a 1024-dim f32 head
// (a 64 KiB ring step) do not.
func TestDecodeStreamFits(t *testing.T) {
	for _, c := range []struct {
		d, blockHeads int
		bf16, ok      bool
	}{{256, 8, true, true}, {256, 8, false, true}, {32, 2, true, true}, {32, 2, false, true}, {512, 4, true, true},
		{1024, 2, true, true}, {1024, 2, false, false}, {48, 1, true, false}} {
		p := ir.Params{Ints: map[string]int64{"head_dim": int64(c.d), "block_heads": int64(c.blockHeads)}}
		p.SetFlag("kv_bf16", c.bf16)
		if err := DecodeStreamFits(p); (err == nil) != c.ok {
			t.Errorf("%+v: %v", c, err)
		}
	}
	p := ir.Params{Ints: map[string]int64{"head_dim": 256, "block_heads": 8}}
	p.SetFlag("kv_bf16", true)
	if ppw, stages, step, _ := streamGeometry(p, 256); ppw != 2 || stages != 3 || step != 16<<10 {
		t.Errorf("real model, bf16 KV: %d positions a step, %d stages of %d bytes; want 2, 3, 16 KiB", ppw, stages, step)
	}
}
