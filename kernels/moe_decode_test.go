package kernels_test

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

func init() {
	examples[ir.MoEDecodeGateUp] = moeGateUpParams(4, 8, 4, 2, 6, 2, 4)
	examples[ir.MoEDecodeDown] = moeDownParams(moeDecodeParams(4, 8, 4, 2, 6, 1, 2), true)
}

// moeDownParams are p with moe_decode_down's layout flag.
func moeDownParams(p ir.Params, warpPerSlot bool) ir.Params {
	p = p.Clone()
	p.SetFlag("warp_per_slot", warpPerSlot)
	p.SetFlag("early_ids", false)
	return p
}

func moeDecodeParams(experts, hidden, inter, k, shared, rpw, unroll int64) ir.Params {
	return ir.Params{Ints: map[string]int64{"experts": experts, "hidden": hidden, "inter": inter, "k": k,
		"shared_inter": shared, "rows_per_warp": rpw, "unroll": unroll}}
}

// moeGateUpParams are moe_decode_gate_up's parameters: the shared ones and
// its l2_prefetch flag (off: the CPU's references ignore it).
func moeGateUpParams(experts, hidden, inter, k, shared, rpw, unroll int64) ir.Params {
	p := moeDecodeParams(experts, hidden, inter, k, shared, rpw, unroll)
	p.SetFlag("l2_prefetch", false)
	return p
}

// normals are n values of N(0, sd²); normalsBF16 the same as BF16.
func normals(r *rand.Rand, n int, sd float64) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64() * sd)
	}
	return v
}

func normalsBF16(r *rand.Rand, n int, sd float64) []uint16 {
	v := make([]uint16, n)
	for i := range v {
		v[i] = bf16.FromFloat32(float32(r.NormFloat64() * sd))
	}
	return v
}

// mem is an operand's bytes for ir.Args.
func mem[T any](v []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), len(v)*int(unsafe.Sizeof(z)))
}

// runOps calls kind's reference with the named operands' memory.
func runOps(t *testing.T, kind ir.Kind, p ir.Params, rows int, ops map[string][]byte) {
	t.Helper()
	f := kernels.Families[kind]
	var block [ir.ParamSlots]int32
	a := &ir.Args{Family: f, Params: p, N: rows, Block: &block, Mem: make([][]byte, len(f.Operands))}
	for i, o := range f.Operands {
		b, ok := ops[o.Name]
		if !ok {
			t.Fatalf("%s: no operand %s", kind, o.Name)
		}
		a.Mem[i] = b
	}
	if err := a.Check(); err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
	if err := f.Reference(a); err != nil {
		t.Fatalf("%s: %v", kind, err)
	}
}

// TestMoEDecodeComposed holds the fused MoE block's references to the
// eleven-launch tail the lowering makes (router_topk, moe_gate_up,
// moe_down, the shared expert's gate, up, silu_mul, down, the
// shared_expert_gate projection, shared_expert_combine), each family run
// through its own declaration: ids, weights and the residual equal bit for
// bit, for one row (decode) and several, at odd sizes and top-k ≠ 8.
func TestMoEDecodeComposed(t *testing.T) {
	sizes := []struct{ experts, hidden, inter, k, shared int }{
		{5, 20, 6, 3, 10},
		{16, 64, 32, 4, 32},
		{9, 24, 8, 8, 16},
		{7, 16, 5, 1, 3},
	}
	for _, sz := range sizes {
		for _, rows := range []int{1, 3} {
			r := rand.New(rand.NewPCG(uint64(sz.experts*100+rows), 7))
			E, H, I, K, S := sz.experts, sz.hidden, sz.inter, sz.k, sz.shared
			x, xn, logits := normals(r, rows*H, 1), normals(r, rows*H, 1), normals(r, rows*E, 2)
			gateUp, down := normalsBF16(r, E*2*I*H, 0.1), normalsBF16(r, E*H*I, 0.1)
			sg, su, sd, gw := normalsBF16(r, S*H, 0.1), normalsBF16(r, S*H, 0.1), normalsBF16(r, H*S, 0.1), normalsBF16(r, H, 0.1)
			moe := map[string]int64{"experts": int64(E), "hidden": int64(H), "inter": int64(I), "k": int64(K)}
			ints := func(m map[string]int64) ir.Params { return ir.Params{Ints: m} }

			// The unfused tail, on the lowering's buffers.
			ids, w := make([]int32, rows*K), make([]float32, rows*K)
			act := make([]float32, rows*K*I)
			routed, g, u, sa := make([]float32, rows*H), make([]float32, rows*S), make([]float32, rows*S), make([]float32, rows*S)
			sdOut, gl, want := make([]float32, rows*H), make([]float32, rows), append([]float32(nil), x...)
			runOps(t, ir.RouterTopK, ints(map[string]int64{"experts": int64(E), "k": int64(K)}), rows,
				map[string][]byte{"ids": mem(ids), "weights": mem(w), "logits": mem(logits)})
			runOps(t, ir.MoEGateUp, ints(moe), rows, map[string][]byte{"act": mem(act), "x": mem(xn), "ids": mem(ids), "gate_up": mem(gateUp)})
			runOps(t, ir.MoEDown, ints(moe), rows, map[string][]byte{"y": mem(routed), "act": mem(act), "ids": mem(ids), "weights": mem(w), "down": mem(down)})
			mm := func(y, x []float32, wt []uint16, k, n int) {
				runOps(t, ir.MatMul, ints(map[string]int64{"k": int64(k), "n": int64(n)}), rows, map[string][]byte{"y": mem(y), "x": mem(x), "w": mem(wt)})
			}
			mm(g, xn, sg, H, S)
			mm(u, xn, su, H, S)
			runOps(t, ir.SiLUMul, ints(map[string]int64{"width": int64(S)}), rows, map[string][]byte{"out": mem(sa), "gate": mem(g), "up": mem(u)})
			mm(sdOut, sa, sd, S, H)
			mm(gl, xn, gw, H, 1)
			runOps(t, ir.SharedExpertCombine, ints(map[string]int64{"hidden": int64(H)}), rows,
				map[string][]byte{"x": mem(want), "routed": mem(routed), "shared": mem(sdOut), "gate": mem(gl)})

			// The two fused launches.
			p := moeGateUpParams(int64(E), int64(H), int64(I), int64(K), int64(S), 1, 1)
			fIDs, fW := make([]int32, rows*K), make([]float32, rows*K)
			fAct, got := make([]float32, rows*(K*I+S)), append([]float32(nil), x...)
			for i := range fAct {
				fAct[i] = float32(math.NaN())
			}
			runOps(t, ir.MoEDecodeGateUp, p, rows, map[string][]byte{"act": mem(fAct), "ids": mem(fIDs), "weights": mem(fW),
				"x": mem(xn), "logits": mem(logits), "gate_up": mem(gateUp), "shared_gate": mem(sg), "shared_up": mem(su)})
			runOps(t, ir.MoEDecodeDown, moeDownParams(p, false), rows, map[string][]byte{"y": mem(got), "act": mem(fAct), "ids": mem(fIDs), "weights": mem(fW),
				"x": mem(xn), "down": mem(down), "shared_down": mem(sd), "shared_expert_gate": mem(gw)})

			var wantAct []float32
			for tk := range rows {
				wantAct = append(wantAct, act[tk*K*I:][:K*I]...)
				wantAct = append(wantAct, sa[tk*S:][:S]...)
			}
			for _, c := range []struct {
				what      string
				got, want any
			}{{"ids", fIDs, ids}, {"weights", fW, w}, {"act", fAct, wantAct}, {"residual", got, want}} {
				if diff := cmp.Diff(c.want, c.got); diff != "" {
					t.Errorf("%+v rows %d: %s (-unfused +fused):\n%s", sz, rows, c.what, diff)
				}
			}
		}
	}
}

// TestMoEDecodeTopKTies: the fused block ranks as router_topk does — the
// larger probability first, equal ones by the lower expert index — and
// renormalizes the picks to sum 1.
func TestMoEDecodeTopKTies(t *testing.T) {
	cases := []struct {
		name    string
		logits  []float32
		k       int
		ids     []int32
		weights []float32
	}{
		{"three-way tie", []float32{1, 3, 3, 0, 3}, 3, []int32{1, 2, 4}, []float32{1. / 3, 1. / 3, 1. / 3}},
		{"tie at the cut", []float32{0, 2, 1, 1, -1}, 2, []int32{1, 2}, nil},
		{"all equal", []float32{0.5, 0.5, 0.5, 0.5, 0.5}, 4, []int32{0, 1, 2, 3}, []float32{0.25, 0.25, 0.25, 0.25}},
		{"k 1", []float32{-1, -2, 4, 4, 0}, 1, []int32{2}, []float32{1}},
	}
	for _, c := range cases {
		const H, I, S = 8, 4, 4
		E := len(c.logits)
		p := moeGateUpParams(int64(E), H, I, int64(c.k), S, 1, 1)
		ids, w := make([]int32, c.k), make([]float32, c.k)
		act := make([]float32, c.k*I+S)
		runOps(t, ir.MoEDecodeGateUp, p, 1, map[string][]byte{"act": mem(act), "ids": mem(ids), "weights": mem(w),
			"x": mem(make([]float32, H)), "logits": mem(c.logits), "gate_up": mem(make([]uint16, E*2*I*H)),
			"shared_gate": mem(make([]uint16, S*H)), "shared_up": mem(make([]uint16, S*H))})
		if diff := cmp.Diff(c.ids, ids); diff != "" {
			t.Errorf("%s: ids (-want +got):\n%s", c.name, diff)
		}
		var sum float32
		for _, v := range w {
			sum += v
		}
		if sum < 0.9999 || sum > 1.0001 {
			t.Errorf("%s: weights %v sum to %v", c.name, w, sum)
		}
		if c.weights != nil {
			if diff := cmp.Diff(c.weights, w, cmpopts.EquateApprox(0, 1e-6)); diff != "" {
				t.Errorf("%s: weights (-want +got):\n%s", c.name, diff)
			}
		}
	}
}

// TestMoEDecodeChecks refuses what the templates cannot run: top-k past the
// experts or the slots a lane streams at once, more router logits than a
// warp ranks, more loads in flight than a lane holds.
func TestMoEDecodeChecks(t *testing.T) {
	cases := []struct {
		name string
		kind ir.Kind
		p    ir.Params
		ok   bool
	}{
		{"gate_up real", ir.MoEDecodeGateUp, moeGateUpParams(256, 2048, 512, 8, 512, 1, 4), true},
		{"down real", ir.MoEDecodeDown, moeDownParams(moeDecodeParams(256, 2048, 512, 8, 512, 1, 2), false), true},
		{"down real warp per slot", ir.MoEDecodeDown, moeDownParams(moeDecodeParams(256, 2048, 512, 8, 512, 8, 2), true), true},
		{"down warp per slot rows", ir.MoEDecodeDown, moeDownParams(moeDecodeParams(256, 2048, 512, 8, 512, 32, 1), true), false},
		{"down warp per slot loads", ir.MoEDecodeDown, moeDownParams(moeDecodeParams(256, 2048, 512, 8, 512, 8, 4), true), false},
		{"down no layout flag", ir.MoEDecodeDown, moeDecodeParams(256, 2048, 512, 8, 512, 1, 2), false},
		{"gate_up k > experts", ir.MoEDecodeGateUp, moeGateUpParams(4, 8, 4, 5, 4, 1, 1), false},
		{"down k 9", ir.MoEDecodeDown, moeDownParams(moeDecodeParams(16, 8, 4, 9, 4, 1, 1), false), false},
		{"gate_up experts 513", ir.MoEDecodeGateUp, moeGateUpParams(513, 8, 4, 8, 4, 1, 1), false},
		{"gate_up loads", ir.MoEDecodeGateUp, moeGateUpParams(256, 2048, 512, 8, 512, 4, 4), false},
		{"down loads", ir.MoEDecodeDown, moeDownParams(moeDecodeParams(256, 2048, 512, 8, 512, 1, 4), false), false},
		{"down shared 0", ir.MoEDecodeDown, moeDownParams(moeDecodeParams(16, 8, 4, 2, 0, 1, 1), false), false},
	}
	for _, c := range cases {
		err := kernels.Families[c.kind].CheckParams(c.p)
		if (err == nil) != c.ok {
			t.Errorf("%s: CheckParams = %v, want ok %v", c.name, err, c.ok)
		}
	}
}

// TestMoEDecodeLaunch: the gate_up grid covers k experts' rows then the
// shared expert's, the down grid every output row, on every GPU target.
func TestMoEDecodeLaunch(t *testing.T) {
	for _, tg := range plan.GPUTargets() {
		c := tg.Launch()
		for _, rpw := range []int64{1, 2} {
			p := moeDecodeParams(256, 2048, 512, 8, 300, rpw, 1)
			per := c.Warps() * int(rpw)
			gu := kernels.Families[ir.MoEDecodeGateUp].Launch(p, 1, c)
			if want := 8*((512+per-1)/per) + (300+per-1)/per; gu.Grid != [3]int{want, 1, 1} {
				t.Errorf("%s rpw %d: gate_up grid %v, want %d blocks", tg, rpw, gu.Grid, want)
			}
			dn := kernels.Families[ir.MoEDecodeDown].Launch(moeDownParams(p, false), 2, c)
			if want := (2048 + per - 1) / per; dn.Grid != [3]int{want, 2, 1} {
				t.Errorf("%s rpw %d: down grid %v, want %d × 2", tg, rpw, dn.Grid, want)
			}
			// A block's rows: rows_per_warp.
			ws := kernels.Families[ir.MoEDecodeDown].Launch(moeDownParams(p, true), 1, c)
			if want := (2048 + int(rpw) - 1) / int(rpw); ws.Grid != [3]int{want, 1, 1} {
				t.Errorf("%s rpw %d: warp-per-slot down grid %v, want %d", tg, rpw, ws.Grid, want)
			}
		}
	}
}
