package ir

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Verify checks the graph's invariants against the families of cat and
// returns every violation: declared kinds, operand counts and dtypes,
// parameters declared, present and of their kind, every access inside its
// tensor for the largest logical row count, weights and inputs never
// written (but for the sampler's next token id), activations written
// before they are read.
func (g *Graph) Verify(cat Catalogue) error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	names := map[string]bool{}
	for i, t := range g.Tensors {
		if t.ID != i {
			fail("tensor %s: id %d at index %d", t.Name, t.ID, i)
		}
		if names[t.Name] {
			fail("tensor %s: duplicate name", t.Name)
		}
		names[t.Name] = true
		if t.DType.Size() == 0 {
			fail("tensor %s: unknown dtype %q", t.Name, t.DType)
		}
		for _, d := range t.Shape {
			if d <= 0 {
				fail("tensor %s: shape %v has a non-positive extent", t.Name, t.Shape)
				break
			}
		}
		switch {
		case t.Role == Weight && t.Source == "" && len(t.Parts) == 0:
			fail("tensor %s: weight without a checkpoint source", t.Name)
		case len(t.Parts) > 0 && (t.Role != Weight || t.Source != ""):
			fail("tensor %s: parts belong to a weight without a source of its own", t.Name)
		}
		if err := CheckParts(t.Parts, t.Shape); err != nil {
			fail("tensor %s: %v", t.Name, err)
		}
	}
	for _, s := range g.Dyn {
		if !s.Valid() {
			fail("dynamic value %d is not a parameter block slot", int(s))
		}
	}
	dynOK := func(s Slot) bool { return slices.Contains(g.Dyn, s) }
	written := map[int]bool{}
	used := map[int]bool{}
	// verifyOp checks one op against its family and the graph; written
	// holds the activations written before it, which it extends.
	verifyOp := func(where string, op *Op, written map[int]bool) {
		f, err := cat.Family(op.Kind)
		if err != nil {
			fail("%s: %v", where, err)
			return
		}
		if len(op.Operands) != len(f.Operands) {
			fail("%s: %d operands, want %d", where, len(op.Operands), len(f.Operands))
			return
		}
		if err := f.CheckParams(op.Params); err != nil {
			fail("%s: %v", where, err)
			return
		}
		for _, s := range f.Slots {
			if !dynOK(s) {
				fail("%s: reads dynamic value %s, which the graph does not set", where, s)
			}
		}
		var rows int64
		switch {
		case op.Rows == nil:
			r, ok := op.Params.Rows()
			if !ok {
				fail("%s: no row slot and no constant %s parameter", where, RowsParam)
			}
			rows = r
		case !dynOK(*op.Rows):
			fail("%s: row count from dynamic value %s, which the graph does not set", where, *op.Rows)
		default:
			rows = int64(g.Tokens)
		}
		for j, o := range op.Operands {
			spec := f.Operands[j]
			if o.Tensor < 0 || o.Tensor >= len(g.Tensors) {
				fail("%s: operand %s: no tensor %d", where, spec.Name, o.Tensor)
				continue
			}
			t := g.Tensors[o.Tensor]
			used[t.ID] = true
			switch {
			case spec.DType == AnyFloat:
				if t.DType != F32 && t.DType != BF16 {
					fail("%s: operand %s: tensor %s is %s, want f32 or bf16", where, spec.Name, t.Name, t.DType)
				}
				// The kernel variant must match the tensor it reads.
				if f.AnyFloatIsBF16(op.Params) != (t.DType == BF16) {
					fail("%s: operand %s: tensor %s is %s, the kernel's dtype flag says otherwise", where, spec.Name, t.Name, t.DType)
				}
			case t.DType != spec.DType:
				fail("%s: operand %s: tensor %s is %s, want %s", where, spec.Name, t.Name, t.DType, spec.DType)
			}
			end := o.Offset + spec.Extent(op.Params, rows)
			if o.Dyn != nil {
				if !dynOK(*o.Dyn) {
					fail("%s: operand %s: offset by dynamic value %s, which the graph does not set", where, spec.Name, *o.Dyn)
				}
				end += g.dynMax(*o.Dyn) * o.DynStride
			}
			if o.Offset < 0 || o.DynStride < 0 || end > t.Elements() {
				fail("%s: operand %s: reaches element %d of tensor %s, which has %d", where, spec.Name, end, t.Name, t.Elements())
			}
			// The samplers alone write an input: the next token id, into
			// the tokens buffer the next decode step reads.
			if spec.Access != Read && (t.Role == Weight || (t.Role == Input && op.Kind != Sample && op.Kind != LMHeadPick)) {
				fail("%s: operand %s: writes %s tensor %s", where, spec.Name, t.Role, t.Name)
			}
			if spec.Access != Write && t.Role == Activation && !written[t.ID] {
				fail("%s: operand %s: reads activation %s before any op writes it", where, spec.Name, t.Name)
			}
		}
		for j, o := range op.Operands {
			if f.Operands[j].Access != Read && o.Tensor >= 0 && o.Tensor < len(g.Tensors) {
				written[o.Tensor] = true
			}
		}
	}
	for i, op := range g.Ops {
		where := fmt.Sprintf("op %d (%s, layer %d)", i, op.Kind, op.Layer)
		// A fallback runs in the op's place: its ops in order, on tensors
		// the op itself names (so the op's placement holds for them).
		if len(op.Fallback) > 0 {
			mine := map[int]bool{}
			for _, o := range op.Operands {
				mine[o.Tensor] = true
			}
			w := maps.Clone(written)
			for k, fb := range op.Fallback {
				fw := fmt.Sprintf("%s: fallback %d (%s)", where, k, fb.Kind)
				if len(fb.Fallback) > 0 {
					fail("%s: a fallback with a fallback of its own", fw)
				}
				for _, o := range fb.Operands {
					if !mine[o.Tensor] {
						fail("%s: tensor %d is none of the op's operands", fw, o.Tensor)
					}
				}
				verifyOp(fw, fb, w)
			}
		}
		verifyOp(where, op, written)
	}
	for _, t := range g.Tensors {
		if !used[t.ID] {
			fail("tensor %s: never used", t.Name)
		}
	}
	return errors.Join(errs...)
}

// dynMax bounds a slot for the extent check: row indices stay below the
// graph's rows, positions are not row offsets.
func (g *Graph) dynMax(s Slot) int64 {
	if m, ok := g.DynMax[s]; ok {
		return m
	}
	return int64(g.Tokens) - 1
}
