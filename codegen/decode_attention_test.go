package codegen

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// splitKernel is an attention_decode_split kernel; block_heads is the
// planner's (kernels.BlockHeads).
func splitKernel(hq, hkv, d, capacity, splits, align int, bf16KV bool) plan.Kernel {
	kv := 0.0
	if bf16KV {
		kv = 1
	}
	return kern("attention_decode_split", map[string]float64{"q_heads": float64(hq), "kv_heads": float64(hkv),
		"head_dim": float64(d), "scale": 1 / math.Sqrt(float64(d)), "capacity": float64(capacity), "width": float64(hkv * d),
		"kv_bf16": kv, "splits": float64(splits), "split_align": float64(align), "block_heads": float64(kernels.BlockHeads(hq/hkv, d))})
}

// streamKernel is the attention_decode_stream kernel of the same shape.
func streamKernel(hq, hkv, d, capacity, splits, align int, bf16KV bool) plan.Kernel {
	k := splitKernel(hq, hkv, d, capacity, splits, align, bf16KV)
	k.Family, k.Name = "attention_decode_stream", "attention_decode_stream_case"
	return k
}

// sharp sets a kernel's scale to 2, so that its scores spread over tens.
func sharp(k plan.Kernel) plan.Kernel {
	k.Params = k.Params.Clone()
	k.Params.SetReal("scale", 2)
	return k
}

func combineGateKernel(hq, d, splits int) plan.Kernel {
	return kern("attention_combine_gate", map[string]float64{"q_heads": float64(hq), "head_dim": float64(d), "splits": float64(splits)})
}

// qkNormKernel is a qk_norm_rope_append kernel with the model's eps, theta
// and 1+w norms.
func qkNormKernel(hq, hkv, d, rot, capacity int, bf16KV bool) plan.Kernel {
	kv := 0.0
	if bf16KV {
		kv = 1
	}
	return kern("qk_norm_rope_append", map[string]float64{"q_heads": float64(hq), "kv_heads": float64(hkv), "head_dim": float64(d),
		"rot_dim": float64(rot), "capacity": float64(capacity), "width": float64(hkv * d), "eps": 1e-6, "theta": 1e7,
		"one_plus": 1, "kv_bf16": kv})
}

func combineKernel(hq, d, splits int) plan.Kernel {
	return kern("attention_combine", map[string]float64{"q_heads": float64(hq), "head_dim": float64(d), "splits": float64(splits)})
}

// decodeAttentionCases are the correctness cases of the split pair: the
// real model's heads (16 query, 2 KV, 256 dims) with gfx1151's 40 and
// sm_90's 132 splits, f32 and bf16 KV, pos 0, below the splits and the alignment, mid-context,
// at the capacity's last position; the tiny fixtures' heads (4, 2, 32:
// scalar loads); a group of 3 heads (padded lane slots), one head per KV
// head of 128 dims, a 512-dim head (one position per warp step); several
// rows; combines of the real size, the tiny size and a 64-dim head (scalar
// path), one split.
func decodeAttentionCases() []gpuCase {
	var cs []gpuCase
	for _, bf := range []bool{false, true} {
		sfx := map[bool]string{false: "", true: "_bf16"}[bf]
		cs = append(cs,
			gpuCase{"dsplit_pos0" + sfx, splitKernel(16, 2, 256, 300, 40, 32, bf), 1, 0},
			gpuCase{"dsplit_short" + sfx, splitKernel(16, 2, 256, 300, 40, 32, bf), 1, 20},
			gpuCase{"dsplit_mid" + sfx, splitKernel(16, 2, 256, 300, 7, 32, bf), 1, 150},
			gpuCase{"dsplit_full" + sfx, splitKernel(16, 2, 256, 300, 132, 1, bf), 1, 299},
			gpuCase{"dsplit_rows" + sfx, splitKernel(16, 2, 256, 300, 5, 4, bf), 3, 200},
			gpuCase{"dsplit_tiny" + sfx, splitKernel(4, 2, 32, 96, 132, 32, bf), 1, 70},
			gpuCase{"dsplit_tiny_rows" + sfx, splitKernel(4, 2, 32, 96, 3, 1, bf), 2, 93},
			gpuCase{"dsplit_group3" + sfx, splitKernel(6, 2, 64, 80, 9, 1, bf), 2, 41},
			gpuCase{"dsplit_mha" + sfx, splitKernel(2, 2, 128, 64, 4, 8, bf), 1, 63},
			gpuCase{"dsplit_wide" + sfx, splitKernel(4, 1, 512, 50, 3, 1, bf), 1, 37},
			// The streamed split: the same edges, sm_90's 66 splits, a context
			// longer than a ring (several steps per warp), the tiny fixtures.
			gpuCase{"dstream_pos0" + sfx, streamKernel(16, 2, 256, 300, 66, 32, bf), 1, 0},
			gpuCase{"dstream_short" + sfx, streamKernel(16, 2, 256, 300, 66, 32, bf), 1, 20},
			gpuCase{"dstream_mid" + sfx, streamKernel(16, 2, 256, 300, 7, 32, bf), 1, 150},
			gpuCase{"dstream_full" + sfx, streamKernel(16, 2, 256, 300, 132, 1, bf), 1, 299},
			gpuCase{"dstream_long" + sfx, streamKernel(16, 2, 256, 2100, 3, 32, bf), 1, 2099},
			gpuCase{"dstream_rows" + sfx, streamKernel(16, 2, 256, 300, 5, 4, bf), 3, 200},
			gpuCase{"dstream_tiny" + sfx, streamKernel(4, 2, 32, 96, 66, 32, bf), 1, 70},
			gpuCase{"dstream_tiny_rows" + sfx, streamKernel(4, 2, 32, 96, 3, 1, bf), 2, 93},
			gpuCase{"dstream_group3" + sfx, streamKernel(6, 2, 64, 80, 9, 1, bf), 2, 41},
			gpuCase{"dstream_mha" + sfx, streamKernel(2, 2, 128, 64, 4, 8, bf), 1, 63},
			gpuCase{"dstream_wide" + sfx, streamKernel(4, 1, 512, 50, 3, 1, bf), 1, 37},
			// Scores of spread ±30 (scale 2): the running max passes the
			// reference by more than the lazy rescale's margin at many steps.
			gpuCase{"dstream_sharp" + sfx, sharp(streamKernel(16, 2, 256, 2100, 3, 32, bf)), 1, 2099},
			gpuCase{"dstream_sharp_tiny" + sfx, sharp(streamKernel(4, 2, 32, 1200, 2, 1, bf)), 2, 1197},
			// q/k norm + RoPE + KV append: the real heads (first and a far
			// position, prefill rows), the tiny fixtures' (rotary 8 of 32),
			// full rotary on odd head counts, the last cache position.
			gpuCase{"qknorm_pos0" + sfx, qkNormKernel(16, 2, 256, 64, 300, bf), 1, 0},
			gpuCase{"qknorm_far" + sfx, qkNormKernel(16, 2, 256, 64, 1200, bf), 1, 1199},
			gpuCase{"qknorm_rows" + sfx, qkNormKernel(16, 2, 256, 64, 300, bf), 3, 150},
			gpuCase{"qknorm_tiny" + sfx, qkNormKernel(4, 2, 32, 8, 96, bf), 2, 70},
			gpuCase{"qknorm_odd" + sfx, qkNormKernel(3, 1, 96, 96, 40, bf), 2, 37},
		)
	}
	return append(cs,
		gpuCase{"dcombine", combineKernel(16, 256, 132), 1, 0},
		gpuCase{"dcombine_rows", combineKernel(16, 256, 7), 3, 0},
		gpuCase{"dcombine_tiny", combineKernel(4, 32, 132), 2, 0},
		gpuCase{"dcombine_d64", combineKernel(6, 64, 9), 2, 0},
		gpuCase{"dcombine_one", combineKernel(2, 128, 1), 1, 0},
		gpuCase{"dcombgate", combineGateKernel(16, 256, 66), 1, 0},
		gpuCase{"dcombgate_rows", combineGateKernel(16, 256, 7), 3, 0},
		gpuCase{"dcombgate_tiny", combineGateKernel(4, 32, 66), 2, 0},
		gpuCase{"dcombgate_d64", combineGateKernel(6, 64, 9), 2, 0},
	)
}

// fillPartials makes partial records like the split kernel's: m a score
// scale, l ≥ 1, accumulators of l's size; every third split neutral (m = l
// = 0) with a NaN accumulator, which the combine must not read.
func fillPartials(rng *rand.Rand, partial []float32, d, splits int) {
	rec := kernels.PartialStride(d)
	for r := 0; r+rec <= len(partial); r += rec {
		s := (r / rec) % splits
		x := partial[r:][:rec]
		if s%3 == 2 {
			for i := range d {
				x[i] = float32(math.NaN())
			}
			x[d], x[d+1] = 0, 0
			continue
		}
		l := 1 + rng.Float64()*30
		for i := range d {
			x[i] = float32(rng.NormFloat64() * l * 0.3)
		}
		x[d], x[d+1] = float32(rng.NormFloat64()*3), float32(l)
	}
}

// decodeSpeed is one speed case at the real model's heads (16 query, 2 KV,
// 256 dims): a split kernel (family) at a context of ctx positions (pos =
// ctx − 1) with splits splits, or (combine) the combine of its partials.
type decodeSpeed struct {
	name   string
	family string // attention_decode_split, attention_decode_stream, attention_combine_gate, qk_norm_rope_append
	ctx    int
	bf16   bool
	splits int
	reps   int
}

// speedPeriod is the positions a speed case's KV files hold: the caches on
// the device repeat them (caseArg.Repeat), so a 128K context travels as 1 MB
// per cache while the kernel reads all 128 MB.
const speedPeriod = 1024

// decodeSpeeds are the split pair's speed cases: the streamed split at 1K,
// 8K, 32K and 128K with bf16 KV (sm_90's 66 splits) and 32K with f32, at
// 8K, 32K and 128K with 132 splits too (to choose the count), the old split (132 splits) at 32K and 128K beside it, the fused combine +
// gate of 66 splits and the fused q/k norm + RoPE + append at decode.
var decodeSpeeds = []decodeSpeed{
	{"dstream_speed_1k_bf16", "attention_decode_stream", 1024, true, 66, 200},
	{"dstream_speed_8k_bf16", "attention_decode_stream", 8192, true, 66, 200},
	{"dstream_speed_32k_bf16", "attention_decode_stream", 32768, true, 66, 100},
	{"dstream_speed_128k_bf16", "attention_decode_stream", 131072, true, 66, 50},
	{"dstream_speed_32k_f32", "attention_decode_stream", 32768, false, 66, 100},
	// Two blocks per SM's worth of splits (two waves on the H200), to
	// choose the split count from the measurement.
	{"dstream_speed_8k_bf16_s132", "attention_decode_stream", 8192, true, 132, 200},
	{"dstream_speed_32k_bf16_s132", "attention_decode_stream", 32768, true, 132, 100},
	{"dstream_speed_128k_bf16_s132", "attention_decode_stream", 131072, true, 132, 50},
	{"dsplit_speed_32k_bf16", "attention_decode_split", 32768, true, 132, 100},
	{"dsplit_speed_128k_bf16", "attention_decode_split", 131072, true, 132, 50},
	{"dcombgate_speed", "attention_combine_gate", 32768, false, 66, 200},
	{"qknorm_speed_bf16", "qk_norm_rope_append", 32768, true, 0, 200},
}

// TestWriteGPUCasesDecodeAttention writes the split pair's correctness
// cases and, with -gpucases, its speed cases (decodeSpeeds). A speed case's
// bytes are what one launch must move: the split reads K and V of every
// position (2 × ctx × kv_heads × head_dim × element size) and q, and writes
// the records of the splits that got positions; the combine reads those
// records and the gates and writes out; the q/k norm reads qg, k, v and
// writes q and one cache row.
func TestWriteGPUCasesDecodeAttention(t *testing.T) {
	out := *gpuCases
	if out == "" {
		out = t.TempDir()
	}
	for i, c := range decodeAttentionCases() {
		writeCase(t, filepath.Join(out, c.name), c, uint64(1000+i))
	}
	if *gpuCases == "" {
		return
	}
	const hq, hkv, d = 16, 2, 256
	for i, sp := range decodeSpeeds {
		es := 4
		if sp.bf16 {
			es = 2
		}
		active := 0
		for s := range sp.splits {
			if lo, hi := kernels.SplitRange(sp.ctx, sp.splits, 32, s); lo < hi {
				active++
			}
		}
		records := int64(hq * active * kernels.PartialStride(d) * 4)
		kv := 2 * int64(sp.ctx) * hkv * d * int64(es)
		var c gpuCase
		var bytes int64
		var note string
		period := speedPeriod
		switch sp.family {
		case "attention_combine_gate":
			c = gpuCase{sp.name, combineGateKernel(hq, d, sp.splits), 1, 0}
			bytes = records + 3*hq*d*4
			note = fmt.Sprintf("combine + gate of %d splits' records (in L2 right after the split in a real step)", sp.splits)
			period = 0
		case "qk_norm_rope_append":
			c = gpuCase{sp.name, qkNormKernel(hq, hkv, d, 64, 64, sp.bf16), 1, 63}
			bytes = (2*hq*d+2*hkv*d+hq*d)*4 + 2*hkv*d*int64(es)
			note = "q/k norm + RoPE + KV append of one decode row: latency, not bandwidth (18 blocks)"
			period = 0
		default:
			k := splitKernel(hq, hkv, d, sp.ctx, sp.splits, 32, sp.bf16)
			k.Family, k.Name = sp.family, sp.family+"_case"
			c = gpuCase{sp.name, k, 1, sp.ctx - 1}
			bytes = kv + hq*d*4 + records
			note = fmt.Sprintf("%s of a %d-position context, %s KV, %d splits (the caches repeat every %d positions)",
				sp.family, sp.ctx, map[bool]string{false: "f32", true: "bf16"}[sp.bf16], sp.splits, speedPeriod)
			if kv < 50<<20 {
				note += fmt.Sprintf("; its %d MB of KV fit in the 50 MB L2, so repeated launches measure L2, not HBM", kv>>20)
			}
		}
		dir := filepath.Join(out, sp.name)
		writeCaseTiled(t, dir, c, uint64(2000+i), period)
		path := filepath.Join(dir, "meta.json")
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var meta caseMeta
		if err := json.Unmarshal(b, &meta); err != nil {
			t.Fatal(err)
		}
		meta.TimeReps, meta.Bytes, meta.Note = sp.reps, bytes, note
		b, _ = json.MarshalIndent(meta, "", " ")
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestCompileDecodeAttention compiles every split-pair kernel of the cases
// for gfx1151 (the frozen plan holds only the real model's f32 ones) and
// to PTX for sm_90: no scratch, VGPRs and LDS within budget, no warnings.
func TestCompileDecodeAttention(t *testing.T) {
	c := clang(t)
	seen := map[string]bool{}
	var hip, cuda []hipcc.Source
	for i, gc := range decodeAttentionCases() {
		k := gc.k
		k.Name = fmt.Sprintf("%s_%d", k.Family, i)
		for _, target := range plan.GPUTargets() {
			s, err := Render(target, k)
			if err != nil {
				t.Fatal(err)
			}
			code := strings.ReplaceAll(s.Code, k.Name, "k")
			if seen[string(target)+code] {
				continue
			}
			seen[string(target)+code] = true
			if target == plan.GFX1151 {
				hip = append(hip, hipcc.Source{Name: k.Name, Code: s.Code})
			} else {
				cuda = append(cuda, hipcc.Source{Name: k.Name, Code: s.Code})
			}
		}
	}
	results, err := c.Compile(context.Background(), hipcc.GFX1151, hip, hipcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range results {
		res := r.Resources
		t.Logf("%-28s vgpr %3d lds %6d scratch %d", r.Name, res.VGPRs, res.LDSBytes, res.ScratchBytes)
		if why := res.Spills(); why != "" || res.ScratchBytes != 0 || res.VGPRs == 0 || res.VGPRs > maxVGPRs || res.LDSBytes > maxLDS {
			t.Errorf("%s: %+v %s", r.Name, res, why)
		}
		if strings.Contains(r.Log, "warning") {
			t.Errorf("%s: compiler warnings:\n%s", r.Name, r.Log)
		}
	}
	ptx, err := c.SyntaxCheckCUDA(context.Background(), cuda, hipcc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range ptx {
		if !strings.Contains(string(r.Object), ".entry "+r.Name) || strings.Contains(r.Log, "warning") {
			t.Errorf("%s: PTX without its entry or with warnings:\n%s", r.Name, r.Log)
		}
	}
	if len(results) == 0 || len(ptx) == 0 {
		t.Fatal("nothing compiled")
	}
}
