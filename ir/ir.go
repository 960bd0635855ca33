// Package ir is the compiler's graph: the tensors of one step of the model
// (a prefill bucket, the decode step, the logits pass) and the ordered ops
// over them. Op kinds are the model's own operations at the granularity a
// kernel implements them; the planner turns a verified graph into launches.
package ir

import (
	"fmt"
	"strings"
)

// DType is an element type of a device buffer.
type DType string

const (
	BF16 DType = "bf16"
	F32  DType = "f32"
	I32  DType = "i32"
	// I8 holds signed bytes: the int8 rows of a quantized matrix (the
	// certified LM head's, derived from its BF16 weights on load).
	I8 DType = "i8"
)

// Size is the element size in bytes.
func (d DType) Size() int {
	switch d {
	case BF16:
		return 2
	case F32, I32:
		return 4
	case I8:
		return 1
	}
	return 0
}

// Role says who owns a tensor's memory and how long it lives.
type Role string

const (
	Weight     Role = "weight"     // read-only, loaded from the checkpoint once
	Input      Role = "input"      // written by the host before the step (token ids)
	Activation Role = "activation" // lives within one step, placed in the arena
	State      Role = "state"      // GDN recurrent and conv state, carried across steps
	KV         Role = "kv"         // the KV cache of a full-attention layer
	Output     Role = "output"     // read by the host after the step (hidden rows, logits)
)

// Persistent reports whether tensors of this role outlive a step and so get
// their own buffer instead of an arena slot.
func (r Role) Persistent() bool { return r != Activation }

// Tensor is one named buffer of the graph. Shape is the physical extent,
// sized for the step's bucket; the logical row count is the dynamic n.
type Tensor struct {
	ID     int
	Name   string
	DType  DType
	Shape  []int64
	Role   Role
	Source string // weights: the checkpoint tensor, relative to the model prefix
	// Parts, for a weight made of checkpoint tensors concatenated along
	// their first dimension (the fusion pass's concatenated projections),
	// are those tensors in row order; Source is then empty.
	Parts []Part
	// SourceDType is the checkpoint's element type when the device keeps a
	// widened copy (small parameters are stored as f32 on the device).
	SourceDType string
	// Derive, on a weight, says the load step makes it on the device from
	// another weight (Source is then that weight's checkpoint tensor).
	Derive *Derivation
	// Placement is an activation's arena slot, once the scheduler placed it.
	Placement *Placement
}

// Part is one checkpoint tensor of a concatenated weight: its name
// (relative to the model prefix) and the rows [Rows[0], Rows[1]) of the
// weight it fills.
type Part struct {
	Source string
	Rows   [2]int64
}

// Derivation is how a derived weight is made: Op (its operands unbound:
// the load step binds them by name) run once, reading weight From, with
// this tensor as its operand Operand.
type Derivation struct {
	Op      *Op
	From    string
	Operand string
}

// Placement is an activation's byte offset in the arena and its live range
// (the first and last op that use it).
type Placement struct {
	Offset      int64
	First, Last int
}

// Elements is the product of the shape.
func (t *Tensor) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// Bytes is the tensor's size in bytes.
func (t *Tensor) Bytes() int64 { return t.Elements() * int64(t.DType.Size()) }

// Operand binds an op argument to a tensor, starting Offset elements in;
// when Dyn is set the start moves by the value of that parameter-block slot
// × DynStride elements at run time (the LM head reading the last logical
// row, say).
type Operand struct {
	Tensor    int
	Offset    int64
	Dyn       *Slot
	DynStride int64
}

// Op is one operation: a family's kind, its operands in the family's
// order, and its specialization parameters.
type Op struct {
	Kind     Kind
	Layer    int // decoder layer, -1 outside the layers
	Operands []Operand
	Params   Params
	// Rows is the slot that holds the number of logical rows (ParamN);
	// nil means the constant parameter RowsParam.
	Rows *Slot
	// Launch is its launch shape on a GPU target, once configured.
	Launch *LaunchShape
	// Fallback, when set, is ops that compute what this one does, on
	// tensors it names, run in its place where a device cannot run it (a
	// family whose grid waits at a grid barrier, on a device that cannot
	// hold the whole grid at once: Family.GridBarrier).
	Fallback []*Op
}

// Graph is one step of the model.
type Graph struct {
	Name    string
	Tokens  int // physical rows of the step (the bucket)
	Tensors []*Tensor
	Ops     []*Op
	// Dyn lists the parameter-block slots the host sets before each run.
	Dyn []Slot
	// DynMax bounds slots used as operand offsets (default Tokens-1).
	DynMax map[Slot]int64
}

// AddTensor appends a tensor; names are unique within a graph.
func (g *Graph) AddTensor(t Tensor) *Tensor {
	t.ID = len(g.Tensors)
	p := &t
	g.Tensors = append(g.Tensors, p)
	return p
}

// Tensor returns the tensor called name, or nil.
func (g *Graph) Tensor(name string) *Tensor {
	for _, t := range g.Tensors {
		if t.Name == name {
			return t
		}
	}
	return nil
}

// Dump writes the graph as text, one tensor or op a line, for reading and
// diffs; cat names the operands.
func (g *Graph) Dump(cat Catalogue) string {
	var b strings.Builder
	dyn := make([]string, len(g.Dyn))
	for i, s := range g.Dyn {
		dyn[i] = s.String()
	}
	fmt.Fprintf(&b, "graph %s tokens=%d dyn=%s\n", g.Name, g.Tokens, strings.Join(dyn, ","))
	for _, t := range g.Tensors {
		fmt.Fprintf(&b, "  %%%d %s %s %v %s", t.ID, t.Name, t.DType, t.Shape, t.Role)
		if t.Source != "" {
			fmt.Fprintf(&b, " <- %s", t.Source)
		}
		for _, p := range t.Parts {
			fmt.Fprintf(&b, " <- %s[%d:%d]", p.Source, p.Rows[0], p.Rows[1])
		}
		if p := t.Placement; p != nil {
			fmt.Fprintf(&b, " @%d live=[%d,%d]", p.Offset, p.First, p.Last)
		}
		b.WriteByte('\n')
	}
	for i, op := range g.Ops {
		fmt.Fprintf(&b, "  %4d L%-2d %s(", i, op.Layer, op.Kind)
		var names []OperandSpec
		if f := cat[op.Kind]; f != nil {
			names = f.Operands
		}
		for j, o := range op.Operands {
			if j > 0 {
				b.WriteString(", ")
			}
			if j < len(names) {
				b.WriteString(names[j].Name + "=")
			}
			fmt.Fprintf(&b, "%%%d", o.Tensor)
			if o.Offset != 0 {
				fmt.Fprintf(&b, "+%d", o.Offset)
			}
			if o.Dyn != nil {
				fmt.Fprintf(&b, "+%s*%d", *o.Dyn, o.DynStride)
			}
		}
		b.WriteString(")")
		if op.Params.Len() > 0 {
			b.WriteString(" " + op.Params.String())
		}
		if op.Rows != nil {
			fmt.Fprintf(&b, " rows=%s", *op.Rows)
		}
		if l := op.Launch; l != nil {
			fmt.Fprintf(&b, " grid=%v block=%v", l.Grid, l.Block)
			if l.SharedBytes > 0 {
				fmt.Fprintf(&b, " shared=%d", l.SharedBytes)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// DropUnused removes the tensors no op uses (after a rewrite removed their
// last use) and renumbers the rest in order.
func (g *Graph) DropUnused() {
	used := map[int]bool{}
	for _, op := range g.Ops {
		for _, o := range op.Operands {
			used[o.Tensor] = true
		}
		for _, fb := range op.Fallback {
			for _, o := range fb.Operands {
				used[o.Tensor] = true
			}
		}
	}
	ids := map[int]int{}
	var kept []*Tensor
	for _, t := range g.Tensors {
		if used[t.ID] {
			ids[t.ID] = len(kept)
			t.ID = len(kept)
			kept = append(kept, t)
		}
	}
	g.Tensors = kept
	for _, op := range g.Ops {
		for _, o := range append([]*Op{op}, op.Fallback...) {
			for j := range o.Operands {
				o.Operands[j].Tensor = ids[o.Operands[j].Tensor]
			}
		}
	}
}

// CheckParts checks that the parts of a concatenated weight of shape tile
// its first dimension in order: from row 0, each starting where the one
// before ended, non-empty, up to the last row, none named twice.
func CheckParts(parts []Part, shape []int64) error {
	if len(parts) == 0 {
		return nil
	}
	if len(shape) == 0 {
		return fmt.Errorf("parts of a scalar")
	}
	row := int64(0)
	seen := map[string]bool{}
	for _, p := range parts {
		if p.Source == "" || seen[p.Source] {
			return fmt.Errorf("part %q: empty or named twice", p.Source)
		}
		seen[p.Source] = true
		if p.Rows[0] != row || p.Rows[1] <= p.Rows[0] {
			return fmt.Errorf("part %s: rows [%d, %d), want rows from %d on, at least one", p.Source, p.Rows[0], p.Rows[1], row)
		}
		row = p.Rows[1]
	}
	if row != shape[0] {
		return fmt.Errorf("parts cover %d rows of %d", row, shape[0])
	}
	return nil
}
