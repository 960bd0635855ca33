package hipcc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
)

// Source is one kernel source to compile.
type Source struct {
	Name string // kernel name: the symbol of its entry point, used in reports and errors
	Code string // self-contained source text
}

// Result is the outcome for one Source.
type Result struct {
	Name   string
	Object []byte // code object (.hsaco / .cubin), or PTX for SyntaxCheckCUDA; nil when it failed to compile
	// Resources is the report of the kernel called Name, or the element-wise
	// maximum over the object's kernels when none is called Name.
	Resources Resources
	Kernels   map[string]Resources // every kernel (function) in the object
	Cached    bool                 // served from the cache without running the compiler
	Log       string               // compiler diagnostics (warnings, ptxas -v), paths replaced by the kernel name
}

// Options tune a Compile.
type Options struct {
	CacheDir string   // content-addressed cache; "" compiles without a cache
	Flags    []string // user flags appended to every command (see SplitFlags)
	Workers  int      // parallel compiles; ≤ 0 means GOMAXPROCS
}

// Reason classifies a failure.
type Reason string

// Failure reasons.
const (
	ReasonCompile Reason = "compile error"
	ReasonSpill   Reason = "spill"
	ReasonReport  Reason = "no resource report"
)

// Failure is one kernel that did not compile cleanly.
type Failure struct {
	Kernel string
	Reason Reason
	Detail string // the compiler's message (trimmed) or what spilled
}

// Error reports every failed kernel of a Compile, in source order, so one run
// shows all problems rather than the first.
type Error struct {
	Target   Target
	Total    int
	Failures []Failure
}

// Error lists every failure with its compiler message indented under it.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "hipcc: %s: %d of %d kernels failed:", e.Target, len(e.Failures), e.Total)
	for _, f := range e.Failures {
		fmt.Fprintf(&b, "\n  %s: %s", f.Kernel, f.Reason)
		if f.Detail != "" {
			b.WriteString(":\n    " + strings.ReplaceAll(f.Detail, "\n", "\n    "))
		}
	}
	return b.String()
}

// mode is one way of turning a source into an object: its command, file
// names and resource report.
type mode struct {
	name   string // part of the cache key
	target Target
	ext    string // source file extension the driver recognizes
	argv   func(src, out string) ([]string, error)
	report func(ctx context.Context, obj, log string) (map[string]Resources, error) // nil: no report
}

// Compile compiles srcs for t in parallel through the cache of o.CacheDir,
// reads each object's resource report and fails, naming every kernel
// concerned, on compile errors and on spills. Results come back in the order
// of srcs, including on error (failed entries have a nil Object), so callers
// can still inspect the reports; the error is an *Error unless the context
// ended or the request was invalid.
func (c *Compiler) Compile(ctx context.Context, t Target, srcs []Source, o Options) ([]Result, error) {
	argv := func(src, out string) ([]string, error) { return c.Command(t, src, out, o.Flags) }
	if _, err := argv("", ""); err != nil {
		return nil, err
	}
	m := mode{name: "compile", target: t, ext: ".hip", argv: argv}
	if c.Kind == KindNVCC {
		m.ext = ".cu"
		m.report = func(_ context.Context, _, log string) (map[string]Resources, error) {
			return ParsePtxasVerbose(log)
		}
	} else {
		if c.Readelf == "" {
			return nil, fmt.Errorf("hipcc: %s has no llvm-readelf to read resource reports", c.Path)
		}
		m.report = c.readNotes
	}
	return c.run(ctx, srcs, o, m)
}

// SyntaxCheckCUDA runs clang's CUDA front end and NVPTX back end on CUDA
// sources (see SyntaxCheckCUDACommand), in parallel and through the cache,
// so generated CUDA kernels are checked where no CUDA toolkit is installed.
// Each Result's Object holds the PTX; there is no resource report.
func (c *Compiler) SyntaxCheckCUDA(ctx context.Context, srcs []Source, o Options) ([]Result, error) {
	argv := func(src, out string) ([]string, error) { return c.SyntaxCheckCUDACommand(src, out, o.Flags) }
	if _, err := argv("", ""); err != nil {
		return nil, err
	}
	return c.run(ctx, srcs, o, mode{name: "cuda-syntax", target: SM90, ext: ".cu", argv: argv})
}

// readNotes runs llvm-readelf --notes on an AMD object and parses it. An
// offload bundle (what hipcc --genco writes) is unpacked first, since
// llvm-readelf reads only the ELF inside.
func (c *Compiler) readNotes(ctx context.Context, obj, _ string) (map[string]Resources, error) {
	data, err := os.ReadFile(obj)
	if err != nil {
		return nil, err
	}
	elfObj, err := AMDGPUObject(data)
	if err != nil {
		return nil, err
	}
	if len(elfObj) != len(data) {
		obj += ".elf"
		if err := os.WriteFile(obj, elfObj, 0o644); err != nil {
			return nil, err
		}
	}
	out, err := exec.CommandContext(ctx, c.Readelf, "--notes", obj).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s --notes: %v: %s", c.Readelf, err, trimLog(string(out)))
	}
	return ParseAMDNotes(string(out))
}

// cacheKeyVersion changes when the cache entry format changes.
const cacheKeyVersion = "aimac-hipcc-cache-v1"

// cacheKey is the content address of one compile: the compiler's identity,
// the mode and target, the full command line with placeholder file names
// (built-in and user flags) and the source text.
func cacheKey(c *Compiler, m string, t Target, argv []string, code string) string {
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s\n", len(s), s) }
	field(cacheKeyVersion)
	field(c.Kind)
	field(c.Path)
	field(c.Version)
	field(m)
	field(string(t))
	field(fmt.Sprint(len(argv)))
	for _, a := range argv {
		field(a)
	}
	field(code)
	return hex.EncodeToString(h.Sum(nil))
}

// entry is the JSON stored next to a cached object.
type entry struct {
	Kernels      map[string]Resources `json:"kernels"`
	Log          string               `json:"log,omitempty"`
	ObjectSHA256 string               `json:"object_sha256"`
}

// run validates the request and feeds srcs to a worker pool; each result
// lands at its source's index, so output order never depends on timing.
func (c *Compiler) run(ctx context.Context, srcs []Source, o Options, m mode) ([]Result, error) {
	seen := map[string]bool{}
	for i, s := range srcs {
		if s.Name == "" {
			return nil, fmt.Errorf("hipcc: source %d has no kernel name", i)
		}
		if seen[s.Name] {
			return nil, fmt.Errorf("hipcc: kernel %q given twice", s.Name)
		}
		seen[s.Name] = true
	}
	if o.CacheDir != "" {
		if err := os.MkdirAll(o.CacheDir, 0o755); err != nil {
			return nil, fmt.Errorf("hipcc: cache: %w", err)
		}
	}
	keyArgv, err := m.argv("<src>", "<out>")
	if err != nil {
		return nil, err
	}
	workers := o.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	workers = min(workers, len(srcs))

	results := make([]Result, len(srcs))
	failures := make([][]Failure, len(srcs))
	idx := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range idx {
				key := cacheKey(c, m.name, m.target, keyArgv, srcs[i].Code)
				results[i], failures[i] = c.one(ctx, srcs[i], key, o.CacheDir, m)
			}
		}()
	}
feed:
	for i := range srcs {
		select {
		case idx <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(idx)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return results, fmt.Errorf("hipcc: %w", err)
	}
	e := &Error{Target: m.target, Total: len(srcs)}
	for _, f := range failures {
		e.Failures = append(e.Failures, f...)
	}
	if len(e.Failures) > 0 {
		return results, e
	}
	return results, nil
}

// one compiles (or finds in the cache) a single source and checks its report.
func (c *Compiler) one(ctx context.Context, s Source, key, cacheDir string, m mode) (Result, []Failure) {
	r := Result{Name: s.Name}
	ent, obj, ok := loadEntry(cacheDir, key)
	if ok {
		r.Cached = true
	} else {
		var fail *Failure
		ent, obj, fail = c.build(ctx, s, key, m)
		if fail != nil {
			return r, []Failure{*fail}
		}
		if cacheDir != "" {
			// A cache that cannot be written only costs time; the result stands.
			_ = storeEntry(cacheDir, key, ent, obj)
		}
	}
	r.Object, r.Log, r.Kernels = obj, ent.Log, ent.Kernels
	if m.report == nil {
		return r, nil
	}
	if len(ent.Kernels) == 0 {
		return r, []Failure{{Kernel: s.Name, Reason: ReasonReport, Detail: "the object lists no kernels"}}
	}
	if k, ok := ent.Kernels[s.Name]; ok {
		r.Resources = k
	} else {
		for _, k := range ent.Kernels {
			r.Resources = r.Resources.max(k)
		}
	}
	var fails []Failure
	names := make([]string, 0, len(ent.Kernels))
	for n := range ent.Kernels {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if why := ent.Kernels[n].Spills(); why != "" {
			d := why
			if n != s.Name {
				d = n + ": " + why
			}
			fails = append(fails, Failure{Kernel: s.Name, Reason: ReasonSpill, Detail: d})
		}
	}
	return r, fails
}

// build runs the compiler in a private temporary directory.
func (c *Compiler) build(ctx context.Context, s Source, key string, m mode) (entry, []byte, *Failure) {
	dir, err := os.MkdirTemp("", "aimac-hipcc-")
	if err != nil {
		return entry{}, nil, &Failure{Kernel: s.Name, Reason: ReasonCompile, Detail: err.Error()}
	}
	defer os.RemoveAll(dir)
	src := filepath.Join(dir, key[:16]+m.ext)
	out := filepath.Join(dir, key[:16]+".o")
	if err := os.WriteFile(src, []byte(s.Code), 0o644); err != nil {
		return entry{}, nil, &Failure{Kernel: s.Name, Reason: ReasonCompile, Detail: err.Error()}
	}
	clean := func(log string) string {
		log = strings.ReplaceAll(log, src, s.Name+m.ext)
		log = strings.ReplaceAll(log, out, s.Name+".o")
		return strings.ReplaceAll(log, dir+string(filepath.Separator), "")
	}
	argv, err := m.argv(src, out)
	if err != nil {
		return entry{}, nil, &Failure{Kernel: s.Name, Reason: ReasonCompile, Detail: err.Error()}
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = dir
	logb, runErr := cmd.CombinedOutput()
	log := clean(string(logb))
	if runErr != nil {
		detail := trimLog(log)
		if detail == "" || !isExit(runErr) {
			detail = strings.TrimSpace(runErr.Error() + "\n" + detail)
		}
		return entry{}, nil, &Failure{Kernel: s.Name, Reason: ReasonCompile, Detail: detail}
	}
	obj, err := os.ReadFile(out)
	if err != nil {
		return entry{}, nil, &Failure{Kernel: s.Name, Reason: ReasonCompile, Detail: "compiler wrote no object: " + err.Error()}
	}
	ent := entry{Log: log, ObjectSHA256: sha(obj)}
	if m.report != nil {
		k, err := m.report(ctx, out, string(logb))
		if err != nil {
			return entry{}, nil, &Failure{Kernel: s.Name, Reason: ReasonReport, Detail: clean(err.Error())}
		}
		ent.Kernels = k
	}
	return ent, obj, nil
}

// isExit tells a compiler that ran and failed (its message says why) from
// one that could not start (the Go error says why).
func isExit(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee)
}

// sha is the hex sha256 kept with a cached object to detect damage.
func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// loadEntry returns a complete, intact cache entry or ok=false.
func loadEntry(dir, key string) (entry, []byte, bool) {
	if dir == "" {
		return entry{}, nil, false
	}
	j, err := os.ReadFile(filepath.Join(dir, key+".json"))
	if err != nil {
		return entry{}, nil, false
	}
	var ent entry
	if json.Unmarshal(j, &ent) != nil {
		return entry{}, nil, false
	}
	obj, err := os.ReadFile(filepath.Join(dir, key+".o"))
	if err != nil || sha(obj) != ent.ObjectSHA256 {
		return entry{}, nil, false
	}
	return ent, obj, true
}

// storeEntry writes DIR/KEY.o, then DIR/KEY.json, each atomically (temporary
// file and rename), so a reader never sees a partial entry.
func storeEntry(dir, key string, ent entry, obj []byte) error {
	j, err := json.MarshalIndent(ent, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(dir, key+".o"), obj); err != nil {
		return err
	}
	return writeAtomic(filepath.Join(dir, key+".json"), append(j, '\n'))
}

// writeAtomic writes path through a temporary file in the same directory
// and a rename, so concurrent compiles never read half a file.
func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// maxLogLines bounds the compiler message kept in a Failure.
const maxLogLines = 25

// trimLog keeps the first lines of a compiler message, which carry the
// first errors; the rest is summarized by a count.
func trimLog(s string) string {
	s = strings.TrimSpace(s)
	lines := strings.Split(s, "\n")
	if len(lines) <= maxLogLines {
		return s
	}
	return strings.Join(lines[:maxLogLines], "\n") + fmt.Sprintf("\n… (%d more lines)", len(lines)-maxLogLines)
}
