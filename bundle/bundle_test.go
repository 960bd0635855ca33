// Tests for the bundle package: real gfx1151 builds of the tiny synthetic
// model's plan with clang-19 (required: a missing clang fails the tests),
// the manifest's file list, verification on Open, determinism, the compile
// cache, and every refusal Build and Open make.
package bundle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/synth"
)

// clang finds the gfx1151 compiler; CI installs clang-19, so a missing one
// fails rather than skips.
func clang(t *testing.T) *hipcc.Compiler {
	t.Helper()
	c, err := hipcc.Find(hipcc.GFX1151)
	if err != nil {
		t.Fatalf("%v\ninstall clang-19 lld-19 llvm-19 (apt-get install -y clang-19 lld-19 llvm-19)", err)
	}
	return c
}

// tinyPlan plans the tiny synthetic model for target, the smallest real
// plan with every kernel family.
func tinyPlan(t *testing.T, target string) *plan.Plan {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(synth.Options{Preset: "tiny", Seed: 1, Out: dir}); err != nil {
		t.Fatal(err)
	}
	ck, err := checkpoint.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := planner.FromCheckpoint("tiny", ck)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{Target: plan.Target(target), Buckets: []int{16, 64}, ContextTokens: 256})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var (
	sharedOnce sync.Once
	sharedDir  string
	sharedErr  error
)

// built returns a copy of one gfx1151 bundle built for the whole test run,
// so damage tests do not each pay for a compile.
func built(t *testing.T) string {
	t.Helper()
	c := clang(t)
	sharedOnce.Do(func() {
		root, err := os.MkdirTemp("", "bundle-test-")
		if err != nil {
			sharedErr = err
			return
		}
		sharedDir = filepath.Join(root, "b")
		_, sharedErr = Build(context.Background(), tinyPlan(t, "gfx1151"), "gfx1151", Options{Out: sharedDir, Compiler: c})
	})
	if sharedErr != nil {
		t.Fatal(sharedErr)
	}
	dst := filepath.Join(t.TempDir(), "b")
	if err := os.CopyFS(dst, os.DirFS(sharedDir)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestMain removes the shared bundle after the run.
func TestMain(m *testing.M) {
	code := m.Run()
	if sharedDir != "" {
		os.RemoveAll(filepath.Dir(sharedDir))
	}
	os.Exit(code)
}

// tree reads every file under dir by slash path, to compare bundles.
func tree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		b, err := os.ReadFile(path)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestBuildGFX1151(t *testing.T) {
	c := clang(t)
	p := tinyPlan(t, "gfx1151")
	cache := t.TempDir()
	out := filepath.Join(t.TempDir(), "bundle")
	rep, err := Build(context.Background(), p, "gfx1151", Options{Out: out, CacheDir: cache, Compiler: c})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Kernels != len(p.Kernels) || rep.Cached != 0 {
		t.Errorf("first build: %d kernels, %d cached; want %d, 0", rep.Kernels, rep.Cached, len(p.Kernels))
	}
	files := tree(t, out)
	if !bytes.Equal(files[PlanFile], p.Bytes()) {
		t.Error("plan.json is not the plan's canonical bytes")
	}
	var m Manifest
	if err := json.Unmarshal(files[ManifestFile], &m); err != nil {
		t.Fatal(err)
	}
	if m.Format != Format || m.Target != "gfx1151" || m.PlanHash != p.Hash() || len(m.Kernels.Kernels) != len(p.Kernels) {
		t.Errorf("manifest head: %s %s %s, %d kernels", m.Format, m.Target, m.PlanHash, len(m.Kernels.Kernels))
	}
	// Every file but the manifest is listed, with the right size and sha256.
	if len(m.Files) != len(files)-1 {
		t.Errorf("manifest lists %d files, the bundle has %d besides the manifest", len(m.Files), len(files)-1)
	}
	for _, f := range m.Files {
		data, ok := files[f.Path]
		if !ok || int64(len(data)) != f.Size || sum(data) != f.SHA256 {
			t.Errorf("%s: listed %d bytes %s, on disk %d bytes %s (present %v)", f.Path, f.Size, f.SHA256, len(data), sum(data), ok)
		}
	}
	for _, k := range p.Kernels {
		obj := files[ObjectPath(k.Name, ".hsaco")]
		if _, err := hipcc.AMDGPUObject(obj); err != nil || len(obj) == 0 {
			t.Errorf("kernel %s: no code object: %v", k.Name, err)
		}
		if r, ok := m.Resources[k.Name]; !ok || r.VGPRs == 0 {
			t.Errorf("kernel %s: resource report %+v", k.Name, r)
		}
	}
	b, err := Open(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Objects) != len(p.Kernels) || b.Plan.Hash() != p.Hash() || b.PlanPath() != filepath.Join(out, PlanFile) {
		t.Errorf("Open: %d objects, plan %s", len(b.Objects), b.Plan.Hash())
	}

	// A rebuild elsewhere comes from the cache and is byte-identical.
	again := filepath.Join(t.TempDir(), "again")
	rep, err = Build(context.Background(), p, "gfx1151", Options{Out: again, CacheDir: cache, Compiler: c})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Cached != len(p.Kernels) {
		t.Errorf("rebuild: %d of %d kernels from the cache", rep.Cached, len(p.Kernels))
	}
	other := tree(t, again)
	if len(other) != len(files) {
		t.Errorf("rebuild has %d files, first build %d", len(other), len(files))
	}
	for name, data := range files {
		if !bytes.Equal(other[name], data) {
			t.Errorf("%s differs between builds", name)
		}
	}
	// Without the cache the compiler itself is deterministic too.
	fresh := filepath.Join(t.TempDir(), "fresh")
	if _, err := Build(context.Background(), p, "gfx1151", Options{Out: fresh, Compiler: c}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tree(t, fresh)[ManifestFile], files[ManifestFile]) {
		t.Error("an uncached build's manifest differs from the first build's")
	}

	// Replacing a previous bundle in place leaves no temporaries behind.
	if _, err := Build(context.Background(), p, "gfx1151", Options{Out: out, CacheDir: cache, Compiler: c}); err != nil {
		t.Fatal(err)
	}
	for _, leftover := range []string{out + ".tmp", out + ".old"} {
		if _, err := os.Stat(leftover); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left behind (%v)", leftover, err)
		}
	}
	if _, err := Open(out); err != nil {
		t.Error(err)
	}
}

func TestOpenReportsEveryProblem(t *testing.T) {
	dir := built(t)
	b, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range b.Plan.Kernels {
		names = append(names, k.Name)
	}
	tampered, missing := ObjectPath(names[0], ".hsaco"), ObjectPath(names[1], ".hsaco")
	obj, err := os.ReadFile(filepath.Join(dir, tampered))
	if err != nil {
		t.Fatal(err)
	}
	obj[100] ^= 0xff // same size, other bytes
	if err := os.WriteFile(filepath.Join(dir, tampered), obj, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, missing)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kernels", "stray.hsaco"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir)
	var be *Error
	if !errors.As(err, &be) || len(be.Problems) != 3 {
		t.Fatalf("want 3 problems, got %v", err)
	}
	for _, want := range []string{tampered + ": sha256", missing + ": missing", "kernels/stray.hsaco: not listed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// rewriteManifest edits a bundle's manifest, to test the consistency checks
// that do not depend on file sums.
func rewriteManifest(t *testing.T, dir string, edit func(*Manifest)) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, ManifestFile))
	if err != nil {
		t.Fatal(err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	edit(&m)
	if data, err = m.Bytes(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ManifestFile), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestOpenChecksManifestAgainstPlan(t *testing.T) {
	dir := built(t)
	var dropped, renamed string
	rewriteManifest(t, dir, func(m *Manifest) {
		// Drop one kernel's object from the list (and the disk), give
		// another a foreign source hash, and claim another plan hash.
		for i, f := range m.Files {
			if strings.HasPrefix(f.Path, KernelsDir+"/") {
				dropped = strings.TrimSuffix(strings.TrimPrefix(f.Path, KernelsDir+"/"), ".hsaco")
				m.Files = append(m.Files[:i], m.Files[i+1:]...)
				break
			}
		}
		k := &m.Kernels.Kernels[len(m.Kernels.Kernels)-1]
		renamed = k.Name
		k.SourceHash = "sha256:00"
		m.PlanHash = "sha256:11"
	})
	if err := os.Remove(filepath.Join(dir, ObjectPath(dropped, ".hsaco"))); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir)
	if err == nil {
		t.Fatal("Open accepted an inconsistent manifest")
	}
	for _, want := range []string{
		"kernel " + dropped + ": no code object",
		"kernel " + renamed + ": the plan renders source",
		"plan.json: hash",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}

	for _, tt := range []struct {
		name, want string
		damage     func(dir string)
	}{
		{"no manifest", "build one with `aimac build`", func(dir string) { os.Remove(filepath.Join(dir, ManifestFile)) }},
		{"other format", `format "aimac-bundle/0"`, func(dir string) {
			rewriteManifest(t, dir, func(m *Manifest) { m.Format = "aimac-bundle/0" })
		}},
		{"bad json", ManifestFile, func(dir string) { os.WriteFile(filepath.Join(dir, ManifestFile), []byte("{"), 0o644) }},
	} {
		dir := built(t)
		tt.damage(dir)
		if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
}

func TestBuildRefuses(t *testing.T) {
	c := clang(t)
	p := tinyPlan(t, "gfx1151")
	ctx := context.Background()
	notBundle := t.TempDir()
	if err := os.WriteFile(filepath.Join(notBundle, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, target, out, want string
		p                       *plan.Plan
	}{
		{"target mismatch", "sm_90", filepath.Join(t.TempDir(), "x"), "the plan is for target gfx1151, not sm_90", p},
		{"cpu target", "cpu", filepath.Join(t.TempDir(), "x"), `target "cpu" has no code objects`, p},
		{"cpu plan", "gfx1151", filepath.Join(t.TempDir(), "x"), "the plan is for target cpu", tinyPlan(t, "cpu")},
		{"not a bundle", "gfx1151", notBundle, "not empty and not a bundle", p},
		{"no out", "gfx1151", "", "no output directory", p},
	} {
		if _, err := Build(ctx, tt.p, tt.target, Options{Out: tt.out, Compiler: c}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want %q", tt.name, err, tt.want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(notBundle, "notes.txt")); err != nil || string(b) != "mine" {
		t.Errorf("the refused directory was changed: %q %v", b, err)
	}

	// A compile failure names the kernels and writes nothing.
	out := filepath.Join(t.TempDir(), "broken")
	_, err := Build(ctx, p, "gfx1151", Options{Out: out, Compiler: c, Flags: []string{"-include", "/nonexistent/broken.h"}})
	var he *hipcc.Error
	if !errors.As(err, &he) || len(he.Failures) != len(p.Kernels) || !strings.Contains(err.Error(), p.Kernels[0].Name) {
		t.Errorf("compile failure: %v", err)
	}
	for _, path := range []string{out, out + ".tmp"} {
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists after a failed build (%v)", path, err)
		}
	}
}

// TestBuildSM90NeedsNVCC: where no nvcc is installed (CI, this machine) an
// sm_90 build fails before compiling and says why.
func TestBuildSM90NeedsNVCC(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("CUDA_HOME", "")
	if c, err := hipcc.Find(hipcc.SM90); err == nil {
		t.Skipf("nvcc is installed at %s; this test covers machines without it", c.Path)
	}
	out := filepath.Join(t.TempDir(), "b")
	_, err := Build(context.Background(), tinyPlan(t, "sm_90"), "sm_90", Options{Out: out})
	if err == nil || !strings.Contains(err.Error(), "nvcc not found") {
		t.Errorf("error %v, want nvcc not found", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s exists after a failed build", out)
	}
}
