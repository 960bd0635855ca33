package bundle

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aimaproject/aimac/plan"
)

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

// Error names the bundle and its problem, or each problem on its own line.
func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return fmt.Sprintf("bundle %s: %s", e.Dir, e.Problems[0])
	}
	return fmt.Sprintf("bundle %s: %d problems:\n  %s", e.Dir, len(e.Problems), strings.Join(e.Problems, "\n  "))
}

// Open reads the bundle in dir and verifies it without rendering or
// compiling anything: the manifest's format and shape, its kernel ABI
// against the engine's (plan.KernelABI), every listed file's size and
// sha256, no unlisted files, the plan's hash and target against the
// manifest, and for every kernel of the plan a manifest entry, a code object
// and a resource report. A manifest that cannot be read or speaks another
// ABI is refused at once; the other problems are reported together. Every
// refusal is an *Error.
func Open(dir string) (*Bundle, error) {
	refuse := func(format string, args ...any) (*Bundle, error) {
		return nil, &Error{Dir: dir, Problems: []string{fmt.Sprintf(format, args...)}}
	}
	data, err := readManifest(filepath.Join(dir, ManifestFile))
	if errors.Is(err, fs.ErrNotExist) {
		return refuse("no %s: not a bundle (build one with `aimac build`)", ManifestFile)
	}
	if err != nil {
		return refuse("%s: %v", ManifestFile, err)
	}
	m, err := ParseManifest(data)
	if err != nil {
		return refuse("%s: %v", ManifestFile, err)
	}
	if m.KernelABI != plan.KernelABI {
		return refuse("kernel ABI %d, this engine speaks kernel ABI %d (build the bundle again with an aimac of kernel ABI %d)", m.KernelABI, plan.KernelABI, plan.KernelABI)
	}

	var probs []string
	fail := func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) }
	contents := map[string][]byte{}
	listed := map[string]bool{}
	for _, f := range m.Files {
		listed[f.Path] = true
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
	b := &Bundle{Dir: dir, Manifest: m}
	b.Plan, b.Objects = verify(m, contents, fail)
	if len(probs) > 0 {
		return nil, &Error{Dir: dir, Problems: probs}
	}
	return b, nil
}

// maxManifestBytes bounds a manifest; the real model's is under a megabyte.
const maxManifestBytes = 64 << 20

// readManifest reads a manifest file, refusing one too large to be one.
func readManifest(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxManifestBytes {
		return nil, fmt.Errorf("larger than %d bytes: not a manifest", maxManifestBytes)
	}
	return data, nil
}

// verify holds a parsed manifest to the bundle's contents (the listed files
// whose sums matched): the plan's encoding, hash and target, and one entry,
// code object and resource report per kernel of the plan, nothing more. It
// returns the plan and the code objects by kernel name. Open runs it on the
// disk, Write on what it is about to write.
func verify(m *Manifest, contents map[string][]byte, fail func(string, ...any)) (*plan.Plan, map[string][]byte) {
	listed := map[string]bool{}
	for _, f := range m.Files {
		listed[f.Path] = true
	}
	data, ok := contents[PlanFile]
	if !ok {
		return nil, nil // listed (ParseManifest) and missing or damaged: already reported
	}
	p, err := plan.Decode(bytes.NewReader(data))
	if err != nil {
		fail("%s: %v", PlanFile, err)
		return nil, nil
	}
	if !bytes.Equal(p.Bytes(), data) {
		fail("%s: not in canonical form", PlanFile)
	}
	if h := p.Hash(); h != m.PlanHash {
		fail("%s: hash %s, the manifest says %s", PlanFile, h, m.PlanHash)
	}
	if string(p.Target) != m.Target {
		// The code objects are of the manifest's target: nothing to match.
		fail("%s: target %s, the manifest says %s", PlanFile, p.Target, m.Target)
		return p, nil
	}
	ext, err := ObjectExt(m.Target)
	if err != nil {
		fail("%v", err)
		return p, nil
	}
	entries := map[string]Kernel{}
	for _, k := range m.Kernels {
		entries[k.Name] = k
	}
	objects := map[string][]byte{}
	used := map[string]bool{PlanFile: true}
	for _, k := range p.Kernels {
		switch e, ok := entries[k.Name]; {
		case !ok:
			fail("kernel %s: in the plan but not in the manifest", k.Name)
		case e.Family != string(k.Family):
			fail("kernel %s: family %s in the plan, %s in the manifest", k.Name, k.Family, e.Family)
		}
		delete(entries, k.Name)
		path := ObjectPath(k.Name, ext)
		used[path] = true
		obj, ok := contents[path]
		switch {
		case ok:
			objects[k.Name] = obj
		case !listed[path]:
			fail("kernel %s: no code object %s in the manifest", k.Name, path)
		}
		if _, ok := m.Resources[k.Name]; !ok {
			fail("kernel %s: no resource report in the manifest", k.Name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(entries)) {
		fail("kernel %s: in the manifest but not in the plan", name)
	}
	for _, f := range m.Files {
		if !used[f.Path] {
			fail("%s: listed in the manifest, but no kernel of the plan uses it", f.Path)
		}
	}
	return p, objects
}

// sum is the "sha256:"-prefixed hex digest used throughout the manifest.
func sum(data []byte) string {
	s := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(s[:])
}
