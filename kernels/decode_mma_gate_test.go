package kernels_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
)

// mmaGateShape is one attention_decode_mma_gate launch: heads, a context
// of ctx positions for the last of rows query rows, the cache's capacity,
// splits and their alignment. The shapes are the GPU cases' (codegen's
// mmaCases, dmmag_*).
type mmaGateShape struct {
	name                    string
	hq, hkv, d, ctx, rows   int
	capacity, splits, align int
}

var mmaGateShapes = []mmaGateShape{
	{"ctx1", 16, 2, 256, 1, 1, 300, 66, 32},
	{"ctx257", 16, 2, 256, 257, 1, 300, 66, 32},
	{"boundary1", 16, 2, 256, 66*32 + 1, 1, 2200, 66, 32},
	{"long", 16, 2, 256, 2100, 1, 2100, 3, 32},
	{"rows", 16, 2, 256, 203, 3, 300, 5, 4},
	{"tiny", 4, 2, 32, 70, 1, 96, 66, 32},
	{"tiny_rows", 4, 2, 32, 95, 2, 96, 3, 1},
	{"group16", 16, 1, 64, 130, 1, 200, 2, 16},
	{"d16", 4, 1, 16, 77, 1, 100, 2, 1},
	{"splits1", 16, 2, 256, 257, 1, 300, 1, 32},
	{"splits4", 16, 2, 256, 257, 1, 300, 4, 32},
	{"group3_splits7", 6, 2, 64, 42, 2, 80, 7, 1},
	{"mha", 2, 2, 128, 64, 1, 64, 4, 8},
}

// params are the shape's parameters with sm_90's geometry (4 warps, 3
// stages), as the planner gives them.
func (s mmaGateShape) params() ir.Params {
	p := ir.Params{}
	for k, v := range map[string]int{"q_heads": s.hq, "kv_heads": s.hkv, "head_dim": s.d, "capacity": s.capacity,
		"width": s.hkv * s.d, "splits": s.splits, "split_align": s.align, "block_heads": kernels.MMABlockHeads(s.hq / s.hkv),
		"warps": 4, "ring_stages": 3} {
		p.SetInt(k, int64(v))
	}
	p.SetReal("scale", 1/math.Sqrt(float64(s.d)))
	p.SetFlag("kv_bf16", true)
	return p
}

// TestDecodeMMAGateReference holds attention_decode_mma_gate's reference,
// run through its family declaration with the GPU cases' shapes, to
// attention (f32, over the widened bf16 cache) followed by the output gate:
// contexts 1 (65 of 66 splits neutral), 257, one past a split boundary,
// long, several rows, the tiny heads, a group of 16 (two blocks of 8 heads
// per KV head), head dim 16, one split, four, a group of 3 over 7 splits,
// one head per KV head. The arrival counters must be zero before and after,
// and a counter left nonzero is an error naming it.
func TestDecodeMMAGateReference(t *testing.T) {
	f := kernels.Families[ir.AttentionDecodeMMAGate]
	r := rand.New(rand.NewPCG(77, 1))
	normal := func(n int) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(r.NormFloat64())
		}
		return v
	}
	for _, s := range mmaGateShapes {
		p := s.params()
		if err := f.Check(p); err != nil { // the family's own limits (DecodeMMAFits included)
			t.Fatalf("%s: %v", s.name, err)
		}
		pos := s.ctx - s.rows
		width := s.hkv * s.d
		kc, vc := make([]uint16, s.capacity*width), make([]uint16, s.capacity*width)
		kw, vw := make([]float32, len(kc)), make([]float32, len(vc))
		for i := range kc {
			kc[i], vc[i] = bf16.FromFloat32(float32(r.NormFloat64())), bf16.FromFloat32(float32(r.NormFloat64()))
			kw[i], vw[i] = bf16.ToFloat32(kc[i]), bf16.ToFloat32(vc[i])
		}
		q, qg := normal(s.rows*s.hq*s.d), normal(s.rows*2*s.hq*s.d)
		want := make([]float32, s.rows*s.hq*s.d)
		kernels.Attention(want, q, kw, vw, s.rows, pos, s.hq, s.hkv, s.d, float32(p.Real("scale")))
		kernels.AttnOutputGate(want, qg, s.rows, s.hq, s.d)

		out := make([]float32, len(want))
		partial := make([]float32, s.rows*s.hq*s.splits*kernels.PartialStride(s.d))
		for _, v := range [][]float32{out, partial} {
			for i := range v {
				v[i] = float32(math.NaN())
			}
		}
		arrivals := make([]int32, s.rows*2*(s.hq/p.Int("block_heads")))
		var block [ir.ParamSlots]int32
		block[ir.ParamPos] = int32(pos)
		ops := map[string][]byte{"out": f32Bytes(out), "partial": f32Bytes(partial), "q": f32Bytes(q), "qg": f32Bytes(qg),
			"k_cache": u16Bytes(kc), "v_cache": u16Bytes(vc), "arrivals": i32Bytes(arrivals)}
		a := &ir.Args{Family: f, Params: p, N: s.rows, Block: &block, Mem: make([][]byte, len(f.Operands))}
		for i, o := range f.Operands {
			a.Mem[i] = ops[o.Name]
		}
		if err := a.Check(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if err := f.Reference(a); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if diff := cmp.Diff(want, out, approxF32(2e-6, 1e-5)); diff != "" {
			t.Errorf("%s: attention_decode_mma_gate vs attention + gate (-want +got):\n%s", s.name, diff)
		}
		if diff := cmp.Diff(make([]int32, len(arrivals)), arrivals); diff != "" {
			t.Errorf("%s: arrivals after the launch (-want +got):\n%s", s.name, diff)
		}
		arrivals[len(arrivals)-2] = 5
		err := f.Reference(a)
		if wantErr := fmt.Sprintf("arrival counter %d is 5", len(arrivals)-2); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: a counter left at 5: error %v, want one naming %q", s.name, err, wantErr)
		}
	}
}

// TestDecodeMMAGateMerge: the merge's scratch (kernels.DecodeMMAGateMerge)
// at every shape of TestDecodeMMAGateReference and at the real model's
// 8K-128K launches: the warps' sums, read and written as 16-byte vectors,
// start 16-byte aligned (the split counts 66, 2, 3 and 5 put them off it
// when the weights came first), the three parts do not overlap, and the
// launch's dynamic shared memory holds them.
func TestDecodeMMAGateMerge(t *testing.T) {
	shapes := append([]mmaGateShape(nil), mmaGateShapes...)
	for _, splits := range []int{66, 132, 1024} {
		shapes = append(shapes, mmaGateShape{fmt.Sprintf("real_%d", splits), 16, 2, 256, 8192, 1, 131072, splits, 32})
	}
	for _, s := range shapes {
		p := s.params()
		wacc, w, red, floats := kernels.DecodeMMAGateMerge(p)
		warps, d := p.Int("warps"), s.d
		switch {
		case wacc%4 != 0 || d%4 != 0:
			t.Errorf("%s: the warps' sums at float %d, rows of %d floats: not 16-byte aligned", s.name, wacc, d)
		case w < wacc+warps*d || red < w+s.splits || floats < red+warps:
			t.Errorf("%s: wacc %d, w %d, red %d, %d floats overlap (%d warps × %d dims, %d splits)", s.name, wacc, w, red, floats, warps, d, s.splits)
		case kernels.DecodeMMAGateSharedBytes(p) < 4*floats:
			t.Errorf("%s: %d bytes of shared memory for %d floats of scratch", s.name, kernels.DecodeMMAGateSharedBytes(p), floats)
		}
	}
}

func i32Bytes(v []int32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}

// approxF32 compares floats within atol + rtol·|want|.
func approxF32(atol, rtol float64) cmp.Option {
	return cmp.Comparer(func(x, y float32) bool {
		return math.Abs(float64(x)-float64(y)) <= atol+rtol*math.Max(math.Abs(float64(x)), math.Abs(float64(y)))
	})
}
