// Package bundle builds and opens engine bundles: the directory `aimac build`
// writes and `aima-engine --bundle` runs. A bundle holds a plan, one compiled
// code object per kernel of the plan and a manifest that ties them together
// with sha256 sums, so the engine loads verified code and never compiles.
//
// Layout:
//
//	DIR/plan.json                    the plan's canonical bytes
//	DIR/kernels/<kernel>.cubin       sm_90 code objects (.hsaco for gfx1151)
//	DIR/manifest.json                Manifest
package bundle

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aimaproject/aimac/codegen"
	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/plan"
)

// Format tags a manifest; Open refuses any other.
const Format = "aimac-bundle/1"

// File names inside a bundle.
const (
	ManifestFile = "manifest.json"
	PlanFile     = "plan.json"
	KernelsDir   = "kernels"
)

// File is one file of the bundle with its size and sha256.
type File struct {
	Path   string `json:"path"` // slash-separated, relative to the bundle
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // "sha256:" + hex
}

// Manifest describes a bundle: what it was built from and every file in it
// (except the manifest itself).
type Manifest struct {
	Format   string `json:"format"`
	Target   string `json:"target"`
	PlanHash string `json:"plan_hash"`
	// Compiler is the device compiler's kind and version, Flags the user
	// flags it was given.
	Compiler string   `json:"compiler"`
	Flags    []string `json:"flags"`
	// Kernels is the codegen manifest: each kernel's family, parameters and
	// source hash.
	Kernels *codegen.Manifest `json:"kernels"`
	// Resources is each kernel's resource report, by kernel name.
	Resources map[string]hipcc.Resources `json:"resources"`
	Files     []File                     `json:"files"`
}

// Bytes is the manifest's canonical JSON (two-space indent, trailing
// newline), so equal bundles have equal manifests.
func (m *Manifest) Bytes() ([]byte, error) {
	out, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// ObjectExt is the code-object file extension of target, so builder and
// reader name kernel files the same way.
func ObjectExt(target string) (string, error) {
	ext, err := plan.Target(target).ObjectExt()
	if err != nil {
		return "", fmt.Errorf("bundle: %w", err)
	}
	return ext, nil
}

// ObjectPath is the bundle-relative path of a kernel's code object.
func ObjectPath(kernel, ext string) string { return KernelsDir + "/" + kernel + ext }

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
	Manifest *Manifest
	Kernels  int
	Cached   int // kernels served from the compile cache
}

// Build renders and compiles every kernel of p for target and writes the
// bundle to o.Out atomically (into o.Out+".tmp", then renamed), so a reader
// never sees half a bundle. It refuses a plan made for another target and a
// non-empty o.Out that is not a bundle; compile failures name the kernels.
func Build(ctx context.Context, p *plan.Plan, target string, o Options) (*Report, error) {
	if o.Out == "" {
		return nil, errors.New("bundle: no output directory")
	}
	ext, err := ObjectExt(target)
	if err != nil {
		return nil, err
	}
	if string(p.Target) != target {
		return nil, fmt.Errorf("bundle: the plan is for target %s, not %s (make a plan for %s with `aimac plan --target %s`)", p.Target, target, target, target)
	}
	if err := checkOut(o.Out); err != nil {
		return nil, err
	}
	srcs, err := codegen.RenderPlan(p)
	if err != nil {
		return nil, err
	}
	km, err := codegen.NewManifest(p)
	if err != nil {
		return nil, err
	}
	c := o.Compiler
	if c == nil {
		if c, err = hipcc.Find(hipcc.Target(target)); err != nil {
			return nil, fmt.Errorf("bundle: %w", err)
		}
	}
	in := make([]hipcc.Source, len(srcs))
	for i, s := range srcs {
		in[i] = hipcc.Source{Name: s.Kernel, Code: s.Code}
	}
	res, err := c.Compile(ctx, hipcc.Target(target), in, hipcc.Options{CacheDir: o.CacheDir, Flags: compileFlags(target, o.Flags), Workers: o.Workers})
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}

	files := map[string][]byte{PlanFile: p.Bytes()}
	m := &Manifest{
		Format: Format, Target: target, PlanHash: p.Hash(),
		Compiler: c.Kind + " " + c.Version, Flags: append([]string{}, o.Flags...),
		Kernels: km, Resources: map[string]hipcc.Resources{},
	}
	rep := &Report{Manifest: m, Kernels: len(res)}
	for _, r := range res {
		files[ObjectPath(r.Name, ext)] = r.Object
		m.Resources[r.Name] = r.Resources
		if r.Cached {
			rep.Cached++
		}
	}
	for _, name := range sortedKeys(files) {
		m.Files = append(m.Files, fileOf(name, files[name]))
	}
	mb, err := m.Bytes()
	if err != nil {
		return nil, err
	}
	files[ManifestFile] = mb
	if err := writeDir(o.Out, files); err != nil {
		return nil, fmt.Errorf("bundle: write %s: %w", o.Out, err)
	}
	return rep, nil
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

// checkOut refuses to overwrite a directory that is not a bundle: only a
// missing or empty directory, or one with a bundle manifest, may be replaced.
func checkOut(out string) error {
	entries, err := os.ReadDir(out)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bundle: --out %s: %w", out, err)
	}
	if len(entries) == 0 {
		return nil
	}
	data, err := os.ReadFile(filepath.Join(out, ManifestFile))
	var head struct {
		Format string `json:"format"`
	}
	if err != nil || json.Unmarshal(data, &head) != nil || head.Format != Format {
		return fmt.Errorf("bundle: %s is not empty and not a bundle (no %s of format %s); refusing to replace it", out, ManifestFile, Format)
	}
	return nil
}

// writeDir writes files into out+".tmp" and swaps it for out, keeping the
// previous bundle until the new one is in place.
func writeDir(out string, files map[string][]byte) error {
	tmp := out + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	for _, name := range sortedKeys(files) {
		path := filepath.Join(tmp, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			return err
		}
	}
	old := out + ".old"
	if err := os.RemoveAll(old); err != nil {
		return err
	}
	moved := false
	if _, err := os.Stat(out); err == nil {
		if err := os.Rename(out, old); err != nil {
			return err
		}
		moved = true
	}
	if err := os.Rename(tmp, out); err != nil {
		if moved {
			os.Rename(old, out)
		}
		return err
	}
	return os.RemoveAll(old)
}

// fileOf is the manifest entry of one file's contents.
func fileOf(name string, data []byte) File {
	return File{Path: name, Size: int64(len(data)), SHA256: sum(data)}
}

// sum is the "sha256:"-prefixed hex digest used throughout the manifest.
func sum(data []byte) string {
	s := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(s[:])
}

// sortedKeys makes file order, and so the manifest, deterministic.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// Bundle is an opened, verified bundle.
type Bundle struct {
	Dir      string
	Manifest *Manifest
	Plan     *plan.Plan
	// Objects are the code objects by kernel name, for loader.Options.Cubins.
	Objects map[string][]byte
}

// PlanPath is the bundle's plan file, for loader.Options.PlanFile.
func (b *Bundle) PlanPath() string { return filepath.Join(b.Dir, PlanFile) }

// Error lists every problem Open found, so one run shows all of them.
type Error struct {
	Dir      string
	Problems []string
}

// Error names the bundle and each problem on its own line.
func (e *Error) Error() string {
	return fmt.Sprintf("bundle %s: %d problem(s):\n  %s", e.Dir, len(e.Problems), strings.Join(e.Problems, "\n  "))
}

// Open reads the bundle in dir and verifies it: every listed file's size and
// sha256, no unlisted files, the plan's hash and target against the
// manifest, the kernel sources the plan renders to against the manifest's
// source hashes, and one code object per kernel of the plan. It reports all
// problems at once as an *Error.
func Open(dir string) (*Bundle, error) {
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		return nil, fmt.Errorf("bundle %s: %w (build one with `aimac build`)", dir, err)
	}
	var m Manifest
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("bundle %s: %s: %w", dir, ManifestFile, err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("bundle %s: format %q, want %q", dir, m.Format, Format)
	}
	var probs []string
	fail := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }

	contents := map[string][]byte{}
	listed := map[string]bool{}
	for _, f := range m.Files {
		listed[f.Path] = true
		if !fs.ValidPath(f.Path) || f.Path == ManifestFile {
			fail("%s: not a valid file name in a bundle", f.Path)
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f.Path)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			fail("%s: missing", f.Path)
		case err != nil:
			fail("%s: %v", f.Path, err)
		case int64(len(b)) != f.Size:
			fail("%s: %d bytes, the manifest says %d (damaged or replaced)", f.Path, len(b), f.Size)
		case sum(b) != f.SHA256:
			fail("%s: sha256 %s, the manifest says %s (damaged or replaced)", f.Path, sum(b), f.SHA256)
		default:
			contents[f.Path] = b
		}
	}
	err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel != ManifestFile && !listed[rel] {
			fail("%s: not listed in the manifest", rel)
		}
		return nil
	})
	if err != nil {
		fail("%v", err)
	}

	b := &Bundle{Dir: dir, Manifest: &m, Objects: map[string][]byte{}}
	ext, err := ObjectExt(m.Target)
	if err != nil {
		fail("%v", err)
	}
	if pb, ok := contents[PlanFile]; ok {
		b.Plan = checkPlan(pb, &m, fail)
	} else if !listed[PlanFile] {
		fail("%s: not listed in the manifest", PlanFile)
	}
	if b.Plan != nil && ext != "" {
		for _, k := range b.Plan.Kernels {
			path := ObjectPath(k.Name, ext)
			obj, ok := contents[path]
			switch {
			case ok:
				b.Objects[k.Name] = obj
			case !listed[path]:
				fail("kernel %s: no code object %s in the manifest", k.Name, path)
			}
			if _, ok := m.Resources[k.Name]; !ok {
				fail("kernel %s: no resource report in the manifest", k.Name)
			}
		}
	}
	if len(probs) > 0 {
		return nil, &Error{Dir: dir, Problems: probs}
	}
	return b, nil
}

// checkPlan decodes the bundle's plan and holds it to the manifest: hash,
// target, canonical encoding and the codegen manifest of its kernels.
func checkPlan(data []byte, m *Manifest, fail func(string, ...any)) *plan.Plan {
	p, err := plan.Decode(bytes.NewReader(data))
	if err != nil {
		fail("%s: %v", PlanFile, err)
		return nil
	}
	if !bytes.Equal(p.Bytes(), data) {
		fail("%s: not in canonical form", PlanFile)
	}
	if h := p.Hash(); h != m.PlanHash {
		fail("%s: hash %s, the manifest says %s", PlanFile, h, m.PlanHash)
	}
	if string(p.Target) != m.Target {
		fail("%s: target %s, the manifest says %s", PlanFile, p.Target, m.Target)
	}
	km, err := codegen.NewManifest(p)
	if err != nil {
		fail("%s: render kernels: %v", PlanFile, err)
		return p
	}
	if m.Kernels == nil {
		fail("manifest has no kernel list")
		return p
	}
	want := map[string]codegen.ManifestKernel{}
	for _, k := range m.Kernels.Kernels {
		want[k.Name] = k
	}
	for _, k := range km.Kernels {
		got, ok := want[k.Name]
		switch {
		case !ok:
			fail("kernel %s: in the plan but not in the manifest", k.Name)
		case got.SourceHash != k.SourceHash:
			fail("kernel %s: the plan renders source %s, the manifest says %s (built by another code generator?)", k.Name, k.SourceHash, got.SourceHash)
		}
		delete(want, k.Name)
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		fail("kernel %s: in the manifest but not in the plan", name)
	}
	return p
}
