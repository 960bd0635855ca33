package planner

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// Options choose what to plan.
type Options struct {
	Target        plan.Target
	Buckets       []int
	ContextTokens int
	// LogitsRows is the row capacity of the teacher-forcing logits pass
	// (0: 64, or the largest bucket if smaller).
	LogitsRows int
	// Chunk is the GDN chunk size of prefill (0: 64, SPEC §3.1).
	Chunk int
	// KVDType is the KV cache's element type: "bf16" or "f32" on the GPU
	// targets, where "" means bf16 (half the bytes the decode attention
	// reads; SPEC §2.3 step 4 stores bf16, at a cost in agreement with an
	// fp32 reference), and "f32" on the cpu ("" means f32 there).
	KVDType ir.DType
	// Fusion says whether the fusion pass runs (FuseDefault: on GPU targets).
	Fusion Fusion
	// Tiling says whether prefill's projections and routed experts move to
	// the tensor-core families (the tile pass; TileDefault: on GPU targets).
	Tiling Tiling
	// DecodeSplits is the split count of the decode step's split-KV
	// attention (the split_kv pass): 0 picks the target's (twice its
	// multiprocessors' worth of blocks on a GPU; none on the cpu, whose
	// plan keeps attention as the oracle), -1 keeps attention, n in [1,
	// kernels.MaxSplits] asks for n on any target.
	DecodeSplits int
	// DecodeStream runs the split as attention_decode_stream (the KV rows
	// streamed through a shared-memory ring) on the targets with
	// asynchronous copies (sm_90) instead of attention_decode_split. Off by
	// default: on the H200 it measured 11–21 % slower at 32K and 128K and
	// 17 % faster at 8K (docs/decode-attention.md).
	DecodeStream bool
	// MoERouter folds each decode MoE block's router (its rmsnorm_gemv)
	// into moe_decode_gate_up as moe_decode_route_gate_up, one launch with
	// a grid barrier, the pair kept as its fallback (docs/moe-decode.md).
	// Off by default: on the H200 the fused launch measured 21.8 µs against
	// 14.4 + 5.3 µs for the two it replaces (one token, from HBM).
	MoERouter bool
	// MoERank ranks each decode MoE block's top-k once, in the router's
	// launch (rmsnorm_router_topk), gate_up reading the ids
	// (moe_decode_gate_up_ranked) and moe_decode_down reading them before
	// its programmatic wait (docs/pdl.md), on any target that fuses; GPU
	// targets whose stream row says RankOnce rank so without being asked.
	MoERank bool
	// L2Prefetch asks the decode step's weight-streaming launches for an
	// L2 prefetch of their first weight bytes before the programmatic wait
	// (the kernels' l2_prefetch flag, docs/pdl.md) on a target whose
	// launches overlap; targets whose stream row says L2Prefetch do so
	// without being asked.
	L2Prefetch bool
	// LateTrigger moves the programmatic trigger of the decode step's
	// streaming launches (the gemv families, moe_decode_gate_up,
	// moe_decode_down) from their wait to the moment a lane's last pass of
	// weight loads is out, and gdn_decode_split's to the end of its rows
	// (the kernels' late_trigger flag, docs/pdl.md), on a target whose
	// launches overlap; targets whose stream row says LateTrigger do so
	// without being asked.
	LateTrigger bool
	// GDNEarlyState has gdn_decode_split load its state slice before the
	// programmatic wait (the kernel's early_state flag, docs/pdl.md) on a
	// target whose launches overlap.
	GDNEarlyState bool
	// GDNOut folds each decode GDN layer's output projection and residual
	// add into its gdn_decode_split launch: gdn_decode_out, one grid
	// barrier in place of the split's last-block norm and the gemv_add
	// launch (docs/gdn-decode.md), the pair kept as the fallback.
	GDNOut bool
	// GDNOutStage says where gdn_decode_out copies its slice of the output
	// projection to shared memory: "" or "early" before the programmatic
	// wait, "late" after the state's loads, "mid" once the first row's
	// inputs are loaded (the chain then reads on chip), "bulk" before the wait as
	// bulk copies on an mbarrier (sm_90), "off" not at all (read from
	// global memory after the chain).
	GDNOutStage string
	// StreamUnroll, when positive, replaces the target's unroll of the
	// weight-streaming families (the 16-byte chunks a lane loads before its
	// FMAs, within kernels.GEMVMaxLoads over its rows): a tuning knob for
	// measuring the decode step; 0 keeps the target's (docs/gemv.md).
	StreamUnroll int
	// BF16Head leaves the greedy step with the certified int8 LM head
	// (decode_greedy, docs/lm-head.md) out of a GPU plan, whose greedy
	// draws then use the BF16 head. Every plan has the step by default: on
	// the H200 it took the 8K decode step from 2.94 to 2.57 ms with the same
	// tokens; the cpu plan always has it (its oracle keeps the BF16 head
	// unless a test turns the certified one on).
	BF16Head bool
	// DecodeMMA says whether the split runs on tensor cores
	// (attention_decode_mma) where its kernel serves the attention (a bf16
	// KV cache, head_dim 16, 32 or a multiple of 64 up to 256):
	// DecodeMMADefault (on for sm_90, off on gfx1151: docs/decode-attention.md), DecodeMMAOn (every GPU target: gfx1151 through
	// WMMA), DecodeMMAFused (on, with the combine and the output gate in the
	// same launch: attention_decode_mma_gate) or DecodeMMAOff (the CUDA-core
	// split).
	DecodeMMA DecodeMMA
	// QKFold folds the decode step's qk_norm_rope_append into the split
	// after it (attention_decode_split or _mma) where the plan fuses:
	// attention_decode_split_qk or attention_decode_mma_qk, one launch a
	// full-attention layer fewer. Off by default: correct on the H200, and
	// slower there (decode at 8K 366.7 against 382.4 tok/s;
	// docs/decode-attention.md); the pair stays the oracle.
	QKFold bool
	// GDNColumnTile is the column tile of the decode step's
	// gdn_decode_split or gdn_decode_peer (the fuse pass's GDN rule): 0
	// picks the target's (on a GPU, gdn_decode_split's widest tile that
	// gives every multiprocessor a block, with GDNPeer gdn_decode_peer's
	// narrowest whose blocks fit one wave; the cpu plan keeps
	// gdn_decode_step when it fuses), -1 keeps
	// gdn_decode_step (a block per key head), n > 0 asks for n columns on
	// any target, where n divides v_dim and the template runs it (otherwise
	// gdn_decode_step, or the chain).
	GDNColumnTile int
	// GDNPeer runs the column-tiled step as gdn_decode_peer (every block
	// finishes its own columns once its key head's blocks have published
	// their sums) where its blocks fit one wave, instead of
	// gdn_decode_split (the last block of a key head to arrive finishes the
	// gated norm). Off by default: on the H200 it measured slower
	// (docs/gdn-decode.md).
	GDNPeer bool
	// PrefillAttention chooses the prefill steps' attention (the flash
	// pass): PrefillDefault (flash where the target can split its operands,
	// sm_90; eager on gfx1151 and the cpu, whose plan keeps the oracle),
	// PrefillFlash, PrefillFlashBF16, PrefillWGMMA, PrefillWGMMABF16 or
	// PrefillEager on any target.
	PrefillAttention PrefillAttention
	// PrefillGDN chooses the prefill steps' gated delta rule and conv (the
	// gdn pass): PrefillGDNDefault (the chunked form on tensor cores on GPU
	// targets where its tiles fit, the serial families on the cpu, whose
	// plan is the oracle), PrefillGDNWY, PrefillGDNTF32 or PrefillGDNChunked
	// (the serial families) on any target.
	PrefillGDN PrefillGDN
	// GEMMTile chooses the tile of the tiled GEMMs (gemm, gemm_add and the
	// grouped MoE's; the tile pass): GEMMTileDefault (the target's:
	// wgmmaDefault), GEMMTileWGMMA (sm_90a's warpgroup products, sm_90 only),
	// GEMMTileWGMMAWS (the same products, warp-specialized, each k-tile's
	// partial sums added in f32: sm_90 only) or GEMMTileMMA (mma.sync on
	// sm_90, WMMA on gfx1151).
	GEMMTile GEMMTile
	// TCSums chooses how the tensor-core kernels keep their long sums:
	// TCSumsDefault (the target's: tcSumsDefault, flush on sm_90, mma elsewhere),
	// TCSumsMMA (the whole sum in the MMA accumulators), TCSumsFlush (each
	// k-tile's products summed apart and added in rounded to nearest: the
	// tiled GEMMs' flush_k: the wgmma tile at flushTileCols, the mma tile at 128), TCSumsFlushSlice (each
	// 16-deep slice's: flush_k16 too) or TCSumsFlushAll (flush, and the GDN
	// state pass's and attention_prefill's flush_k).
	TCSums TCSums
	// ATerms, when positive, is the bf16 terms (1 to 3) every tiled
	// projection stages its activations as (kernels.ATerms) instead of the
	// target's (activationTerms: three on sm_90, two on gfx1151): fewer
	// terms are fewer tensor-core products and less exact sums
	// (docs/prefill-gemm.md, "Precision").
	ATerms int
	// WideExperts puts the grouped MoE GEMMs of a plan on the wgmma tile
	// on its 256 columns (wide_tile) instead of 128: off by default, its
	// flushed kernels spill on sm_90 (docs/prefill-gemm.md).
	WideExperts bool
	// PersistentExperts runs the grouped MoE GEMMs on the wgmma tile as a
	// block per multiprocessor that walks the tiles (the kernels' persistent
	// flag): off by default, measured slower on the H200 (8K prefill 18,886
	// against 19,214 tok/s; docs/prefill-gemm.md).
	PersistentExperts bool
	// ClusterA launches the wgmma tile's GEMMs (dense and grouped) as
	// clusters of two column tiles whose A rows each block copies half of
	// into both (the kernels' cluster_a flag; sm_90): the L2 serves each
	// block half its A bytes (docs/prefill-gemm.md, "A shared by a
	// cluster"). Projections whose K is not whole 16-byte rows keep one
	// block.
	ClusterA bool
	// SharedATerms rounds the wgmma tile's A terms once a k-tile into shared
	// memory, by every thread a share under the products, which then read
	// both operands from there (the kernels' ss_a flag; sm_90, flush_k's
	// tiles: docs/prefill-gemm.md, "The A terms in shared memory").
	SharedATerms bool
	// PersistentDecode lets one decode_persistent launch run each run of
	// the decode steps' launches whose families can run as its items (a GPU
	// target; docs/persistent.md): the runs' blocks become work items taken
	// in order, each waiting for the launch before its own instead of a
	// launch boundary. The launches stay in the plan as the oracle.
	PersistentDecode bool
}

// DefaultBuckets are the real model's prefill buckets.
var DefaultBuckets = []int{1024, 2048, 4096, 8192}

// arenaAlign aligns arena slots for vector loads on every target.
const arenaAlign = 256

// Plan lowers every step of the model and schedules it for a target: the
// planner's passes in order (passes.go), then the plan validated.
func Plan(m *Model, o Options) (*plan.Plan, error) {
	c, err := compile(m, o, "", nil)
	if err != nil {
		return nil, err
	}
	return c.plan, nil
}

// steps are the graphs a plan holds: every prefill bucket, the decode
// step, the logits pass and the sampler.
func (o *Options) steps() []Step {
	var steps []Step
	for _, b := range o.Buckets {
		steps = append(steps, Step{Kind: plan.Prefill, Tokens: b})
	}
	steps = append(steps, Step{Kind: plan.DecodeStep, Tokens: 1}, Step{Kind: plan.Logits, Tokens: o.LogitsRows},
		Step{Kind: plan.Sample, Tokens: 1})
	if o.Target == plan.CPU || !o.BF16Head {
		steps = append(steps, Step{Kind: plan.DecodeGreedy, Tokens: 1})
	}
	for i := range steps {
		steps[i].MaxTokens, steps[i].ContextTokens = o.Buckets[len(o.Buckets)-1], o.ContextTokens
		steps[i].KVDType, steps[i].Chunk = o.KVDType, o.Chunk
	}
	return steps
}

// newPlan is the plan's header: what was planned, for which target.
func newPlan(m *Model, o Options) (*plan.Plan, error) {
	cfg, err := json.Marshal(m.Config)
	if err != nil {
		return nil, err
	}
	return &plan.Plan{
		Format: plan.Format,
		Model: plan.Model{Arch: "qwen3_5_moe", Fingerprint: m.Fingerprint(), Config: cfg,
			Vocab: m.Config.VocabSize},
		Target:        o.Target,
		ContextTokens: o.ContextTokens,
		Buckets:       slices.Clone(o.Buckets),
		LogitsRows:    o.LogitsRows,
	}, nil
}

func (o *Options) check() error {
	var errs []error
	if err := o.Target.Check(); err != nil {
		errs = append(errs, err)
	}
	if len(o.Buckets) == 0 {
		errs = append(errs, errors.New("no buckets"))
	}
	for i, b := range o.Buckets {
		if b <= 0 || b > 1<<20 || (i > 0 && b <= o.Buckets[i-1]) {
			errs = append(errs, fmt.Errorf("buckets %v: want increasing sizes in [1, %d]", o.Buckets, 1<<20))
			break
		}
	}
	if o.ContextTokens <= 0 || o.ContextTokens > 1<<24 {
		errs = append(errs, fmt.Errorf("context tokens %d: want 1 to %d", o.ContextTokens, 1<<24))
	}
	if o.StreamUnroll < 0 || o.StreamUnroll > kernels.GEMVMaxLoads {
		errs = append(errs, fmt.Errorf("stream unroll %d: want 0 (the target's) to %d", o.StreamUnroll, kernels.GEMVMaxLoads))
	}
	if o.Chunk == 0 {
		o.Chunk = 64
	}
	switch {
	case o.KVDType == "" && o.Target.GPU():
		o.KVDType = ir.BF16
	case o.KVDType == "":
		o.KVDType = ir.F32
	case o.KVDType == ir.BF16 && !o.Target.GPU():
		errs = append(errs, errors.New("a bf16 KV cache needs a GPU target; the cpu target keeps it in f32"))
	case o.KVDType != ir.F32 && o.KVDType != ir.BF16:
		errs = append(errs, fmt.Errorf("KV cache dtype %q: want f32 or bf16", o.KVDType))
	}
	if o.Tiling != TileDefault && o.Tiling != TileOn && o.Tiling != TileOff {
		errs = append(errs, fmt.Errorf("tiling %q: want %q, %q or empty (the target's default)", o.Tiling, TileOn, TileOff))
	}
	switch o.GEMMTile {
	case GEMMTileDefault, GEMMTileMMA:
	case GEMMTileWGMMA, GEMMTileWGMMAWS:
		if !wgmmaTargets[o.Target] {
			errs = append(errs, fmt.Errorf("gemm tile %q: target %s has no wgmma (sm_90 only)", o.GEMMTile, o.Target))
		}
	default:
		errs = append(errs, fmt.Errorf("gemm tile %q: want %q, %q, %q or empty (the target's default)", o.GEMMTile, GEMMTileWGMMA, GEMMTileWGMMAWS, GEMMTileMMA))
	}
	switch {
	case o.ATerms < 0 || o.ATerms > 3:
		errs = append(errs, fmt.Errorf("activation terms %d: want 1 to 3, or 0 for the target's", o.ATerms))
	case o.ATerms > 0 && !tileFits(o.Target, kernels.GEMMTileCols, o.ATerms):
		errs = append(errs, fmt.Errorf("activation terms %d: the %s tile's shared memory does not hold them (at most %d)", o.ATerms, o.Target, activationTerms(o.Target)))
	}
	if o.TCSums != TCSumsDefault && !slices.Contains(TCSumsModes, o.TCSums) {
		errs = append(errs, fmt.Errorf("tc sums %q: want one of %q or empty (the target's default)", o.TCSums, TCSumsModes))
	}
	if o.Fusion != FuseDefault && o.Fusion != FuseOn && o.Fusion != FuseOff {
		errs = append(errs, fmt.Errorf("fusion %q: want %q, %q or empty (the target's default)", o.Fusion, FuseOn, FuseOff))
	}
	if !slices.Contains([]string{"", "early", "late", "mid", "bulk", "off"}, o.GDNOutStage) {
		errs = append(errs, fmt.Errorf("gdn out stage %q: want early, late, mid, bulk, off or empty (early)", o.GDNOutStage))
	}
	if o.GDNColumnTile < -1 {
		errs = append(errs, fmt.Errorf("gdn column tile %d: want -1 (gdn_decode_step), 0 (the target's) or a positive column count", o.GDNColumnTile))
	}
	if o.PrefillAttention != PrefillDefault && !slices.Contains(PrefillAttentions, o.PrefillAttention) {
		errs = append(errs, fmt.Errorf("prefill attention %q: want one of %q or empty (the target's default)", o.PrefillAttention, PrefillAttentions))
	}
	if o.DecodeMMA != DecodeMMADefault && o.DecodeMMA != DecodeMMAOn && o.DecodeMMA != DecodeMMAOff && o.DecodeMMA != DecodeMMAFused {
		errs = append(errs, fmt.Errorf("decode mma %q: want %q, %q, %q or empty (the target's default)", o.DecodeMMA, DecodeMMAOn, DecodeMMAFused, DecodeMMAOff))
	}
	if (o.DecodeMMA == DecodeMMAOn || o.DecodeMMA == DecodeMMAFused) && o.DecodeStream {
		errs = append(errs, fmt.Errorf("decode mma %s and decode stream both choose the decode attention's split kernel: ask for one", o.DecodeMMA))
	}
	if o.PrefillGDN != PrefillGDNDefault && o.PrefillGDN != PrefillGDNWY && o.PrefillGDN != PrefillGDNTF32 && o.PrefillGDN != PrefillGDNChunked {
		errs = append(errs, fmt.Errorf("prefill gdn %q: want %q, %q, %q or empty (the target's default)", o.PrefillGDN, PrefillGDNWY, PrefillGDNTF32, PrefillGDNChunked))
	}
	if o.DecodeSplits < -1 || o.DecodeSplits > kernels.MaxSplits {
		errs = append(errs, fmt.Errorf("decode splits %d: want -1 (attention), 0 (the target's) or 1 to %d", o.DecodeSplits, kernels.MaxSplits))
	}
	if o.PersistentDecode && !o.Target.GPU() {
		errs = append(errs, fmt.Errorf("persistent decode needs a GPU target; target %s runs its launches one by one", o.Target))
	}
	if o.Chunk < 1 || o.Chunk > 1024 {
		errs = append(errs, fmt.Errorf("chunk %d: want 1 to 1024", o.Chunk))
	}
	if len(errs) == 0 && o.LogitsRows == 0 {
		o.LogitsRows = min(64, o.Buckets[len(o.Buckets)-1])
	}
	if len(errs) == 0 && (o.LogitsRows < 1 || o.LogitsRows > o.Buckets[len(o.Buckets)-1]) {
		errs = append(errs, fmt.Errorf("logits rows %d: want 1 to the largest bucket", o.LogitsRows))
	}
	return errors.Join(errs...)
}

// scheduler turns graphs into the plan's phases, sharing kernels and
// persistent buffers between phases.
type scheduler struct {
	p       *plan.Plan
	target  plan.Target
	kernels map[string]bool
	globals map[string]int // name → index in p.Buffers
}

func (s *scheduler) phase(kind plan.PhaseKind, g *ir.Graph) error {
	ph := plan.Phase{Name: g.Name, Kind: kind, Tokens: g.Tokens, Dyn: g.Dyn}
	ph.Inputs, ph.Outputs = plan.PhaseIO(g)
	for _, t := range g.Tensors {
		if !t.Role.Persistent() {
			continue
		}
		b := buffer(t)
		if d := t.Derive; d != nil {
			k := kernelFor(d.Op)
			if !s.kernels[k.Name] {
				s.kernels[k.Name] = true
				s.p.Kernels = append(s.p.Kernels, k)
			}
			b.Derive = &plan.Derive{Kernel: k.Name, From: d.From, Operand: d.Operand}
		}
		if i, ok := s.globals[t.Name]; ok {
			if old := s.p.Buffers[i]; old.Bytes != b.Bytes || old.DType != b.DType || old.Role != b.Role || (old.Derive == nil) != (b.Derive == nil) {
				return fmt.Errorf("phase %s: buffer %s differs from an earlier phase's", g.Name, t.Name)
			}
			continue
		}
		s.globals[t.Name] = len(s.p.Buffers)
		s.p.Buffers = append(s.p.Buffers, b)
	}
	s.p.ArenaBytes = max(s.p.ArenaBytes, placeArena(g))
	for _, t := range g.Tensors {
		if t.Role.Persistent() {
			continue
		}
		b := buffer(t)
		b.Offset = t.Placement.Offset
		b.Live = []int{t.Placement.First, t.Placement.Last}
		ph.Buffers = append(ph.Buffers, b)
	}
	for _, op := range g.Ops {
		l, err := s.launch(g, op)
		if err != nil {
			return err
		}
		ph.Launches = append(ph.Launches, l)
	}
	s.p.Phases = append(s.p.Phases, ph)
	return nil
}

// launch is op's launch, with its fallback's, listing their kernels.
func (s *scheduler) launch(g *ir.Graph, op *ir.Op) (plan.Launch, error) {
	k := kernelFor(op)
	if !s.kernels[k.Name] {
		s.kernels[k.Name] = true
		s.p.Kernels = append(s.p.Kernels, k)
	}
	l := plan.Launch{Kernel: k.Name, Layer: op.Layer, Rows: op.Rows}
	if s.target.GPU() {
		if op.Launch == nil {
			return l, fmt.Errorf("phase %s: %s launch was not configured", g.Name, op.Kind)
		}
		l.Grid, l.Block, l.SharedBytes = slices.Clone(op.Launch.Grid[:]), slices.Clone(op.Launch.Block[:]), op.Launch.SharedBytes
		if op.Launch.Cluster > 1 {
			l.Cluster = op.Launch.Cluster
		}
	}
	for _, o := range op.Operands {
		t := g.Tensors[o.Tensor]
		size := int64(t.DType.Size())
		l.Args = append(l.Args, plan.Arg{Buffer: t.Name, Offset: o.Offset * size, Dyn: o.Dyn, DynStride: o.DynStride * size})
	}
	for _, fb := range op.Fallback {
		fl, err := s.launch(g, fb)
		if err != nil {
			return l, err
		}
		l.Fallback = append(l.Fallback, fl)
	}
	return l, nil
}

// fillKernels lists a fill_uniform kernel for every dtype of the plan's
// weights (bf16 matrices, f32 small parameters). No phase launches them:
// runtime.SyntheticWeights does, once per weight buffer, so generated
// weights are made in device memory by the same code on every backend.
func (s *scheduler) fillKernels() {
	for _, dt := range []ir.DType{ir.BF16, ir.F32} {
		used := false
		for _, b := range s.p.Buffers {
			used = used || (b.Role == ir.Weight && b.DType == dt)
		}
		if !used {
			continue
		}
		k := kernelFor(&ir.Op{Kind: ir.FillUniform, Params: params(nil, "bf16", dt == ir.BF16), Rows: ir.SlotRef(ir.ParamN)})
		if !s.kernels[k.Name] {
			s.kernels[k.Name] = true
			s.p.Kernels = append(s.p.Kernels, k)
		}
	}
}

func buffer(t *ir.Tensor) plan.Buffer {
	b := plan.Buffer{Name: t.Name, Role: t.Role, DType: t.DType, Shape: t.Shape, Bytes: t.Bytes(), Tensor: t.Source}
	if t.SourceDType != "" && t.SourceDType != "F32" {
		b.SourceDType = t.SourceDType
	}
	for _, p := range t.Parts {
		b.Parts = append(b.Parts, plan.Part{Tensor: p.Source, Rows: p.Rows})
	}
	return b
}

// kernelFor names the kernel specialized for an op: its family and
// parameters (verified against the family's declaration), the name
// carrying a short hash of the parameters (ir.Params.Key) so equal
// specializations share one kernel across layers and phases.
func kernelFor(op *ir.Op) plan.Kernel {
	h := sha256.Sum256(append([]byte(op.Kind+":"), op.Params.Key()...))
	return plan.Kernel{Name: fmt.Sprintf("%s_%s", op.Kind, hex.EncodeToString(h[:4])), Family: string(op.Kind), Params: op.Params.Clone()}
}

// placeArena gives every activation its arena placement: intervals of
// first and last use, placed largest first at the lowest aligned offset that
// does not overlap a placed buffer whose interval intersects. It returns the
// arena's size.
func placeArena(g *ir.Graph) (arena int64) {
	first, last := map[int]int{}, map[int]int{}
	for i, op := range g.Ops {
		for _, o := range op.Operands {
			if _, ok := first[o.Tensor]; !ok {
				first[o.Tensor] = i
			}
			last[o.Tensor] = i
		}
	}
	var acts []*ir.Tensor
	for _, t := range g.Tensors {
		if !t.Role.Persistent() {
			acts = append(acts, t)
		}
	}
	sort.SliceStable(acts, func(i, j int) bool {
		if acts[i].Bytes() != acts[j].Bytes() {
			return acts[i].Bytes() > acts[j].Bytes()
		}
		return acts[i].ID < acts[j].ID
	})
	type slot struct {
		t          *ir.Tensor
		start, end int64
	}
	var placed []slot
	for _, t := range acts {
		size := (t.Bytes() + arenaAlign - 1) / arenaAlign * arenaAlign
		var busy []slot
		for _, s := range placed {
			if first[s.t.ID] <= last[t.ID] && first[t.ID] <= last[s.t.ID] {
				busy = append(busy, s)
			}
		}
		sort.Slice(busy, func(i, j int) bool { return busy[i].start < busy[j].start })
		off := int64(0)
		for _, s := range busy {
			if off+size <= s.start {
				break
			}
			off = max(off, s.end)
		}
		t.Placement = &ir.Placement{Offset: off, First: first[t.ID], Last: last[t.ID]}
		placed = append(placed, slot{t, off, off + size})
		arena = max(arena, off+size)
	}
	return arena
}
