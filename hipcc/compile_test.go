package hipcc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// clang19 returns Debian's clang-19. These tests are CI's proof that
// generated device code compiles, so a missing compiler fails them.
func clang19(t *testing.T) *Compiler {
	t.Helper()
	p, err := exec.LookPath("clang++-19")
	if err != nil {
		t.Fatalf("clang++-19 not found: install clang-19 lld-19 llvm-19 (apt-get install -y clang-19 lld-19 llvm-19)")
	}
	c, err := Probe(p)
	if err != nil {
		t.Fatalf("%v: install clang-19 lld-19 llvm-19 (apt-get install -y clang-19 lld-19 llvm-19)", err)
	}
	return c
}

// hipPrelude is the kind of prelude generated kernels carry instead of HIP
// headers.
const hipPrelude = "#define __global__ __attribute__((global))\n"

func scaleKernel(name string, scale int) Source {
	return Source{Name: name, Code: hipPrelude + fmt.Sprintf(
		"extern \"C\" __global__ void %s(float* x) { x[__builtin_amdgcn_workitem_id_x()] *= %d.0f * SCALE; }\n",
		name, scale)}
}

var elfMagic = []byte("\x7fELF")

func TestCompileGFX1151(t *testing.T) {
	c := clang19(t)
	src := Source{Name: "k", Code: hipPrelude +
		"extern \"C\" __global__ void k(float* x) { x[__builtin_amdgcn_workitem_id_x()] *= 2.0f; }\n"}
	res, err := c.Compile(context.Background(), GFX1151, []Source{src}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := res[0]
	if r.Name != "k" || r.Cached || !bytes.HasPrefix(r.Object, elfMagic) {
		t.Fatalf("result %q cached=%v object %q…", r.Name, r.Cached, r.Object[:min(len(r.Object), 4)])
	}
	if r.Resources.VGPRs <= 0 || r.Resources.SGPRs <= 0 || r.Resources.ScratchBytes != 0 || r.Resources.LDSBytes != 0 {
		t.Errorf("resources %+v: want VGPRs, SGPRs > 0, no scratch, no LDS", r.Resources)
	}
	if d := cmp.Diff(map[string]Resources{"k": r.Resources}, r.Kernels); d != "" {
		t.Errorf("Kernels (-want +got):\n%s", d)
	}
}

func TestCompileReportsEveryFailure(t *testing.T) {
	c := clang19(t)
	srcs := []Source{
		{Name: "typo", Code: hipPrelude + "extern \"C\" __global__ void typo(float* x) { x[0] = y; }\n"},
		{Name: "ok", Code: hipPrelude + "extern \"C\" __global__ void ok(float* x) { x[0] = 1.0f; }\n"},
		// A large private array indexed at run time lives in scratch memory.
		{Name: "hog", Code: hipPrelude + `extern "C" __global__ void hog(float* x, int n) {
  float a[4096];
  for (int i = 0; i < 4096; i++) a[i] = x[i * n];
  x[__builtin_amdgcn_workitem_id_x()] = a[n & 4095];
}
`},
	}
	res, err := c.Compile(context.Background(), GFX1151, srcs, Options{CacheDir: t.TempDir()})
	var ce *Error
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v, want *Error", err)
	}
	if ce.Total != 3 || len(ce.Failures) != 2 {
		t.Fatalf("failures %+v of %d", ce.Failures, ce.Total)
	}
	typo, hog := ce.Failures[0], ce.Failures[1]
	if typo.Kernel != "typo" || typo.Reason != ReasonCompile ||
		!strings.Contains(typo.Detail, "typo.hip:2:") || !strings.Contains(typo.Detail, "undeclared identifier 'y'") {
		t.Errorf("compile failure %+v", typo)
	}
	if strings.Contains(typo.Detail, os.TempDir()) {
		t.Errorf("compile failure leaks a temporary path: %q", typo.Detail)
	}
	if hog.Kernel != "hog" || hog.Reason != ReasonSpill || !strings.Contains(hog.Detail, "bytes scratch") {
		t.Errorf("spill failure %+v", hog)
	}
	for _, want := range []string{"2 of 3 kernels failed", "typo: compile error", "hog: spill"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	if res[0].Object != nil || !bytes.HasPrefix(res[1].Object, elfMagic) || res[2].Resources.ScratchBytes <= 0 {
		t.Errorf("results: typo object %d bytes, ok object %q, hog %+v", len(res[0].Object), res[1].Object[:4], res[2].Resources)
	}
	// The spill is a property of the cached object too.
	_, err = c.Compile(context.Background(), GFX1151, srcs[2:], Options{CacheDir: t.TempDir()})
	if !errors.As(err, &ce) || len(ce.Failures) != 1 || ce.Failures[0].Kernel != "hog" {
		t.Errorf("spill again: %v", err)
	}
}

func TestCompileParallelCache(t *testing.T) {
	c := clang19(t)
	var srcs []Source
	for i := range 8 {
		srcs = append(srcs, scaleKernel(fmt.Sprintf("scale%d", i), i+1))
	}
	dir := filepath.Join(t.TempDir(), "cache")
	o := Options{CacheDir: dir, Flags: []string{"-DSCALE=2.0f"}, Workers: 4}
	first, err := c.Compile(context.Background(), GFX1151, srcs, o)
	if err != nil {
		t.Fatal(err)
	}
	second, err := c.Compile(context.Background(), GFX1151, srcs, o)
	if err != nil {
		t.Fatal(err)
	}
	for i := range srcs {
		if first[i].Name != srcs[i].Name || first[i].Cached || !second[i].Cached {
			t.Errorf("%d: names %q/%q, cached %v then %v", i, first[i].Name, second[i].Name, first[i].Cached, second[i].Cached)
		}
		if !bytes.Equal(first[i].Object, second[i].Object) || first[i].Resources != second[i].Resources {
			t.Errorf("%s: cached result differs", srcs[i].Name)
		}
		if first[i].Resources.VGPRs <= 0 {
			t.Errorf("%s: resources %+v", srcs[i].Name, first[i].Resources)
		}
	}
	objs, _ := filepath.Glob(filepath.Join(dir, "*.o"))
	jsons, _ := filepath.Glob(filepath.Join(dir, "*.json"))
	temps, _ := filepath.Glob(filepath.Join(dir, ".tmp-*"))
	if len(objs) != 8 || len(jsons) != 8 || len(temps) != 0 {
		t.Errorf("cache holds %d objects, %d reports, %d temporaries", len(objs), len(jsons), len(temps))
	}

	// A damaged object is recompiled, not served.
	if err := os.WriteFile(objs[0], []byte("junk"), 0o644); err != nil {
		t.Fatal(err)
	}
	third, err := c.Compile(context.Background(), GFX1151, srcs, o)
	if err != nil {
		t.Fatal(err)
	}
	misses := 0
	for _, r := range third {
		if !r.Cached {
			misses++
		}
	}
	if misses != 1 {
		t.Errorf("after damaging one entry: %d misses, want 1", misses)
	}

	// A changed flag is a different compile.
	o.Flags = []string{"-DSCALE=3.0f"}
	changed, err := c.Compile(context.Background(), GFX1151, srcs[:1], o)
	if err != nil {
		t.Fatal(err)
	}
	if changed[0].Cached {
		t.Error("changed flags served from the cache")
	}
}

func TestCompileCanceled(t *testing.T) {
	c := clang19(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := c.Compile(ctx, GFX1151, []Source{scaleKernel("k", 1)}, Options{Flags: []string{"-DSCALE=1"}})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestCompileRejectsBadRequests(t *testing.T) {
	c := &Compiler{Kind: KindClang, Path: "/nonexistent/clang++-19", Version: "19.1.7", Readelf: "/nonexistent/llvm-readelf"}
	ctx := context.Background()
	if _, err := c.Compile(ctx, SM90, nil, Options{}); err == nil {
		t.Error("clang for sm_90: no error")
	}
	dup := []Source{{Name: "a", Code: "x"}, {Name: "a", Code: "y"}}
	if _, err := c.Compile(ctx, GFX1151, dup, Options{}); err == nil || !strings.Contains(err.Error(), `"a" given twice`) {
		t.Errorf("duplicate names: %v", err)
	}
	if _, err := c.Compile(ctx, GFX1151, []Source{{Code: "x"}}, Options{}); err == nil {
		t.Error("unnamed source: no error")
	}
	// A compiler that cannot run is a compile failure naming the kernel.
	_, err := c.Compile(ctx, GFX1151, []Source{{Name: "a", Code: "x"}}, Options{})
	var ce *Error
	if !errors.As(err, &ce) || ce.Failures[0].Kernel != "a" || !strings.Contains(ce.Failures[0].Detail, "/nonexistent/clang++-19") {
		t.Errorf("missing compiler: %v", err)
	}
}

func TestSyntaxCheckCUDA(t *testing.T) {
	c := clang19(t)
	// -nocudainc leaves no __global__ or threadIdx: the prelude provides them
	// from clang builtins, as the CUDA renderer's prelude does.
	prelude := "#define __global__ __attribute__((global))\n" +
		"#define THREAD_X __nvvm_read_ptx_sreg_tid_x()\n"
	srcs := []Source{
		{Name: "k", Code: prelude + "extern \"C\" __global__ void k(float* x) { x[THREAD_X] *= 2.f; }\n"},
		{Name: "bad", Code: prelude + "extern \"C\" __global__ void bad(float* x) { x[threadIdx.x] *= 2.f; }\n"},
	}
	res, err := c.SyntaxCheckCUDA(context.Background(), srcs, Options{CacheDir: t.TempDir()})
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Failures) != 1 || ce.Failures[0].Kernel != "bad" ||
		!strings.Contains(ce.Failures[0].Detail, "bad.cu:3:") || !strings.Contains(ce.Failures[0].Detail, "threadIdx") {
		t.Fatalf("err = %v, want one failure naming bad and threadIdx", err)
	}
	ptx := string(res[0].Object)
	for _, want := range []string{".target sm_90a", ".entry k(", "%tid.x"} {
		if !strings.Contains(ptx, want) {
			t.Errorf("PTX lacks %q:\n%s", want, ptx)
		}
	}
}

// TestReadNotesBundle reads the report of a real object wrapped the way
// hipcc --genco wraps it.
func TestReadNotesBundle(t *testing.T) {
	c := clang19(t)
	res, err := c.Compile(context.Background(), GFX1151, []Source{scaleKernel("k", 1)}, Options{Flags: []string{"-DSCALE=1"}})
	if err != nil {
		t.Fatal(err)
	}
	b := makeBundle([]string{"host-x86_64-unknown-linux-gnu-", "hipv4-amdgcn-amd-amdhsa--gfx1151"}, [][]byte{nil, res[0].Object})
	p := filepath.Join(t.TempDir(), "k.bundle")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := c.readNotes(context.Background(), p, "")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(res[0].Kernels, got); d != "" {
		t.Errorf("notes of the bundle (-want +got):\n%s", d)
	}
}
