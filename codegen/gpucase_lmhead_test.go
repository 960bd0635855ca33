package codegen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// The certified LM head's cases (docs/lm-head.md): one head (n rows of
// width k, an activation row, a vocabulary limit) run through the four
// families' references in the order of the greedy decode step, each
// family's case taking the previous one's reference outputs as inputs.

// lmHead is one head and the launch parameters of its four kernels.
type lmHead struct {
	name          string
	n, k          int
	rpw, unroll   int // lm_head_int8's (group = 8 warps × rpw)
	blocks, cap   int // lm_head_certify's
	split         int // the BF16 head's gemv split_k, which certify reproduces
	lim           int // vocabulary limit slot (0: none)
	x             []float32
	w             []uint16
	stored        int64 // weight rows written to the files (0: all); the rest are zeros
	speed         bool  // timed cases at this size
	forceFallback bool  // certify's bounds replaced by "every row a candidate"
	int8Only      bool  // only the int8 family's case (a timed variant of its launch)
	// norm: the final RMSNorm folded in (rmsnorm_lm_head_int8 and
	// rmsnorm_lm_head_certify; the BF16 head rmsnorm_gemv): x is the
	// residual row, normW the norm weights, onePlus the 1 + w form.
	norm    bool
	normW   []float32
	onePlus bool
}

// withNorm is h with the final norm folded in: Gaussian norm weights
// (std 0.3, seeded) and x scaled by 8 (a residual row, not a normed one).
func withNorm(h lmHead, name string, seed uint64, onePlus bool) lmHead {
	rng := rand.New(rand.NewPCG(seed, 23))
	h.name, h.norm, h.onePlus = name, true, onePlus
	h.normW = make([]float32, h.k)
	for i := range h.normW {
		h.normW[i] = float32(rng.NormFloat64() * 0.3)
	}
	x := make([]float32, h.k)
	for i, v := range h.x {
		x[i] = 8 * v
	}
	h.x = x
	return h
}

// normParams are the folded norm's parameters of the head's kernels.
func (h lmHead) normParams(p map[string]float64) map[string]float64 {
	if h.norm {
		p["eps"] = 1e-6
		p["one_plus"] = 0
		if h.onePlus {
			p["one_plus"] = 1
		}
	}
	return p
}

// families are the head's int8 and certify families.
func (h lmHead) families() (int8f, certf string) {
	if h.norm {
		return string(ir.RMSNormLMHeadInt8), string(ir.RMSNormLMHeadCertify)
	}
	return string(ir.LMHeadInt8), string(ir.LMHeadCertify)
}

// bf16Head is the BF16 head the certified one stands for, as the decode
// step launches it: gemv, or rmsnorm_gemv with the norm folded in.
func (h lmHead) bf16Head(rpw, unroll int) plan.Kernel {
	if h.norm {
		return normGEMV(float64(h.k), float64(h.n), float64(rpw), float64(h.split), float64(unroll), h.onePlus)
	}
	return gemv(float64(h.k), float64(h.n), float64(rpw), float64(h.split), float64(unroll))
}

// logits are the BF16 head's logits (the references': MatMul, or
// rmsnorm's then MatMul's).
func (h lmHead) logits() []float32 {
	x := h.x
	if h.norm {
		x = make([]float32, h.k)
		kernels.RMSNorm(x, h.k, h.x, h.k, h.normW, 1, h.k, 1e-6, h.onePlus)
	}
	logits := make([]float32, h.n)
	kernels.MatMul(logits, x, h.w, 1, h.k, h.n)
	return logits
}

func (h lmHead) group() int { return kernels.LMHeadWarps * h.rpw }

func (h lmHead) kernels() (quant, int8k, certify, pick plan.Kernel) {
	n, k := float64(h.n), float64(h.k)
	int8f, certf := h.families()
	quant = kern("quantize_rows_int8", map[string]float64{"k": k, "n": n})
	int8k = kern(int8f, h.normParams(map[string]float64{"k": k, "n": n, "group": float64(h.group()), "rows_per_warp": float64(h.rpw), "unroll": float64(h.unroll)}))
	certify = kern(certf, h.normParams(map[string]float64{"k": k, "n": n, "group": float64(h.group()), "blocks": float64(h.blocks),
		"cap": float64(h.cap), "split_k": float64(h.split), "unroll": float64(h.unroll)}))
	pick = kern("lm_head_pick", map[string]float64{"blocks": float64(h.blocks)})
	return
}

// randomLMHead is a head of Gaussian weights (std) and activations; with
// rows > 0 only the first rows rows are drawn, the rest are zeros.
func randomLMHead(name string, seed uint64, n, k int, std float64, rows ...int) lmHead {
	rng := rand.New(rand.NewPCG(seed, 17))
	h := lmHead{name: name, n: n, k: k, rpw: 4, unroll: 4, blocks: 132, cap: kernels.LMHeadCap, split: 1,
		x: make([]float32, k), w: make([]uint16, n*k)}
	for i := range h.x {
		h.x[i] = float32(rng.NormFloat64())
	}
	w := h.w
	if len(rows) > 0 && rows[0] < n {
		w = w[:rows[0]*k]
	}
	for i := range w {
		w[i] = bf16.FromFloat32(float32(rng.NormFloat64() * std))
	}
	return h
}

// exactLMHead is a head whose logits are exact in float32 in any order
// (small integers times powers of two), so the device and the reference
// agree on every tie: rows ≡ 5 (mod 97) are copies of row 5, the winner
// (exact ties: the lowest id wins), rows ≡ 6 copies of it with element 0 a
// BF16 step lower (near-ties inside one int8 step).
func exactLMHead(name string, n, k int) lmHead {
	h := lmHead{name: name, n: n, k: k, rpw: 1, unroll: 1, blocks: 40, cap: kernels.LMHeadCap, split: 1,
		x: make([]float32, k), w: make([]uint16, n*k)}
	for i := range h.x {
		h.x[i] = float32(1 + i%4)
	}
	h.x[0] = 64
	for j := 0; j < n; j++ {
		for i := 0; i < k; i++ {
			v := float32((i*7+j*13)%9) - 4 // in [-4, 4]
			h.w[j*k+i] = bf16.FromFloat32(v / 64)
		}
	}
	h.w[5*k] = bf16.FromFloat32(2)
	for j := 5; j < n; j += 97 {
		copy(h.w[j*k:][:k], h.w[5*k:][:k])
		if j+1 < n {
			copy(h.w[(j+1)*k:][:k], h.w[5*k:][:k])
			h.w[(j+1)*k] = bf16.FromFloat32(2 - 0x1p-6)
		}
	}
	return h
}

// lmHeadCases are the correctness heads: the tiny fixtures' head (vocab
// 512, hidden 64), odd widths (the one-element paths), K with a remainder
// past the unrolled passes, a split BF16 head, exact ties and near-ties, a
// vocabulary limit that masks the unlimited winner, the fallback (a cap of
// one group and bounds that make every row a candidate), a NaN activation,
// a head of 20000 rows, and one certify block over 17500 groups.
func lmHeadCases() []lmHead {
	tiny := randomLMHead("lmhead_tiny", 1, 512, 64, 0.1)
	tiny.rpw, tiny.unroll = 1, 1
	odd := randomLMHead("lmhead_odd", 2, 301, 37, 0.2)
	odd.rpw, odd.unroll, odd.blocks = 2, 1, 7
	krem := randomLMHead("lmhead_krem", 3, 1000, 2064, 0.02)
	split := randomLMHead("lmhead_split", 4, 777, 2048, 0.02)
	split.split, split.rpw = 2, 2
	ties := exactLMHead("lmhead_ties", 1000, 64)
	tiesOdd := exactLMHead("lmhead_ties_odd", 300, 21)
	limited := randomLMHead("lmhead_limit", 5, 600, 256, 0.05)
	limited.lim = 333
	fallback := randomLMHead("lmhead_fallback", 6, 5000, 128, 0.05)
	fallback.cap = 1
	forced := randomLMHead("lmhead_forced", 7, 3000, 256, 0.05)
	forced.forceFallback = true
	nan := randomLMHead("lmhead_nan", 8, 700, 64, 0.1)
	nan.x[3] = float32(math.NaN())
	wide := randomLMHead("lmhead_wide", 9, 20000, 2048, 0.02)
	// One certify block over 17500 groups: the bounds read in two passes
	// (too many for registers) and the groups too many for shared flags.
	many := randomLMHead("lmhead_manygroups", 12, 140000, 16, 0.3)
	many.rpw, many.unroll, many.blocks = 1, 1, 1
	cs := []lmHead{tiny, odd, krem, split, ties, tiesOdd, limited, fallback, forced, nan, wide, many}
	// The final norm folded in: the tiny fixtures' head, odd widths (the
	// one-element paths), a K remainder, a split head, x·w (no 1 +), the
	// vocabulary limit, the fallback both ways, exact ties, 20000 rows.
	normTiny := withNorm(tiny, "lmhead_norm_tiny", 31, true)
	normOdd := withNorm(odd, "lmhead_norm_odd", 32, true)
	normKrem := withNorm(krem, "lmhead_norm_krem", 33, true)
	normSplit := withNorm(split, "lmhead_norm_split", 34, true)
	normPlain := withNorm(randomLMHead("", 13, 900, 128, 0.05), "lmhead_norm_plain", 35, false)
	normLimited := withNorm(limited, "lmhead_norm_limit", 36, true)
	normFallback := withNorm(ties, "lmhead_norm_fallback", 37, true) // the tied rows' groups: more than one
	normFallback.cap = 1
	normForced := withNorm(forced, "lmhead_norm_forced", 38, true)
	normTies := withNorm(ties, "lmhead_norm_ties", 39, true)
	normWide := withNorm(wide, "lmhead_norm_wide", 40, true)
	return append(cs, normTiny, normOdd, normKrem, normSplit, normPlain, normLimited, normFallback, normForced, normTies, normWide)
}

// TestWriteGPUCasesLMHead writes the four families' correctness cases for
// every head of lmHeadCases, and the speed cases at the real model's head
// (248320 × 2048; a sixty-fourth of the rows without -gpucases).
func TestWriteGPUCasesLMHead(t *testing.T) {
	out, N := *gpuCases, 248320
	if out == "" {
		out, N = t.TempDir(), 248320/64
	}
	heads := lmHeadCases()
	real := randomLMHead("speed_lmhead", 10, N, 2048, 0.02, 8192)
	real.stored, real.speed = min(8192, int64(N)), true
	realFB := randomLMHead("speed_lmhead_fallback", 11, N, 2048, 0.02, 8192)
	realFB.stored, realFB.speed, realFB.forceFallback = min(8192, int64(N)), true, true
	realNorm := withNorm(randomLMHead("", 10, N, 2048, 0.02, 8192), "speed_lmhead_norm", 41, true)
	realNorm.stored, realNorm.speed = min(8192, int64(N)), true
	// The folded int8 head's stream at half the loads a lane has in
	// flight (unroll 2) and at half the rows a warp (2: twice the
	// blocks), beside the plan's 4 × 4: each case's ptxas line tells
	// whether that launch spills, its time what the loads in flight buy.
	var variants []lmHead
	for _, v := range []struct {
		name      string
		rpw, unrl int
	}{{"speed_lmhead_norm_u2", 4, 2}, {"speed_lmhead_norm_r2", 2, 4}} {
		h := withNorm(randomLMHead("", 10, N, 2048, 0.02, 8192), v.name, 41, true)
		h.stored, h.speed, h.int8Only, h.rpw, h.unroll = min(8192, int64(N)), true, true, v.rpw, v.unrl
		variants = append(variants, h)
	}
	for _, h := range append(append(heads, real, realFB, realNorm), variants...) {
		writeLMHead(t, out, h)
	}
}

// TestLMHeadCasesCertify: on every correctness head the chain of the four
// references picks the BF16 head's greedy token (MatMul, with the folded
// norm rmsnorm's first, then Sample).
func TestLMHeadCasesCertify(t *testing.T) {
	for _, h := range lmHeadCases() {
		if h.forceFallback {
			continue
		}
		tok, stats := runLMHead(t, h).token()
		want, _ := kernels.SampleToken(h.logits(), kernels.SampleParams{VocabLimit: int32(h.lim)})
		if tok != want {
			t.Errorf("%s: certified %d, BF16 head %d (candidates %d, fallback %d)", h.name, tok, want, stats[0], stats[1])
		}
		t.Logf("%s: token %d, %d candidates, fallback %d", h.name, tok, stats[0], stats[1])
	}
}

// headRun is the memory of one head's chain, by family, as ir.Args.
type headRun struct {
	block                        [ir.ParamSlots]int32
	quant, int8k, certify, pick  *ir.Args
	quantK, int8K, certK, pickK  plan.Kernel
	inQuant, inInt8, inCert, inP map[string][]byte // each family's inputs before its reference ran
}

func (r *headRun) token() (int32, [2]int32) {
	s := r.pick.I32("out")
	return s[0], [2]int32{s[2], s[3]}
}

// args binds a family's operands to fresh memory, write operands poisoned.
func headArgs(k plan.Kernel, block *[ir.ParamSlots]int32) *ir.Args {
	f := kernels.Families[ir.Kind(k.Family)]
	a := &ir.Args{Family: f, Params: k.Params, N: 1, Block: block, Mem: make([][]byte, len(f.Operands))}
	for i, o := range f.Operands {
		a.Mem[i] = aligned(o.Extent(k.Params, 1) * int64(o.DType.Size()))
		if o.Access != ir.Read {
			for j := range a.Mem[i] {
				a.Mem[i][j] = 0x7f // NaN bits for f32, 0x7f7f7f7f for ids
			}
		}
	}
	return a
}

// set copies b into operand name of a.
func set(a *ir.Args, name string, b []byte) {
	copy(a.Mem[a.Family.Operand(name)], b)
}

func get(a *ir.Args, name string) []byte { return a.Mem[a.Family.Operand(name)] }

func snapshot(a *ir.Args) map[string][]byte {
	m := map[string][]byte{}
	for i, o := range a.Family.Operands {
		m[o.Name] = bytes.Clone(a.Mem[i])
	}
	return m
}

func f32Raw(v []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 4*len(v))
}
func u16Raw(v []uint16) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(v))), 2*len(v))
}

// runLMHead runs the chain's references, keeping each family's inputs.
func runLMHead(t *testing.T, h lmHead) *headRun {
	t.Helper()
	r := &headRun{}
	r.block[ir.ParamVocabLimit] = int32(h.lim)
	r.quantK, r.int8K, r.certK, r.pickK = h.kernels()
	for _, k := range []plan.Kernel{r.quantK, r.int8K, r.certK, r.pickK} {
		if err := kernels.Families[ir.Kind(k.Family)].CheckParams(k.Params); err != nil {
			t.Fatalf("%s: %s: %v", h.name, k.Family, err)
		}
	}
	run := func(a *ir.Args) {
		if err := a.Check(); err != nil {
			t.Fatalf("%s: %s: %v", h.name, a.Family.Kind, err)
		}
		if err := a.Family.Reference(a); err != nil {
			t.Fatalf("%s: %s: %v", h.name, a.Family.Kind, err)
		}
	}
	r.quant = headArgs(r.quantK, &r.block)
	set(r.quant, "w", u16Raw(h.w))
	r.inQuant = snapshot(r.quant)
	run(r.quant)

	r.int8k = headArgs(r.int8K, &r.block)
	set(r.int8k, "x", f32Raw(h.x))
	if h.norm {
		set(r.int8k, "norm_w", f32Raw(h.normW))
	}
	set(r.int8k, "q", get(r.quant, "q"))
	set(r.int8k, "scale", get(r.quant, "scale"))
	r.inInt8 = snapshot(r.int8k)
	run(r.int8k)

	r.certify = headArgs(r.certK, &r.block)
	set(r.certify, "x", f32Raw(h.x))
	if h.norm {
		set(r.certify, "norm_w", f32Raw(h.normW))
	}
	set(r.certify, "w", u16Raw(h.w))
	set(r.certify, "upper", get(r.int8k, "upper"))
	set(r.certify, "bounds", get(r.int8k, "bounds"))
	if h.forceFallback {
		// Bounds no group can be ruled out by: the full BF16 head.
		inf := float32(math.Inf(1))
		b := r.certify.F32("bounds")
		for g := 0; g < len(b)/2; g++ {
			b[2*g], b[2*g+1] = -inf, inf
		}
		u := r.certify.F32("upper")
		for j := range u {
			u[j] = inf
		}
	}
	r.inCert = snapshot(r.certify)
	run(r.certify)

	r.pick = headArgs(r.pickK, &r.block)
	set(r.pick, "best_v", get(r.certify, "best_v"))
	set(r.pick, "best_i", get(r.certify, "best_i"))
	r.inP = snapshot(r.pick)
	run(r.pick)
	return r
}

// writeLMHead writes the head's four cases (<name>_quant, _int8, _certify,
// _pick); a speed head's also get "time_reps" and "bytes".
func writeLMHead(t *testing.T, out string, h lmHead) {
	r := runLMHead(t, h)
	_, stats := r.token()
	K, N := int64(h.k), int64(h.n)
	groups := int64(ir.Ceil(h.n, h.group()))
	type timed struct {
		reps  int
		bytes int64
		note  string
	}
	certBytes := groups*8*int64(h.blocks) + int64(stats[0])*K*2
	certNote := fmt.Sprintf("%d candidates: %d blocks each read the %d groups' bounds (L2), then the candidates' BF16 rows", stats[0], h.blocks, groups)
	if stats[1] != 0 {
		certBytes = N*K*2 + groups*8*int64(h.blocks)
		certNote = "fallback: every row's BF16 logit (the full head, 1 GB at the real size)"
	}
	stored := func(name string) int64 {
		if h.stored == 0 {
			return 0
		}
		switch name {
		case "q":
			return h.stored * K
		case "w":
			return h.stored * K
		}
		return 0
	}
	write := func(suffix string, k plan.Kernel, a *ir.Args, in map[string][]byte, tm timed) {
		if (h.speed && tm.reps == 0) || (h.int8Only && suffix != "int8") {
			return
		}
		dir := filepath.Join(out, h.name+"_"+suffix)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		f := a.Family
		meta := caseMeta{Kernel: k.Name, Grid: caseGrid(k, 1), Block: caseBlock(), N: 1, Params: r.block,
			TimeReps: tm.reps, Bytes: tm.bytes, Note: tm.note}
		for i, o := range f.Operands {
			arg := caseArg{File: o.Name + ".in", DType: string(o.DType), Out: o.Access != ir.Read}
			b := in[o.Name]
			if s := stored(o.Name); s > 0 && o.Access == ir.Read {
				arg.Elements = int64(len(b)) / int64(o.DType.Size())
				b = b[:s*int64(o.DType.Size())]
			}
			meta.Args = append(meta.Args, arg)
			if err := os.WriteFile(filepath.Join(dir, o.Name+".in"), b, 0o644); err != nil {
				t.Fatal(err)
			}
			if o.Access != ir.Read {
				if err := os.WriteFile(filepath.Join(dir, o.Name+".want"), a.Mem[i], 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
		src, err := Render(plan.SM90, k)
		if err != nil {
			t.Fatal(err)
		}
		mb, _ := json.MarshalIndent(meta, "", " ")
		if err := os.WriteFile(filepath.Join(dir, "meta.json"), mb, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "kernel.cu"), []byte(src.Code), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var tq, ti, tc, tp timed
	if h.speed {
		ti = timed{200, N*K + N*8 + groups*8 + K*4, fmt.Sprintf("int8 head (%s, %d rows a warp, unroll %d): 0.51 GB of int8 rows at 248320 × 2048, expected ≈ 128 µs at 4 TB/s",
			r.int8K.Family, h.rpw, h.unroll)}
		tc = timed{200, certBytes, certNote}
		tp = timed{200, int64(h.blocks) * 16, "the pick: one block over the certify blocks' bests (latency)"}
		if h.forceFallback {
			ti, tp = timed{}, timed{}
		}
	}
	write("quant", r.quantK, r.quant, r.inQuant, tq)
	write("int8", r.int8K, r.int8k, r.inInt8, ti)
	write("certify", r.certK, r.certify, r.inCert, tc)
	write("pick", r.pickK, r.pick, r.inP, tp)
	if h.speed && !h.forceFallback && !h.int8Only {
		// The BF16 head at the same shape, as the decode step launches it
		// (gemv, or rmsnorm_gemv with the norm folded in; 4 rows per warp):
		// what the int8 head replaces.
		g := h.bf16Head(4, 4)
		g.Name = "gemv_case"
		dir := filepath.Join(out, h.name+"_gemv")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		logits := h.logits()
		poison := make([]float32, h.n)
		for i := range poison {
			poison[i] = 7
		}
		files := map[string][]byte{"y.in": f32Raw(poison), "y.want": f32Raw(logits), "x.in": f32Raw(h.x), "w.in": u16Raw(h.w[:h.stored*K])}
		meta := caseMeta{Kernel: g.Name, Grid: caseGrid(g, 1), Block: caseBlock(), N: 1, TimeReps: 200, Bytes: N*K*2 + N*4 + K*4,
			Note: "BF16 head (gemv): 1.02 GB at 248320 × 2048, expected ≈ 255 µs at 4 TB/s",
			Args: []caseArg{{File: "y.in", DType: "f32", Out: true}, {File: "x.in", DType: "f32"}, {File: "w.in", DType: "bf16", Elements: N * K}}}
		if h.norm {
			// rmsnorm_gemv's operands: y, x, norm_w, w, xn (the normed row).
			xn := make([]float32, h.k)
			kernels.RMSNorm(xn, h.k, h.x, h.k, h.normW, 1, h.k, 1e-6, h.onePlus)
			files["norm_w.in"], files["xn.in"], files["xn.want"] = f32Raw(h.normW), f32Raw(poison[:h.k]), f32Raw(xn)
			meta.Note = "BF16 head with the final norm folded (rmsnorm_gemv), the decode step's: 1.02 GB, expected ≈ 255 µs at 4 TB/s"
			meta.Bytes += 2 * K * 4
			meta.Args = []caseArg{meta.Args[0], meta.Args[1], {File: "norm_w.in", DType: "f32"}, meta.Args[2], {File: "xn.in", DType: "f32", Out: true}}
		}
		for name, b := range files {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		src, err := Render(plan.SM90, g)
		if err != nil {
			t.Fatal(err)
		}
		mb, _ := json.MarshalIndent(meta, "", " ")
		for name, b := range map[string][]byte{"meta.json": mb, "kernel.cu": []byte(src.Code)} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestCompileLMHeadCases compiles every head's four kernels for gfx1151
// (no scratch, LDS within budget) and to PTX through clang's CUDA front
// end without a warning.
func TestCompileLMHeadCases(t *testing.T) {
	c := clang(t)
	render := func(tg plan.Target) []hipcc.Source {
		seen := map[string]bool{}
		var srcs []hipcc.Source
		for _, h := range lmHeadCases() {
			qk, ik, ck, pk := h.kernels()
			for _, k := range []plan.Kernel{qk, ik, ck, pk} {
				k.Name = strings.ReplaceAll(fmt.Sprintf("%s_%s", h.name, k.Family), ".", "_")
				s, err := Render(tg, k)
				if err != nil {
					t.Fatal(err)
				}
				if seen[s.Code] {
					continue
				}
				seen[s.Code] = true
				srcs = append(srcs, hipcc.Source{Name: k.Name, Code: s.Code})
			}
		}
		return srcs
	}
	ptx, err := c.SyntaxCheckCUDA(context.Background(), render(plan.SM90), hipcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ptx {
		if !bytes.Contains(r.Object, []byte(".entry "+r.Name)) || strings.Contains(r.Log, "warning") {
			t.Errorf("%s: no .entry in the PTX, or warnings:\n%s", r.Name, r.Log)
		}
	}
	results, err := c.Compile(context.Background(), hipcc.GFX1151, render(plan.GFX1151), hipcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		if r.Object == nil {
			t.Errorf("%s: no code object\n%s", r.Name, r.Log)
			continue
		}
		if why := r.Resources.Spills(); why != "" || r.Resources.ScratchBytes != 0 || r.Resources.LDSBytes > maxLDS {
			t.Errorf("%s: scratch %q (%d bytes), LDS %d", r.Name, why, r.Resources.ScratchBytes, r.Resources.LDSBytes)
		}
	}
}
