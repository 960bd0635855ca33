package planner

import (
	"fmt"
	"slices"
	"sort"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// The planner is a table of named passes run in order over the graph of
// every step (the Go compiler's pass list is the model): each pass rewrites
// or annotates the graphs, and the last one turns them into the plan.
// `aimac ir --passes` lists them; `aimac ir --after PASS` prints a step's
// graph after any of them. The tests check the graph and plan invariants
// after every pass.
type pass struct {
	name string
	fn   func(c *compilation) error
}

var passes = []pass{
	{"lower", lowerPass},         // each step of the model to a verified IR graph
	{"fuse", fusePass},           // rewrite patterns into fused families (on GPU targets by default)
	{"split_kv", splitPass},      // decode attention split across the context (on GPU targets by default)
	{"flash", flashPass},         // prefill attention and its output gate to flash attention on tensor cores (GPU targets, f32 KV, by default)
	{"gdn", gdnPass},             // prefill's gated delta rule to the chunked form on tensor cores, the conv to a thread per (channel, row tile) (--prefill-gdn wy)
	{"stream", streamPass},       // one-row projections to the weight-streaming families (GPU targets)
	{"tile", tilePass},           // prefill's projections and routed experts to the tensor-core families (--tiling on)
	{"certify", certifyPass},     // the certified int8 head's launch parameters, its exact logits the decode step's LM head's
	{"configure", configurePass}, // each op's launch shape from the target's launch configuration
	{"schedule", schedulePass},   // arena placement, kernels, launches: the plan, validated
}

// Passes names the planner's passes in the order they run.
func Passes() []string {
	out := make([]string, len(passes))
	for i, p := range passes {
		out[i] = p.name
	}
	return out
}

// compilation is what the passes share: the model, the options, the steps
// and their graphs, and finally the plan.
type compilation struct {
	m      *Model
	o      Options
	steps  []Step
	graphs []*ir.Graph
	plan   *plan.Plan
}

// compile runs the passes up to and including after ("" for all of them);
// check, when set, runs after every pass.
func compile(m *Model, o Options, after string, check func(pass string, c *compilation) error) (*compilation, error) {
	if err := o.check(); err != nil {
		return nil, err
	}
	if after != "" && !slices.Contains(Passes(), after) {
		return nil, fmt.Errorf("no planner pass %q (the passes: %v)", after, Passes())
	}
	c := &compilation{m: m, o: o, steps: o.steps()}
	for _, p := range passes {
		if err := p.fn(c); err != nil {
			return nil, fmt.Errorf("pass %s: %w", p.name, err)
		}
		if check != nil {
			if err := check(p.name, c); err != nil {
				return nil, fmt.Errorf("after pass %s: %w", p.name, err)
			}
		}
		if p.name == after {
			break
		}
	}
	return c, nil
}

// Graphs runs the passes up to and including after and returns the graph
// of every step the options plan, in plan order.
func Graphs(m *Model, o Options, after string) ([]*ir.Graph, error) {
	c, err := compile(m, o, after, nil)
	if err != nil {
		return nil, err
	}
	return c.graphs, nil
}

func lowerPass(c *compilation) error {
	for _, st := range c.steps {
		g, err := Lower(c.m, st)
		if err != nil {
			return err
		}
		c.graphs = append(c.graphs, g)
	}
	return nil
}

// Fusion says whether the fusion pass runs.
type Fusion string

const (
	FuseDefault Fusion = ""    // on for GPU targets, off on the CPU, whose plan keeps the unfused families as the oracle
	FuseOn      Fusion = "on"  // on for every target (fused references are composed from the unfused ones)
	FuseOff     Fusion = "off" // never
)

func (o *Options) fuses() bool {
	return o.Fusion == FuseOn || (o.Fusion == FuseDefault && o.Target.GPU())
}

// fusePass applies every fusion rule to every graph, then drops the
// tensors the rewrites left unused and verifies the graph again.
func fusePass(c *compilation) error {
	if !c.o.fuses() {
		return nil
	}
	for i, g := range c.graphs {
		n := fuseMatMulAdd(g)
		if c.steps[i].Kind.Decode() {
			n += fuseGDNDecode(g, c.o.Target, c.o.GDNColumnTile, c.o.GDNPeer)
			n += fuseQKNormRoPE(g)
			n += fuseMoEDecode(g)
		}
		// After the GDN chain (whose rule wants the projections' outputs as
		// tensors of their own), before the norms (which fold into the
		// concatenated projection).
		n += fuseProjections(g)
		n += fuseNormGEMV(g, c.o.Target, c.o.streamRow())
		if c.steps[i].Kind.Decode() && c.o.GDNOut {
			// After the projections' and the norms' rules, which rewrite the
			// split's inputs (a fallback's operands must be the fused op's).
			n += fuseGDNOut(g, c.o.Target, c.o.streamRow(), c.o.GDNOutStage)
		}
		if c.steps[i].Kind.Decode() && c.o.MoERouter {
			// After the norms: the router is the rmsnorm_gemv it folds in.
			n += fuseMoERouter(g, c.o.Target)
		}
		if c.steps[i].Kind.Decode() {
			// After the router's fold, on the blocks it left.
			n += fuseMoERank(g, c.o.streamRow().RankOnce)
		}
		if n == 0 {
			continue
		}
		g.DropUnused()
		if err := g.Verify(kernels.Families); err != nil {
			return fmt.Errorf("%s: %w", g.Name, err)
		}
	}
	return nil
}

// fuseMatMulAdd rewrites m = x·Wᵀ followed by the residual X += m into
// X += x·Wᵀ (matmul_add) when m is an activation that the add is the only
// reader of (the next op to touch m after it, if any, overwrites it: the
// lowering reuses an activation's name layer after layer), both run over
// the same rows, the add covers m exactly, and no op between them touches X
// (which the fused kernel updates at the matmul's place) nor does the
// matmul read X. It returns the number of rewrites.
func fuseMatMulAdd(g *ir.Graph) int {
	u := indexUses(g)
	next := u.next
	drop := map[int]bool{}
	n := 0
	for i, mm := range g.Ops {
		if mm.Kind != ir.MatMul || mm.Rows == nil {
			continue
		}
		m := mm.Operands[0]
		if g.Tensors[m.Tensor].Role != ir.Activation || !plain(m) {
			continue
		}
		j := next(m.Tensor, i)
		if j < 0 {
			continue
		}
		add := g.Ops[j]
		if add.Kind != ir.Add || add.Rows == nil || *add.Rows != *mm.Rows || add.Layer != mm.Layer ||
			add.Operands[1] != m || add.Params.Int("width") != mm.Params.Int("n") {
			continue
		}
		if !u.deadAfter(m.Tensor, j) {
			continue
		}
		x := add.Operands[0]
		if x.Tensor == m.Tensor || x.Tensor == mm.Operands[1].Tensor || x.Tensor == mm.Operands[2].Tensor {
			continue
		}
		if k := next(x.Tensor, i); k >= 0 && k < j {
			continue
		}
		g.Ops[i] = &ir.Op{Kind: ir.MatMulAdd, Layer: mm.Layer, Rows: mm.Rows, Params: mm.Params.Clone(),
			Operands: []ir.Operand{x, mm.Operands[1], mm.Operands[2]}}
		drop[j] = true
		n++
	}
	dropOps(g, drop)
	return n
}

// uses indexes, for each tensor of a graph, the ops that use it, in order,
// once each: what a fusion rule asks before it rewrites.
type uses struct {
	g  *ir.Graph
	by map[int][]int
}

func indexUses(g *ir.Graph) uses {
	u := uses{g: g, by: map[int][]int{}}
	for i, op := range g.Ops {
		for _, o := range op.Operands {
			if l := u.by[o.Tensor]; len(l) == 0 || l[len(l)-1] != i {
				u.by[o.Tensor] = append(l, i)
			}
		}
	}
	return u
}

// next is the first op after i that uses tensor t, or -1.
func (u uses) next(t, i int) int {
	for _, k := range u.by[t] {
		if k > i {
			return k
		}
	}
	return -1
}

// overwrites reports whether op k only writes tensor t.
func (u uses) overwrites(k, t int) bool {
	f := kernels.Families[u.g.Ops[k].Kind]
	for j, o := range u.g.Ops[k].Operands {
		if o.Tensor == t && f.Operands[j].Access != ir.Write {
			return false
		}
	}
	return true
}

// deadAfter reports whether tensor t's value after op i is never read: no
// later op uses it, or the next one only overwrites it.
func (u uses) deadAfter(t, i int) bool {
	k := u.next(t, i)
	return k < 0 || u.overwrites(k, t)
}

// plain is an operand at the start of its tensor with no dynamic offset.
func plain(o ir.Operand) bool { return o.Offset == 0 && o.Dyn == nil }

// dropOps removes the ops marked in drop, keeping the order of the rest.
func dropOps(g *ir.Graph, drop map[int]bool) {
	kept := g.Ops[:0]
	for i, op := range g.Ops {
		if !drop[i] {
			kept = append(kept, op)
		}
	}
	g.Ops = kept
}

// configurePass gives every op of a GPU target its launch shape: the
// family's launch rule with the target's launch configuration.
func configurePass(c *compilation) error {
	if !c.o.Target.GPU() {
		return nil
	}
	for _, g := range c.graphs {
		for _, op := range g.Ops {
			for _, o := range append([]*ir.Op{op}, op.Fallback...) {
				s, err := launchFor(o, g.Tokens, c.o.Target)
				if err != nil {
					return fmt.Errorf("%s: %w", g.Name, err)
				}
				o.Launch = &s
			}
		}
	}
	return nil
}

// schedulePass places every graph's activations in the arena and turns the
// graphs into the plan's phases, kernels and buffers, then validates it.
func schedulePass(c *compilation) error {
	p, err := newPlan(c.m, c.o)
	if err != nil {
		return err
	}
	s := &scheduler{p: p, target: c.o.Target, kernels: map[string]bool{}, globals: map[string]int{}}
	for i, g := range c.graphs {
		if err := s.phase(c.steps[i].Kind, g); err != nil {
			return err
		}
	}
	s.fillKernels()
	if c.o.PersistentDecode && c.o.Target.GPU() {
		if err := persistDecode(p, c.o.Target.Launch().Threads); err != nil {
			return err
		}
	}
	sort.Slice(p.Kernels, func(i, j int) bool { return p.Kernels[i].Name < p.Kernels[j].Name })
	if err := p.Validate(); err != nil {
		return fmt.Errorf("planner produced an invalid plan: %w", err)
	}
	c.plan = p
	return nil
}
