package kernels

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/ir"
	"github.com/google/go-cmp/cmp"
)

// bytesOf views a float32 or uint16 slice as bytes.
func bytesOf[T float32 | uint16](v []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(z)))
}

// runFolded runs family kind's reference on operand memories mem with
// params p, n rows and position pos.
func runFolded(kind ir.Kind, p ir.Params, n, pos int, mem ...[]byte) error {
	f := Families[kind]
	var block [ir.ParamSlots]int32
	block[ir.ParamPos] = int32(pos)
	a := &ir.Args{Family: f, Params: p, N: n, Block: &block, Mem: mem}
	if err := f.CheckParams(p); err != nil {
		return err
	}
	if err := a.Check(); err != nil {
		return err
	}
	return f.Reference(a)
}

// TestFoldIsTheChain holds attention_decode_split_qk and
// attention_decode_mma_qk to the launches they replace, run in turn
// through their families' references: qk_norm_rope_append into q and the
// caches, then attention_decode_split (or _mma) on them. The records and
// both caches agree bit for bit, cache positions outside pos..pos+n−1 keep
// their contents, and with a bf16 cache the appended rows are the f32
// chain's rounded to nearest even. Shapes: the real model's heads, the tiny
// fixtures', full rotary on a group of 3, one row and several (whose later
// rows attend to the earlier rows' new positions), positions 0, within a
// split and past the first split.
func TestFoldIsTheChain(t *testing.T) {
	type shape struct{ hq, hkv, d, rot, splits, align int }
	r := newRand(11)
	for _, kind := range []ir.Kind{ir.AttentionDecodeSplitQK, ir.AttentionDecodeMMAQK} {
		for _, sh := range []shape{{16, 2, 256, 64, 66, 32}, {4, 2, 32, 8, 3, 1}, {6, 2, 64, 64, 9, 1}} {
			for _, c := range []struct{ n, pos int }{{1, 0}, {1, 37}, {3, 5}, {2, 45}} {
				for _, kvBF16 := range []bool{false, true} {
					if kind == ir.AttentionDecodeMMAQK && !kvBF16 {
						continue // the tensor-core split reads a bf16 cache only
					}
					t.Run(fmt.Sprintf("%s %v n=%d pos=%d bf16=%v", kind, sh, c.n, c.pos, kvBF16), func(t *testing.T) {
						foldCase(t, r, kind, sh.hq, sh.hkv, sh.d, sh.rot, sh.splits, sh.align, c.n, c.pos, kvBF16)
					})
				}
			}
		}
	}
}

func foldCase(t *testing.T, r interface{ NormFloat64() float64 }, kind ir.Kind, hq, hkv, d, rot, splits, align, n, pos int, kvBF16 bool) {
	const capacity, eps, theta = 48, 1e-6, 1e7
	width := hkv * d
	rnd := func(k int, sd float64) []float32 {
		v := make([]float32, k)
		for i := range v {
			v[i] = float32(r.NormFloat64() * sd)
		}
		return v
	}
	qg, k, v := rnd(n*2*hq*d, 1), rnd(n*width, 1), rnd(n*width, 1)
	qw, kw := rnd(d, 0.1), rnd(d, 0.1)
	kc0, vc0 := rnd(capacity*width, 1), rnd(capacity*width, 1)
	for i := range kc0 { // values a bf16 cache holds exactly
		kc0[i], vc0[i] = bf16.ToFloat32(bf16.FromFloat32(kc0[i])), bf16.ToFloat32(bf16.FromFloat32(vc0[i]))
	}
	rec := PartialStride(d)
	p := ir.Params{Ints: map[string]int64{"q_heads": int64(hq), "kv_heads": int64(hkv), "head_dim": int64(d), "capacity": capacity,
		"width": int64(width), "splits": int64(splits), "split_align": int64(align), "rot_dim": int64(rot), "new_rows": int64(n)}}
	p.SetReal("scale", 0.3)
	p.SetReal("eps", eps)
	p.SetReal("theta", theta)
	p.SetFlag("one_plus", true)
	p.SetFlag("kv_bf16", kvBF16)
	split := ir.AttentionDecodeSplit
	if kind == ir.AttentionDecodeMMAQK {
		split = ir.AttentionDecodeMMA
		warps, stages, _ := DecodeMMAGeometry(ir.LaunchConfig{Threads: 256, Warp: 32, MaxSharedBytes: 227 << 10}, d)
		p.SetInt("block_heads", int64(MMABlockHeads(hq/hkv)))
		p.SetInt("warps", int64(warps))
		p.SetInt("ring_stages", int64(stages))
	} else {
		p.SetInt("block_heads", int64(BlockHeads(hq/hkv, d)))
	}

	// The chain: qk_norm_rope_append on f32 caches, the cache's rounding,
	// then the split on the cache's dtype.
	q := make([]float32, n*hq*d)
	kc1, vc1 := slices.Clone(kc0), slices.Clone(vc0)
	qp := ir.Params{Ints: map[string]int64{"q_heads": int64(hq), "kv_heads": int64(hkv), "head_dim": int64(d),
		"rot_dim": int64(rot), "capacity": capacity, "width": int64(width)}}
	qp.SetReal("eps", eps)
	qp.SetReal("theta", theta)
	qp.SetFlag("one_plus", true)
	qp.SetFlag("kv_bf16", false)
	if err := runFolded(ir.QKNormRoPEAppend, qp, n, pos, bytesOf(q), bytesOf(kc1), bytesOf(vc1), bytesOf(qg), bytesOf(k), bytesOf(v), bytesOf(qw), bytesOf(kw)); err != nil {
		t.Fatal(err)
	}
	sp := p.Clone()
	for _, name := range []string{"rot_dim", "new_rows"} {
		delete(sp.Ints, name)
	}
	delete(sp.Reals, "eps")
	delete(sp.Reals, "theta")
	delete(sp.Flags, "one_plus")
	want := make([]float32, n*hq*splits*rec)
	cache := func(x []float32) []byte {
		if !kvBF16 {
			return bytesOf(x)
		}
		h := make([]uint16, len(x))
		for i, f := range x {
			h[i] = bf16.FromFloat32(f)
		}
		return bytesOf(h)
	}
	kb1, vb1 := cache(kc1), cache(vc1)
	if err := runFolded(split, sp, n, pos, bytesOf(want), bytesOf(q), kb1, vb1); err != nil {
		t.Fatal(err)
	}

	// The fold.
	got := make([]float32, len(want))
	kb2, vb2 := cache(slices.Clone(kc0)), cache(slices.Clone(vc0))
	if err := runFolded(kind, p, n, pos, bytesOf(got), bytesOf(qg), kb2, vb2, bytesOf(k), bytesOf(v), bytesOf(qw), bytesOf(kw)); err != nil {
		t.Fatal(err)
	}
	// Records of splits without positions keep their (zero) accumulators
	// on both sides; every record is compared.
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("partial (-chain +fold):\n%s", diff)
	}
	if !slices.Equal(kb1, kb2) || !slices.Equal(vb1, vb2) {
		t.Error("the caches differ from the chain's")
	}
	es := 4
	if kvBF16 {
		es = 2
	}
	k0 := cache(kc0)
	if !slices.Equal(kb2[:pos*width*es], k0[:pos*width*es]) || !slices.Equal(kb2[(pos+n)*width*es:], k0[(pos+n)*width*es:]) {
		t.Error("the fold wrote cache positions outside pos..pos+n−1")
	}
	if slices.Equal(kb2[pos*width*es:(pos+n)*width*es], k0[pos*width*es:(pos+n)*width*es]) {
		t.Error("the fold did not write the new positions")
	}
}

// TestFoldRefusesAFullCache: a launch past the capacity is an error naming
// it, as qk_norm_rope_append's.
func TestFoldRefusesAFullCache(t *testing.T) {
	p := ir.Params{Ints: map[string]int64{"q_heads": 2, "kv_heads": 1, "head_dim": 8, "capacity": 4, "width": 8, "splits": 2,
		"split_align": 1, "block_heads": 2, "rot_dim": 4, "new_rows": 2}}
	p.SetReal("scale", 0.3)
	p.SetReal("eps", 1e-6)
	p.SetReal("theta", 1e4)
	p.SetFlag("one_plus", true)
	p.SetFlag("kv_bf16", false)
	z := func(k int) []byte { return bytesOf(make([]float32, k)) }
	err := runFolded(ir.AttentionDecodeSplitQK, p, 2, 3, z(2*2*2*12), z(2*32), z(32), z(32), z(16), z(16), z(8), z(8))
	if err == nil || !strings.Contains(err.Error(), "KV cache full") {
		t.Errorf("3 + 2 tokens in a cache of 4: %v", err)
	}
	p.SetInt("new_rows", 1)
	if err := runFolded(ir.AttentionDecodeSplitQK, p, 2, 0, z(2*2*2*12), z(2*32), z(32), z(32), z(16), z(16), z(8), z(8)); err == nil || !strings.Contains(err.Error(), "new_rows") {
		t.Errorf("2 rows, new_rows 1: %v", err)
	}
	p.SetInt("rot_dim", 3)
	if err := Families[ir.AttentionDecodeSplitQK].CheckParams(p); err == nil || !strings.Contains(err.Error(), "rot_dim") {
		t.Errorf("odd rot_dim: %v", err)
	}
}
