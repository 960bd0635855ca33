package codegen

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// The tolerance of the chunked GDN cases with plain tf32 products (split
// off): each operand keeps 10 of its 23 mantissa bits (relative error ≤
// 2⁻¹¹ ≈ 4.9e-4), so a sum of K products of values ≤ 1 moves by up to
// ≈ 2⁻¹⁰·Σ|a·b|; through T·(βv), P·u and the state's products over the
// chunks the emulated kernels (gdn_emulate_test.go, the tiny fixture's
// 200 tokens, dims 16) reach 4.5e-4 absolute on values ≤ 1; the model's
// dims of 128 sum 8 times the terms, hence 1e-2. With the split (≈ 21
// bits) the runner's f32 tolerance holds (the emulation: ≤ 2e-7).
const (
	gdnPlainATol = 1e-2
	gdnPlainRTol = 1e-2
)

// gdnCaseOpt is how a chunked-GDN case fills its inputs (gdnFill): the
// largest per-token decay |g| (0: 0.3) and a zero initial state.
type gdnCaseOpt struct {
	gmax      float64
	zeroState bool
}

var gdnCaseOpts = map[string]gdnCaseOpt{
	"gdn_state_t200_zero":     {zeroState: true},
	"gdn_wy_t130_decay":       {gmax: 4},
	"gdn_state_t130_decay":    {gmax: 4},
	"gdn_state_fk_t130_decay": {gmax: 4},
	"gdn_state_fk_t200_zero":  {zeroState: true},
}

// gdnCaseFill is writeCaseFull's fill of a gated_delta_wy or
// gated_delta_state case over phys rows.
func gdnCaseFill(name string, a *ir.Args, rng *rand.Rand, phys int) {
	o := gdnCaseOpts[name]
	if o.gmax == 0 {
		o.gmax = 0.3
	}
	gdnFill(a, rng, phys, o.gmax, o.zeroState)
}

// The planner's tiles: sm_90 runs gated_delta_wy split on slices of 64
// dims (plain on 32) and gated_delta_state on the whole k_dim with 32
// state columns a block, its staging asynchronous; gfx1151 slices of 32
// for both (its 64 KiB of LDS).
func gdnModelWY(split bool) plan.Kernel { return gdnWY(16, 32, 128, 128, 64, 64, split) }
func gdnModelState(split bool, cols int) plan.Kernel {
	return gdnStateAsync(16, 32, 128, 128, 64, 128, cols, split, true)
}

// gdnChunkCases are the correctness cases: both launches at the model's
// heads at 1, 63, 64, 65 and 200 tokens (a partial chunk, one, one and a
// token, several with a ragged tail), from a random state (a prefill after a
// prefill) and from zero, strong decays (|g| up to 4 a token: e^{G} down to
// e^{−256} within a chunk), gfx1151's slices and a narrower column tile on
// the same code, plain tf32 products, the staging synchronous (the
// planner's is asynchronous on sm_90); the tiny fixtures' heads (2, 4, 16);
// a group of three with k_dim ≠ v_dim; the parallel conv at the edges of
// its state (fewer rows than its history, one row, tiles of 3 and 4). Every
// written operand is compared, rows past n poisoned.
func gdnChunkCases() []gpuCase {
	cs := gdnChunkCasesCvt()
	// Every case of either launch again with int_tf32 (the same bits
	// expected: the error figures should match the twin's).
	// Every split state case with the corrections summed apart as well
	// (lo_acc: another order of the sums, the same tolerance).
	for _, c := range gdnChunkCasesCvt() {
		k := ir.Kind(c.k.Family)
		if k == ir.GatedDeltaWY || k == ir.GatedDeltaState {
			i := c
			i.name += "_int"
			i.k = gdnInt(c.k)
			cs = append(cs, i)
		}
		if k == ir.GatedDeltaState && c.k.Params.Flag("split") {
			l := c
			l.name += "_int_lo"
			l.k = gdnLoAcc(gdnInt(c.k))
			cs = append(cs, l)
		}
		// The split B operands (pre_split, the same bits expected) where
		// the pass is split and asynchronous.
		if k == ir.GatedDeltaState && c.k.Params.Flag("split") && c.k.Params.Flag("async") {
			for _, fast := range []struct {
				suffix string
				k      plan.Kernel
			}{{"_pre", gdnPre(c.k)}, {"_int_pre", gdnPre(gdnInt(c.k))}} {
				q := c
				q.name += fast.suffix
				q.k = fast.k
				cs = append(cs, q)
			}
		}
	}
	return cs
}

// gdnChunkCasesCvt are the cases with cvt.rna.tf32.f32 operands.
func gdnChunkCasesCvt() []gpuCase {
	var cs []gpuCase
	for _, n := range []int{1, 63, 64, 65, 200} {
		cs = append(cs,
			gpuCase{fmt.Sprintf("gdn_wy_t%d", n), gdnModelWY(true), n, 0},
			gpuCase{fmt.Sprintf("gdn_state_t%d", n), gdnModelState(true, 32), n, 0})
	}
	return append(cs,
		gpuCase{"gdn_state_t200_zero", gdnModelState(true, 32), 200, 0},
		gpuCase{"gdn_state_t520", gdnModelState(true, 32), 520, 0}, // nine chunks: the [w; qw] buffers in turn, a tail of 8
		gpuCase{"gdn_wy_t130_decay", gdnModelWY(true), 130, 0},
		gpuCase{"gdn_state_t130_decay", gdnModelState(true, 32), 130, 0},
		gpuCase{"gdn_wy_s32_t65", gdnWY(16, 32, 128, 128, 64, 32, true), 65, 0},
		gpuCase{"gdn_wy_s32_t200", gdnWY(16, 32, 128, 128, 64, 32, true), 200, 0},
		gpuCase{"gdn_wy_s32_plain_t200", gdnWY(16, 32, 128, 128, 64, 32, false), 200, 0},
		gpuCase{"gdn_state_gfxtile_t65", gdnState(16, 32, 128, 128, 64, 32, 32, true), 65, 0},
		gpuCase{"gdn_state_c16_t65", gdnModelState(true, 16), 65, 0},
		gpuCase{"gdn_state_sync_t200", gdnState(16, 32, 128, 128, 64, 128, 32, true), 200, 0},
		gpuCase{"gdn_state_tiny_async_t130", gdnStateAsync(2, 4, 16, 16, 64, 16, 16, true, true), 130, 0},
		gpuCase{"gdn_wy_plain_t200", gdnModelWY(false), 200, 0},
		gpuCase{"gdn_state_plain_t200", gdnModelState(false, 32), 200, 0},
		gpuCase{"gdn_wy_tiny_t7", gdnWY(2, 4, 16, 16, 64, 16, true), 7, 0},
		gpuCase{"gdn_state_tiny_t7", gdnState(2, 4, 16, 16, 64, 16, 8, true), 7, 0},
		gpuCase{"gdn_wy_tiny_t130", gdnWY(2, 4, 16, 16, 64, 16, true), 130, 0},
		gpuCase{"gdn_state_tiny_t130", gdnState(2, 4, 16, 16, 64, 16, 16, true), 130, 0},
		gpuCase{"gdn_wy_group3_t70", gdnWY(1, 3, 32, 16, 64, 16, true), 70, 0},
		gpuCase{"gdn_state_group3_t70", gdnState(1, 3, 32, 16, 64, 32, 16, true), 70, 0},
		// flush_k (each chunk's kdᵀ·Vnew added to the decayed state rounded to
		// nearest) on the same shapes: a partial chunk, several, from zero,
		// strong decays, gfx1151's tile, synchronous staging, plain tf32, the
		// tiny fixtures' heads, a group of three.
		gpuCase{"gdn_state_fk_t1", gdnFlush(gdnModelState(true, 32)), 1, 0},
		gpuCase{"gdn_state_fk_t65", gdnFlush(gdnModelState(true, 32)), 65, 0},
		gpuCase{"gdn_state_fk_t520", gdnFlush(gdnModelState(true, 32)), 520, 0},
		gpuCase{"gdn_state_fk_t200_zero", gdnFlush(gdnModelState(true, 32)), 200, 0},
		gpuCase{"gdn_state_fk_t130_decay", gdnFlush(gdnModelState(true, 32)), 130, 0},
		gpuCase{"gdn_state_fk_gfxtile_t65", gdnFlush(gdnState(16, 32, 128, 128, 64, 32, 32, true)), 65, 0},
		gpuCase{"gdn_state_fk_sync_t200", gdnFlush(gdnState(16, 32, 128, 128, 64, 128, 32, true)), 200, 0},
		gpuCase{"gdn_state_fk_plain_t200", gdnFlush(gdnModelState(false, 32)), 200, 0},
		gpuCase{"gdn_state_fk_tiny_t130", gdnFlush(gdnState(2, 4, 16, 16, 64, 16, 16, true)), 130, 0},
		gpuCase{"gdn_state_fk_group3_t70", gdnFlush(gdnState(1, 3, 32, 16, 64, 32, 16, true)), 70, 0},
		gpuCase{"conv_rows_t5", gdnConv(8192, 4, 4), 5, 0},
		gpuCase{"conv_rows_t2", gdnConv(300, 4, 3), 2, 0},
		gpuCase{"conv_rows_t1", gdnConv(300, 4, 4), 1, 0},
		gpuCase{"conv_rows_t200", gdnConv(8192, 4, 4), 200, 0},
		gpuCase{"conv_rows_tiny_t9", gdnConv(128, 4, 3), 9, 0},
		gpuCase{"conv_rows_r8_t3", gdnConv(8192, 4, 8), 3, 0},
		gpuCase{"conv_rows_r8_t13", gdnConv(8192, 4, 8), 13, 0},
		gpuCase{"conv_rows_r8_tiny_t200", gdnConv(320, 4, 8), 200, 0},
		// the gated norm after the state pass, a warp per vector: the model's
		// heads, the tiny fixtures' (a last block of 4 of its 8 warps)
		gpuCase{"gated_rmsnorm_t200", kern("gated_rmsnorm", map[string]float64{"heads": 32, "dim": 128, "eps": 1e-6}), 200, 0},
		gpuCase{"gated_rmsnorm_tiny_t7", kern("gated_rmsnorm", map[string]float64{"heads": 4, "dim": 16, "eps": 1e-6}), 7, 0},
	)
}

// gdnSpeed is one speed case at the model's heads over n tokens: the files
// hold period rows that the device repeats to n (meta.json "elements",
// "repeat"), the outputs are zero-extended and compared over the first
// period rows (whose want the reference computes on its own); from set:
// timed on that case's files.
type gdnSpeed struct {
	name string
	k    plan.Kernel
	reps int
	from string
}

// TestWriteGPUCasesGDNChunk writes the chunked GDN's correctness cases and
// its speed cases at the model's size, 8192 tokens (one bucket): both
// launches with the planner's tiles, split and plain, other slices and
// column tiles, and the conv, the old serial one beside the parallel one;
// and the state pass over 131072 tokens. Without -gpucases the speed cases
// are written at 512 and 1024 tokens.
func TestWriteGPUCasesGDNChunk(t *testing.T) {
	out := *gpuCases
	if out == "" {
		out = t.TempDir()
	}
	for i, c := range gdnChunkCases() {
		writeCase(t, filepath.Join(out, c.name), c, uint64(5000+i))
	}
	n := 8192
	if *gpuCases == "" {
		n = 512
	}
	conv := kern("causal_conv1d_silu", map[string]float64{"channels": 8192, "kernel": 4})
	conv.Name = "causal_conv1d_silu_8192_4"
	speeds := []gdnSpeed{
		{"speed_gdn_wy_8k", gdnModelWY(true), 10, ""},
		{"speed_gdn_wy_8k_plain", gdnModelWY(false), 10, "speed_gdn_wy_8k"},
		{"speed_gdn_wy_8k_s32", gdnWY(16, 32, 128, 128, 64, 32, true), 10, "speed_gdn_wy_8k"},
		{"speed_gdn_wy_8k_s32_plain", gdnWY(16, 32, 128, 128, 64, 32, false), 10, "speed_gdn_wy_8k"},
		{"speed_gdn_state_8k", gdnModelState(true, 32), 10, ""},
		{"speed_gdn_state_8k_plain", gdnModelState(false, 32), 10, "speed_gdn_state_8k"},
		{"speed_gdn_state_8k_c16", gdnModelState(true, 16), 10, "speed_gdn_state_8k"},
		{"speed_gdn_state_8k_c64", gdnModelState(true, 64), 10, "speed_gdn_state_8k"},
		{"speed_gdn_state_8k_s64", gdnState(16, 32, 128, 128, 64, 64, 32, true), 10, "speed_gdn_state_8k"},
		{"speed_gdn_state_8k_sync", gdnState(16, 32, 128, 128, 64, 128, 32, true), 10, "speed_gdn_state_8k"},
		{"speed_gdn_state_8k_plain_sync", gdnState(16, 32, 128, 128, 64, 128, 32, false), 10, "speed_gdn_state_8k"},
		{"speed_gdn_wy_8k_int", gdnInt(gdnModelWY(true)), 10, "speed_gdn_wy_8k"},
		{"speed_gdn_wy_8k_s32_int", gdnInt(gdnWY(16, 32, 128, 128, 64, 32, true)), 10, "speed_gdn_wy_8k"},
		{"speed_gdn_wy_8k_s32_plain_int", gdnInt(gdnWY(16, 32, 128, 128, 64, 32, false)), 10, "speed_gdn_wy_8k"},
		{"speed_gdn_state_8k_int", gdnInt(gdnModelState(true, 32)), 10, "speed_gdn_state_8k"},
		{"speed_gdn_state_8k_plain_int", gdnInt(gdnModelState(false, 32)), 10, "speed_gdn_state_8k"},
		{"speed_gdn_state_8k_lo", gdnLoAcc(gdnModelState(true, 32)), 10, "speed_gdn_state_8k"},
		{"speed_gdn_state_8k_int_lo", gdnLoAcc(gdnInt(gdnModelState(true, 32))), 10, "speed_gdn_state_8k"},
		{"speed_gdn_state_8k_pre", gdnPre(gdnModelState(true, 32)), 10, "speed_gdn_state_8k"},
		{"speed_gdn_state_8k_int_pre", gdnPre(gdnInt(gdnModelState(true, 32))), 10, "speed_gdn_state_8k"},
		{"speed_gdn_state_8k_int_lo_pre", gdnPre(gdnLoAcc(gdnInt(gdnModelState(true, 32)))), 10, "speed_gdn_state_8k"},
		{"speed_gdn_state_8k_fk", gdnFlush(gdnModelState(true, 32)), 10, "speed_gdn_state_8k"},
		{"speed_conv_rows_8k", gdnConv(8192, 4, 8), 20, ""},
		{"speed_conv_rows_8k_r4", gdnConv(8192, 4, 4), 20, "speed_conv_rows_8k"},
		{"speed_conv_rows_8k_r16", gdnConv(8192, 4, 16), 20, "speed_conv_rows_8k"},
		{"speed_conv_serial_8k", conv, 3, "speed_conv_rows_8k"},
		{"speed_gated_rmsnorm_8k", kern("gated_rmsnorm", map[string]float64{"heads": 32, "dim": 128, "eps": 1e-6}), 20, ""},
	}
	for i, sp := range speeds {
		writeGDNSpeed(t, filepath.Join(out, sp.name), out, sp, n, uint64(5100+i))
	}
	// The serial part at a whole 128K prompt in one segment: the state
	// pass walks 2048 chunks a block (the engine's segments are buckets of
	// up to 8K, so this is the pass's cost per token at its longest walk).
	long := 131072
	if *gpuCases == "" {
		long = 1024
	}
	writeGDNSpeed(t, filepath.Join(out, "speed_gdn_state_128k"), out, gdnSpeed{"speed_gdn_state_128k", gdnModelState(true, 32), 2, ""}, long, 5199)
	writeGDNSpeed(t, filepath.Join(out, "speed_gdn_state_128k_int"), out, gdnSpeed{"speed_gdn_state_128k_int", gdnInt(gdnModelState(true, 32)), 2, "speed_gdn_state_128k"}, long, 5199)
	writeGDNSpeed(t, filepath.Join(out, "speed_gdn_state_128k_int_lo"), out, gdnSpeed{"speed_gdn_state_128k_int_lo", gdnLoAcc(gdnInt(gdnModelState(true, 32))), 2, "speed_gdn_state_128k"}, long, 5199)
	writeGDNSpeed(t, filepath.Join(out, "speed_gdn_state_128k_int_pre"), out, gdnSpeed{"speed_gdn_state_128k_int_pre", gdnPre(gdnInt(gdnModelState(true, 32))), 2, "speed_gdn_state_128k"}, long, 5199)
	// 32K in one segment (512 chunks a block), both launches old and new.
	mid := 32768
	if *gpuCases == "" {
		mid = 768
	}
	for i, sp := range []gdnSpeed{
		{"speed_gdn_wy_32k", gdnModelWY(true), 3, ""},
		{"speed_gdn_wy_32k_int", gdnInt(gdnModelWY(true)), 3, "speed_gdn_wy_32k"},
		{"speed_gdn_state_32k", gdnModelState(true, 32), 3, ""},
		{"speed_gdn_state_32k_int", gdnInt(gdnModelState(true, 32)), 3, "speed_gdn_state_32k"},
		{"speed_gdn_state_32k_int_lo", gdnLoAcc(gdnInt(gdnModelState(true, 32))), 3, "speed_gdn_state_32k"},
		{"speed_gdn_state_32k_int_pre", gdnPre(gdnInt(gdnModelState(true, 32))), 3, "speed_gdn_state_32k"},
	} {
		writeGDNSpeed(t, filepath.Join(out, sp.name), out, sp, mid, uint64(5200+i))
	}
}

// gdnSpeedBytes is what one launch must move at least: every operand once
// (read-write ones both ways), q and k once per key head.
func gdnSpeedBytes(k plan.Kernel, n int) int64 {
	var b int64
	for _, o := range kernels.Families[ir.Kind(k.Family)].Operands {
		e := o.Extent(k.Params, int64(n))
		if o.Name == "q" || o.Name == "k" || o.Name == "v" {
			p := k.Params
			e = int64(n * p.Int("k_heads") * p.Int("k_dim"))
			if o.Name == "v" {
				e = int64(n * p.Int("v_heads") * p.Int("v_dim"))
			}
		}
		if o.Access == ir.ReadWrite {
			e *= 2
		}
		b += e * 4
	}
	return b
}

// writeGDNSpeed writes one speed case of n rows whose files hold period
// rows (period = 256).
func writeGDNSpeed(t *testing.T, dir, root string, sp gdnSpeed, n int, seed uint64) {
	const period = 256
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	k := sp.k
	f := kernels.Families[ir.Kind(k.Family)]
	ls := caseLaunch(k, n)
	meta := caseMeta{Kernel: k.Name, Grid: ls.Grid[:], Block: ls.Block[:], Shared: ls.SharedBytes, N: n,
		TimeReps: sp.reps, Bytes: gdnSpeedBytes(k, n), InputsFrom: sp.from}
	// A period's rows, whole rows (so that repeating the file repeats rows).
	rowsOf := func(o ir.OperandSpec) int64 {
		if e := o.Extent(k.Params, 2) - o.Extent(k.Params, 1); e > 0 {
			return e
		}
		return 0
	}
	for _, o := range f.Operands {
		arg := caseArg{File: o.Name + ".in", DType: string(o.DType), Out: o.Access != ir.Read, Elements: o.Extent(k.Params, int64(n))}
		// The state is carried from launch to launch and not compared: a
		// want over 8K tokens would be the reference's whole run (the
		// correctness cases compare it).
		if o.Name == "state" {
			arg.Out, arg.Elements = false, 0
		}
		arg.Repeat = o.Access != ir.Write && rowsOf(o) > 0
		meta.Args = append(meta.Args, arg)
	}
	switch ir.Kind(k.Family) {
	case ir.GatedDeltaWY, ir.GatedDeltaState:
		wy, st := kernels.GDNChunkFLOPs(k.Params, n)
		meta.FLOPs = wy
		if ir.Kind(k.Family) == ir.GatedDeltaState {
			meta.FLOPs = st
		}
		products := 1
		if k.Params.Flag("split") {
			products = 3
		}
		meta.Note = fmt.Sprintf("%d tokens (%d chunks: µs a chunk = µs / %d) of one GDN layer at the model's heads, %s, %d tf32 products per multiply-add (%s), operands rounded by %s; files of %d rows repeated",
			n, ir.Ceil(n, k.Params.Int("chunk")), ir.Ceil(n, k.Params.Int("chunk")), kernelShape(k), products, map[bool]string{true: "split: hi·hi + hi·lo + lo·hi", false: "plain"}[products == 3],
			map[bool]string{true: "integer arithmetic (int_tf32)", false: "cvt.rna.tf32.f32"}[k.Params.Flag("int_tf32")], period)
	case ir.GatedRMSNorm:
		meta.Note = fmt.Sprintf("%d tokens of the gated norm over %d heads of %d, a warp per vector; files of %d rows repeated", n, k.Params.Int("heads"), k.Params.Int("dim"), period)
	default:
		meta.Note = fmt.Sprintf("%d tokens of the conv over %d channels, %s; files of %d rows repeated", n, k.Params.Int("channels"), kernelShape(k), period)
	}
	if sp.from == "" {
		a := &ir.Args{Family: f, Params: k.Params, N: period, Block: &[ir.ParamSlots]int32{}, Mem: make([][]byte, len(f.Operands))}
		rng := rand.New(rand.NewPCG(seed, 7))
		for i, o := range f.Operands {
			e := o.Extent(k.Params, period)
			if r := rowsOf(o); r > 0 {
				e = r * period
			}
			a.Mem[i] = aligned(e * 4)
			v := a.F32(o.Name)
			for j := range v {
				v[j] = float32(rng.Float64()*2 - 1)
				if o.Access == ir.Write {
					v[j] = 0
				}
			}
		}
		if ir.Kind(k.Family) == ir.GatedDeltaWY || ir.Kind(k.Family) == ir.GatedDeltaState {
			gdnFill(a, rng, period, 0.3, false)
		}
		for i, o := range f.Operands {
			if err := os.WriteFile(filepath.Join(dir, o.Name+".in"), a.Mem[i], 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Reference(a); err != nil {
			t.Fatal(err)
		}
		for i, o := range f.Operands {
			if o.Access == ir.Read || o.Name == "state" {
				continue
			}
			// The first period rows; the conv's state is not rows.
			b := a.Mem[i][:rowsOf(o)*period*4]
			if err := os.WriteFile(filepath.Join(dir, o.Name+".want"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	if sp.from != "" {
		// The sibling's arguments, this kernel's launch.
		b, err := os.ReadFile(filepath.Join(root, sp.from, "meta.json"))
		if err != nil {
			t.Fatalf("%s: %v (its sibling is written first)", sp.name, err)
		}
		var sib caseMeta
		if err := json.Unmarshal(b, &sib); err != nil {
			t.Fatal(err)
		}
		meta.Args = sib.Args
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

// kernelShape names a case kernel's tile parameters.
func kernelShape(k plan.Kernel) string {
	p := k.Params
	switch ir.Kind(k.Family) {
	case ir.GatedDeltaWY:
		return fmt.Sprintf("gated_delta_wy chunk %d, slices of %d", p.Int("chunk"), p.Int("slice"))
	case ir.GatedDeltaState:
		return fmt.Sprintf("gated_delta_state chunk %d, slices of %d, %d state columns a block, %s staging%s", p.Int("chunk"), p.Int("slice"), p.Int("cols"),
			map[bool]string{true: "asynchronous", false: "synchronous"}[p.Flag("async")], map[bool]string{true: ", the split's corrections summed apart (lo_acc)", false: ""}[p.Flag("lo_acc")]+
				map[bool]string{true: ", S and Vnew split once by their producers (pre_split)", false: ""}[p.Flag("pre_split")])
	case ir.CausalConv1dSiLURows:
		return fmt.Sprintf("a thread per channel and %d rows", p.Int("rows_per_thread"))
	}
	return fmt.Sprintf("%s, a thread per channel over every row", k.Family)
}
