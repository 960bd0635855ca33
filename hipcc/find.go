package hipcc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/aimaproject/aimac/plan"
)

// Target names the GPU a kernel is compiled for: a plan target, which
// knows its dialect, code objects and device compiler (plan.TargetSpec).
type Target = plan.Target

// The supported device targets.
const (
	GFX1151 = plan.GFX1151 // AMD Radeon 8060S (RDNA 3.5, wave32)
	SM90    = plan.SM90    // NVIDIA H100/H200, compiled as sm_90a
)

// amd reports whether t's kernels are HIP; the AMD and NVIDIA paths differ
// in compiler, object format and resource report.
func amd(t Target) bool { return t.Spec().Dialect == plan.HIP }

// Compiler kinds.
const (
	KindHIPCC = "hipcc"
	KindClang = "clang"
	KindNVCC  = "nvcc"
)

// Compiler is one device compiler found on this machine.
type Compiler struct {
	Kind    string // KindHIPCC, KindClang or KindNVCC
	Path    string // absolute path of the driver
	Version string // release, e.g. "19.1.7" for clang, "13.0.48" for nvcc
	// Readelf is the llvm-readelf used to read AMD code-object notes; empty
	// for nvcc, whose resource report comes from ptxas -v.
	Readelf string
}

// Major returns the major version number (0 when unknown); clang ≥ 22 needs
// an explicit code-object version.
func (c *Compiler) Major() int {
	v := c.Version
	if i := strings.IndexAny(v, ".-"); i >= 0 {
		v = v[:i]
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0
	}
	return n
}

// minClang is the oldest clang that knows gfx1151 and sm_90a.
const minClang = 19

// clangNames are the clang drivers searched on PATH, newest first.
var clangNames = []string{"clang++-22", "clang++-21", "clang++-20", "clang++-19", "clang++"}

// env abstracts the process environment so the search can be tested.
type env struct {
	lookPath func(string) (string, error)
	getenv   func(string) string
	version  func(path string) (string, error) // output of PATH --version
}

var osEnv = env{lookPath: exec.LookPath, getenv: os.Getenv, version: runVersion}

// runVersion asks a driver for its version, which identifies it and keys the cache.
func runVersion(path string) (string, error) {
	out, err := exec.Command(path, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %v: %s", path, err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// Find locates the device compiler for a target: for gfx1151 hipcc (PATH,
// $ROCM_PATH/bin, /opt/rocm/bin), else a clang++ ≥ 19 with lld on PATH; for
// sm_90 nvcc (PATH, $CUDA_HOME/bin, /usr/local/cuda/bin). The error names
// everything that was searched.
func Find(t Target) (*Compiler, error) { return osEnv.find(t) }

// FindClang locates a clang++ ≥ 19 with lld and llvm-readelf on PATH, the
// compiler CI uses for gfx1151 objects and for SyntaxCheckCUDA.
func FindClang() (*Compiler, error) { return osEnv.findClang() }

// Probe identifies the compiler at path (by its name and --version output),
// for callers that name a compiler explicitly instead of searching.
func Probe(path string) (*Compiler, error) { return osEnv.probe(path) }

// find implements Find against an environment (the real one, or a test's).
func (e env) find(t Target) (*Compiler, error) {
	switch t {
	case GFX1151:
		var tried []string
		for _, p := range e.candidates("hipcc", "ROCM_PATH", "/opt/rocm/bin") {
			tried = append(tried, p)
			c, err := e.probe(p)
			if err == nil {
				return c, nil
			}
			if !errors.Is(err, errNotFound) {
				tried[len(tried)-1] += " (" + err.Error() + ")"
			}
		}
		c, err := e.findClang()
		if err == nil {
			return c, nil
		}
		return nil, fmt.Errorf("hipcc: no compiler for %s: hipcc not found (searched %s); %v",
			t, strings.Join(tried, ", "), err)
	case SM90:
		var tried []string
		for _, p := range e.candidates("nvcc", "CUDA_HOME", "/usr/local/cuda/bin") {
			tried = append(tried, p)
			c, err := e.probe(p)
			if err == nil {
				return c, nil
			}
			if !errors.Is(err, errNotFound) {
				tried[len(tried)-1] += " (" + err.Error() + ")"
			}
		}
		return nil, fmt.Errorf("hipcc: no compiler for %s: nvcc not found (searched %s)", t, strings.Join(tried, ", "))
	}
	return nil, fmt.Errorf("hipcc: unknown target %q (want %s or %s)", t, GFX1151, SM90)
}

// candidates lists where a tool may live: PATH, $ENVVAR/bin, a fixed dir.
func (e env) candidates(name, envVar, fixed string) []string {
	out := []string{"PATH:" + name}
	if d := e.getenv(envVar); d != "" {
		out = append(out, filepath.Join(d, "bin", name))
	}
	return append(out, filepath.Join(fixed, name))
}

var errNotFound = errors.New("not found")

// resolve turns a candidate ("PATH:name" or a path) into an executable path.
func (e env) resolve(cand string) (string, error) {
	if name, ok := strings.CutPrefix(cand, "PATH:"); ok {
		p, err := e.lookPath(name)
		if err != nil {
			return "", errNotFound
		}
		return p, nil
	}
	p, err := e.lookPath(cand)
	if err != nil {
		return "", errNotFound
	}
	return p, nil
}

// findClang tries clang drivers newest first, recording why each was passed over.
func (e env) findClang() (*Compiler, error) {
	var tried []string
	for _, name := range clangNames {
		c, err := e.probe("PATH:" + name)
		if err == nil {
			return c, nil
		}
		if errors.Is(err, errNotFound) {
			tried = append(tried, name)
		} else {
			tried = append(tried, name+" ("+err.Error()+")")
		}
	}
	return nil, fmt.Errorf("no clang++ ≥ %d with lld and llvm-readelf on PATH (tried %s); on Debian: apt-get install clang-19 lld-19 llvm-19",
		minClang, strings.Join(tried, ", "))
}

var (
	clangVersionRE = regexp.MustCompile(`clang version (\d+(?:\.\d+)*)`)
	hipVersionRE   = regexp.MustCompile(`HIP version: (\S+)`)
	nvccVersionRE  = regexp.MustCompile(`release \S+, V(\S+)`)
)

// probe identifies the compiler at cand and finds its companion tools.
func (e env) probe(cand string) (*Compiler, error) {
	path, err := e.resolve(cand)
	if err != nil {
		return nil, err
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	out, err := e.version(path)
	if err != nil {
		return nil, err
	}
	base := filepath.Base(path)
	c := &Compiler{Path: path}
	switch {
	case strings.HasPrefix(base, "hipcc"):
		c.Kind = KindHIPCC
		if m := hipVersionRE.FindStringSubmatch(out); m != nil {
			c.Version = m[1]
		} else {
			c.Version = firstLine(out)
		}
		c.Readelf = e.companion(path, "llvm-readelf", 0)
		if c.Readelf == "" {
			return nil, fmt.Errorf("no llvm-readelf next to %s or on PATH", path)
		}
	case strings.HasPrefix(base, "nvcc"):
		c.Kind = KindNVCC
		m := nvccVersionRE.FindStringSubmatch(out)
		if m == nil {
			return nil, fmt.Errorf("%s: unrecognized --version output %q", path, firstLine(out))
		}
		c.Version = m[1]
	case strings.HasPrefix(base, "clang"):
		c.Kind = KindClang
		m := clangVersionRE.FindStringSubmatch(out)
		if m == nil {
			return nil, fmt.Errorf("%s: unrecognized --version output %q", path, firstLine(out))
		}
		c.Version = m[1]
		if c.Major() < minClang {
			return nil, fmt.Errorf("clang %s is older than %d", c.Version, minClang)
		}
		if e.companion(path, "ld.lld", c.Major()) == "" {
			return nil, fmt.Errorf("no ld.lld next to %s or on PATH (install lld-%d)", path, c.Major())
		}
		c.Readelf = e.companion(path, "llvm-readelf", c.Major())
		if c.Readelf == "" {
			return nil, fmt.Errorf("no llvm-readelf next to %s or on PATH (install llvm-%d)", path, c.Major())
		}
	default:
		return nil, fmt.Errorf("%s: not hipcc, clang or nvcc", path)
	}
	return c, nil
}

// companion finds an LLVM tool belonging to the driver at path: next to the
// driver's real location (Debian's /usr/lib/llvm-N/bin, ROCm's ../llvm/bin),
// then NAME-MAJOR and NAME on PATH.
func (e env) companion(path, name string, major int) string {
	real := path
	if r, err := filepath.EvalSymlinks(path); err == nil {
		real = r
	}
	dir := filepath.Dir(real)
	for _, p := range []string{filepath.Join(dir, name), filepath.Join(dir, "..", "llvm", "bin", name)} {
		if found, err := e.lookPath(p); err == nil {
			return found
		}
	}
	names := []string{name}
	if major > 0 {
		names = []string{name + "-" + strconv.Itoa(major), name}
	}
	for _, n := range names {
		if found, err := e.lookPath(n); err == nil {
			return found
		}
	}
	return ""
}

// firstLine shortens tool output for error messages.
func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}
