package hipcc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fakeTool writes an executable script at dir/name that prints version.
func fakeTool(t *testing.T, dir, name, version string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name)
	script := "#!/bin/sh\nprintf '%s\\n' '" + strings.ReplaceAll(version, "'", `'\''`) + "'\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// isolate points PATH, ROCM_PATH and CUDA_HOME at fresh directories; the
// fixed locations (/opt/rocm, /usr/local/cuda) are absent on test machines.
func isolate(t *testing.T) (bin string) {
	t.Helper()
	bin = filepath.Join(t.TempDir(), "bin")
	if err := os.MkdirAll(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin)
	t.Setenv("ROCM_PATH", "")
	t.Setenv("CUDA_HOME", "")
	for _, fixed := range []string{"/opt/rocm/bin/hipcc", "/usr/local/cuda/bin/nvcc"} {
		if _, err := os.Stat(fixed); err == nil {
			t.Skipf("%s exists on this machine; the search test needs it absent", fixed)
		}
	}
	return bin
}

const (
	clang20Version = "Ubuntu clang version 20.1.2 (0ubuntu1)\nTarget: x86_64-pc-linux-gnu"
	clang17Version = "clang version 17.0.6\nTarget: x86_64-pc-linux-gnu"
	hipccVersion   = "HIP version: 6.4.43482-0f2d60242\nAMD clang version 19.0.0git\nTarget: x86_64-unknown-linux-gnu"
	nvccVersion    = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.48\nBuild cuda_13.0.r13.0/compiler.36260728_0"
)

func TestFindClang(t *testing.T) {
	bin := isolate(t)
	// Too old, and a newer one without lld: both skipped with a reason.
	fakeTool(t, bin, "clang++", clang17Version)
	_, err := Find(GFX1151)
	if err == nil {
		t.Fatal("Find with only clang 17: no error")
	}
	for _, want := range []string{"hipcc", "clang++-19", "clang++ (clang 17.0.6 is older than 19)", "lld-19"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}

	llvm := filepath.Join(t.TempDir(), "llvm-20", "bin")
	real := fakeTool(t, llvm, "clang", clang20Version)
	if err := os.Symlink(real, filepath.Join(bin, "clang++-20")); err != nil {
		t.Fatal(err)
	}
	if _, err := Find(GFX1151); err == nil || !strings.Contains(err.Error(), "no ld.lld") {
		t.Fatalf("clang 20 without lld: %v", err)
	}
	fakeTool(t, llvm, "ld.lld", "LLD 20.1.2")
	fakeTool(t, llvm, "llvm-readelf", "LLVM version 20.1.2")
	c, err := Find(GFX1151)
	if err != nil {
		t.Fatal(err)
	}
	want := &Compiler{Kind: KindClang, Path: filepath.Join(bin, "clang++-20"), Version: "20.1.2",
		Readelf: filepath.Join(llvm, "llvm-readelf")}
	if d := cmp.Diff(want, c); d != "" {
		t.Errorf("Find (-want +got):\n%s", d)
	}
	if c.Major() != 20 {
		t.Errorf("Major = %d", c.Major())
	}

	// hipcc is preferred over clang; its llvm-readelf lives in ../llvm/bin.
	rocm := t.TempDir()
	t.Setenv("ROCM_PATH", rocm)
	fakeTool(t, filepath.Join(rocm, "bin"), "hipcc", hipccVersion)
	fakeTool(t, filepath.Join(rocm, "llvm", "bin"), "llvm-readelf", "LLVM version 19.0.0git")
	c, err = Find(GFX1151)
	if err != nil {
		t.Fatal(err)
	}
	want = &Compiler{Kind: KindHIPCC, Path: filepath.Join(rocm, "bin", "hipcc"), Version: "6.4.43482-0f2d60242",
		Readelf: filepath.Join(rocm, "llvm", "bin", "llvm-readelf")}
	if d := cmp.Diff(want, c); d != "" {
		t.Errorf("Find with hipcc (-want +got):\n%s", d)
	}
}

func TestFindNVCC(t *testing.T) {
	bin := isolate(t)
	cuda := t.TempDir()
	t.Setenv("CUDA_HOME", cuda)
	_, err := Find(SM90)
	if err == nil {
		t.Fatal("Find(sm_90) without nvcc: no error")
	}
	for _, want := range []string{"nvcc not found", "PATH:nvcc", filepath.Join(cuda, "bin", "nvcc"), "/usr/local/cuda/bin/nvcc"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	fakeTool(t, filepath.Join(cuda, "bin"), "nvcc", nvccVersion)
	c, err := Find(SM90)
	if err != nil {
		t.Fatal(err)
	}
	want := &Compiler{Kind: KindNVCC, Path: filepath.Join(cuda, "bin", "nvcc"), Version: "13.0.48"}
	if d := cmp.Diff(want, c); d != "" {
		t.Errorf("Find (-want +got):\n%s", d)
	}
	// PATH comes first.
	fakeTool(t, bin, "nvcc", strings.Replace(nvccVersion, "V13.0.48", "V12.8.93", 1))
	c, err = Find(SM90)
	if err != nil || c.Path != filepath.Join(bin, "nvcc") || c.Version != "12.8.93" {
		t.Errorf("Find with nvcc on PATH = %+v, %v", c, err)
	}

	if _, err := Find("gfx90a"); err == nil || !strings.Contains(err.Error(), "unknown target") {
		t.Errorf("unknown target: %v", err)
	}
}

func TestProbeRejects(t *testing.T) {
	dir := t.TempDir()
	for name, version := range map[string]string{
		"gcc":      "gcc (Debian 12.2.0-14) 12.2.0",
		"nvcc":     "something else",
		"clang++":  "no version here",
		"clang-18": "clang version 18.1.8",
	} {
		p := fakeTool(t, dir, name, version)
		if c, err := Probe(p); err == nil {
			t.Errorf("Probe(%s) = %+v, want an error", name, c)
		}
	}
	if _, err := Probe(filepath.Join(dir, "missing")); err == nil {
		t.Error("Probe of a missing file: no error")
	}
}
