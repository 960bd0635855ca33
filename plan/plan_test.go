package plan_test

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
)

func tinyPlan(t testing.TB) *plan.Plan { return tinyPlanFusion(t, planner.FuseDefault) }

// tinyPlanFusion is tinyPlan with fusion f (on: attention's q, k and v
// concatenated into one weight of parts).
func tinyPlanFusion(t testing.TB, f planner.Fusion) *plan.Plan {
	t.Helper()
	p, err := planner.Plan(planner.FromConfig("tiny", tinyConfig(t)), planner.Options{Target: "cpu", Buckets: []int{4, 8}, ContextTokens: 32, Fusion: f})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tinyConfig is a model of every layer kind at the smallest widths.
func tinyConfig(t testing.TB) *arch.Config {
	t.Helper()
	c, err := arch.ParseConfig([]byte(`{"hidden_size":16,"num_hidden_layers":4,"vocab_size":40,"num_attention_heads":2,
	"num_key_value_heads":1,"head_dim":8,"linear_num_key_heads":1,"linear_num_value_heads":2,"linear_key_head_dim":4,
	"linear_value_head_dim":4,"linear_conv_kernel_dim":4,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":8,
	"shared_expert_intermediate_size":8,"partial_rotary_factor":0.5}`))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// weights are the indices of the plan's weight buffers.
func weights(p *plan.Plan) []int {
	var out []int
	for i, b := range p.Buffers {
		if b.Role == ir.Weight {
			out = append(out, i)
		}
	}
	return out
}

// TestValidateRejects corrupts a valid plan in one place at a time.
func TestValidateRejects(t *testing.T) {
	tests := []struct {
		name   string
		modify func(p *plan.Plan)
		want   string
	}{
		{"format", func(p *plan.Plan) { p.Format = "x" }, `format "x"`},
		{"target", func(p *plan.Plan) { p.Target = "tpu" }, `target "tpu"`},
		{"bytes", func(p *plan.Plan) { p.Buffers[0].Bytes++ }, "bytes, shape"},
		{"dtype", func(p *plan.Plan) { p.Buffers[0].DType = "f8" }, `unknown dtype "f8"`},
		{"unknown kernel", func(p *plan.Plan) { p.Phases[0].Launches[0].Kernel = "nope" }, `unknown kernel "nope"`},
		{"unknown buffer", func(p *plan.Plan) { p.Phases[0].Launches[0].Args[0].Buffer = "nope" }, `unknown buffer "nope"`},
		{"offset past the end", func(p *plan.Plan) { p.Phases[0].Launches[1].Args[1].Offset = 1 << 20 }, "reaches element"},
		{"misaligned offset", func(p *plan.Plan) { p.Phases[0].Launches[1].Args[1].Offset = 3 }, "not a multiple"},
		{"arena overflow", func(p *plan.Plan) { p.ArenaBytes = 8 }, "outside the arena"},
		{"missing parameter", func(p *plan.Plan) {
			p.Kernels[0].Params = ir.Params{}
		}, "missing"},
		{"undeclared parameter", func(p *plan.Plan) { p.Kernels[0].Params.SetInt("bogus", 1) }, "parameter bogus is not a parameter of family"},
		{"unknown family", func(p *plan.Plan) { p.Kernels[0].Family = "conv3d" }, `unknown kernel family "conv3d"`},
		{"phase kind", func(p *plan.Plan) { p.Phases[0].Kind = "train" }, `kind "train" is not one of`},
		{"undeclared input", func(p *plan.Plan) { p.Phases[0].Inputs = nil }, "declares inputs [] and outputs"},
		{"extra output", func(p *plan.Plan) {
			p.Phases[0].Outputs = append(p.Phases[0].Outputs, plan.PortSampled)
		}, "its launches read [tokens]"},
		{"overlapping live buffers", func(p *plan.Plan) {
			b := p.Phases[0].Buffers
			b[1].Offset, b[1].Live = b[0].Offset, b[0].Live
		}, "live together and overlap"},
		{"use outside the live range", func(p *plan.Plan) { p.Phases[0].Buffers[0].Live = []int{5, 6} }, "outside its live range"},
		{"too few args", func(p *plan.Plan) { l := &p.Phases[0].Launches[0]; l.Args = l.Args[:1] }, "operands, want"},
		{"tensor loaded twice", func(p *plan.Plan) {
			w := weights(p)
			p.Buffers[w[1]].Tensor = p.Buffers[w[0]].Tensor
		}, "is already loaded by buffer"},
		{"tensor loaded again as a part", func(p *plan.Plan) {
			w := weights(p)
			b := &p.Buffers[w[1]]
			b.Parts = []plan.Part{{Tensor: p.Buffers[w[0]].Tensor, Rows: [2]int64{0, b.Shape[0]}}}
			b.Tensor = ""
		}, "is already loaded by buffer"},
		{"parts beside a tensor", func(p *plan.Plan) {
			b := &p.Buffers[weights(p)[0]]
			b.Parts = []plan.Part{{Tensor: "other", Rows: [2]int64{0, b.Shape[0]}}}
		}, "parts belong to a weight without a tensor"},
		{"parts short of the rows", func(p *plan.Plan) {
			b := &p.Buffers[weights(p)[0]]
			b.Parts = []plan.Part{{Tensor: b.Tensor, Rows: [2]int64{0, b.Shape[0] - 1}}}
			b.Tensor = ""
		}, "parts cover"},
	}
	for _, tt := range tests {
		p := tinyPlan(t)
		tt.modify(p)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
}

func TestDecodeRejectsUnknownFields(t *testing.T) {
	b := tinyPlan(t).Bytes()
	b = bytes.Replace(b, []byte(`"format"`), []byte(`"extra": 1, "format"`), 1)
	if _, err := plan.Decode(bytes.NewReader(b)); err == nil || !strings.Contains(err.Error(), "unknown field") {
		t.Errorf("error %v, want unknown field", err)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(tinyPlan(f).Bytes())
	fused := tinyPlanFusion(f, planner.FuseOn)
	if !bytes.Contains(fused.Bytes(), []byte(`"parts"`)) {
		f.Fatal("the fused tiny plan has no concatenated weight")
	}
	f.Add(fused.Bytes())
	f.Add([]byte(`{"format":"aimac-plan/3"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := plan.Decode(bytes.NewReader(data))
		if err != nil {
			return
		}
		// A plan that validates re-encodes to a plan that validates.
		if _, err := plan.Decode(bytes.NewReader(p.Bytes())); err != nil {
			t.Fatalf("re-encoded plan fails: %v", err)
		}
	})
}

// TestDecodeOlderFormat checks that a plan of an earlier format is refused
// by its format tag, with what to do, not by the first field it lacks.
func TestDecodeOlderFormat(t *testing.T) {
	for _, format := range []string{"aimac-plan/1", "aimac-plan/2"} {
		old := `{"format":"` + format + `","target":"cpu","kernels":[{"name":"add_1","family":"add","params":{"width":4}}]}`
		_, err := plan.Decode(strings.NewReader(old))
		want := `plan format "` + format + `", this program reads "aimac-plan/3": plan the model again with this aimac`
		if err == nil || err.Error() != want {
			t.Errorf("Decode of an older plan: %v, want %s", err, want)
		}
	}
}

// TestTakeFallbacks: with fusion and the router rule on, the tiny plan's
// decode step has launches with a fallback (the fused router); taking it splices the
// fallback's launches in its place, renumbers the live ranges, and the
// plan still validates; p itself keeps its launches; taking none shares
// the phases.
func TestTakeFallbacks(t *testing.T) {
	c, err := arch.ParseConfig([]byte(`{"hidden_size":16,"num_hidden_layers":4,"vocab_size":40,"num_attention_heads":2,
	"num_key_value_heads":1,"head_dim":8,"linear_num_key_heads":1,"linear_num_value_heads":2,"linear_key_head_dim":4,
	"linear_value_head_dim":4,"linear_conv_kernel_dim":4,"num_experts":4,"num_experts_per_tok":2,"moe_intermediate_size":8,
	"shared_expert_intermediate_size":8,"partial_rotary_factor":0.5}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(planner.FromConfig("tiny", c), planner.Options{Target: "cpu", Buckets: []int{4, 8}, ContextTokens: 32,
		Fusion: planner.FuseOn, MoERouter: true})
	if err != nil {
		t.Fatal(err)
	}
	before := p.Bytes()
	var with, fallbacks int
	for _, ph := range p.Phases {
		for _, l := range ph.Launches {
			if len(l.Fallback) > 0 {
				with++
				fallbacks += len(l.Fallback)
			}
		}
	}
	if with == 0 {
		t.Fatal("no launch with a fallback in the fused tiny plan")
	}
	q := p.TakeFallbacks(func(*plan.Phase, *plan.Launch) bool { return true })
	var n, left int
	for pi, ph := range q.Phases {
		n += len(ph.Launches) - len(p.Phases[pi].Launches)
		for _, l := range ph.Launches {
			left += len(l.Fallback)
		}
	}
	if n != fallbacks-with || left != 0 {
		t.Errorf("taking every fallback added %d launches and left %d fallbacks, want %d and 0", n, left, fallbacks-with)
	}
	if err := q.Validate(); err != nil {
		t.Errorf("the plan with its fallbacks taken does not validate: %v", err)
	}
	if !bytes.Equal(before, p.Bytes()) {
		t.Error("TakeFallbacks changed the plan it copied")
	}
	same := p.TakeFallbacks(func(*plan.Phase, *plan.Launch) bool { return false })
	if !bytes.Equal(before, same.Bytes()) || &same.Phases[0].Launches[0] != &p.Phases[0].Launches[0] {
		t.Error("taking no fallback changed the plan or copied its launches")
	}
}

// persistentPlan is the tiny model's sm_90 plan with persistent runs
// (aimac plan --persistent-decode), and the index of its decode phase.
func persistentPlan(t testing.TB) (*plan.Plan, int) {
	t.Helper()
	c := tinyConfig(t)
	p, err := planner.Plan(planner.FromConfig("tiny", c), planner.Options{Target: plan.SM90, Buckets: []int{4}, ContextTokens: 32, PersistentDecode: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, ph := range p.Phases {
		if ph.Kind == plan.DecodeStep {
			return p, i
		}
	}
	t.Fatal("no decode phase")
	return nil, 0
}

// TestValidatePersistent: a plan's persistent runs and their kernel are
// held to their rules, one corruption at a time.
func TestValidatePersistent(t *testing.T) {
	p, _ := persistentPlan(t)
	if err := p.Validate(); err != nil {
		t.Fatalf("the persistent plan: %v", err)
	}
	stream := func(p *plan.Plan) *plan.Kernel {
		for i := range p.Kernels {
			if p.Kernels[i].Family == string(ir.DecodePersistent) {
				return &p.Kernels[i]
			}
		}
		t.Fatal("no decode_persistent kernel")
		return nil
	}
	marked := func(p *plan.Plan, d int) *plan.Launch {
		for i := range p.Phases[d].Launches {
			if p.Phases[d].Launches[i].Stream != "" {
				return &p.Phases[d].Launches[i]
			}
		}
		t.Fatal("no marked launch")
		return nil
	}
	for _, tt := range []struct {
		name   string
		modify func(p *plan.Plan, d int)
		want   string
	}{
		{"unknown stream", func(p *plan.Plan, d int) { marked(p, d).Stream = "nope" }, "stream nope is not a decode_persistent kernel"},
		{"not a member", func(p *plan.Plan, d int) {
			k := stream(p)
			k.Members = slices.DeleteFunc(slices.Clone(k.Members), func(m string) bool { return m == marked(p, d).Kernel })
		}, "is not a member of stream"},
		{"member unknown", func(p *plan.Plan, d int) { k := stream(p); k.Members = append(slices.Clone(k.Members), "nope") }, "member nope is not a plan kernel"},
		{"member twice", func(p *plan.Plan, d int) { k := stream(p); k.Members = append(slices.Clone(k.Members), k.Members[0]) }, "listed twice"},
		{"member itself", func(p *plan.Plan, d int) { k := stream(p); k.Members = append(slices.Clone(k.Members), k.Name) }, "is a decode_persistent kernel itself"},
		{"no members", func(p *plan.Plan, d int) { stream(p).Members = nil }, "lists the kernels it runs"},
		{"members elsewhere", func(p *plan.Plan, d int) { p.Kernels[0].Members = []string{p.Kernels[1].Name} }, "has no members"},
		{"2-D block", func(p *plan.Plan, d int) { marked(p, d).Block = []int{128, 2, 1} }, "runs 1-D blocks"},
		{"another block size", func(p *plan.Plan, d int) { marked(p, d).Block = []int{128, 1, 1} }, "of the target's 256 threads"},
		{"cluster", func(p *plan.Plan, d int) { marked(p, d).Cluster = 2 }, "a cluster launch cannot join"},
		{"moving operand", func(p *plan.Plan, d int) {
			l := marked(p, d)
			s := ir.ParamPos
			l.Args[0].Dyn, l.Args[0].DynStride = &s, 4
		}, "moves with a slot"},
		{"max_launches below a run", func(p *plan.Plan, d int) { stream(p).Params.SetInt("max_launches", 1) }, "max_launches 1: want 2 to"},
		{"a run past max_launches", func(p *plan.Plan, d int) { stream(p).Params.SetInt("max_launches", 2) }, "runs at most 2 (max_launches)"},
		{"3-D grid", func(p *plan.Plan, d int) { l := marked(p, d); l.Grid = append(slices.Clone(l.Grid[:2]), 2) }, "runs 2-D grids"},
		{"outside a decode step", func(p *plan.Plan, d int) {
			l := &p.Phases[0].Launches[0]
			if p.Phases[0].Kind.Decode() {
				t.Fatal("the first phase is a decode step")
			}
			l.Stream = stream(p).Name
			k := stream(p)
			k.Members = append(slices.Clone(k.Members), l.Kernel)
		}, "outside a decode step"},
		{"member of no item family", func(p *plan.Plan, d int) {
			k := stream(p)
			for _, pk := range p.Kernels {
				if pk.Family == "fill_uniform" {
					k.Members = append(slices.Clone(k.Members), pk.Name)
					return
				}
			}
			t.Fatal("no fill_uniform kernel")
		}, "cannot run as a persistent item"},
	} {
		p, d := persistentPlan(t)
		if p.Kernels[0].Family == string(ir.DecodePersistent) {
			p.Kernels[0], p.Kernels[1] = p.Kernels[1], p.Kernels[0]
		}
		tt.modify(p, d)
		err := p.Validate()
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want it to contain %q", tt.name, err, tt.want)
		}
	}
	// The cpu target has no persistent runs.
	cpu := tinyPlan(t)
	cpu.Phases[0].Launches[0].Stream = "decode_persistent_x"
	if err := cpu.Validate(); err == nil || !strings.Contains(err.Error(), "on a target that is no GPU") {
		t.Errorf("cpu plan with a stream: %v", err)
	}
}
