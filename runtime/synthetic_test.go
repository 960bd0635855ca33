package runtime

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/plans"
)

// fillRecorder is the CPU backend with the calls a GPU backend would see
// counted: synthetic weights must be made by fill launches alone, each
// after the parameter block holding its fill slots.
type fillRecorder struct {
	*CPU
	params                    Params
	target                    plan.Target
	uploads, launches, syncs  int
	launchedSinceSync, errors []string
}

func (r *fillRecorder) Upload(dst Ref, src []byte) error {
	r.uploads++
	return r.CPU.Upload(dst, src)
}

func (r *fillRecorder) SetParams(p *Params) error {
	r.params = *p
	return nil
}

func (r *fillRecorder) Launch(k *plan.Kernel, l *plan.Launch, args []Ref, rows int, p *Params) error {
	r.launches++
	r.launchedSinceSync = append(r.launchedSinceSync, k.Name)
	if ir.Kind(k.Family) != ir.FillUniform {
		r.errors = append(r.errors, "launch of "+k.Name)
	}
	for _, s := range kernels.Families[ir.FillUniform].Slots {
		if p[s] != r.params[s] {
			r.errors = append(r.errors, fmt.Sprintf("%s: slot %s = %d, parameter block %d", k.Name, s, p[s], r.params[s]))
		}
	}
	if r.target.GPU() {
		want := kernels.Families[ir.FillUniform].Launch(k.Params, rows, r.target.Launch())
		if !slices.Equal(l.Grid, want.Grid[:]) || !slices.Equal(l.Block, want.Block[:]) || want.Grid[0] != min(16384, (rows+255)/256) {
			r.errors = append(r.errors, fmt.Sprintf("%s: grid %v block %v for %d elements", k.Name, l.Grid, l.Block, rows))
		}
	} else if l.Grid != nil || l.Block != nil {
		r.errors = append(r.errors, fmt.Sprintf("%s: grid %v block %v on the cpu", k.Name, l.Grid, l.Block))
	}
	return r.CPU.Launch(k, l, args, rows, p)
}

func (r *fillRecorder) Sync() error {
	r.syncs++
	r.launchedSinceSync = nil
	return nil
}

// tinyPlan plans a model with every kind of weight at toy widths.
func tinyPlan(t *testing.T) *plan.Plan { return tinyPlanFusion(t, planner.FuseDefault) }

// tinyPlanFusion is tinyPlan with fusion f (on: concatenated weights).
func tinyPlanFusion(t *testing.T, f planner.Fusion) *plan.Plan {
	t.Helper()
	c, err := arch.ParseConfig([]byte(`{"model_type":"qwen3_5_moe","text_config":{"model_type":"qwen3_5_moe_text",
	"hidden_size":64,"num_hidden_layers":4,"vocab_size":300,"num_attention_heads":2,"num_key_value_heads":1,
	"head_dim":32,"linear_num_key_heads":1,"linear_num_value_heads":2,"linear_key_head_dim":16,"linear_value_head_dim":16,
	"linear_conv_kernel_dim":4,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":32,
	"shared_expert_intermediate_size":32,"rope_parameters":{"rope_theta":10000,"partial_rotary_factor":0.5}}}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(planner.FromConfig("tiny", c), planner.Options{Target: "cpu", Buckets: []int{4}, ContextTokens: 16, Fusion: f})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// synthesize binds synthetic weights of seed to a bare engine over rec and
// returns each weight buffer's bytes by name.
func synthesize(t *testing.T, p *plan.Plan, rec *fillRecorder, seed uint64) map[string][]byte {
	t.Helper()
	e := &Engine{plan: p, be: rec, globals: map[string]Mem{}}
	if err := SyntheticWeights(seed).bind(e); err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for name, m := range e.globals {
		out[name] = m.(*hostMem).b
	}
	return out
}

// TestSyntheticWeightsFill: every weight is made on the backend by one
// fill launch per checkpoint tensor it holds (no uploads, one Sync at the
// end) and holds exactly the pure Go generator's values, each tensor under
// its own key (a concatenated weight's parts hold what the unfused tensors
// hold); a seed reproduces, another seed differs, and the values have
// their distribution's range and moments.
func TestSyntheticWeightsFill(t *testing.T) {
	for _, f := range []planner.Fusion{planner.FuseOff, planner.FuseOn} {
		checkSyntheticFill(t, tinyPlanFusion(t, f), f == planner.FuseOn)
	}
}

func checkSyntheticFill(t *testing.T, p *plan.Plan, concatenated bool) {
	rec := &fillRecorder{CPU: NewCPU()}
	w1 := synthesize(t, p, rec, 1)
	weights, sources, parts := 0, 0, 0
	for _, b := range p.Buffers {
		if b.Role == ir.Weight && b.Derive == nil {
			weights++
			sources += len(b.Sources())
			parts += len(b.Parts)
		}
	}
	if concatenated != (parts > 0) {
		t.Fatalf("fusion %v: %d parts of concatenated weights", concatenated, parts)
	}
	if rec.uploads != 0 || rec.syncs != 1 || rec.launches != sources || len(rec.launchedSinceSync) != 0 || len(rec.errors) != 0 {
		t.Fatalf("%d uploads, %d syncs, %d launches for %d checkpoint tensors, unsynced %v, errors %v",
			rec.uploads, rec.syncs, rec.launches, sources, rec.launchedSinceSync, rec.errors)
	}
	if len(w1) != weights {
		t.Fatalf("%d weights bound, plan has %d", len(w1), weights)
	}
	w1b := synthesize(t, p, &fillRecorder{CPU: NewCPU()}, 1)
	w2 := synthesize(t, p, &fillRecorder{CPU: NewCPU()}, 2)
	for _, b := range p.Buffers {
		if b.Role != ir.Weight || b.Derive != nil {
			continue
		}
		all := w1[b.Name]
		if int64(len(all)) != b.Bytes {
			t.Fatalf("%s: %d bytes, want %d", b.Name, len(all), b.Bytes)
		}
		rowBytes := b.Bytes / b.Shape[0]
		for _, src := range b.Sources() {
			name := src.Tensor
			got := all[src.Rows[0]*rowBytes : src.Rows[1]*rowBytes]
			shape := append([]int64{src.Rows[1] - src.Rows[0]}, b.Shape[1:]...)
			lo, hi := synthRange(name, shape)
			lo32, scale32 := float32(lo), float32(hi-lo)
			key := kernels.FillKey(name)
			vals := make([]float64, 0, len(got)/2)
			for i := int64(0); i < int64(len(got)/b.DType.Size()); i++ {
				want := kernels.FillUniform(1, key, i, lo32, scale32)
				var v float32
				if b.DType == ir.BF16 {
					h := binary.LittleEndian.Uint16(got[2*i:])
					if h != bf16.FromFloat32(want) {
						t.Fatalf("%s[%d] = %#04x, want %#04x", name, i, h, bf16.FromFloat32(want))
					}
					v = bf16.ToFloat32(h)
				} else {
					if v = math.Float32frombits(binary.LittleEndian.Uint32(got[4*i:])); v != want {
						t.Fatalf("%s[%d] = %g, want %g", name, i, v, want)
					}
				}
				vals = append(vals, float64(v))
			}
			checkUniform(t, name, vals, lo, hi)
		}
		if !bytes.Equal(all, w1b[b.Name]) {
			t.Errorf("%s: the same seed gave other values", b.Name)
		}
		same := 0
		for i := 0; i < len(all); i += 4 {
			if bytes.Equal(all[i:i+4], w2[b.Name][i:i+4]) {
				same++
			}
		}
		if same > len(all)/4/8 {
			t.Errorf("%s: %d of %d words equal under another seed", b.Name, same, len(all)/4)
		}
	}
}

// checkUniform holds values to uniform(lo, hi): inside the bounds (plus
// BF16 rounding), mean and variance within generous bounds of the
// distribution's.
func checkUniform(t *testing.T, name string, v []float64, lo, hi float64) {
	t.Helper()
	slack := max(math.Abs(lo), math.Abs(hi)) / 128 // a BF16 rounding step
	var sum, sq float64
	for i, x := range v {
		if x < lo-slack || x > hi+slack {
			t.Fatalf("%s[%d] = %g outside [%g, %g]", name, i, x, lo, hi)
		}
		sum += x
	}
	n := float64(len(v))
	mean := sum / n
	for _, x := range v {
		sq += (x - mean) * (x - mean)
	}
	std := (hi - lo) / math.Sqrt(12)
	if math.Abs(mean-(lo+hi)/2) > 6*std/math.Sqrt(n)+slack {
		t.Errorf("%s: mean %g of %d values, want %g", name, mean, len(v), (lo+hi)/2)
	}
	if n >= 64 {
		if r := math.Sqrt(sq/n) / std; r < 0.7 || r > 1.3 {
			t.Errorf("%s: std %g of %d values, want %g", name, math.Sqrt(sq/n), len(v), std)
		}
	}
}

// TestSyntheticRanges checks the bounds of the real model's weights in the
// frozen GPU plan: one fill kernel per weight dtype, every weight's count
// within a launch's rows, the documented distributions.
func TestSyntheticRanges(t *testing.T) {
	raw, err := plans.Frozen("sm_90")
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	fills := map[bool]bool{}
	for _, k := range p.Kernels {
		if ir.Kind(k.Family) == ir.FillUniform {
			fills[k.Params.Flag("bf16")] = true
		}
	}
	if !fills[false] || !fills[true] {
		t.Fatalf("the sm_90 plan lacks a fill kernel: %v", fills)
	}
	seen := map[string]bool{}
	for _, b := range p.Buffers {
		if b.Role != ir.Weight {
			continue
		}
		count := b.Bytes / int64(b.DType.Size())
		if count > math.MaxInt32 {
			t.Errorf("%s: %d elements", b.Name, count)
		}
		if g := kernels.Families[ir.FillUniform].Launch(ir.Params{}, int(count), p.Target.Launch()).Grid; g[0] < 1 || g[0] > kernels.FillMaxBlocks {
			t.Errorf("%s: grid %v", b.Name, g)
		}
		lo, hi := synthRange(b.Tensor, b.Shape)
		if !(lo < hi) || math.IsInf(hi-lo, 0) || float32(hi-lo) <= 0 {
			t.Errorf("%s: range [%g, %g]", b.Name, lo, hi)
		}
		switch {
		case strings.HasSuffix(b.Tensor, "A_log"):
			seen["A_log"] = true
			if lo != 0 || math.Abs(math.Exp(hi)-16) > 1e-9 {
				t.Errorf("%s: A_log in [%g, %g], want [0, ln 16]", b.Name, lo, hi)
			}
		case strings.HasSuffix(b.Tensor, "embed_tokens.weight"):
			seen["embed"] = true
			if std := (hi - lo) / math.Sqrt(12); math.Abs(std-1) > 1e-12 {
				t.Errorf("%s: std %g, want 1", b.Name, std)
			}
		case strings.HasSuffix(b.Tensor, "experts.gate_up_proj"):
			seen["experts"] = true
			if std, want := (hi-lo)/math.Sqrt(12), 1/math.Sqrt(float64(b.Shape[len(b.Shape)-1])); math.Abs(std-want) > 1e-12 {
				t.Errorf("%s: std %g, want 1/sqrt(fan_in) = %g", b.Name, std, want)
			}
		}
	}
	if len(seen) != 3 {
		t.Errorf("weights not found in the plan: saw %v", seen)
	}
}
