// Package bundler builds engine bundles for `aimac build`: it renders every
// kernel of a plan (codegen), compiles the sources for the plan's target
// (hipcc) and writes the bundle atomically (bundle.Write). It is the
// compiler's half of the bundle; the engine links only package bundle, the
// format and its verifier.
package bundler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/aimaproject/aimac/bundle"
	"github.com/aimaproject/aimac/codegen"
	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/plan"
)

// Options tune Build.
type Options struct {
	Out      string   // bundle directory to write
	CacheDir string   // compile cache ("" compiles without one)
	Flags    []string // user device-compiler flags (hipcc.UserFlags)
	Workers  int      // parallel compiles; ≤ 0 means GOMAXPROCS
	// Compiler compiles the kernels; nil finds one for the target
	// (hipcc.Find).
	Compiler *hipcc.Compiler
}

// Report says what Build wrote and how much came from the cache.
type Report struct {
	Manifest *bundle.Manifest
	Kernels  int
	Cached   int // kernels served from the compile cache
}

// Build renders and compiles every kernel of p for target and writes the
// bundle to o.Out. It refuses a plan made for another target and a non-empty
// o.Out that is not a bundle before compiling anything; compile failures
// name the kernels and leave o.Out as it was.
func Build(ctx context.Context, p *plan.Plan, target string, o Options) (*Report, error) {
	if o.Out == "" {
		return nil, errors.New("bundler: no output directory")
	}
	if _, err := bundle.ObjectExt(target); err != nil {
		return nil, fmt.Errorf("bundler: %w", err)
	}
	if string(p.Target) != target {
		return nil, fmt.Errorf("bundler: the plan is for target %s, not %s (make a plan for %s with `aimac plan --target %s`)", p.Target, target, target, target)
	}
	if err := bundle.CheckDest(o.Out); err != nil {
		return nil, err
	}
	srcs, err := codegen.RenderPlan(p)
	if err != nil {
		return nil, err
	}
	abi, err := sourceABI(srcs)
	if err != nil {
		return nil, err
	}
	c := o.Compiler
	if c == nil {
		if c, err = hipcc.Find(hipcc.Target(target)); err != nil {
			return nil, fmt.Errorf("bundler: %w", err)
		}
	}
	in := make([]hipcc.Source, len(srcs))
	kernels := make([]bundle.Kernel, len(srcs))
	for i, s := range srcs {
		in[i] = hipcc.Source{Name: s.Kernel, Code: s.Code}
		kernels[i] = bundle.Kernel{Name: s.Kernel, Family: s.Family, Template: s.Template, SourceHash: s.Hash}
	}
	res, err := c.Compile(ctx, hipcc.Target(target), in, hipcc.Options{CacheDir: o.CacheDir, Flags: compileFlags(target, o.Flags), Workers: o.Workers})
	if err != nil {
		return nil, fmt.Errorf("bundler: %w", err)
	}
	contents := bundle.Contents{
		Plan: p, KernelABI: abi, Compiler: c.Kind + " " + c.Version, Flags: o.Flags, Kernels: kernels,
		Objects: map[string][]byte{}, Resources: map[string]bundle.Resources{},
	}
	rep := &Report{Kernels: len(res)}
	for _, r := range res {
		contents.Objects[r.Name] = r.Object
		if contents.Resources[r.Name], err = resources(r.Resources); err != nil {
			return nil, fmt.Errorf("bundler: kernel %s: %w", r.Name, err)
		}
		if r.Cached {
			rep.Cached++
		}
	}
	if rep.Manifest, err = bundle.Write(o.Out, contents); err != nil {
		return nil, err
	}
	return rep, nil
}

// sourceABI is the one kernel ABI every rendered source implements.
func sourceABI(srcs []codegen.Source) (int, error) {
	abis := map[int]bool{}
	for _, s := range srcs {
		abis[s.ABI] = true
	}
	if len(abis) != 1 {
		return 0, fmt.Errorf("bundler: the plan's kernels are rendered for kernel ABIs %v; a bundle holds one", slices.Sorted(maps.Keys(abis)))
	}
	return srcs[0].ABI, nil
}

// resources is the manifest's form of a resource report: hipcc's counts
// under their JSON names, so the format needs no compiler types.
func resources(r hipcc.Resources) (bundle.Resources, error) {
	data, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	out := bundle.Resources{}
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("resource report %s: %w", data, err)
	}
	return out, nil
}

// deterministicAMD makes clang name the compilation-unit id symbol
// (__hip_cuid_…) without hashing the temporary source path, so equal sources
// compile to equal code objects and a rebuilt bundle is byte-identical.
const deterministicAMD = "-fuse-cuid=none"

// compileFlags puts the determinism flag of target before the user's flags,
// which may still override it.
func compileFlags(target string, user []string) []string {
	if plan.Target(target).Spec().Dialect == plan.HIP {
		return append([]string{deterministicAMD}, user...)
	}
	return append([]string{}, user...)
}
