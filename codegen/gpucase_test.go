package codegen

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

var gpuCases = flag.String("gpucases", "", "write CUDA differential cases (sources, inputs, reference outputs) to this directory")

// gpuCase is one kernel run: plan kernel, logical rows, position.
type gpuCase struct {
	name string
	k    plan.Kernel
	n    int
	pos  int
}

// caseSpeed makes a case a speed case: launches to time, the bytes one
// launch must move, copies of the operands the timed launches rotate
// through (so that a small working set comes from HBM, not L2), and the
// sibling case whose files it reads ("": its own).
type caseSpeed struct {
	reps, rotate int
	bytes        int64
	from, note   string
	graph        bool // also timed inside a CUDA graph (caseMeta.Graph)
}

// caseArg describes one argument file of a written case.
type caseArg struct {
	File  string `json:"file"`
	DType string `json:"dtype"`
	Out   bool   `json:"out"`
	// Elements, when set, is the operand's length on the device: a file
	// holding fewer is zero-extended (a speed case's unread experts), or
	// with Repeat tiled (a long KV cache from one period of positions).
	Elements int64 `json:"elements,omitempty"`
	Repeat   bool  `json:"repeat,omitempty"`
	// Tagged: an i32 operand of (tag, f32 bits) pairs, gdn_decode_peer's
	// slots: the tags compared exactly, the floats within tolerance.
	Tagged bool `json:"tagged,omitempty"`
	// Want64: a file of the output's float64 reference (its first
	// elements), against which the runner reports the error relative to
	// the reference's rms beside the f32 check (the precision cases).
	Want64 string `json:"want64,omitempty"`
}

// caseMeta is what the device-side runner reads.
type caseMeta struct {
	Kernel string `json:"kernel"`
	Grid   []int  `json:"grid"`
	// Block is the plan's block on sm_90 (the target's launch configuration).
	Block []int `json:"block"`
	N     int   `json:"n"`
	// Params is the parameter block the kernel's last argument points at.
	Params [ir.ParamSlots]int32 `json:"params"`
	Args   []caseArg            `json:"args"`
	// Shared is the launch's dynamic shared memory in bytes (the runner
	// raises the kernel's limit past 48 KiB).
	Shared int `json:"shared,omitempty"`
	// Cluster is the blocks of a thread-block cluster along x (the launch
	// rule's ir.LaunchShape.Cluster): the runner launches clusters of that
	// many blocks; absent, none.
	Cluster int `json:"cluster,omitempty"`
	// TimeReps, Bytes, FLOPs and Note: a speed case's launches to time, the
	// bytes one launch must move (for GB/s), the floating-point operations
	// of one launch (for TFLOP/s) and what it measures.
	TimeReps int    `json:"time_reps,omitempty"`
	Bytes    int64  `json:"bytes,omitempty"`
	FLOPs    int64  `json:"flops,omitempty"`
	Note     string `json:"note,omitempty"`
	// Rotate: the timed launches take copy r mod Rotate of every operand
	// (the device holds that many); InputsFrom: the sibling case whose
	// input and want files this one reads.
	Rotate     int    `json:"rotate,omitempty"`
	InputsFrom string `json:"inputs_from,omitempty"`
	// Graph: the timed launches are also captured into one CUDA graph
	// and replayed, with and without programmatic dependent launch, so
	// that the host's launch rate (the back-to-back floor) does not
	// enter the figure; the step replays its launches the same way.
	Graph bool `json:"graph,omitempty"`
	// ATol and RTol, when set, replace the runner's f32 tolerance
	// (|got − want| ≤ atol + rtol·|want|): the tensor-core families',
	// stated beside their cases.
	ATol float64 `json:"atol,omitempty"`
	RTol float64 `json:"rtol,omitempty"`
}

// caseGrid is the planner's launch rule for a launch of n rows on sm_90:
// the family's, with the target's launch configuration.
func caseGrid(k plan.Kernel, rows int) []int {
	s := caseLaunch(k, rows)
	return s.Grid[:]
}

// caseLaunch is the whole launch shape of that rule: grid, block and
// dynamic shared memory.
func caseLaunch(k plan.Kernel, rows int) ir.LaunchShape {
	return kernels.Families[ir.Kind(k.Family)].Launch(k.Params, rows, plan.SM90.Launch())
}

// caseBlock is the block of every sm_90 launch.
func caseBlock() []int { return []int{plan.SM90.Launch().Threads, 1, 1} }

// kern names a case kernel after its family, the entry point the runner
// looks up; params are typed by the family's declaration.
func kern(family string, params map[string]float64) plan.Kernel {
	f := kernels.Families[ir.Kind(family)]
	var p ir.Params
	for name, v := range params {
		kind := ir.IntParam
		for _, s := range f.Params {
			if s.Name == name {
				kind = s.Kind
			}
		}
		switch kind {
		case ir.RealParam:
			p.SetReal(name, v)
		case ir.FlagParam:
			p.SetFlag(name, v != 0)
		default:
			p.SetInt(name, int64(v))
		}
	}
	return plan.Kernel{Name: family + "_case", Family: family, Params: p}
}

// TestWriteGPUCases writes differential cases for the CUDA kernels: each
// case holds the rendered .cu, random inputs, and the Go reference kernel's
// outputs (rows ≥ n poisoned on both sides). With -gpucases DIR they go to
// DIR for the device harness; otherwise to a temporary directory, which
// still proves every case renders and its reference runs.
func TestWriteGPUCases(t *testing.T) {
	out := *gpuCases
	if out == "" {
		out = t.TempDir()
	}
	gdn := map[string]float64{"row_stride": 8192, "k_heads": 16, "v_heads": 32, "k_dim": 128, "v_dim": 128}
	gdnC := map[string]float64{"chunk": 64}
	for k, v := range gdn {
		gdnC[k] = v
	}
	// The fused GDN decode step at the model's sizes and the tiny fixtures'
	// (synth's tiny preset and testdata/hf-tiny: 2 key heads, 4 value heads,
	// head dims 16): state, conv state and output rows against the chain's
	// references.
	step := func(hk, hv, dk, dv float64) map[string]float64 {
		return map[string]float64{"k_heads": hk, "v_heads": hv, "k_dim": dk, "v_dim": dv, "kernel": 4,
			"l2_eps": 1e-6, "q_scale": 1 / math.Sqrt(dk), "k_scale": 1, "eps": 1e-6}
	}
	cases := []gpuCase{
		{"gdn_decode_step", kern("gdn_decode_step", step(16, 32, 128, 128)), 1, 0},
		{"gdn_decode_step_rows", kern("gdn_decode_step", step(16, 32, 128, 128)), 2, 0},
		{"gdn_decode_step_tiny", kern("gdn_decode_step", step(2, 4, 16, 16)), 1, 0},
		{"embedding", kern("embedding", map[string]float64{"hidden": 2048, "vocab": 100}), 3, 0},
		{"rmsnorm", kern("rmsnorm", map[string]float64{"width": 2048, "heads": 1, "x_stride": 2048, "y_stride": 2048, "eps": 1e-6, "one_plus": 1}), 3, 0},
		{"rmsnorm_q", kern("rmsnorm", map[string]float64{"width": 256, "heads": 16, "x_stride": 512, "y_stride": 256, "eps": 1e-6, "one_plus": 1}), 2, 0},
		{"matmul", kern("matmul", map[string]float64{"k": 2048, "n": 45}), 3, 0},
		{"matmul_odd", kern("matmul", map[string]float64{"k": 20, "n": 7}), 2, 0},
		{"matmul_add", kern("matmul_add", map[string]float64{"k": 4096, "n": 45}), 3, 0},
		{"matmul_add_odd", kern("matmul_add", map[string]float64{"k": 20, "n": 7}), 2, 0},
		{"conv", kern("causal_conv1d_silu", map[string]float64{"channels": 300, "kernel": 4}), 5, 0},
		{"conv_short", kern("causal_conv1d_silu", map[string]float64{"channels": 300, "kernel": 4}), 2, 0},
		{"gates", kern("gdn_gates", map[string]float64{"heads": 32}), 3, 0},
		{"l2norm", kern("l2norm_heads", map[string]float64{"row_stride": 8192, "heads": 16, "dim": 128, "eps": 1e-6, "scale": 0.08838834764831843}), 3, 0},
		{"delta_rec", kern("gated_delta_recurrent", gdn), 3, 0},
		{"delta_chunk", kern("gated_delta_chunked", gdnC), 70, 0},
		{"gated_rmsnorm", kern("gated_rmsnorm", map[string]float64{"heads": 32, "dim": 128, "eps": 1e-6}), 2, 0},
		{"rope", kern("rope", map[string]float64{"row_stride": 4096, "heads": 16, "head_dim": 256, "rot_dim": 64, "theta": 1e7}), 3, 1000},
		{"rope_far", kern("rope", map[string]float64{"row_stride": 512, "heads": 2, "head_dim": 256, "rot_dim": 64, "theta": 1e7}), 2, 200000},
		{"kv_append", kern("kv_append", map[string]float64{"width": 512, "capacity": 16, "kv_bf16": 0}), 3, 5},
		{"kv_append_bf16", kern("kv_append", map[string]float64{"width": 512, "capacity": 16, "kv_bf16": 1}), 3, 5},
		{"attention", kern("attention", map[string]float64{"q_heads": 16, "kv_heads": 2, "head_dim": 256, "scale": 0.0625, "capacity": 64, "width": 512, "kv_bf16": 0}), 3, 20},
		{"attention_one", kern("attention", map[string]float64{"q_heads": 16, "kv_heads": 2, "head_dim": 256, "scale": 0.0625, "capacity": 64, "width": 512, "kv_bf16": 0}), 1, 0},
		{"attention_bf16", kern("attention", map[string]float64{"q_heads": 16, "kv_heads": 2, "head_dim": 256, "scale": 0.0625, "capacity": 64, "width": 512, "kv_bf16": 1}), 3, 20},
		{"out_gate", kern("attn_output_gate", map[string]float64{"heads": 16, "head_dim": 256}), 2, 0},
		{"router", kern("router_topk", map[string]float64{"experts": 256, "k": 8}), 4, 0},
		{"moe_gate_up", kern("moe_gate_up", map[string]float64{"experts": 16, "hidden": 256, "inter": 64, "k": 4}), 3, 0},
		{"moe_gate_up_wide", kern("moe_gate_up", map[string]float64{"experts": 8, "hidden": 2048, "inter": 72, "k": 8}), 2, 0},
		{"moe_down", kern("moe_down", map[string]float64{"experts": 16, "hidden": 256, "inter": 64, "k": 4}), 3, 0},
		{"moe_down_wide", kern("moe_down", map[string]float64{"experts": 8, "hidden": 1024, "inter": 512, "k": 8}), 2, 0},
		{"silu_mul", kern("silu_mul", map[string]float64{"width": 512}), 3, 0},
		{"add", kern("add", map[string]float64{"width": 2048}), 3, 0},
		{"combine", kern("shared_expert_combine", map[string]float64{"hidden": 2048}), 3, 0},
	}
	for i, c := range cases {
		dir := filepath.Join(out, c.name)
		writeCase(t, dir, c, uint64(i))
		if entries, err := os.ReadDir(dir); err != nil || len(entries) < 2 {
			t.Errorf("case %s: wrote %d files (%v)", c.name, len(entries), err)
		}
	}
}

// writeCase fills the operands, runs the family's reference and writes
// the files. A bf16 KV kernel's reference runs the f32 variant on values
// rounded to bf16; its caches are written as bf16.
func writeCase(t *testing.T, dir string, c gpuCase, seed uint64) {
	writeCaseFull(t, dir, c, seed, 0, nil)
}

// writeCaseTiled is writeCase with the read-only KV caches (the AnyFloat
// operands) repeating every period positions when period > 0: their files
// hold one period and meta.json says to tile them to the cache's length,
// so a long-context speed case stays small on disk while the device reads
// every byte of a full cache. The reference runs on the tiled caches.
func writeCaseTiled(t *testing.T, dir string, c gpuCase, seed uint64, period int) {
	writeCaseFull(t, dir, c, seed, period, nil)
}

// writeTimedCase is writeCase with a speed case's timing (nil: none).
func writeTimedCase(t *testing.T, dir string, c gpuCase, seed uint64, sp *caseSpeed) {
	writeCaseFull(t, dir, c, seed, 0, sp)
}

// writeCaseFull writes a case with tiled KV caches (period > 0) and a speed
// case's timing (sp non-nil).
func writeCaseFull(t *testing.T, dir string, c gpuCase, seed uint64, period int, sp *caseSpeed) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 7))
	f := kernels.Families[ir.Kind(c.k.Family)]
	if err := f.CheckParams(c.k.Params); err != nil {
		t.Fatalf("case %s: %v", c.name, err)
	}
	kvBF16 := f.AnyFloatIsBF16(c.k.Params)
	refParams := c.k.Params.Clone()
	if kvBF16 {
		refParams.SetFlag(f.AnyFloatFlag, false)
	}
	phys := int64(c.n + 2)
	var block [ir.ParamSlots]int32
	block[ir.ParamPos] = int32(c.pos)
	a := &ir.Args{Family: f, Params: refParams, N: c.n, Block: &block, Mem: make([][]byte, len(f.Operands))}
	for i, o := range f.Operands {
		size := int64(o.DType.Size())
		if o.DType == ir.AnyFloat {
			size = 4
		}
		a.Mem[i] = aligned(o.Extent(refParams, phys) * size)
	}
	for _, o := range f.Operands {
		switch o.DType {
		case ir.I32:
		case ir.BF16:
			w := a.BF16(o.Name)
			for j := range w {
				w[j] = bf16.FromFloat32(float32(rng.NormFloat64() * 0.05))
			}
		default:
			v := a.F32(o.Name)
			for j := range v {
				if o.Access == ir.Write {
					v[j] = 7
				} else {
					v[j] = float32(rng.Float64()*2 - 1)
				}
			}
		}
	}
	// A cache the kernel also writes (the folded append) is tiled too: its
	// want file holds the first period, which the runner compares.
	tiled := func(o ir.OperandSpec) bool {
		return period > 0 && o.DType == ir.AnyFloat && o.Access != ir.Write
	}
	p := c.k.Params
	switch ir.Kind(c.k.Family) {
	case ir.Embedding:
		ids := a.I32("ids")
		for j := range ids {
			ids[j] = int32(rng.IntN(p.Int("vocab")))
		}
	case ir.GatedDeltaChunked, ir.GatedDeltaRecurrent:
		kernels.L2NormHeads(a.F32("q"), 8192, int(phys), 16, 128, 1e-6, 0.0884)
		kernels.L2NormHeads(a.F32("k"), 8192, int(phys), 16, 128, 1e-6, 1)
		beta, g := a.F32("beta"), a.F32("g")
		for j := range beta {
			beta[j] = float32(rng.Float64())
			g[j] = float32(-rng.Float64() * 0.3)
		}
	case ir.GatedDeltaWY, ir.GatedDeltaState:
		gdnCaseFill(c.name, a, rng, int(phys))
	case ir.Attention, ir.KVAppend, ir.AttentionDecodeSplit, ir.AttentionDecodeStream, ir.AttentionDecodeMMA, ir.AttentionDecodeMMAGate, ir.QKNormRoPEAppend, ir.AttentionPrefill, ir.AttentionPrefillWG,
		ir.AttentionDecodeSplitQK, ir.AttentionDecodeMMAQK:
		names := []string{"k_cache", "v_cache"}
		if k := ir.Kind(c.k.Family); k == ir.AttentionPrefill || k == ir.AttentionPrefillWG {
			// What the tensor cores take as one bf16 term is a bf16 value, so the
			// reference sees the same; split operands keep their f32 values.
			names = nil
			if kvBF16 || !p.Flag("split_kv") {
				names = []string{"k_cache", "v_cache"}
			}
			if !p.Flag("split_q") && !p.Flag("fp16") { // fp16 rounds an f32 q itself
				names = append(names, "q")
			}
		}
		for _, name := range names {
			v := a.F32(name)
			for j := range v {
				v[j] = bf16.ToFloat32(bf16.FromFloat32(v[j]))
			}
		}
		if strings.HasSuffix(c.name, "_k0") {
			// Every score 0, every weight 1: the output is the gated mean of the
			// visible v rows whatever q·kᵀ computes, so the case holds p·v and
			// the softmax to account apart from the score product.
			clear(a.F32("k_cache"))
		}
	case ir.RouterTopK:
		ids := a.I32("ids")
		for j := range ids {
			ids[j] = -5
		}
		logits := a.F32("logits")
		for j := range logits {
			logits[j] *= 4
		}
	case ir.MoEDecodeGateUp:
		// Outputs poisoned; logits spread as the router's.
		ids := a.I32("ids")
		for j := range ids {
			ids[j] = -5
		}
		logits := a.F32("logits")
		for j := range logits {
			logits[j] *= 4
		}
	case ir.RMSNormRouterTopK:
		// Outputs poisoned; the arrival count as a launch before left it
		// (2³¹: this launch flips it to 0).
		ids := a.I32("ids")
		for j := range ids {
			ids[j] = -5
		}
		a.I32("count")[0] = math.MinInt32
	case ir.MoEDecodeRouteGateUp:
		// Outputs poisoned; the barrier count as a launch before left it
		// (2³¹: this launch flips it to 0).
		ids := a.I32("ids")
		for j := range ids {
			ids[j] = -5
		}
		a.I32("barrier")[0] = math.MinInt32
	case ir.MoEGateUp, ir.MoEDown, ir.MoEGateUpGEMV, ir.MoEDownGEMV, ir.MoEDecodeDown, ir.MoEDecodeGateUpRanked:
		k := p.Int("k")
		down := ir.Kind(c.k.Family) == ir.MoEDown || ir.Kind(c.k.Family) == ir.MoEDownGEMV || ir.Kind(c.k.Family) == ir.MoEDecodeDown
		ids := a.I32("ids")
		var weights []float32
		if down {
			weights = a.F32("weights")
		}
		for t := range int(phys) {
			perm := rng.Perm(p.Int("experts"))
			var s float32
			for j := range k {
				ids[t*k+j] = int32(perm[j])
				if down {
					weights[t*k+j] = float32(rng.Float64())
					s += weights[t*k+j]
				}
			}
			for j := range k {
				if down {
					weights[t*k+j] /= s
				}
			}
		}
		ids[k-1] = -1 // an id outside the experts contributes nothing
	case ir.AttentionCombine, ir.AttentionCombineGate:
		fillPartials(rng, a.F32("partial"), p.Int("head_dim"), p.Int("splits"))
	case ir.GDNDecodePeer:
		// Slots as a launch leaves them: tags equal within a key head and
		// parity, any value (the first key head's parity 0 at the int32
		// wrap), any sums beside them.
		slots := a.I32("slots")
		blocks := len(slots) / kernels.GDNPeerSlotWords
		peers := blocks / p.Int("k_heads")
		for par := range 2 {
			for kh := range p.Int("k_heads") {
				v := int32(rng.Uint32())
				if kh == 0 && par == 0 {
					v = math.MaxInt32
				}
				for i := range peers {
					s := 2 * (par*blocks + kh*peers + i)
					slots[s], slots[s+1] = v, int32(math.Float32bits(float32(rng.Float64())))
				}
			}
		}
	}
	var periodElems int
	for _, o := range f.Operands {
		if !tiled(o) {
			continue
		}
		v := a.F32(o.Name)
		periodElems = period * p.Int("width")
		if periodElems <= 0 || periodElems > len(v) {
			t.Fatalf("case %s: a period of %d positions does not tile %s", c.name, period, o.Name)
		}
		for j := periodElems; j < len(v); j++ {
			v[j] = v[j-periodElems]
		}
	}
	ls := caseLaunch(c.k, c.n)
	meta := caseMeta{Kernel: c.k.Name, Grid: ls.Grid[:], Block: ls.Block[:], Shared: ls.SharedBytes, N: c.n, Params: block}
	if k := ir.Kind(c.k.Family); (k == ir.AttentionPrefill || k == ir.AttentionPrefillWG) && !p.Flag("split_p") {
		meta.ATol, meta.RTol = prefillATol, prefillRTol // p as one bf16 term
	}
	if k := ir.Kind(c.k.Family); (k == ir.GatedDeltaWY || k == ir.GatedDeltaState) && !p.Flag("split") {
		meta.ATol, meta.RTol = gdnPlainATol, gdnPlainRTol // plain tf32 products
	}
	if sp != nil {
		meta.TimeReps, meta.Bytes, meta.Rotate, meta.InputsFrom, meta.Note, meta.Graph = sp.reps, sp.bytes, sp.rotate, sp.from, sp.note, sp.graph
	}
	own := sp == nil || sp.from == "" // a case timed on a sibling's files writes none
	// save writes operand i as the kernel takes it (AnyFloat as bf16 for a
	// bf16 KV kernel).
	save := func(name string, i int) {
		b := a.Mem[i]
		vals := a.F32
		if tiled(f.Operands[i]) {
			vals = func(name string) []float32 { return a.F32(name)[:periodElems] }
			b = b[:4*periodElems]
		}
		if kvBF16 && f.Operands[i].DType == ir.AnyFloat {
			b = nil
			for _, v := range vals(f.Operands[i].Name) {
				b = binary.LittleEndian.AppendUint16(b, bf16.FromFloat32(v))
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, o := range f.Operands {
		dt := string(o.DType)
		switch {
		case o.DType == ir.AnyFloat && kvBF16:
			dt = string(ir.BF16)
		case o.DType == ir.AnyFloat:
			dt = string(ir.F32)
		}
		arg := caseArg{File: o.Name + ".in", DType: dt, Out: o.Access != ir.Read, Tagged: ir.Kind(c.k.Family) == ir.GDNDecodePeer && o.Name == "slots"}
		if tiled(o) {
			arg.Elements, arg.Repeat = o.Extent(refParams, phys), true
		}
		meta.Args = append(meta.Args, arg)
		if own {
			save(o.Name+".in", i)
		}
	}
	if err := caseReference(a, c.k.Params, kvBF16); err != nil {
		t.Fatalf("case %s: reference: %v", c.name, err)
	}
	for i, o := range f.Operands {
		if o.Access != ir.Read && own {
			save(o.Name+".want", i)
		}
	}
	src, err := Render(plan.SM90, c.k)
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

// caseReference runs a's reference. A family that writes the cache and
// then reads what it wrote (the folded append: attention_decode_*_qk) runs
// it on bf16 caches with the kernel's params p when the kernel's cache is
// bf16, so that the rows it appends are rounded as the device's before the
// attention reads them; a's f32 caches (bf16 values) are converted there
// and back, exactly.
func caseReference(a *ir.Args, p ir.Params, kvBF16 bool) error {
	f := a.Family
	if !kvBF16 || (f.Kind != ir.AttentionDecodeSplitQK && f.Kind != ir.AttentionDecodeMMAQK) {
		return f.Reference(a)
	}
	b := &ir.Args{Family: f, Params: p, N: a.N, Block: a.Block, Mem: slices.Clone(a.Mem)}
	for i, o := range f.Operands {
		if o.DType != ir.AnyFloat {
			continue
		}
		w := make([]uint16, len(a.Mem[i])/4)
		for j, x := range a.F32(o.Name)[:len(w)] {
			w[j] = bf16.FromFloat32(x)
		}
		b.Mem[i] = unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(w))), 2*len(w))
	}
	if err := f.Reference(b); err != nil {
		return err
	}
	for _, o := range f.Operands {
		if o.DType == ir.AnyFloat {
			v := a.F32(o.Name)
			for j, x := range b.BF16(o.Name) {
				v[j] = bf16.ToFloat32(x)
			}
		}
	}
	return nil
}

// aligned is n zero bytes, 8-byte aligned for the typed views.
func aligned(n int64) []byte {
	words := make([]uint64, (n+7)/8)
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(words))), n)
}

// fillCase is one fill_uniform run: dtype, element count, grid, and the
// generator's inputs as runtime.SyntheticWeights passes them.
type fillCase struct {
	name      string
	bf16      bool
	n, blocks int
	seed      uint64
	buffer    string // the key is kernels.FillKey of this name
	lo, scale float32
}

// TestWriteGPUCasesFill writes the fill_uniform cases: edge sizes, grids
// smaller than the element count (the grid-stride loop) and larger, seeds
// and keys with the high bits set, negative bounds. The output is poisoned
// (NaN bits) past n as well as before the launch, and the runner compares
// it with kernels.FillUniform* bit for bit ("exact" in meta.json).
func TestWriteGPUCasesFill(t *testing.T) {
	out := *gpuCases
	if out == "" {
		out = t.TempDir()
	}
	a := float32(math.Sqrt(3.0 / 2048))
	cases := []fillCase{
		{"fill_f32_one", false, 1, 1, 0, "model.language_model.norm.weight", -0.1, 0.2},
		{"fill_f32_257", false, 257, 2, 1, "model.language_model.layers.0.input_layernorm.weight", -0.1, 0.2},
		{"fill_f32_stride", false, 100003, 3, 0xdeadbeefcafef00d, "model.language_model.layers.0.linear_attn.A_log", 0, float32(math.Log(16))},
		{"fill_f32_wide", false, 1000, 64, 42, "model.language_model.layers.0.linear_attn.dt_bias", -0.5, 1},
		{"fill_bf16_255", true, 255, 1, 7, "model.language_model.embed_tokens.weight", -float32(math.Sqrt(3)), 2 * float32(math.Sqrt(3))},
		{"fill_bf16_256", true, 256, 1, 1 << 63, "model.language_model.layers.3.self_attn.q_proj.weight", -a, 2 * a},
		{"fill_bf16_stride", true, 1<<20 + 3, 5, 0x8000000000000001, "model.language_model.layers.0.mlp.experts.gate_up_proj", -a, 2 * a},
		{"fill_bf16_full", true, 3<<20 + 1, 16384, ^uint64(0), "lm_head.weight", -a, 2 * a},
	}
	for _, c := range cases {
		dir := filepath.Join(out, c.name)
		writeFillCase(t, dir, c)
		if entries, err := os.ReadDir(dir); err != nil || len(entries) < 4 {
			t.Errorf("case %s: wrote %d files (%v)", c.name, len(entries), err)
		}
	}
}

// writeFillCase writes one fill case: the poisoned output, the reference
// and the parameter block with the fill slots set.
func writeFillCase(t *testing.T, dir string, c fillCase) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	const pad = 7 // elements past n that must stay poisoned
	flag, dt := 0.0, "f32"
	if c.bf16 {
		flag, dt = 1, "bf16"
	}
	k := kern("fill_uniform", map[string]float64{"bf16": flag})
	key := kernels.FillKey(c.buffer)
	meta := struct {
		caseMeta
		Exact bool `json:"exact"`
	}{caseMeta{Kernel: k.Name, Grid: []int{c.blocks, 1, 1}, Block: caseBlock(), N: c.n}, true}
	meta.Params[ir.ParamFillSeedLo] = int32(uint32(c.seed))
	meta.Params[ir.ParamFillSeedHi] = int32(uint32(c.seed >> 32))
	meta.Params[ir.ParamFillKeyLo] = int32(uint32(key))
	meta.Params[ir.ParamFillKeyHi] = int32(uint32(key >> 32))
	meta.Params[ir.ParamFillLo] = int32(math.Float32bits(c.lo))
	meta.Params[ir.ParamFillScale] = int32(math.Float32bits(c.scale))
	meta.Args = []caseArg{{File: "out.in", DType: dt, Out: true}}
	var in, want []byte
	if c.bf16 {
		v := make([]uint16, c.n+pad)
		for i := range v {
			v[i] = 0xffff
		}
		for _, x := range v {
			in = binary.LittleEndian.AppendUint16(in, x)
		}
		kernels.FillUniformBF16(v, c.n, c.seed, key, c.lo, c.scale)
		for _, x := range v {
			want = binary.LittleEndian.AppendUint16(want, x)
		}
	} else {
		v := make([]float32, c.n+pad)
		for i := range v {
			v[i] = math.Float32frombits(0xffffffff)
		}
		for _, x := range v {
			in = binary.LittleEndian.AppendUint32(in, math.Float32bits(x))
		}
		kernels.FillUniformF32(v, c.n, c.seed, key, c.lo, c.scale)
		for _, x := range v {
			want = binary.LittleEndian.AppendUint32(want, math.Float32bits(x))
		}
	}
	src, err := Render(plan.SM90, k)
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := json.MarshalIndent(meta, "", " ")
	for name, b := range map[string][]byte{"out.in": in, "out.want": want, "meta.json": mb, "kernel.cu": []byte(src.Code)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sampleCase is one draw of the sample kernel: a row of logits and the
// sampling slots of the parameter block.
type sampleCase struct {
	name   string
	vocab  int
	logits func(rng *rand.Rand, i int) float32
	p      kernels.SampleParams
	// allow, when set, builds the token mask (constrained decoding): id i
	// may be drawn when allow(rng, i).
	allow func(rng *rand.Rand, i int) bool
}

// llmLogits is a model-like row: a normal bulk and a sparse upper tail
// (the largest id takes about a third of the probability).
func llmLogits(rng *rand.Rand, _ int) float32 {
	if rng.IntN(500) == 0 {
		return float32(4 + rng.ExpFloat64()*1.2)
	}
	return float32(rng.NormFloat64()*2 - 3)
}

// TestWriteGPUCasesSample writes the sample cases: greedy, temperature with
// top_k, top_p and min_p alone and together, cuts wider than the kernel's
// shared candidates, ties at a cut (equal and quantized logits), NaN and
// −Inf logits, the vocabulary limit, a vocabulary that is not a multiple of
// 4. The runner compares the chosen id (tokens[0], out[0]) with
// kernels.Sample exactly and the logprob (out[1]) to 1e-5 ("sample" in
// meta.json).
func TestWriteGPUCasesSample(t *testing.T) {
	out := *gpuCases
	if out == "" {
		out = t.TempDir()
	}
	const V = 248320
	flat := func(*rand.Rand, int) float32 { return 1.25 }
	quantized := func(rng *rand.Rand, _ int) float32 { return float32(math.Round(rng.NormFloat64()*4)) * 0.5 }
	poisoned := func(rng *rand.Rand, i int) float32 {
		switch i % 997 {
		case 5:
			return float32(math.NaN())
		case 11:
			return float32(math.Inf(-1))
		}
		return llmLogits(rng, i)
	}
	padded := func(rng *rand.Rand, i int) float32 {
		if i >= 248077 {
			return 40 // padding rows the vocabulary limit must mask
		}
		return llmLogits(rng, i)
	}
	cases := []sampleCase{
		{"sample_greedy", V, llmLogits, kernels.SampleParams{Seed: 1}, nil},
		{"sample_greedy_ties", 1000, quantized, kernels.SampleParams{}, nil},
		{"sample_greedy_limit", V, padded, kernels.SampleParams{VocabLimit: 248077}, nil},
		{"sample_temp", V, llmLogits, kernels.SampleParams{Temperature: 0.8, Seed: 2, Step: 7}, nil},
		{"sample_temp_hot", V, llmLogits, kernels.SampleParams{Temperature: 3, Seed: 3, Step: 1 << 31}, nil},
		{"sample_topk", V, llmLogits, kernels.SampleParams{Temperature: 0.7, TopK: 20, Seed: 4}, nil},
		{"sample_topk_wide", V, llmLogits, kernels.SampleParams{Temperature: 1, TopK: 30000, Seed: 5}, nil},
		{"sample_topp", V, llmLogits, kernels.SampleParams{Temperature: 1, TopP: 0.9, Seed: 6}, nil},
		{"sample_minp", V, llmLogits, kernels.SampleParams{Temperature: 1, MinP: 0.05, Seed: 7}, nil},
		{"sample_qwen", V, llmLogits, kernels.SampleParams{Temperature: 0.7, TopK: 20, TopP: 0.8, Seed: 8, Step: 3}, nil},
		{"sample_all", V, llmLogits, kernels.SampleParams{Temperature: 1.3, TopK: 3000, TopP: 0.95, MinP: 0.02, Seed: 1<<64 - 1, Step: 99}, nil},
		{"sample_limit", V, padded, kernels.SampleParams{Temperature: 1, TopP: 0.9, VocabLimit: 248077, Seed: 9}, nil},
		{"sample_ties_topk", V, flat, kernels.SampleParams{Temperature: 1, TopK: 5, Seed: 10}, nil},
		{"sample_ties_topp", V, quantized, kernels.SampleParams{Temperature: 1, TopP: 0.5, TopK: 100000, Seed: 11}, nil},
		{"sample_nan_inf", V, poisoned, kernels.SampleParams{Temperature: 1, TopK: 50, TopP: 0.99, Seed: 12}, nil},
		{"sample_small", 37, llmLogits, kernels.SampleParams{Temperature: 1, TopP: 0.9, MinP: 0.01, Seed: 13}, nil},
		// Masks: the draw among the allowed ids only, the logprob unmasked.
		{"sample_mask_greedy", V, llmLogits, kernels.SampleParams{Seed: 14}, sparse(0.001)},
		{"sample_mask_qwen", V, llmLogits, kernels.SampleParams{Temperature: 0.7, TopK: 20, TopP: 0.8, Seed: 15, Step: 4}, sparse(0.3)},
		{"sample_mask_all", V, llmLogits, kernels.SampleParams{Temperature: 1.3, TopK: 3000, TopP: 0.95, MinP: 0.02, Seed: 16}, sparse(0.9)},
		{"sample_mask_one", V, llmLogits, kernels.SampleParams{Temperature: 1, TopP: 0.9, Seed: 17}, func(_ *rand.Rand, i int) bool { return i == 151645 }},
		{"sample_mask_limit", V, padded, kernels.SampleParams{Temperature: 1, TopK: 50, VocabLimit: 248077, Seed: 18}, sparse(0.5)},
		{"sample_mask_small", 37, llmLogits, kernels.SampleParams{Temperature: 1, Seed: 19}, func(_ *rand.Rand, i int) bool { return i%3 == 1 }},
	}
	for i, c := range cases {
		dir := filepath.Join(out, c.name)
		writeSampleCase(t, dir, c, uint64(i))
		if entries, err := os.ReadDir(dir); err != nil || len(entries) < 8 {
			t.Errorf("case %s: wrote %d files (%v)", c.name, len(entries), err)
		}
	}
}

// sparse allows each id with probability p.
func sparse(p float64) func(*rand.Rand, int) bool {
	return func(rng *rand.Rand, _ int) bool { return rng.Float64() < p }
}

// writeSampleCase writes one sample case: the logits, the poisoned tokens
// and out buffers with kernels.Sample's values as the want files, and the
// parameter block with the sampling slots set.
func writeSampleCase(t *testing.T, dir string, c sampleCase, seed uint64) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(seed, 11))
	logits := make([]float32, c.vocab)
	for i := range logits {
		logits[i] = c.logits(rng, i)
	}
	k := kern("sample", map[string]float64{"vocab": float64(c.vocab), "rows": 1})
	meta := struct {
		caseMeta
		Sample bool `json:"sample"`
	}{caseMeta{Kernel: k.Name, Grid: caseGrid(k, 1), Block: caseBlock(), N: 1}, true}
	p := c.p
	meta.Params[ir.ParamSeedLo] = int32(uint32(p.Seed))
	meta.Params[ir.ParamSeedHi] = int32(uint32(p.Seed >> 32))
	meta.Params[ir.ParamStep] = int32(p.Step)
	meta.Params[ir.ParamTemperature] = int32(math.Float32bits(p.Temperature))
	meta.Params[ir.ParamTopP] = int32(math.Float32bits(p.TopP))
	meta.Params[ir.ParamMinP] = int32(math.Float32bits(p.MinP))
	meta.Params[ir.ParamTopK] = p.TopK
	meta.Params[ir.ParamVocabLimit] = p.VocabLimit
	mask := make([]int32, (c.vocab+31)/32)
	if c.allow != nil {
		meta.Params[ir.ParamMasked] = 1
		p.Mask = make([]uint32, len(mask))
		for i := range c.vocab {
			if c.allow(rng, i) {
				p.Mask[i/32] |= 1 << (i % 32)
			}
		}
		for i, w := range p.Mask {
			mask[i] = int32(w)
		}
	}
	meta.Args = []caseArg{{File: "logits.in", DType: "f32"}, {File: "tokens.in", DType: "i32", Out: true}, {File: "out.in", DType: "i32", Out: true}, {File: "mask.in", DType: "i32"}}
	tokens, res := []int32{-1, -1}, []int32{-1, -1, -1}
	i32s := func(v []int32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		}
		return b
	}
	var lb []byte
	for _, x := range logits {
		lb = binary.LittleEndian.AppendUint32(lb, math.Float32bits(x))
	}
	files := map[string][]byte{"logits.in": lb, "tokens.in": i32s(tokens), "out.in": i32s(res), "mask.in": i32s(mask)}
	kernels.Sample(tokens, res, logits, c.vocab, p)
	files["tokens.want"], files["out.want"] = i32s(tokens), i32s(res)
	src, err := Render(plan.SM90, k)
	if err != nil {
		t.Fatal(err)
	}
	files["kernel.cu"] = []byte(src.Code)
	files["meta.json"], _ = json.MarshalIndent(meta, "", " ")
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
