// Package plan is the compiled engine's frozen schedule: buffers, kernels and,
// per phase (each prefill bucket, the decode step, the logits pass, the
// sampler), the ordered launches. It is data — canonical JSON, hashed,
// human-readable — made by the planner and executed by the runtime on any
// backend.
package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	"github.com/aimaproject/aimac/ir"
)

// Format is the version tag of the plan file.
const Format = "aimac-plan/3"

// PhaseKind says what a phase computes and how the engine runs it.
type PhaseKind string

const (
	Prefill    PhaseKind = "prefill" // a bucket of prompt tokens; hidden rows out, logits of the last row
	DecodeStep PhaseKind = "decode"  // one token in, logits out
	Logits     PhaseKind = "logits"  // LM head over stored hidden rows, for teacher-forced probes
	Sample     PhaseKind = "sample"  // the next token from the logits, written to tokens (sampling on the device)
	// DecodeGreedy is the decode step with the certified int8 LM head
	// (docs/lm-head.md): one token in, the greedy token out to tokens and
	// sampled, no logits.
	DecodeGreedy PhaseKind = "decode_greedy"
)

// PhaseKinds lists every phase kind.
var PhaseKinds = []PhaseKind{Prefill, DecodeStep, Logits, Sample, DecodeGreedy}

// Decode reports whether k is a decode step (with either LM head).
func (k PhaseKind) Decode() bool { return k == DecodeStep || k == DecodeGreedy }

// Valid reports whether k is a known phase kind.
func (k PhaseKind) Valid() bool { return slices.Contains(PhaseKinds, k) }

// Port names a persistent buffer the engine binds — writes from the host,
// reads back, or carries from one phase to the next. A phase declares the
// ports it reads (Phase.Inputs) and writes (Phase.Outputs); each port is the
// plan buffer of the same name.
type Port string

const (
	PortTokens     Port = "tokens"      // i32 token ids: the host's (or the sampler's) input to prefill and decode
	PortHidden     Port = "hidden"      // f32 final-normed rows, written by prefill and decode, read by logits
	PortLogits     Port = "logits"      // f32 logits of the last row, read by the host and by sample
	PortLogitsRows Port = "logits_rows" // f32 teacher-forced logits of the logits phase's rows
	PortSampled    Port = "sampled"     // i32 id and logprob bits the sampler leaves for the host
	PortSampleMask Port = "sample_mask" // u32 words of the ids a constrained draw may pick, read by sample
)

// Ports lists every port.
var Ports = []Port{PortTokens, PortHidden, PortLogits, PortLogitsRows, PortSampled, PortSampleMask}

// Plan is the whole schedule.
type Plan struct {
	Format        string   `json:"format"`
	Model         Model    `json:"model"`
	Target        Target   `json:"target"`
	ContextTokens int      `json:"context_tokens"`
	Buckets       []int    `json:"buckets"`
	LogitsRows    int      `json:"logits_rows"`
	ArenaBytes    int64    `json:"arena_bytes"`
	Buffers       []Buffer `json:"buffers"`
	Kernels       []Kernel `json:"kernels"`
	Phases        []Phase  `json:"phases"`
}

// Model identifies what was planned.
type Model struct {
	Arch        string          `json:"arch"`
	Fingerprint string          `json:"fingerprint"`
	Config      json.RawMessage `json:"config"`
	// Vocab is the LM head's row count.
	Vocab int `json:"vocab"`
}

// Buffer is one device buffer. Persistent buffers (weights, state, KV,
// inputs, outputs) are allocated once; activations live in the arena at
// Offset, valid only within their phase.
type Buffer struct {
	Name   string   `json:"name"`
	Role   ir.Role  `json:"role"`
	DType  ir.DType `json:"dtype"`
	Shape  []int64  `json:"shape"`
	Bytes  int64    `json:"bytes"`
	Offset int64    `json:"offset,omitempty"`
	// Tensor is the checkpoint tensor a weight is loaded from (name relative
	// to the model prefix) and SourceDType its stored type when it differs.
	Tensor      string `json:"tensor,omitempty"`
	SourceDType string `json:"source_dtype,omitempty"`
	// Parts, for a weight concatenated from checkpoint tensors along their
	// first dimension (the projections that share an input, made one
	// launch by the fusion pass), are those tensors in row order; Tensor
	// is then empty. The loader builds the buffer from them.
	Parts []Part `json:"parts,omitempty"`
	// Live is an activation's first and last launch: buffers whose live
	// ranges intersect never share arena bytes.
	Live []int `json:"live,omitempty"`
	// Derive, on a weight, says that the load step makes it on the device
	// from another weight instead of reading it (the certified head's
	// int8 rows and scales, from the BF16 LM head).
	Derive *Derive `json:"derive,omitempty"`
}

// Derive is how a derived weight is made: Kernel (a plan kernel, launched
// once on load with one row) reads weight From and writes this buffer as
// its operand Operand; the kernel's other operands are the buffers of the
// other weights derived by the same kernel from the same weight, by
// operand, and From for the operand it reads.
type Derive struct {
	Kernel  string `json:"kernel"`
	From    string `json:"from"`
	Operand string `json:"operand"`
}

// Part is one checkpoint tensor of a concatenated weight and the rows
// [Rows[0], Rows[1]) of the buffer it fills.
type Part struct {
	Tensor string   `json:"tensor"`
	Rows   [2]int64 `json:"rows"`
}

// IRParts are the parts as the IR holds them.
func (b *Buffer) IRParts() []ir.Part {
	var out []ir.Part
	for _, p := range b.Parts {
		out = append(out, ir.Part{Source: p.Tensor, Rows: p.Rows})
	}
	return out
}

// Sources are the checkpoint tensors a weight buffer is loaded from, with
// the first row each fills: its tensor, or its parts.
func (b *Buffer) Sources() []Part {
	if len(b.Parts) > 0 {
		return b.Parts
	}
	return []Part{{Tensor: b.Tensor, Rows: [2]int64{0, b.Rows()}}}
}

// Rows is the buffer's first dimension (1 for a scalar): what parts tile.
func (b *Buffer) Rows() int64 {
	if len(b.Shape) == 0 {
		return 1
	}
	return b.Shape[0]
}

// Kernel is one specialized kernel: a family and the compile-time
// parameters it is rendered with, typed as the family declares them.
type Kernel struct {
	Name       string    `json:"name"`
	Family     string    `json:"family"`
	Params     ir.Params `json:"params"`
	SourceHash string    `json:"source_hash,omitempty"`
	// Members, for a kernel of the decode_persistent family, are the plan
	// kernels whose entry points it runs as work items (their blocks), in
	// the order its item table numbers them (docs/persistent.md).
	Members []string `json:"members,omitempty"`
}

// Phase is one executable step.
type Phase struct {
	Name   string    `json:"name"`
	Kind   PhaseKind `json:"kind"`
	Tokens int       `json:"tokens"`
	// Dyn lists the parameter-block slots the host sets before running the
	// phase (by name: "n", "pos", …; each name is one fixed slot).
	Dyn []ir.Slot `json:"dyn"`
	// Inputs and Outputs are the ports the phase reads (before writing)
	// and writes, in order of first use: the engine binds them by port.
	Inputs   []Port   `json:"inputs"`
	Outputs  []Port   `json:"outputs"`
	Buffers  []Buffer `json:"buffers"`
	Launches []Launch `json:"launches"`
}

// Input reports whether the phase declares port as an input.
func (ph *Phase) Input(port Port) bool { return slices.Contains(ph.Inputs, port) }

// Output reports whether the phase declares port as an output.
func (ph *Phase) Output(port Port) bool { return slices.Contains(ph.Outputs, port) }

// Launch is one kernel launch with its arguments bound.
type Launch struct {
	Kernel      string   `json:"kernel"`
	Layer       int      `json:"layer"`
	Rows        *ir.Slot `json:"rows,omitempty"`
	Grid        []int    `json:"grid,omitempty"`
	Block       []int    `json:"block,omitempty"`
	SharedBytes int      `json:"shared_bytes,omitempty"`
	// Cluster is the blocks of a thread-block cluster along the grid's x
	// (ir.LaunchShape.Cluster); 0 is none.
	Cluster int `json:"cluster,omitempty"`
	// Stream names the decode_persistent kernel that may run this launch
	// together with the launches next to it that name the same kernel: one
	// launch whose blocks take the run's blocks in order, each waiting for
	// the launch before its own to be done (docs/persistent.md). An engine
	// that does not run it launches them one by one, as if it were empty.
	Stream string `json:"stream,omitempty"`
	Args   []Arg  `json:"args"`
	// Fallback, for a kernel whose family waits at a grid barrier
	// (ir.Family.GridBarrier), is the launches that compute the same on
	// the same buffers, in order: the engine runs them instead on a device
	// that cannot hold the launch's whole grid at once.
	Fallback []Launch `json:"fallback,omitempty"`
}

// Arg binds a kernel argument to a buffer at a byte offset; when Dyn is set
// the offset grows by that slot's value × DynStride bytes at run time.
type Arg struct {
	Buffer    string   `json:"buffer"`
	Offset    int64    `json:"offset,omitempty"`
	Dyn       *ir.Slot `json:"dyn,omitempty"`
	DynStride int64    `json:"dyn_stride,omitempty"`
}

// Encode writes the plan as canonical JSON: fixed key order, no timestamps,
// one buffer or launch a line so diffs stay readable.
func (p *Plan) Encode(w io.Writer) error {
	var b bytes.Buffer
	line := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	js := func(v any) string {
		out, err := json.Marshal(v)
		if err != nil {
			panic(err) // plan values always marshal
		}
		return string(out)
	}
	list := func(indent string, n int, item func(i int) string) {
		if n == 0 {
			b.WriteString("[]")
			return
		}
		b.WriteString("[\n")
		for i := 0; i < n; i++ {
			b.WriteString(indent + "  " + item(i))
			if i < n-1 {
				b.WriteByte(',')
			}
			b.WriteByte('\n')
		}
		b.WriteString(indent + "]")
	}
	line("{\n")
	line("  \"format\": %s,\n", js(p.Format))
	line("  \"model\": %s,\n", js(p.Model))
	line("  \"target\": %s,\n", js(p.Target))
	line("  \"context_tokens\": %d,\n", p.ContextTokens)
	line("  \"buckets\": %s,\n", js(p.Buckets))
	line("  \"logits_rows\": %d,\n", p.LogitsRows)
	line("  \"arena_bytes\": %d,\n", p.ArenaBytes)
	line("  \"buffers\": ")
	list("  ", len(p.Buffers), func(i int) string { return js(p.Buffers[i]) })
	line(",\n  \"kernels\": ")
	list("  ", len(p.Kernels), func(i int) string { return js(p.Kernels[i]) })
	line(",\n  \"phases\": [\n")
	for i, ph := range p.Phases {
		line("    {\n")
		line("      \"name\": %s,\n", js(ph.Name))
		line("      \"kind\": %s,\n", js(ph.Kind))
		line("      \"tokens\": %d,\n", ph.Tokens)
		line("      \"dyn\": %s,\n", js(ph.Dyn))
		line("      \"inputs\": %s,\n", js(orEmpty(ph.Inputs)))
		line("      \"outputs\": %s,\n", js(orEmpty(ph.Outputs)))
		line("      \"buffers\": ")
		list("      ", len(ph.Buffers), func(i int) string { return js(ph.Buffers[i]) })
		line(",\n      \"launches\": ")
		list("      ", len(ph.Launches), func(i int) string { return js(ph.Launches[i]) })
		line("\n    }")
		if i < len(p.Phases)-1 {
			line(",")
		}
		line("\n")
	}
	line("  ]\n}\n")
	_, err := w.Write(b.Bytes())
	return err
}

// Bytes returns the canonical encoding.
func (p *Plan) Bytes() []byte {
	var b bytes.Buffer
	_ = p.Encode(&b) // a bytes.Buffer never fails
	return b.Bytes()
}

// Hash is the sha256 of the canonical encoding.
func (p *Plan) Hash() string {
	s := sha256.Sum256(p.Bytes())
	return "sha256:" + hex.EncodeToString(s[:])
}

// WriteFile writes the plan atomically.
func (p *Plan) WriteFile(path string) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	if err := p.Encode(f); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	return os.Rename(f.Name(), path)
}

// orEmpty writes no ports as [] rather than null.
func orEmpty(p []Port) []Port {
	if p == nil {
		return []Port{}
	}
	return p
}

// TakeFallbacks is a copy of the plan in which every launch for which take
// says yes is replaced by its fallback launches (Launch.Fallback), in
// place, with the phase's activation live ranges renumbered to the new
// launch indices: the plan a device runs when it cannot run some launches
// (a grid barrier whose grid it cannot hold at once). Launches without a
// fallback are kept whatever take says. p itself is not changed; when
// nothing is replaced the copy shares p's phases.
func (p *Plan) TakeFallbacks(take func(ph *Phase, l *Launch) bool) *Plan {
	q := *p
	q.Phases = slices.Clone(p.Phases)
	for pi := range q.Phases {
		ph := &q.Phases[pi]
		// first[i], last[i]: the new indices launch i became.
		first, last := make([]int, len(ph.Launches)), make([]int, len(ph.Launches))
		var launches []Launch
		replaced := false
		for i := range ph.Launches {
			l := &ph.Launches[i]
			first[i] = len(launches)
			if len(l.Fallback) > 0 && take(ph, l) {
				launches = append(launches, l.Fallback...)
				replaced = true
			} else {
				launches = append(launches, *l)
			}
			last[i] = len(launches) - 1
		}
		if !replaced {
			continue
		}
		ph.Launches = launches
		ph.Buffers = slices.Clone(ph.Buffers)
		for bi := range ph.Buffers {
			b := &ph.Buffers[bi]
			if len(b.Live) == 2 && b.Live[0] >= 0 && b.Live[1] < len(first) && b.Live[0] <= b.Live[1] {
				b.Live = []int{first[b.Live[0]], last[b.Live[1]]}
			}
		}
	}
	return &q
}
