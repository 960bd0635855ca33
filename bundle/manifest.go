// Package bundle is the engine bundle format: the directory `aimac build`
// writes and `aima-engine --bundle` runs. A bundle holds a plan, one compiled
// code object per kernel of the plan and a manifest that ties them together
// with sha256 sums and the kernel ABI the code objects speak, so the engine
// loads verified code and never compiles.
//
// Layout:
//
//	DIR/plan.json                    the plan's canonical bytes
//	DIR/kernels/<kernel>.cubin       sm_90 code objects (.hsaco for gfx1151)
//	DIR/manifest.json                Manifest
//
// The package is the format only: Write lays out what a builder made and
// Open verifies it. It knows nothing of templates or device compilers
// (package bundler renders and compiles), so the serving binary does not
// link the compiler.
package bundle

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"

	"github.com/aimaproject/aimac/plan"
)

// Format tags a manifest; ParseManifest refuses any other. It changes when
// the manifest's shape does.
const Format = "aimac-bundle/2"

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

// Kernel is what the builder recorded of one kernel: where its source came
// from. It documents the build; Open does not re-render anything, so a
// bundle of an older compiler with the same kernel ABI opens.
type Kernel struct {
	Name       string `json:"name"`
	Family     string `json:"family"`
	Template   string `json:"template"`    // the family template's file name
	SourceHash string `json:"source_hash"` // "sha256:" + hex of the rendered source
}

// Resources is a kernel's resource report as the device compiler gave it,
// counts by name: vgprs, sgprs, lds_bytes, scratch_bytes, … on AMD;
// registers, shared_bytes, spill_stores, … on NVIDIA. Zero counts are left
// out.
type Resources map[string]int

// Manifest describes a bundle: what it was built from and every file in it
// (except the manifest itself).
type Manifest struct {
	Format string `json:"format"`
	// KernelABI is the calling convention the code objects were rendered
	// for (plan.KernelABI of the compiler that built them).
	KernelABI int    `json:"kernel_abi"`
	Target    string `json:"target"`
	PlanHash  string `json:"plan_hash"`
	// Compiler is the device compiler's kind and version, Flags the user
	// flags it was given.
	Compiler string   `json:"compiler"`
	Flags    []string `json:"flags"`
	// Kernels lists the plan's kernels by name.
	Kernels []Kernel `json:"kernels"`
	// Resources is each kernel's resource report, by kernel name.
	Resources map[string]Resources `json:"resources"`
	Files     []File               `json:"files"`
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

// ObjectExt is the code-object file extension of target, as the target's
// own table spells it (plan.TargetSpec), so builder and reader name kernel
// files the same way.
func ObjectExt(target string) (string, error) { return plan.Target(target).ObjectExt() }

// ObjectPath is the bundle-relative path of a kernel's code object.
func ObjectPath(kernel, ext string) string { return KernelsDir + "/" + kernel + ext }

// ParseManifest decodes a manifest and checks its shape: the format tag
// first (so a manifest of another format is named as such, not as unknown
// fields), then strictly every field, a known target, well-formed sums and
// file names, the plan among the files, no file or kernel twice. It does not judge the kernel ABI:
// that is Open's, which knows the engine's.
func ParseManifest(data []byte) (*Manifest, error) {
	var head struct {
		Format *string `json:"format"`
	}
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(&head); err != nil {
		return nil, jsonError(data, err)
	}
	if head.Format == nil {
		return nil, errors.New(`no "format": not a bundle manifest`)
	}
	if *head.Format != Format {
		return nil, fmt.Errorf("format %q, this engine reads %q (build the bundle again with this release's `aimac build`)", *head.Format, Format)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, jsonError(data, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON object")
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return &m, nil
}

// jsonError says what is wrong with a manifest that does not decode; a
// file cut short (a copy interrupted, a full disk) is named as such.
func jsonError(data []byte, err error) error {
	var syn *json.SyntaxError
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || (errors.As(err, &syn) && syn.Offset >= int64(len(data))) {
		return fmt.Errorf("truncated after %d bytes", len(data))
	}
	return fmt.Errorf("not a manifest of format %s: %w", Format, err)
}

// sumPattern is the form of every sha256 in a manifest.
var sumPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// check holds a decoded manifest to the format's rules.
func (m *Manifest) check() error {
	if m.KernelABI < 1 {
		return fmt.Errorf("kernel_abi %d: want a version ≥ 1", m.KernelABI)
	}
	if _, err := ObjectExt(m.Target); err != nil {
		return err
	}
	if !sumPattern.MatchString(m.PlanHash) {
		return fmt.Errorf("plan_hash %q is not a sha256 sum", m.PlanHash)
	}
	seen := map[string]bool{}
	for _, f := range m.Files {
		switch {
		case !fs.ValidPath(f.Path) || f.Path == "." || f.Path == ManifestFile:
			return fmt.Errorf("file %q: not a valid file name in a bundle", f.Path)
		case seen[f.Path]:
			return fmt.Errorf("file %s: listed twice", f.Path)
		case f.Size < 0:
			return fmt.Errorf("file %s: size %d", f.Path, f.Size)
		case !sumPattern.MatchString(f.SHA256):
			return fmt.Errorf("file %s: %q is not a sha256 sum", f.Path, f.SHA256)
		}
		seen[f.Path] = true
	}
	if !seen[PlanFile] {
		return fmt.Errorf("files: no %s", PlanFile)
	}
	names := map[string]bool{}
	for _, k := range m.Kernels {
		switch {
		case k.Name == "":
			return errors.New("a kernel without a name")
		case names[k.Name]:
			return fmt.Errorf("kernel %s: listed twice", k.Name)
		}
		names[k.Name] = true
	}
	return nil
}
