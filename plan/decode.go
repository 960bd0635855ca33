package plan

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
)

// maxPlanBytes bounds a plan file; the real model's plans are a few MB.
const maxPlanBytes = 256 << 20

// Decode reads a plan and validates it (Validate).
func Decode(r io.Reader) (*Plan, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxPlanBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxPlanBytes {
		return nil, fmt.Errorf("plan is larger than %d bytes", maxPlanBytes)
	}
	// The format tag first: a plan of another format is named as such, not
	// as a field this format lacks.
	var tag struct {
		Format string `json:"format"`
	}
	if err := json.Unmarshal(data, &tag); err == nil && tag.Format != "" && tag.Format != Format {
		return nil, fmt.Errorf("plan format %q, this program reads %q: plan the model again with this aimac", tag.Format, Format)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var p Plan
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("plan is not valid JSON of format %s: %w", Format, err)
	}
	if dec.More() {
		return nil, errors.New("plan has trailing data after the JSON object")
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

// ReadFile reads and validates a plan file.
func ReadFile(path string) (*Plan, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	p, err := Decode(f)
	if err != nil {
		return nil, fmt.Errorf("plan %s: %w", path, err)
	}
	return p, nil
}

// Validate checks the plan's own consistency and every phase's launches
// against the op catalogue: a plan that validates can be executed without
// out-of-bounds access for any logical length up to its bucket.
func (p *Plan) Validate() error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if p.Format != Format {
		fail("format %q, want %q", p.Format, Format)
	}
	if err := p.Target.Check(); err != nil {
		fail("%v", err)
	}
	if p.ContextTokens <= 0 {
		fail("context_tokens %d must be > 0", p.ContextTokens)
	}
	if p.Model.Vocab <= 0 {
		fail("model.vocab %d must be > 0", p.Model.Vocab)
	}
	for i, b := range p.Buckets {
		if b <= 0 || (i > 0 && b <= p.Buckets[i-1]) {
			fail("buckets %v must be positive and increasing", p.Buckets)
			break
		}
	}
	global := map[string]*Buffer{}
	loadedBy := map[string]string{} // checkpoint tensor → the weight buffer holding it
	for i := range p.Buffers {
		b := &p.Buffers[i]
		checkBuffer(b, "buffer", fail)
		if err := ir.CheckParts(b.IRParts(), b.Shape); err != nil {
			fail("buffer %s: %v", b.Name, err)
		}
		if len(b.Parts) > 0 && (b.Role != ir.Weight || b.Tensor != "") {
			fail("buffer %s: parts belong to a weight without a tensor of its own", b.Name)
		}
		if b.Role == ir.Weight && b.Derive == nil {
			// A checkpoint tensor is held once on the device, whole or as one
			// part of a concatenated weight (a derived weight is made from one
			// on the device, not loaded).
			for _, part := range b.Sources() {
				if other, dup := loadedBy[part.Tensor]; dup && part.Tensor != "" {
					fail("buffer %s: checkpoint tensor %s is already loaded by buffer %s", b.Name, part.Tensor, other)
				}
				loadedBy[part.Tensor] = b.Name
			}
		}
		if global[b.Name] != nil {
			fail("buffer %s: duplicate", b.Name)
		}
		if !b.Role.Persistent() {
			fail("buffer %s: role %s belongs in a phase", b.Name, b.Role)
		}
		global[b.Name] = b
	}
	byName := map[string]*Kernel{}
	for i := range p.Kernels {
		k := &p.Kernels[i]
		if byName[k.Name] != nil {
			fail("kernel %s: duplicate", k.Name)
		}
		if f, err := kernels.Families.Family(ir.Kind(k.Family)); err != nil {
			fail("kernel %s: %v", k.Name, err)
		} else if err := f.CheckParams(k.Params); err != nil {
			fail("kernel %s: %v", k.Name, err)
		}
		byName[k.Name] = k
	}
	for i := range p.Kernels {
		checkMembers(&p.Kernels[i], byName, fail)
	}
	for pi := range p.Phases {
		ph := &p.Phases[pi]
		if !ph.Kind.Valid() {
			fail("phase %s: kind %q is not one of %v", ph.Name, ph.Kind, PhaseKinds)
		}
		if g, err := p.Graph(pi); err != nil {
			fail("phase %s: %w", ph.Name, err)
		} else {
			in, out := PhaseIO(g)
			if !slices.Equal(in, ph.Inputs) || !slices.Equal(out, ph.Outputs) {
				fail("phase %s: declares inputs %v and outputs %v, its launches read %v and write %v", ph.Name, ph.Inputs, ph.Outputs, in, out)
			}
		}
		for li := range ph.Launches {
			checkFallback(ph, li, byName, p.Target.GPU(), fail)
			checkStream(ph, li, byName, p.Target, fail)
		}
		checkLifetimes(ph, fail)
		for i := range ph.Buffers {
			b := &ph.Buffers[i]
			checkBuffer(b, "phase "+ph.Name+": buffer", fail)
			if b.Role != ir.Activation {
				fail("phase %s: buffer %s: role %s is not an activation", ph.Name, b.Name, b.Role)
			}
			if b.Offset < 0 || b.Offset+b.Bytes > p.ArenaBytes {
				fail("phase %s: buffer %s: [%d, %d) outside the arena of %d bytes", ph.Name, b.Name, b.Offset, b.Offset+b.Bytes, p.ArenaBytes)
			}
		}
	}
	for i := range p.Buffers {
		checkDerive(&p.Buffers[i], global, byName, fail)
	}
	return errors.Join(errs...)
}

// checkDerive requires a derived weight's kernel to be a plan kernel that
// writes the operand, reads a weight that is not derived itself, and whose
// operand holds the buffer's bytes.
func checkDerive(b *Buffer, global map[string]*Buffer, kernelsByName map[string]*Kernel, fail func(string, ...any)) {
	d := b.Derive
	if d == nil {
		return
	}
	if b.Role != ir.Weight {
		fail("buffer %s: derived, but role %s is not a weight", b.Name, b.Role)
	}
	k := kernelsByName[d.Kernel]
	if k == nil {
		fail("buffer %s: derived by kernel %s, which the plan lacks", b.Name, d.Kernel)
		return
	}
	from := global[d.From]
	if from == nil || from.Role != ir.Weight || from.Derive != nil {
		fail("buffer %s: derived from %q, which is not a loaded weight", b.Name, d.From)
	}
	f, err := kernels.Families.Family(ir.Kind(k.Family))
	if err != nil {
		return // reported with the kernel
	}
	i := f.Operand(d.Operand)
	if i < 0 || f.Operands[i].Access == ir.Read {
		fail("buffer %s: kernel %s writes no operand %q", b.Name, d.Kernel, d.Operand)
		return
	}
	if need := f.Operands[i].Extent(k.Params, 1) * int64(f.Operands[i].DType.Size()); f.Operands[i].DType != b.DType || need > b.Bytes {
		fail("buffer %s: %s of %d bytes, kernel %s writes %s of %d", b.Name, b.DType, b.Bytes, d.Kernel, f.Operands[i].DType, need)
	}
}

// checkFallback requires a GPU launch whose family waits at a grid barrier
// to have fallback launches (the engine's way on a device that cannot hold
// the grid at once: never a hang), of families that do not wait at one.
func checkFallback(ph *Phase, li int, kernelsByName map[string]*Kernel, gpu bool, fail func(string, ...any)) {
	barrier := func(name string) bool {
		k := kernelsByName[name]
		if k == nil {
			return false // Graph reports it
		}
		f := kernels.Families[ir.Kind(k.Family)]
		return f != nil && f.GridBarrier
	}
	l := &ph.Launches[li]
	if gpu && barrier(l.Kernel) && len(l.Fallback) == 0 {
		fail("phase %s: launch %d (%s) waits at a grid barrier and has no fallback launches", ph.Name, li, l.Kernel)
	}
	for _, fb := range l.Fallback {
		if barrier(fb.Kernel) {
			fail("phase %s: launch %d: fallback %s waits at a grid barrier too", ph.Name, li, fb.Kernel)
		}
	}
}

// checkMembers requires a decode_persistent kernel to list the plan kernels
// it runs, each once, none of them persistent itself, and every other
// kernel to list none.
func checkMembers(k *Kernel, byName map[string]*Kernel, fail func(string, ...any)) {
	if k.Family != string(ir.DecodePersistent) {
		if len(k.Members) > 0 {
			fail("kernel %s: family %s has no members (only %s does)", k.Name, k.Family, ir.DecodePersistent)
		}
		return
	}
	if len(k.Members) == 0 {
		fail("kernel %s: a %s kernel lists the kernels it runs", k.Name, k.Family)
	}
	seen := map[string]bool{}
	for _, m := range k.Members {
		mk := byName[m]
		switch {
		case mk == nil:
			fail("kernel %s: member %s is not a plan kernel", k.Name, m)
		case mk.Family == string(ir.DecodePersistent):
			fail("kernel %s: member %s is a %s kernel itself", k.Name, m, ir.DecodePersistent)
		case !kernels.Persistent(ir.Kind(mk.Family)):
			fail("kernel %s: member %s: family %s cannot run as a persistent item", k.Name, m, mk.Family)
		case seen[m]:
			fail("kernel %s: member %s listed twice", k.Name, m)
		}
		seen[m] = true
	}
}

// checkStream requires a launch that names a decode_persistent kernel to be
// one of that kernel's members, on a GPU target, with the target's 1-D block
// (the kernel is rendered for it), operand offsets that do not move with a
// slot (the kernel's item table is written once) and no fallback (its family
// waits at no grid barrier).
func checkStream(ph *Phase, li int, byName map[string]*Kernel, target Target, fail func(string, ...any)) {
	l := &ph.Launches[li]
	if l.Stream == "" {
		return
	}
	k := byName[l.Stream]
	switch {
	case !target.GPU():
		fail("phase %s: launch %d (%s): stream %s on a target that is no GPU", ph.Name, li, l.Kernel, l.Stream)
	case !ph.Kind.Decode():
		fail("phase %s: launch %d (%s): stream %s outside a decode step", ph.Name, li, l.Kernel, l.Stream)
	case k == nil || k.Family != string(ir.DecodePersistent):
		fail("phase %s: launch %d (%s): stream %s is not a %s kernel of the plan", ph.Name, li, l.Kernel, l.Stream, ir.DecodePersistent)
	case !slices.Contains(k.Members, l.Kernel):
		fail("phase %s: launch %d: kernel %s is not a member of stream %s", ph.Name, li, l.Kernel, l.Stream)
	case len(l.Fallback) > 0:
		fail("phase %s: launch %d (%s): a launch with fallback launches cannot join stream %s", ph.Name, li, l.Kernel, l.Stream)
	case len(l.Block) < 1 || l.Block[0] != target.Launch().Threads || slices.ContainsFunc(l.Block[1:], func(d int) bool { return d != 1 }):
		fail("phase %s: launch %d (%s): block %v: stream %s runs 1-D blocks of the target's %d threads", ph.Name, li, l.Kernel, l.Block, l.Stream, target.Launch().Threads)
	case len(l.Grid) > 2 && slices.ContainsFunc(l.Grid[2:], func(d int) bool { return d != 1 }):
		fail("phase %s: launch %d (%s): grid %v: stream %s runs 2-D grids", ph.Name, li, l.Kernel, l.Grid, l.Stream)
	case l.Cluster > 1:
		fail("phase %s: launch %d (%s): a cluster launch cannot join stream %s", ph.Name, li, l.Kernel, l.Stream)
	}
	for _, a := range l.Args {
		if a.Dyn != nil {
			fail("phase %s: launch %d (%s): operand %s moves with a slot; stream %s writes its operands once", ph.Name, li, l.Kernel, a.Buffer, l.Stream)
		}
	}
	// A run is the launches next to each other that name the stream; its
	// kernel holds max_launches of them.
	if k != nil && (li == 0 || ph.Launches[li-1].Stream != l.Stream) {
		n := 0
		for n < len(ph.Launches)-li && ph.Launches[li+n].Stream == l.Stream {
			n++
		}
		if limit := k.Params.Ints["max_launches"]; int64(n) > limit {
			fail("phase %s: launches %d to %d: a run of %d launches; stream %s runs at most %d (max_launches)", ph.Name, li, li+n-1, n, l.Stream, limit)
		}
	}
}

// checkLifetimes requires every activation's uses to fall inside its
// declared live range and buffers with intersecting ranges to be disjoint
// in the arena.
func checkLifetimes(ph *Phase, fail func(string, ...any)) {
	local := map[string]*Buffer{}
	for i := range ph.Buffers {
		b := &ph.Buffers[i]
		if len(b.Live) != 2 || b.Live[0] < 0 || b.Live[0] > b.Live[1] || b.Live[1] >= len(ph.Launches) {
			fail("phase %s: buffer %s: live range %v is not [first, last] launch", ph.Name, b.Name, b.Live)
			return
		}
		local[b.Name] = b
	}
	for li, l := range ph.Launches {
		for _, a := range l.Args {
			if b := local[a.Buffer]; b != nil && (li < b.Live[0] || li > b.Live[1]) {
				fail("phase %s: launch %d uses %s outside its live range %v", ph.Name, li, b.Name, b.Live)
			}
		}
	}
	for i := range ph.Buffers {
		a := &ph.Buffers[i]
		for j := i + 1; j < len(ph.Buffers); j++ {
			b := &ph.Buffers[j]
			live := a.Live[0] <= b.Live[1] && b.Live[0] <= a.Live[1]
			if live && a.Offset < b.Offset+b.Bytes && b.Offset < a.Offset+a.Bytes {
				fail("phase %s: buffers %s and %s are live together and overlap in the arena", ph.Name, a.Name, b.Name)
			}
		}
	}
}

func checkBuffer(b *Buffer, where string, fail func(string, ...any)) {
	size := b.DType.Size()
	if size == 0 {
		fail("%s %s: unknown dtype %q", where, b.Name, b.DType)
		return
	}
	n := int64(1)
	for _, d := range b.Shape {
		if d <= 0 || d > 1<<40 {
			fail("%s %s: bad shape %v", where, b.Name, b.Shape)
			return
		}
		n *= d
		if n > 1<<42 {
			fail("%s %s: shape %v too large", where, b.Name, b.Shape)
			return
		}
	}
	if n*int64(size) != b.Bytes {
		fail("%s %s: %d bytes, shape %v of %s needs %d", where, b.Name, b.Bytes, b.Shape, b.DType, n*int64(size))
	}
}

// Graph rebuilds phase i as an IR graph (byte offsets back to elements) and
// verifies it; the runtime and the validator share this one view.
func (p *Plan) Graph(i int) (*ir.Graph, error) {
	ph := &p.Phases[i]
	g := &ir.Graph{Name: ph.Name, Tokens: ph.Tokens, Dyn: ph.Dyn}
	if ph.Kind == Logits {
		g.DynMax = map[ir.Slot]int64{ir.ParamRow0: int64(p.maxBucket() - ph.Tokens)}
	}
	ids := map[string]int{}
	add := func(b *Buffer) {
		if _, dup := ids[b.Name]; dup {
			return
		}
		ids[b.Name] = len(g.Tensors)
		g.AddTensor(ir.Tensor{Name: b.Name, DType: b.DType, Shape: b.Shape, Role: b.Role, Source: b.Tensor, Parts: b.IRParts()})
	}
	byName := map[string]*Kernel{}
	for i := range p.Kernels {
		byName[p.Kernels[i].Name] = &p.Kernels[i]
	}
	for i := range ph.Buffers {
		add(&ph.Buffers[i])
	}
	globals := map[string]*Buffer{}
	for i := range p.Buffers {
		globals[p.Buffers[i].Name] = &p.Buffers[i]
	}
	var errs []error
	// opOf is launch l's op (and its fallback's), or nil after an error.
	var opOf func(where string, l *Launch) *ir.Op
	opOf = func(where string, l *Launch) *ir.Op {
		k := byName[l.Kernel]
		if k == nil {
			errs = append(errs, fmt.Errorf("%s: unknown kernel %q", where, l.Kernel))
			return nil
		}
		op := &ir.Op{Kind: ir.Kind(k.Family), Layer: l.Layer, Params: k.Params, Rows: l.Rows}
		for _, a := range l.Args {
			var b *Buffer
			if _, ok := ids[a.Buffer]; !ok {
				if b = globals[a.Buffer]; b == nil {
					errs = append(errs, fmt.Errorf("%s: unknown buffer %q", where, a.Buffer))
					return nil
				}
				add(b)
			}
			t := g.Tensors[ids[a.Buffer]]
			size := int64(t.DType.Size())
			if size == 0 || a.Offset%size != 0 || a.DynStride%size != 0 {
				errs = append(errs, fmt.Errorf("%s: buffer %s: offset not a multiple of the element size", where, a.Buffer))
				return nil
			}
			op.Operands = append(op.Operands, ir.Operand{Tensor: ids[a.Buffer], Offset: a.Offset / size, Dyn: a.Dyn, DynStride: a.DynStride / size})
		}
		for fi := range l.Fallback {
			fb := opOf(fmt.Sprintf("%s: fallback %d", where, fi), &l.Fallback[fi])
			if fb == nil {
				return nil
			}
			op.Fallback = append(op.Fallback, fb)
		}
		return op
	}
	for li := range ph.Launches {
		if op := opOf(fmt.Sprintf("launch %d", li), &ph.Launches[li]); op != nil {
			g.Ops = append(g.Ops, op)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	// Globals appear in a phase only when used, so "never used" cannot fire for them.
	if err := g.Verify(kernels.Families); err != nil {
		return nil, err
	}
	return g, nil
}

func (p *Plan) maxBucket() int {
	m := 1
	for _, b := range p.Buckets {
		m = max(m, b)
	}
	return m
}

// PhaseIO derives a phase's ports from its graph: the port buffers its ops
// read before any op writes them (inputs) and the ones they write
// (outputs), each list in order of first use. The planner declares what it
// derives; Validate requires a plan's declaration to equal it.
func PhaseIO(g *ir.Graph) (inputs, outputs []Port) {
	written := map[int]bool{}
	for _, op := range g.Ops {
		f := kernels.Families[op.Kind]
		if f == nil || len(f.Operands) != len(op.Operands) {
			continue // Verify reports it
		}
		for j, o := range op.Operands {
			if o.Tensor < 0 || o.Tensor >= len(g.Tensors) {
				continue
			}
			t := g.Tensors[o.Tensor]
			port := Port(t.Name)
			if !t.Role.Persistent() || !slices.Contains(Ports, port) {
				continue
			}
			acc := f.Operands[j].Access
			if acc != ir.Write && !written[o.Tensor] && !slices.Contains(inputs, port) {
				inputs = append(inputs, port)
			}
			if acc != ir.Read {
				written[o.Tensor] = true
				if !slices.Contains(outputs, port) {
					outputs = append(outputs, port)
				}
			}
		}
	}
	return inputs, outputs
}
