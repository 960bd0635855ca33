package bundle

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/aimaproject/aimac/plan"
)

// Contents is what a builder made of a plan: Write lays it out as a bundle.
type Contents struct {
	Plan *plan.Plan
	// KernelABI is the ABI the code objects were rendered for.
	KernelABI int
	Compiler  string   // the device compiler's kind and version
	Flags     []string // the user flags it was given
	Kernels   []Kernel // one per kernel of the plan
	// Objects and Resources are each kernel's code object and resource
	// report, by kernel name.
	Objects   map[string][]byte
	Resources map[string]Resources
}

// Write writes the bundle of c to out atomically (into out+".tmp", then
// renamed), so a reader never sees half a bundle, and returns its manifest.
// It refuses contents Open would refuse and a non-empty out that is not a
// bundle (CheckDest).
func Write(out string, c Contents) (*Manifest, error) {
	if out == "" {
		return nil, errors.New("bundle: no output directory")
	}
	if c.Plan == nil {
		return nil, errors.New("bundle: no plan")
	}
	ext, err := ObjectExt(string(c.Plan.Target))
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	files := map[string][]byte{PlanFile: c.Plan.Bytes()}
	for name, obj := range c.Objects {
		files[ObjectPath(name, ext)] = obj
	}
	m := &Manifest{
		Format: Format, KernelABI: c.KernelABI, Target: string(c.Plan.Target), PlanHash: c.Plan.Hash(),
		Compiler: c.Compiler, Flags: append([]string{}, c.Flags...),
		Kernels:   slices.SortedFunc(slices.Values(c.Kernels), func(a, b Kernel) int { return strings.Compare(a.Name, b.Name) }),
		Resources: c.Resources,
	}
	if m.Resources == nil {
		m.Resources = map[string]Resources{}
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		m.Files = append(m.Files, File{Path: name, Size: int64(len(files[name])), SHA256: sum(files[name])})
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("bundle: manifest: %w", err)
	}
	var probs []string
	verify(m, files, func(format string, args ...any) { probs = append(probs, fmt.Sprintf(format, args...)) })
	if len(probs) > 0 {
		return nil, fmt.Errorf("bundle: refusing to write %s, which could not be opened:\n  %s", out, strings.Join(probs, "\n  "))
	}
	mb, err := m.Bytes()
	if err != nil {
		return nil, err
	}
	files[ManifestFile] = mb
	if err := CheckDest(out); err != nil {
		return nil, err
	}
	if err := writeDir(out, files); err != nil {
		return nil, fmt.Errorf("bundle: write %s: %w", out, err)
	}
	return m, nil
}

// CheckDest refuses to overwrite a directory that is not a bundle: only a
// missing or empty directory, or one with a bundle manifest (of any format
// version), may be replaced. Builders call it before compiling, so a refusal
// costs nothing.
func CheckDest(out string) error {
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
	if err != nil || json.Unmarshal(data, &head) != nil || !strings.HasPrefix(head.Format, formatFamily) {
		return fmt.Errorf("bundle: %s is not empty and not a bundle (no %s of format %s); refusing to replace it", out, ManifestFile, Format)
	}
	return nil
}

// formatFamily prefixes the format tag of every version, so a rebuild may
// replace a bundle of an older format.
const formatFamily = "aimac-bundle/"

// writeDir writes files into out+".tmp" and swaps it for out, keeping the
// previous bundle until the new one is in place.
func writeDir(out string, files map[string][]byte) error {
	tmp := out + ".tmp"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
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
