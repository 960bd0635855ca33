package ir

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
)

// ParamKind is the type of a kernel's compile-time parameter.
type ParamKind uint8

const (
	IntParam  ParamKind = iota + 1 // an extent, a count or a stride: 1 to 2^31
	RealParam                      // a positive finite real (eps, scale, θ), folded in as a float32 literal
	FlagParam                      // a switch between kernel variants
)

func (k ParamKind) String() string {
	switch k {
	case IntParam:
		return "integer"
	case RealParam:
		return "real"
	case FlagParam:
		return "flag"
	}
	return fmt.Sprintf("ParamKind(%d)", uint8(k))
}

func (k ParamKind) article() string {
	if k == IntParam {
		return "an " + k.String()
	}
	return "a " + k.String()
}

// ParamSpec declares one compile-time parameter of a family. An optional
// flag may be left out (it reads false), so a variant added behind one
// leaves the names of the kernels that do not take it as they were.
type ParamSpec struct {
	Name     string
	Kind     ParamKind
	Optional bool
}

// Ints, Reals and Flags declare parameters of one kind, in order;
// OptionalFlags declares flags that may be left out.
func Ints(names ...string) []ParamSpec  { return specs(IntParam, names) }
func Reals(names ...string) []ParamSpec { return specs(RealParam, names) }
func Flags(names ...string) []ParamSpec { return specs(FlagParam, names) }
func OptionalFlags(names ...string) []ParamSpec {
	out := specs(FlagParam, names)
	for i := range out {
		out[i].Optional = true
	}
	return out
}

func specs(k ParamKind, names []string) []ParamSpec {
	out := make([]ParamSpec, len(names))
	for i, n := range names {
		out[i] = ParamSpec{Name: n, Kind: k}
	}
	return out
}

// RowsParam is the integer parameter every family accepts besides its
// own: the constant row count of a kernel launched with fixed rows (the LM
// head of the last row, the sampler), rather than a dynamic one.
const RowsParam = "rows"

// Params are a kernel's compile-time parameters, each in the map of its
// kind. In a plan they read {"int": {…}, "real": {…}, "flag": {…}}, so a
// plan file says which is which and decoding never guesses.
type Params struct {
	Ints  map[string]int64   `json:"int,omitempty"`
	Reals map[string]float64 `json:"real,omitempty"`
	Flags map[string]bool    `json:"flag,omitempty"`
}

// Int, Real and Flag read a parameter (zero when absent: callers read
// parameters of validated kernels only).
func (p Params) Int(name string) int      { return int(p.Ints[name]) }
func (p Params) Real(name string) float64 { return p.Reals[name] }
func (p Params) Flag(name string) bool    { return p.Flags[name] }
func (p Params) Has(name string) bool     { return p.kind(name) != 0 }
func (p Params) Rows() (int64, bool)      { r, ok := p.Ints[RowsParam]; return r, ok }
func (p Params) Len() int                 { return len(p.Ints) + len(p.Reals) + len(p.Flags) }
func (p Params) kind(name string) ParamKind {
	if _, ok := p.Ints[name]; ok {
		return IntParam
	}
	if _, ok := p.Reals[name]; ok {
		return RealParam
	}
	if _, ok := p.Flags[name]; ok {
		return FlagParam
	}
	return 0
}

// SetInt, SetReal and SetFlag set a parameter, allocating its map.
func (p *Params) SetInt(name string, v int64) {
	if p.Ints == nil {
		p.Ints = map[string]int64{}
	}
	p.Ints[name] = v
}

func (p *Params) SetReal(name string, v float64) {
	if p.Reals == nil {
		p.Reals = map[string]float64{}
	}
	p.Reals[name] = v
}

func (p *Params) SetFlag(name string, v bool) {
	if p.Flags == nil {
		p.Flags = map[string]bool{}
	}
	p.Flags[name] = v
}

// Clone copies the parameters.
func (p Params) Clone() Params {
	var c Params
	for k, v := range p.Ints {
		c.SetInt(k, v)
	}
	for k, v := range p.Reals {
		c.SetReal(k, v)
	}
	for k, v := range p.Flags {
		c.SetFlag(k, v)
	}
	return c
}

// Names lists every parameter name, sorted.
func (p Params) Names() []string {
	var out []string
	for k := range p.Ints {
		out = append(out, k)
	}
	for k := range p.Reals {
		out = append(out, k)
	}
	for k := range p.Flags {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// String writes name=value pairs, sorted (the graph dump).
func (p Params) String() string {
	var b []byte
	for i, k := range p.Names() {
		if i > 0 {
			b = append(b, ' ')
		}
		switch p.kind(k) {
		case IntParam:
			b = fmt.Appendf(b, "%s=%d", k, p.Ints[k])
		case RealParam:
			b = fmt.Appendf(b, "%s=%g", k, p.Reals[k])
		case FlagParam:
			b = fmt.Appendf(b, "%s=%t", k, p.Flags[k])
		}
	}
	return string(b)
}

// Key is the canonical text a specialization is named by: one JSON object
// of every parameter, keys sorted, flags as 0 or 1. It is the encoding
// kernel names have always been hashed from, so typed parameters name the
// same kernels the untyped ones did.
func (p Params) Key() []byte {
	flat := map[string]any{}
	for k, v := range p.Ints {
		flat[k] = v
	}
	for k, v := range p.Reals {
		flat[k] = v
	}
	for k, v := range p.Flags {
		flat[k] = 0
		if v {
			flat[k] = 1
		}
	}
	b, err := json.Marshal(flat)
	if err != nil {
		panic(err) // only finite reals reach here (CheckParams)
	}
	return b
}

// CheckParams holds p to the family's declaration: every declared
// parameter present (but optional flags) with its kind, nothing undeclared (but RowsParam),
// integers from 1 to 2^31, reals finite and positive, then the family's
// own relations.
func (f *Family) CheckParams(p Params) error {
	declared := map[string]ParamKind{RowsParam: IntParam}
	for _, s := range f.Params {
		declared[s.Name] = s.Kind
	}
	for _, name := range p.Names() {
		want, ok := declared[name]
		if !ok {
			return fmt.Errorf("parameter %s is not a parameter of family %s", name, f.Kind)
		}
		if got := p.kind(name); got != want {
			return fmt.Errorf("parameter %s is given as %s, family %s declares it %s", name, got.article(), f.Kind, want.article())
		}
	}
	for _, s := range f.Params {
		if p.kind(s.Name) == 0 && !s.Optional {
			return fmt.Errorf("parameter %s (%s) missing", s.Name, s.Kind)
		}
	}
	for name, v := range p.Ints {
		if v < 1 || v > 1<<31 {
			return fmt.Errorf("parameter %s is %d, want an integer from 1 to 2^31", name, v)
		}
	}
	for name, v := range p.Reals {
		if math.IsNaN(v) || math.IsInf(v, 0) || v <= 0 {
			return fmt.Errorf("parameter %s is %g, want a finite real > 0", name, v)
		}
	}
	if f.Check != nil {
		return f.Check(p)
	}
	return nil
}
