package hipcc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCommand(t *testing.T) {
	clang19 := &Compiler{Kind: KindClang, Path: "/usr/bin/clang++-19", Version: "19.1.7"}
	clang22 := &Compiler{Kind: KindClang, Path: "/usr/bin/clang++-22", Version: "22.0.0"}
	hip := &Compiler{Kind: KindHIPCC, Path: "/opt/rocm/bin/hipcc", Version: "6.4.43482-0f2d60242"}
	nvcc := &Compiler{Kind: KindNVCC, Path: "/usr/local/cuda/bin/nvcc", Version: "13.0.48"}
	user := []string{"-ffast-math", "-DTILE=64"}
	tests := []struct {
		name string
		c    *Compiler
		t    Target
		user []string
		want []string
	}{
		{"clang19", clang19, GFX1151, nil, []string{"/usr/bin/clang++-19", "-x", "hip", "--offload-arch=gfx1151",
			"--cuda-device-only", "--no-gpu-bundle-output", "-nogpulib", "-nogpuinc", "-O3", "-c", "k.hip", "-o", "k.o"}},
		{"clang22 adds code object v5", clang22, GFX1151, user, []string{"/usr/bin/clang++-22", "-x", "hip", "--offload-arch=gfx1151",
			"--cuda-device-only", "--no-gpu-bundle-output", "-nogpulib", "-nogpuinc", "-O3", "-mcode-object-version=5",
			"-c", "k.hip", "-o", "k.o", "-ffast-math", "-DTILE=64"}},
		{"hipcc", hip, GFX1151, user, []string{"/opt/rocm/bin/hipcc", "--offload-arch=gfx1151", "--genco", "-O3",
			"k.hip", "-o", "k.o", "-ffast-math", "-DTILE=64"}},
		{"nvcc", nvcc, SM90, user, []string{"/usr/local/cuda/bin/nvcc", "-cubin", "-arch=sm_90a", "-O3", "-Xptxas", "-v",
			"k.hip", "-o", "k.o", "-ffast-math", "-DTILE=64"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.c.Command(tc.t, "k.hip", "k.o", tc.user)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("Command (-want +got):\n%s", d)
			}
		})
	}
	for _, bad := range []struct {
		c *Compiler
		t Target
	}{{nvcc, GFX1151}, {clang19, SM90}, {hip, SM90}, {clang19, "gfx90a"}} {
		if _, err := bad.c.Command(bad.t, "k", "o", nil); err == nil {
			t.Errorf("%s for %s: no error", bad.c.Kind, bad.t)
		}
	}

	got, err := clang19.SyntaxCheckCUDACommand("k.cu", "k.ptx", []string{"-DX=1"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/usr/bin/clang++-19", "-x", "cuda", "--cuda-gpu-arch=sm_90a", "--cuda-device-only",
		"-nocudainc", "-nocudalib", "-O3", "-S", "k.cu", "-o", "k.ptx", "-DX=1"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("SyntaxCheckCUDACommand (-want +got):\n%s", d)
	}
	if _, err := nvcc.SyntaxCheckCUDACommand("k.cu", "k.ptx", nil); err == nil {
		t.Error("SyntaxCheckCUDACommand with nvcc: no error")
	}
}

func TestCommandDoesNotAliasUserFlags(t *testing.T) {
	c := &Compiler{Kind: KindHIPCC, Path: "hipcc"}
	user := make([]string, 1, 8)
	user[0] = "-g"
	a, _ := c.Command(GFX1151, "a.hip", "a.o", user)
	a[len(a)-1] = "changed"
	if user[0] != "-g" {
		t.Fatal("Command shares its result with the caller's flags")
	}
}

func TestSplitFlags(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", []string{}},
		{"   ", []string{}},
		{"-O2 -ffast-math", []string{"-O2", "-ffast-math"}},
		{"  -DA=1\t-DB=2\n-g ", []string{"-DA=1", "-DB=2", "-g"}},
		{`-DMSG="hello world"`, []string{"-DMSG=hello world"}},
		{`'-DX=a b' "-DY=c d"`, []string{"-DX=a b", "-DY=c d"}},
		{`-DQ=\"q\"`, []string{`-DQ="q"`}},
		{`-DS=a\ b`, []string{"-DS=a b"}},
		{`'-DL=$HOME'`, []string{"-DL=$HOME"}},
		{`-Xptxas "-v -warn-spills"`, []string{"-Xptxas", "-v -warn-spills"}},
		{`-DE=""`, []string{"-DE="}},
		{`-Wl,--x '-DP=a;b'`, []string{"-Wl,--x", "-DP=a;b"}},
	}
	for _, tc := range tests {
		got, err := SplitFlags(tc.in)
		if err != nil {
			t.Errorf("SplitFlags(%q): %v", tc.in, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("SplitFlags(%q) (-want +got):\n%s", tc.in, d)
		}
	}
	for _, bad := range []string{`-DX="open`, `-DX='open`, `-g \`, `-O3; rm -rf x`, `-g | cat`, `-g > f`, `(-g)`, "-D`x"} {
		if got, err := SplitFlags(bad); err == nil {
			t.Errorf("SplitFlags(%q) = %q, want an error", bad, got)
		}
	}
}

func TestUserFlags(t *testing.T) {
	t.Setenv(FlagsEnv, `-DFROM=env "-DS=a b"`)
	got, err := UserFlags("")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"-DFROM=env", "-DS=a b"}, got); d != "" {
		t.Errorf("from env (-want +got):\n%s", d)
	}
	got, err = UserFlags("-DFROM=option")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"-DFROM=option"}, got); d != "" {
		t.Errorf("from option (-want +got):\n%s", d)
	}
}

func readTestdata(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseAMDNotes(t *testing.T) {
	tests := []struct {
		file string
		want map[string]Resources
	}{
		// llvm-readelf-19 --notes of clang-19 objects.
		{"notes_clang19.txt", map[string]Resources{
			"k":     {VGPRs: 2, SGPRs: 2},
			"spill": {VGPRs: 10, SGPRs: 46, ScratchBytes: 16400},
		}},
		{"notes_template.txt", map[string]Resources{
			"_Z4tileILi256EEvPfi": {VGPRs: 3, SGPRs: 4, LDSBytes: 1024},
		}},
		// ROCm-style metadata: named, typed args (their .name must not be
		// taken for the kernel's), quoted names, spill counts, extra top-level keys.
		{"notes_hipcc.txt", map[string]Resources{
			"rmsnorm_f32": {VGPRs: 24, SGPRs: 18, LDSBytes: 16384},
			"moe_gate":    {VGPRs: 256, SGPRs: 106, ScratchBytes: 96, VGPRSpills: 21, SGPRSpills: 3},
		}},
	}
	for _, tc := range tests {
		got, err := ParseAMDNotes(readTestdata(t, tc.file))
		if err != nil {
			t.Errorf("%s: %v", tc.file, err)
			continue
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.file, d)
		}
	}
}

func TestParseAMDNotesErrors(t *testing.T) {
	good := readTestdata(t, "notes_clang19.txt")
	tests := map[string]string{
		"no metadata":  "Displaying notes found in: .note\n  Owner Data size Description\n",
		"bad number":   strings.Replace(good, ".vgpr_count:     2", ".vgpr_count:     two", 1),
		"missing name": strings.Replace(good, ".name:           k\n", "", 1),
		"duplicate":    strings.Replace(good, ".name:           spill", ".name:           k", 1),
	}
	for name, in := range tests {
		if got, err := ParseAMDNotes(in); err == nil {
			t.Errorf("%s: got %v, want an error", name, got)
		}
	}
}

// ptxasSample is nvcc -cubin -arch=sm_90a -Xptxas -v output in ptxas's
// documented format: two entry functions (one spilling) and a non-inlined
// device function.
const ptxasSample = `ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z7rmsnormPfPKfi' for 'sm_90a'
ptxas info    : Function properties for _Z7rmsnormPfPKfi
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 4096 bytes smem, 400 bytes cmem[0]
ptxas info    : Function properties for _Z6helperf
    16 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function 'moe_gate' for 'sm_90a'
ptxas info    : Function properties for moe_gate
    264 bytes stack frame, 248 bytes spill stores, 312 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 376 bytes cmem[0], 8 bytes cmem[2]
ptxas info    : Compile time = 12.345 ms
`

func TestParsePtxasVerbose(t *testing.T) {
	got, err := ParsePtxasVerbose(ptxasSample)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]Resources{
		"_Z7rmsnormPfPKfi": {Registers: 32, SharedBytes: 4096},
		"_Z6helperf":       {StackBytes: 16},
		"moe_gate":         {Registers: 255, StackBytes: 264, SpillStores: 248, SpillLoads: 312},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ParsePtxasVerbose (-want +got):\n%s", d)
	}
	if got["moe_gate"].Spills() == "" || got["_Z7rmsnormPfPKfi"].Spills() != "" {
		t.Errorf("Spills: moe_gate %q, rmsnorm %q", got["moe_gate"].Spills(), got["_Z7rmsnormPfPKfi"].Spills())
	}

	// Captured from nvcc 13.0.88 -cubin -arch=sm_90a -Xptxas -v -maxrregcount=32
	// (three separate compiles, concatenated).
	got, err = ParsePtxasVerbose(readTestdata(t, "ptxas_nvcc13.txt"))
	if err != nil {
		t.Fatal(err)
	}
	want = map[string]Resources{
		"pressure": {Registers: 32, StackBytes: 440, SpillStores: 940, SpillLoads: 992},
		"stack":    {Registers: 32, StackBytes: 256, SharedBytes: 4096},
		"twice":    {Registers: 8},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("ParsePtxasVerbose(nvcc 13) (-want +got):\n%s", d)
	}

	empty, err := ParsePtxasVerbose("")
	if err != nil || len(empty) != 0 {
		t.Errorf("empty log: %v, %v", empty, err)
	}
	for _, bad := range []string{
		"ptxas info    : Used 8 registers, 360 bytes cmem[0]\n",
		"    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n",
	} {
		if got, err := ParsePtxasVerbose(bad); err == nil {
			t.Errorf("ParsePtxasVerbose(%q) = %v, want an error", bad, got)
		}
	}
}

func TestSpills(t *testing.T) {
	for _, r := range []Resources{{ScratchBytes: 4}, {VGPRSpills: 1}, {SGPRSpills: 1}, {SpillStores: 4}, {SpillLoads: 4}} {
		if r.Spills() == "" {
			t.Errorf("%+v: not reported as spilling", r)
		}
	}
	if s := (Resources{VGPRs: 256, LDSBytes: 65536, StackBytes: 16, Registers: 255}).Spills(); s != "" {
		t.Errorf("no spill reported as %q", s)
	}
}

func TestCacheKey(t *testing.T) {
	c := &Compiler{Kind: KindClang, Path: "/usr/bin/clang++-19", Version: "19.1.7"}
	argv, _ := c.Command(GFX1151, "<src>", "<out>", []string{"-DA=1"})
	base := cacheKey(c, "compile", GFX1151, argv, "kernel source")
	if again := cacheKey(c, "compile", GFX1151, slicesClone(argv), "kernel source"); again != base {
		t.Fatalf("key not stable: %s vs %s", base, again)
	}
	if len(base) != 64 {
		t.Fatalf("key %q is not a sha256 hex digest", base)
	}
	other := *c
	other.Version = "19.1.8"
	otherPath := *c
	otherPath.Path = "/usr/lib/llvm-19/bin/clang"
	flag2, _ := c.Command(GFX1151, "<src>", "<out>", []string{"-DA=2"})
	noFlag, _ := c.Command(GFX1151, "<src>", "<out>", nil)
	// Splitting differently must not collide: ["-DA=1 -g"] vs ["-DA=1", "-g"].
	joined, _ := c.Command(GFX1151, "<src>", "<out>", []string{"-DA=1 -g"})
	split, _ := c.Command(GFX1151, "<src>", "<out>", []string{"-DA=1", "-g"})
	changed := map[string]string{
		"source":         cacheKey(c, "compile", GFX1151, argv, "kernel source "),
		"flag value":     cacheKey(c, "compile", GFX1151, flag2, "kernel source"),
		"flag removed":   cacheKey(c, "compile", GFX1151, noFlag, "kernel source"),
		"version":        cacheKey(&other, "compile", GFX1151, argv, "kernel source"),
		"path":           cacheKey(&otherPath, "compile", GFX1151, argv, "kernel source"),
		"target":         cacheKey(c, "compile", SM90, argv, "kernel source"),
		"mode":           cacheKey(c, "cuda-syntax", GFX1151, argv, "kernel source"),
		"joined flags":   cacheKey(c, "compile", GFX1151, joined, "kernel source"),
		"split flags":    cacheKey(c, "compile", GFX1151, split, "kernel source"),
		"code in argv":   cacheKey(c, "compile", GFX1151, append(slicesClone(argv), "kernel source"), ""),
		"empty argument": cacheKey(c, "compile", GFX1151, append(slicesClone(argv), ""), "kernel source"),
	}
	seen := map[string]string{base: "base"}
	for what, k := range changed {
		if prev, dup := seen[k]; dup {
			t.Errorf("changing %s gives the same key as %s", what, prev)
		}
		seen[k] = what
	}
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

func TestTrimLog(t *testing.T) {
	var lines []string
	for i := range 40 {
		lines = append(lines, "line "+strings.Repeat("x", i))
	}
	got := trimLog("\n" + strings.Join(lines, "\n") + "\n\n")
	if n := strings.Count(got, "\n"); n != maxLogLines {
		t.Errorf("trimmed log has %d newlines, want %d", n, maxLogLines)
	}
	if !strings.HasSuffix(got, "(15 more lines)") || !strings.HasPrefix(got, "line \n") {
		t.Errorf("trimmed log: %q", got)
	}
}

func TestErrorMessage(t *testing.T) {
	e := &Error{Target: GFX1151, Total: 3, Failures: []Failure{
		{Kernel: "a", Reason: ReasonCompile, Detail: "a.hip:1:2: error: x\n1 error generated"},
		{Kernel: "b", Reason: ReasonSpill, Detail: "96 bytes scratch"},
	}}
	want := "hipcc: gfx1151: 2 of 3 kernels failed:\n" +
		"  a: compile error:\n    a.hip:1:2: error: x\n    1 error generated\n" +
		"  b: spill:\n    96 bytes scratch"
	if d := cmp.Diff(want, e.Error()); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// The parsers read tool output that may come from other tool versions: they
// must return an error, never panic.
func FuzzParseAMDNotes(f *testing.F) {
	for _, name := range []string{"notes_clang19.txt", "notes_hipcc.txt"} {
		b, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) { ParseAMDNotes(s) })
}

func FuzzParsePtxasVerbose(f *testing.F) {
	f.Add(ptxasSample)
	if b, err := os.ReadFile(filepath.Join("testdata", "ptxas_nvcc13.txt")); err == nil {
		f.Add(string(b))
	}
	f.Fuzz(func(t *testing.T, s string) { ParsePtxasVerbose(s) })
}
