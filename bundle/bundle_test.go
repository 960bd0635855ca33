// Tests for the bundle format: Write and Open round trips on the tiny
// synthetic model's gfx1151 plan with stand-in code objects (the format
// never looks inside them; package bundler tests real ones), every refusal
// of Open and Write with its exact message, and ParseManifest on bad input.
package bundle_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/bundle"
	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/synth"
)

var (
	planOnce sync.Once
	tiny     *plan.Plan
	planErr  error
)

// tinyPlan plans the tiny synthetic model for gfx1151 once per run: the
// smallest real GPU plan, with every kernel family.
func tinyPlan(t testing.TB) *plan.Plan {
	t.Helper()
	planOnce.Do(func() {
		dir, err := os.MkdirTemp("", "bundle-tiny-")
		if err != nil {
			planErr = err
			return
		}
		defer os.RemoveAll(dir)
		if planErr = synth.Write(synth.Options{Preset: "tiny", Seed: 1, Out: dir}); planErr != nil {
			return
		}
		ck, err := checkpoint.Open(dir)
		if err != nil {
			planErr = err
			return
		}
		defer ck.Close()
		m, err := planner.FromCheckpoint("tiny", ck)
		if err != nil {
			planErr = err
			return
		}
		tiny, planErr = planner.Plan(m, planner.Options{Target: "gfx1151", Buckets: []int{16, 64}, ContextTokens: 256})
	})
	if planErr != nil {
		t.Fatal(planErr)
	}
	return tiny
}

// contents is a complete bundle of p: one stand-in code object, kernel entry
// and resource report per kernel.
func contents(p *plan.Plan) bundle.Contents {
	c := bundle.Contents{
		Plan: p, KernelABI: plan.KernelABI, Compiler: "clang 19.1.7", Flags: []string{"-O3"},
		Objects: map[string][]byte{}, Resources: map[string]bundle.Resources{},
	}
	for _, k := range p.Kernels {
		c.Kernels = append(c.Kernels, bundle.Kernel{Name: k.Name, Family: k.Family, Template: k.Family + ".tmpl", SourceHash: sum([]byte(k.Name))})
		c.Objects[k.Name] = []byte("code object of " + k.Name)
		c.Resources[k.Name] = bundle.Resources{"vgprs": 32, "sgprs": 16}
	}
	return c
}

// written writes a fresh bundle of the tiny plan into a temporary directory.
func written(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "b")
	if _, err := bundle.Write(dir, contents(tinyPlan(t))); err != nil {
		t.Fatal(err)
	}
	return dir
}

func sum(data []byte) string {
	s := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(s[:])
}

// editManifest rewrites a bundle's manifest through edit.
func editManifest(t *testing.T, dir string, edit func(*bundle.Manifest)) {
	t.Helper()
	data := read(t, dir, bundle.ManifestFile)
	m, err := bundle.ParseManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	edit(m)
	if data, err = m.Bytes(); err != nil {
		t.Fatal(err)
	}
	write(t, dir, bundle.ManifestFile, data)
}

// replace writes data as the bundle's file name and records its new sum in
// the manifest, as a consistent but different build would have.
func replace(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	write(t, dir, name, data)
	editManifest(t, dir, func(m *bundle.Manifest) {
		for i := range m.Files {
			if m.Files[i].Path == name {
				m.Files[i].Size, m.Files[i].SHA256 = int64(len(data)), sum(data)
			}
		}
	})
}

func read(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func write(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(name)), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestWriteOpen writes a bundle, opens it and checks everything Open
// returns, then replaces it in place.
func TestWriteOpen(t *testing.T) {
	p := tinyPlan(t)
	c := contents(p)
	dir := filepath.Join(t.TempDir(), "b")
	m, err := bundle.Write(dir, c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := bundle.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(m, b.Manifest); d != "" {
		t.Errorf("opened manifest differs from the written one (-written +opened):\n%s", d)
	}
	if d := cmp.Diff(c.Objects, b.Objects); d != "" {
		t.Errorf("code objects (-written +opened):\n%s", d)
	}
	if b.Plan.Hash() != p.Hash() || b.PlanPath() != filepath.Join(dir, bundle.PlanFile) || !bytes.Equal(read(t, dir, bundle.PlanFile), p.Bytes()) {
		t.Errorf("plan: hash %s, path %s", b.Plan.Hash(), b.PlanPath())
	}
	if m.Format != bundle.Format || m.KernelABI != plan.KernelABI || m.Target != "gfx1151" || m.PlanHash != p.Hash() || len(m.Kernels) != len(p.Kernels) {
		t.Errorf("manifest head: %s ABI %d %s %s, %d kernels", m.Format, m.KernelABI, m.Target, m.PlanHash, len(m.Kernels))
	}
	if len(m.Files) != len(p.Kernels)+1 {
		t.Errorf("manifest lists %d files, want the plan and %d code objects", len(m.Files), len(p.Kernels))
	}
	for i, f := range m.Files {
		if i > 0 && m.Files[i-1].Path >= f.Path {
			t.Errorf("files not sorted at %s", f.Path)
		}
	}
	for i, k := range m.Kernels {
		if i > 0 && m.Kernels[i-1].Name >= k.Name {
			t.Errorf("kernels not sorted at %s", k.Name)
		}
	}
	// The manifest on disk is its canonical encoding.
	if want, _ := m.Bytes(); !bytes.Equal(read(t, dir, bundle.ManifestFile), want) {
		t.Error("manifest.json is not the manifest's canonical bytes")
	}

	// Replacing the bundle in place leaves no temporaries behind.
	c.Flags = []string{"-O2"}
	if _, err := bundle.Write(dir, c); err != nil {
		t.Fatal(err)
	}
	for _, leftover := range []string{dir + ".tmp", dir + ".old"} {
		if _, err := os.Stat(leftover); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left behind (%v)", leftover, err)
		}
	}
	if b, err := bundle.Open(dir); err != nil || b.Manifest.Flags[0] != "-O2" {
		t.Errorf("replaced bundle: %v", err)
	}
}

// TestOpenRefuses damages a bundle one way at a time; each gives exactly
// one problem, named in full.
func TestOpenRefuses(t *testing.T) {
	p := tinyPlan(t)
	k0, k1 := p.Kernels[0], p.Kernels[1]
	obj0 := bundle.ObjectPath(k0.Name, ".hsaco")
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   string // after "bundle DIR: "
	}{
		{"missing file", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, obj0)) }, obj0 + ": missing"},
		{"wrong sum", func(t *testing.T, dir string) {
			b := read(t, dir, obj0)
			b[0] ^= 0xff
			write(t, dir, obj0, b)
		}, fmt.Sprintf("%s: sha256 %s, the manifest says %s (damaged or replaced)", obj0, sum(append([]byte{'c' ^ 0xff}, "ode object of "+k0.Name...)), sum([]byte("code object of "+k0.Name)))},
		{"wrong size", func(t *testing.T, dir string) { write(t, dir, obj0, []byte("x")) },
			fmt.Sprintf("%s: 1 bytes, the manifest says %d (damaged or replaced)", obj0, len("code object of "+k0.Name))},
		{"unlisted file", func(t *testing.T, dir string) { write(t, dir, "kernels/stray.hsaco", []byte("x")) },
			"kernels/stray.hsaco: not listed in the manifest"},
		{"wrong plan hash", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *bundle.Manifest) { m.PlanHash = "sha256:" + strings.Repeat("1", 64) })
		}, fmt.Sprintf("plan.json: hash %s, the manifest says sha256:%s", p.Hash(), strings.Repeat("1", 64))},
		{"wrong ABI", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *bundle.Manifest) { m.KernelABI = plan.KernelABI + 1 })
		}, fmt.Sprintf("kernel ABI %d, this engine speaks kernel ABI %d (build the bundle again with an aimac of kernel ABI %d)", plan.KernelABI+1, plan.KernelABI, plan.KernelABI)},
		{"wrong target", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *bundle.Manifest) { m.Target = "sm_90" })
		}, "plan.json: target gfx1151, the manifest says sm_90"},
		{"target without code objects", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *bundle.Manifest) { m.Target = "cpu" })
		}, `manifest.json: target "cpu" has no code objects (want gfx1151 or sm_90)`},
		{"truncated manifest", func(t *testing.T, dir string) {
			write(t, dir, bundle.ManifestFile, read(t, dir, bundle.ManifestFile)[:300])
		}, "manifest.json: truncated after 300 bytes"},
		{"unknown manifest version", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *bundle.Manifest) { m.Format = "aimac-bundle/9" })
		}, `manifest.json: format "aimac-bundle/9", this engine reads "aimac-bundle/2" (build the bundle again with this release's ` + "`aimac build`)"},
		{"huge manifest", func(t *testing.T, dir string) {
			if err := os.Truncate(filepath.Join(dir, bundle.ManifestFile), 64<<20+1); err != nil {
				t.Fatal(err)
			}
		}, "manifest.json: larger than 67108864 bytes: not a manifest"},
		{"no manifest", func(t *testing.T, dir string) { os.Remove(filepath.Join(dir, bundle.ManifestFile)) },
			"no manifest.json: not a bundle (build one with `aimac build`)"},
		{"plan not canonical", func(t *testing.T, dir string) {
			replace(t, dir, bundle.PlanFile, append(read(t, dir, bundle.PlanFile), '\n'))
		}, "plan.json: not in canonical form"},
		{"plan not a plan", func(t *testing.T, dir string) { replace(t, dir, bundle.PlanFile, []byte("{}")) },
			"plan.json: " + decodeError(t, []byte("{}"))},
		{"kernel not in the manifest", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *bundle.Manifest) {
				m.Kernels = slicesDelete(m.Kernels, func(k bundle.Kernel) bool { return k.Name == k0.Name })
			})
		}, "kernel " + k0.Name + ": in the plan but not in the manifest"},
		{"kernel of another family", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *bundle.Manifest) {
				for i := range m.Kernels {
					if m.Kernels[i].Name == k0.Name {
						m.Kernels[i].Family = "bogus"
					}
				}
			})
		}, fmt.Sprintf("kernel %s: family %s in the plan, bogus in the manifest", k0.Name, k0.Family)},
		{"kernel not in the plan", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *bundle.Manifest) {
				m.Kernels = append(m.Kernels, bundle.Kernel{Name: "ghost", Family: "add"})
			})
		}, "kernel ghost: in the manifest but not in the plan"},
		{"no resource report", func(t *testing.T, dir string) {
			editManifest(t, dir, func(m *bundle.Manifest) { delete(m.Resources, k1.Name) })
		}, "kernel " + k1.Name + ": no resource report in the manifest"},
		{"code object not listed", func(t *testing.T, dir string) {
			os.Remove(filepath.Join(dir, obj0))
			editManifest(t, dir, func(m *bundle.Manifest) {
				m.Files = slicesDelete(m.Files, func(f bundle.File) bool { return f.Path == obj0 })
			})
		}, fmt.Sprintf("kernel %s: no code object %s in the manifest", k0.Name, obj0)},
		{"file no kernel uses", func(t *testing.T, dir string) {
			write(t, dir, "kernels/stray.hsaco", []byte("x"))
			editManifest(t, dir, func(m *bundle.Manifest) {
				m.Files = append(m.Files, bundle.File{Path: "kernels/stray.hsaco", Size: 1, SHA256: sum([]byte("x"))})
			})
		}, "kernels/stray.hsaco: listed in the manifest, but no kernel of the plan uses it"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := written(t)
			tt.damage(t, dir)
			_, err := bundle.Open(dir)
			var be *bundle.Error
			if !errors.As(err, &be) {
				t.Fatalf("error %v (%T), want a *bundle.Error", err, err)
			}
			if d := cmp.Diff("bundle "+dir+": "+tt.want, err.Error()); d != "" {
				t.Errorf("error (-want +got):\n%s", d)
			}
		})
	}
}

// decodeError is plan.Decode's refusal of data.
func decodeError(t *testing.T, data []byte) string {
	t.Helper()
	_, err := plan.Decode(bytes.NewReader(data))
	if err == nil {
		t.Fatalf("plan.Decode accepted %q", data)
	}
	return err.Error()
}

// slicesDelete is s without the elements del selects.
func slicesDelete[T any](s []T, del func(T) bool) []T {
	var out []T
	for _, v := range s {
		if !del(v) {
			out = append(out, v)
		}
	}
	return out
}

// TestOpenReportsEveryProblem: problems with the files are all reported at
// once, one line each.
func TestOpenReportsEveryProblem(t *testing.T) {
	p := tinyPlan(t)
	dir := written(t)
	tampered, missing := bundle.ObjectPath(p.Kernels[0].Name, ".hsaco"), bundle.ObjectPath(p.Kernels[1].Name, ".hsaco")
	obj := read(t, dir, tampered)
	obj[3] ^= 0xff // same size, other bytes
	write(t, dir, tampered, obj)
	if err := os.Remove(filepath.Join(dir, missing)); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "kernels/stray.hsaco", []byte("x"))
	_, err := bundle.Open(dir)
	var be *bundle.Error
	if !errors.As(err, &be) {
		t.Fatalf("error %v, want a *bundle.Error", err)
	}
	// File problems come in manifest order, then unlisted files.
	want := []string{
		fmt.Sprintf("%s: sha256 %s, the manifest says %s (damaged or replaced)", tampered, sum(obj), sum([]byte("code object of "+p.Kernels[0].Name))),
		missing + ": missing",
		"kernels/stray.hsaco: not listed in the manifest",
	}
	if tampered > missing {
		want[0], want[1] = want[1], want[0]
	}
	if d := cmp.Diff(want, be.Problems); d != "" {
		t.Errorf("problems (-want +got):\n%s", d)
	}
	if head := fmt.Sprintf("bundle %s: 3 problems:\n  ", dir); !strings.HasPrefix(err.Error(), head) {
		t.Errorf("error %q does not start %q", err, head)
	}
}

// TestWriteRefuses: Write never leaves a bundle Open would refuse, nor
// replaces a directory that is not a bundle.
func TestWriteRefuses(t *testing.T) {
	p := tinyPlan(t)
	k := p.Kernels[0].Name
	notBundle := t.TempDir()
	write(t, notBundle, "notes.txt", []byte("mine"))
	cpu := *p
	cpu.Target = "cpu"
	tests := []struct {
		name string
		out  string
		edit func(c *bundle.Contents)
		want string
	}{
		{"no out", "", func(*bundle.Contents) {}, "bundle: no output directory"},
		{"no plan", "x", func(c *bundle.Contents) { c.Plan = nil }, "bundle: no plan"},
		{"cpu plan", "x", func(c *bundle.Contents) { c.Plan = &cpu }, `bundle: target "cpu" has no code objects (want gfx1151 or sm_90)`},
		{"no ABI", "x", func(c *bundle.Contents) { c.KernelABI = 0 }, "bundle: manifest: kernel_abi 0: want a version ≥ 1"},
		{"missing object", "x", func(c *bundle.Contents) { delete(c.Objects, k) },
			fmt.Sprintf("bundle: refusing to write x, which could not be opened:\n  kernel %s: no code object kernels/%s.hsaco in the manifest", k, k)},
		{"missing report", "x", func(c *bundle.Contents) { delete(c.Resources, k) },
			fmt.Sprintf("bundle: refusing to write x, which could not be opened:\n  kernel %s: no resource report in the manifest", k)},
		{"kernel twice", "x", func(c *bundle.Contents) { c.Kernels = append(c.Kernels, c.Kernels[0]) },
			fmt.Sprintf("bundle: manifest: kernel %s: listed twice", k)},
		{"not a bundle", notBundle, func(*bundle.Contents) {},
			fmt.Sprintf("bundle: %s is not empty and not a bundle (no manifest.json of format aimac-bundle/2); refusing to replace it", notBundle)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := tt.out
			if out == "x" {
				out = filepath.Join(t.TempDir(), "x")
				tt.want = strings.ReplaceAll(tt.want, "write x,", "write "+out+",")
			}
			c := contents(p)
			tt.edit(&c)
			_, err := bundle.Write(out, c)
			if err == nil {
				t.Fatal("Write accepted it")
			}
			if d := cmp.Diff(tt.want, err.Error()); d != "" {
				t.Errorf("error (-want +got):\n%s", d)
			}
			if out != notBundle {
				if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s exists after a refused write", out)
				}
			}
		})
	}
	if b := read(t, notBundle, "notes.txt"); string(b) != "mine" {
		t.Errorf("the refused directory was changed: %q", b)
	}
	// A bundle of an older format may be replaced.
	old := t.TempDir()
	write(t, old, bundle.ManifestFile, []byte(`{"format": "aimac-bundle/1"}`))
	if err := bundle.CheckDest(old); err != nil {
		t.Errorf("an older bundle cannot be replaced: %v", err)
	}
}

// goodManifest is a valid manifest's bytes, for the parser's tests.
func goodManifest(t testing.TB) []byte {
	t.Helper()
	dir, err := os.MkdirTemp("", "bundle-manifest-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	m, err := bundle.Write(filepath.Join(dir, "b"), contents(tinyPlan(t)))
	if err != nil {
		t.Fatal(err)
	}
	b, err := m.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestParseManifest refuses malformed manifests with one clear error each.
func TestParseManifest(t *testing.T) {
	good := goodManifest(t)
	m, err := bundle.ParseManifest(good)
	if err != nil {
		t.Fatal(err)
	}
	// The first kernel, and the first file: the code object listed first.
	k1, k2, obj := m.Kernels[0].Name, m.Kernels[1].Name, m.Files[0]
	if !strings.HasPrefix(obj.Path, bundle.KernelsDir+"/") {
		t.Fatalf("first file %s is not a code object", obj.Path)
	}
	// swap replaces the first occurrence of old in the good manifest.
	swap := func(old, new string) []byte {
		if !bytes.Contains(good, []byte(old)) {
			t.Fatalf("the manifest has no %q", old)
		}
		return bytes.Replace(good, []byte(old), []byte(new), 1)
	}
	zeros := "sha256:" + strings.Repeat("0", 64)
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "truncated after 0 bytes"},
		{"truncated", good[:len(good)/2], fmt.Sprintf("truncated after %d bytes", len(good)/2)},
		{"not JSON", []byte("manifest"), "not a manifest of format aimac-bundle/2: invalid character 'm' looking for beginning of value"},
		{"an array", []byte("[1]"), "not a manifest of format aimac-bundle/2: json: cannot unmarshal array into Go value of type struct { Format *string \"json:\\\"format\\\"\" }"},
		{"no format", []byte(`{"target": "sm_90"}`), `no "format": not a bundle manifest`},
		{"older format", []byte(`{"format": "aimac-bundle/1", "kernels": {"target": "gfx1151"}}`), `format "aimac-bundle/1", this engine reads "aimac-bundle/2" (build the bundle again with this release's ` + "`aimac build`)"},
		{"trailing data", append(append([]byte{}, good...), "{}"...), "trailing data after the JSON object"},
		{"unknown field", swap(`"target"`, `"targets": 1, "target"`), `not a manifest of format aimac-bundle/2: json: unknown field "targets"`},
		{"wrong type", swap(fmt.Sprintf(`"kernel_abi": %d`, plan.KernelABI), `"kernel_abi": "1"`), "not a manifest of format aimac-bundle/2: json: cannot unmarshal string into Go struct field Manifest.kernel_abi of type int"},
		{"no ABI", swap(fmt.Sprintf(`"kernel_abi": %d`, plan.KernelABI), `"kernel_abi": 0`), "kernel_abi 0: want a version ≥ 1"},
		{"bad plan hash", swap(`"plan_hash": "sha256:`, `"plan_hash": "md5:`), `plan_hash "md5:` + strings.TrimPrefix(m.PlanHash, "sha256:") + `" is not a sha256 sum`},
		{"escaping path", swap(`"path": "kernels/`, `"path": "../`), `file "../` + strings.TrimPrefix(obj.Path, "kernels/") + `": not a valid file name in a bundle`},
		{"manifest listed", swap(`"path": "plan.json"`, `"path": "manifest.json"`), `file "manifest.json": not a valid file name in a bundle`},
		{"file twice", swap(`"path": "plan.json"`, `"path": "`+obj.Path+`"`), "file " + obj.Path + ": listed twice"},
		{"no plan", swap(`"path": "plan.json"`, `"path": "plan.txt"`), "files: no plan.json"},
		{"negative size", swap(`"size": `, `"size": -`), fmt.Sprintf("file %s: size -%d", obj.Path, obj.Size)},
		{"bad sum", swap(`"sha256": "sha256:`, `"sha256": "sha256:zz`), fmt.Sprintf(`file %s: "sha256:zz%s" is not a sha256 sum`, obj.Path, strings.TrimPrefix(obj.SHA256, "sha256:"))},
		{"kernel without a name", swap(`"name": "`+k1+`"`, `"name": ""`), "a kernel without a name"},
		{"kernel twice", swap(`"name": "`+k1+`"`, `"name": "`+k2+`"`), "kernel " + k2 + ": listed twice"},
		{"any well-formed plan hash", swap(`"plan_hash": "`+m.PlanHash, `"plan_hash": "`+zeros), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := bundle.ParseManifest(tt.data)
			got := ""
			if err != nil {
				got = err.Error()
			} else if m == nil {
				t.Fatal("no manifest and no error")
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("error (-want +got):\n%s", d)
			}
		})
	}
}

// FuzzParseManifest: any bytes give a manifest or an error, never a panic,
// and an accepted manifest survives its own canonical encoding unchanged.
func FuzzParseManifest(f *testing.F) {
	good := goodManifest(f)
	f.Add(good)
	f.Add(good[:len(good)/3])
	f.Add([]byte(`{"format": "aimac-bundle/1"}`))
	f.Add([]byte(`{"format": "aimac-bundle/2", "kernel_abi": 1, "target": "sm_90", "plan_hash": "sha256:` + strings.Repeat("a", 64) + `", "files": [{"path": "plan.json", "size": 1, "sha256": "sha256:` + strings.Repeat("b", 64) + `"}]}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := bundle.ParseManifest(data)
		if err != nil {
			return
		}
		enc, err := m.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		back, err := bundle.ParseManifest(enc)
		if err != nil {
			t.Fatalf("an accepted manifest's encoding is refused: %v\n%s", err, enc)
		}
		if d := cmp.Diff(m, back); d != "" {
			t.Errorf("round trip changed the manifest (-parsed +reparsed):\n%s", d)
		}
	})
}
