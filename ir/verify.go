package ir

import (
	"errors"
	"fmt"
)

// Verify checks the graph's invariants and returns every violation:
// known kinds, operand counts and dtypes, parameters present, every access
// inside its tensor for the largest logical row count, weights and inputs
// never written (but for the sampler's next token id), activations written
// before they are read.
func (g *Graph) Verify() error {
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
		if t.Role == Weight && t.Source == "" {
			fail("tensor %s: weight without a checkpoint source", t.Name)
		}
	}
	dynOK := map[string]bool{}
	for _, d := range g.Dyn {
		dynOK[d] = true
	}
	written := map[int]bool{}
	used := map[int]bool{}
	for i, op := range g.Ops {
		where := fmt.Sprintf("op %d (%s, layer %d)", i, op.Kind, op.Layer)
		sig, ok := Catalogue[op.Kind]
		if !ok {
			fail("%s: unknown kind", where)
			continue
		}
		if len(op.Operands) != len(sig.Operands) {
			fail("%s: %d operands, want %d", where, len(op.Operands), len(sig.Operands))
			continue
		}
		missing := false
		for _, p := range sig.Params {
			if _, ok := op.Params[p]; !ok {
				fail("%s: parameter %s missing", where, p)
				missing = true
			}
		}
		if missing {
			continue
		}
		if err := sig.checkParams(op.Params); err != nil {
			fail("%s: %v", where, err)
			continue
		}
		for _, d := range sig.Dyn {
			if !dynOK[d] {
				fail("%s: needs dynamic scalar %s, which the graph does not set", where, d)
			}
		}
		var rows int64
		switch {
		case op.Rows == "":
			rows = int64(op.Params["rows"])
			if rows <= 0 {
				fail("%s: constant row count %d", where, rows)
			}
		case !dynOK[op.Rows]:
			fail("%s: row count from unknown dynamic scalar %s", where, op.Rows)
		default:
			rows = int64(g.Tokens)
		}
		for j, o := range op.Operands {
			spec := sig.Operands[j]
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
				if AnyFloatIsBF16(op.Params) != (t.DType == BF16) {
					fail("%s: operand %s: tensor %s is %s, the kernel's dtype flag says otherwise", where, spec.Name, t.Name, t.DType)
				}
			case t.DType != spec.DType:
				fail("%s: operand %s: tensor %s is %s, want %s", where, spec.Name, t.Name, t.DType, spec.DType)
			}
			end := o.Offset + spec.Extent(op.Params, rows)
			if o.Dyn != "" {
				if !dynOK[o.Dyn] {
					fail("%s: operand %s: unknown dynamic scalar %s", where, spec.Name, o.Dyn)
				}
				end += g.dynMax(o.Dyn) * o.DynStride
			}
			if o.Offset < 0 || end > t.Elements() {
				fail("%s: operand %s: reaches element %d of tensor %s, which has %d", where, spec.Name, end, t.Name, t.Elements())
			}
			// The sampler alone writes an input: the next token id, into
			// the tokens buffer the next decode step reads.
			if spec.Access != Read && (t.Role == Weight || (t.Role == Input && op.Kind != Sample)) {
				fail("%s: operand %s: writes %s tensor %s", where, spec.Name, t.Role, t.Name)
			}
			if spec.Access != Write && t.Role == Activation && !written[t.ID] {
				fail("%s: operand %s: reads activation %s before any op writes it", where, spec.Name, t.Name)
			}
		}
		for j, o := range op.Operands {
			if sig.Operands[j].Access != Read && o.Tensor >= 0 && o.Tensor < len(g.Tensors) {
				written[o.Tensor] = true
			}
		}
	}
	for _, t := range g.Tensors {
		if !used[t.ID] {
			fail("tensor %s: never used", t.Name)
		}
	}
	return errors.Join(errs...)
}

// dynMax bounds a dynamic scalar for the extent check: row indices stay
// below the graph's rows, positions are not row offsets.
func (g *Graph) dynMax(name string) int64 {
	if m, ok := g.DynMax[name]; ok {
		return m
	}
	return int64(g.Tokens) - 1
}
