package hip_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ebitengine/purego"
	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/loader"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/plans"
	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/runtime/gpu/gputest"
	"github.com/aimaproject/aimac/runtime/hip"
	"github.com/aimaproject/aimac/synth"
)

// compilers are tried in order to build testdata/fakehip.c.
var compilers = []string{"clang-19", "clang", "cc", "gcc"}

var errNoCompiler = errors.New("no C compiler on PATH")

var (
	fakePath string // the fake HIP library, built by TestMain
	fakeErr  error
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "fakehip")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fakePath, fakeErr = buildFake(dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildFake compiles the fake HIP library with the first compiler found.
func buildFake(dir string) (string, error) {
	for _, c := range compilers {
		cc, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		out := filepath.Join(dir, "libfakehip.so")
		b, err := exec.Command(cc, "-shared", "-fPIC", "-O1", "-Wall", "-pthread", "-o", out, filepath.Join("testdata", "fakehip.c")).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("%s testdata/fakehip.c: %v\n%s", cc, err, b)
		}
		return out, nil
	}
	return "", fmt.Errorf("%w (tried %s)", errNoCompiler, strings.Join(compilers, ", "))
}

// fake is the fake library: the HIP runtime as the backend sees it, and
// its test hooks.
type fake struct {
	lib      *hip.Library
	reset    func()
	device   func(name string, major, minor, count int32)
	fail     func(fn string, code int32)
	log      func(buf *byte, n uintptr) uintptr
	clearLog func()
	live     func(kind string) int32
}

var (
	fakeOnce sync.Once
	theFake  *fake
	openErr  error
)

// fakeHIP returns the fake library, reset: default gfx1151 device, nothing
// allocated, an empty log. It skips the test only when no C compiler is on
// PATH.
func fakeHIP(t *testing.T) *fake {
	t.Helper()
	if errors.Is(fakeErr, errNoCompiler) {
		t.Skipf("cannot build the fake HIP library: %v", fakeErr)
	}
	if fakeErr != nil {
		t.Fatal(fakeErr)
	}
	fakeOnce.Do(func() {
		f := &fake{}
		if f.lib, openErr = hip.Open(fakePath); openErr != nil {
			return
		}
		h, err := purego.Dlopen(fakePath, purego.RTLD_NOW|purego.RTLD_LOCAL)
		if err != nil {
			openErr = err
			return
		}
		purego.RegisterLibFunc(&f.reset, h, "fakehip_reset")
		purego.RegisterLibFunc(&f.device, h, "fakehip_device")
		purego.RegisterLibFunc(&f.fail, h, "fakehip_fail")
		purego.RegisterLibFunc(&f.log, h, "fakehip_log")
		purego.RegisterLibFunc(&f.clearLog, h, "fakehip_clear_log")
		purego.RegisterLibFunc(&f.live, h, "fakehip_live")
		theFake = f
	})
	if openErr != nil {
		t.Fatal(openErr)
	}
	theFake.reset()
	t.Cleanup(theFake.reset)
	return theFake
}

// launch is one line of the fake's log.
type launch struct {
	Via    string // "launch", or "replay" from a graph
	Kernel string
	Grid   [3]int
	Block  [3]int
	Shared int
	// Args: d<k>+<offset> for a pointer into the k-th allocation, else the
	// decimal value.
	Args []string
	// Params is the parameter block as the launch read it (nil: none).
	Params []int32
}

// launches reads and parses the fake's log.
func (f *fake) launches(t *testing.T) []launch {
	t.Helper()
	n := f.log(nil, 0)
	buf := make([]byte, n+1)
	f.log(&buf[0], n+1)
	var out []launch
	for _, line := range strings.Split(strings.TrimSuffix(string(buf[:n]), "\n"), "\n") {
		if line == "" {
			continue
		}
		fs := strings.Fields(line)
		if len(fs) != 7 {
			t.Fatalf("log line %q", line)
		}
		l := launch{Via: fs[0], Kernel: fs[1]}
		dims := func(s string, d *[3]int) {
			for i, v := range strings.Split(s, ",") {
				d[i] = atoi(t, v)
			}
		}
		dims(strings.TrimPrefix(fs[2], "grid="), &l.Grid)
		dims(strings.TrimPrefix(fs[3], "block="), &l.Block)
		l.Shared = atoi(t, strings.TrimPrefix(fs[4], "shared="))
		l.Args = strings.Split(strings.TrimPrefix(fs[5], "args="), ",")
		if p := strings.TrimPrefix(fs[6], "params="); p != "none" {
			for _, v := range strings.Split(p, ",") {
				l.Params = append(l.Params, int32(atoi(t, v)))
			}
		}
		out = append(out, l)
	}
	return out
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	v, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// liveObjects counts what the fake still holds, by kind.
func (f *fake) liveObjects() map[string]int32 {
	out := map[string]int32{}
	for _, k := range []string{"device", "host", "module", "stream", "event", "graph", "exec"} {
		if n := f.live(k); n != 0 {
			out[k] = n
		}
	}
	return out
}

// image is a fake code object declaring one kernel with nargs arguments.
func image(name string, nargs int) []byte {
	return []byte(fmt.Sprintf("fakehip kernel=%s args=%d\n\x00", name, nargs))
}

// objects are fake code objects of kernels: the operands of their family,
// n and the parameter block.
func objects(ks []plan.Kernel) map[string][]byte {
	out := map[string][]byte{}
	for _, k := range ks {
		out[k.Name] = image(k.Name, len(kernels.Families[ir.Kind(k.Family)].Operands)+2)
	}
	return out
}

func newHIP(t *testing.T, f *fake, objs map[string][]byte) *hip.HIP {
	t.Helper()
	h, err := f.lib.New(objs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// wantErr fails unless err contains want ("" wants no error).
func wantErr(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: %v", what, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: error %q, want one containing %q", what, errString(err), want)
	}
}

// frozen is the frozen gfx1151 plan of the real model.
func frozen(t *testing.T) *plan.Plan {
	t.Helper()
	data, err := plans.Frozen(hip.Target)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// phaseOf returns the plan's phase of a kind (and bucket, for prefill).
func phaseOf(t *testing.T, p *plan.Plan, kind plan.PhaseKind, tokens int) *plan.Phase {
	t.Helper()
	for i := range p.Phases {
		if ph := &p.Phases[i]; ph.Kind == kind && (kind != plan.Prefill || ph.Tokens == tokens) {
			return ph
		}
	}
	t.Fatalf("plan has no %s phase of %d tokens", kind, tokens)
	return nil
}

func kernelOf(t *testing.T, p *plan.Plan, name string) *plan.Kernel {
	t.Helper()
	for i := range p.Kernels {
		if p.Kernels[i].Name == name {
			return &p.Kernels[i]
		}
	}
	t.Fatalf("plan has no kernel %s", name)
	return nil
}

func TestOpen(t *testing.T) {
	f := fakeHIP(t)
	again, err := hip.Open(fakePath)
	if err != nil || again != f.lib {
		t.Errorf("second Open: %p, %v; want the same library %p", again, err, f.lib)
	}
	if got, want := f.lib.Version(), "6.4.43483"; got != want {
		t.Errorf("version %q, want %q", got, want)
	}
	missing := filepath.Join(t.TempDir(), "libamdhip64.so")
	_, err = hip.Open(missing)
	wantErr(t, "open a missing library", err, missing)
	wantErr(t, "open a missing library", err, "a ROCm runtime is needed")
}

func TestNewChecksTheDevice(t *testing.T) {
	for _, c := range []struct {
		name         string
		dev          string
		major, minor int32
		count        int32
		fail         string // entry point made to fail
		want         string // error; "" for success
		device       string
	}{
		{name: "gfx1151", dev: "gfx1151", major: 11, minor: 5, count: 1, device: "gfx1151 (11.5, HIP 6.4.43483)"},
		{name: "gfx1100", dev: "AMD Radeon RX 7900 XTX", major: 11, minor: 0, count: 1, device: "AMD Radeon RX 7900 XTX (11.0, HIP 6.4.43483)"},
		{name: "gfx90a", dev: "AMD Instinct MI210", major: 9, minor: 0, count: 1,
			want: "hip: AMD Instinct MI210 reports compute capability 9.0, not a gfx11 GPU; gfx1151 code objects need gfx11xx"},
		{name: "gfx1201", dev: "gfx1201", major: 12, minor: 0, count: 1, want: "not a gfx11 GPU"},
		{name: "no device", dev: "gfx1151", major: 11, minor: 5, count: 0, want: "hip: hipGetDeviceCount: hipErrorNoDevice (100)"},
		{name: "name fails", dev: "gfx1151", major: 11, minor: 5, count: 1, fail: "hipDeviceGetName", want: "hip: device name: hipErrorInvalidDevice (101): invalid device ordinal"},
		{name: "attribute fails", dev: "gfx1151", major: 11, minor: 5, count: 1, fail: "hipDeviceGetAttribute", want: "hip: compute capability: hipErrorInvalidDevice (101)"},
		{name: "set device fails", dev: "gfx1151", major: 11, minor: 5, count: 1, fail: "hipSetDevice", want: "hip: hipSetDevice: hipErrorInvalidDevice (101)"},
		{name: "stream fails", dev: "gfx1151", major: 11, minor: 5, count: 1, fail: "hipStreamCreateWithFlags", want: "hip: create the stream: hipErrorInvalidDevice (101)"},
		{name: "pinned block fails", dev: "gfx1151", major: 11, minor: 5, count: 1, fail: "hipHostMalloc", want: "hip: pin the argument block: hipErrorInvalidDevice (101)"},
		{name: "parameter block fails", dev: "gfx1151", major: 11, minor: 5, count: 1, fail: "hipMalloc", want: "hip: allocate the parameter block: hipErrorInvalidDevice (101)"},
		{name: "parameter block clear fails", dev: "gfx1151", major: 11, minor: 5, count: 1, fail: "hipMemsetD8", want: "hip: clear the parameter block: hipErrorInvalidDevice (101)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fakeHIP(t)
			f.device(c.dev, c.major, c.minor, c.count)
			if c.fail != "" {
				f.fail(c.fail, 101)
			}
			h, err := f.lib.New(nil)
			wantErr(t, "New", err, c.want)
			if err == nil {
				if h.Name() != "gfx1151" || h.Device() != c.device {
					t.Errorf("Name %q, Device %q; want gfx1151, %q", h.Name(), h.Device(), c.device)
				}
				if diff := cmp.Diff(map[string]int32{"device": 1, "host": 1, "stream": 2, "event": 2}, f.liveObjects()); diff != "" {
					t.Errorf("an open backend holds (-want +got):\n%s", diff)
				}
				if err := h.Close(); err != nil {
					t.Error(err)
				}
			}
			if diff := cmp.Diff(map[string]int32{}, f.liveObjects()); diff != "" {
				t.Errorf("left behind (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMemory(t *testing.T) {
	f := fakeHIP(t)
	h := newHIP(t, f, nil)
	m, err := h.Alloc(64)
	if err != nil {
		t.Fatal(err)
	}
	if m.Size() != 64 {
		t.Errorf("size %d", m.Size())
	}
	read := func() []byte {
		t.Helper()
		got := make([]byte, 64)
		if err := h.Download(got, runtime.Ref{Mem: m}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	want := make([]byte, 64)
	if diff := cmp.Diff(want, read()); diff != "" {
		t.Errorf("fresh memory (-want +got):\n%s", diff)
	}
	src := make([]byte, 32)
	for i := range src {
		src[i] = byte(i + 1)
	}
	steps := []struct {
		name string
		run  func() error
		edit func(b []byte) // what the step does to the expected contents
	}{
		{"upload at 16", func() error { return h.Upload(runtime.Ref{Mem: m, Offset: 16}, src) }, func(b []byte) { copy(b[16:], src) }},
		{"upload of nothing", func() error { return h.Upload(runtime.Ref{Mem: m, Offset: 64}, nil) }, func([]byte) {}},
		{"zero 8 at 20", func() error { return h.Zero(runtime.Ref{Mem: m, Offset: 20}, 8) }, func(b []byte) { clear(b[20:28]) }},
		{"upload the tail", func() error { return h.Upload(runtime.Ref{Mem: m, Offset: 60}, []byte{9, 9, 9, 9}) }, func(b []byte) { copy(b[60:], []byte{9, 9, 9, 9}) }},
		{"zero all", func() error { return h.Zero(runtime.Ref{Mem: m}, 64) }, func(b []byte) { clear(b) }},
	}
	for _, s := range steps {
		if err := s.run(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		s.edit(want)
		if diff := cmp.Diff(want, read()); diff != "" {
			t.Errorf("after %s (-want +got):\n%s", s.name, diff)
		}
	}
	part := make([]byte, 8)
	if err := h.Upload(runtime.Ref{Mem: m, Offset: 8}, src[:8]); err != nil {
		t.Fatal(err)
	}
	if err := h.Download(part, runtime.Ref{Mem: m, Offset: 8}); err != nil || !bytes.Equal(part, src[:8]) {
		t.Errorf("download at 8: %v, %v", part, err)
	}

	cpuMem, _ := runtime.NewCPU().Alloc(64)
	freed, err := h.Alloc(16)
	if err != nil {
		t.Fatal(err)
	}
	h.Free(freed)
	h.Free(freed) // twice is harmless
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"upload overrun", h.Upload(runtime.Ref{Mem: m, Offset: 60}, make([]byte, 8)), "hip: 8 bytes at offset 60 overrun a 64-byte buffer"},
		{"download overrun", h.Download(make([]byte, 65), runtime.Ref{Mem: m}), "hip: 65 bytes at offset 0 overrun a 64-byte buffer"},
		{"negative offset", h.Download(make([]byte, 4), runtime.Ref{Mem: m, Offset: -16}), "overrun a 64-byte buffer"},
		{"zero overrun", h.Zero(runtime.Ref{Mem: m, Offset: 1}, 64), "hip: 64 bytes at offset 1 overrun"},
		{"negative zero", h.Zero(runtime.Ref{Mem: m}, -1), "hip: -1 bytes at offset 0 overrun"},
		{"foreign memory", h.Upload(runtime.Ref{Mem: cpuMem}, src), "hip: memory from another backend"},
		{"after free", h.Download(part, runtime.Ref{Mem: freed}), "hip: memory used after Free"},
		{"negative alloc", func() error { _, err := h.Alloc(-1); return err }(), "hip: cannot allocate -1 bytes"},
	} {
		wantErr(t, c.name, c.err, c.want)
	}
	if got := f.live("device"); got != 2 { // the parameter block and m
		t.Errorf("%d device allocations live, want 2", got)
	}
	empty, err := h.Alloc(0)
	if err != nil || empty.Size() != 0 {
		t.Errorf("empty allocation: %v, %v", empty, err)
	}
}

func TestLoad(t *testing.T) {
	p := frozen(t)
	ks := p.Kernels[:3]
	for _, c := range []struct {
		name string
		objs func(map[string][]byte)
		want string
	}{
		{"all there", func(map[string][]byte) {}, ""},
		{"missing", func(o map[string][]byte) { delete(o, ks[1].Name) }, fmt.Sprintf("hip: no code object for 1 of the plan's 3 kernels: [%s]", ks[1].Name)},
		{"empty", func(o map[string][]byte) { o[ks[2].Name] = nil }, fmt.Sprintf("hip: kernel %s: empty code object", ks[2].Name)},
		{"bad image", func(o map[string][]byte) { o[ks[0].Name] = []byte("\x7fELF\x00") },
			fmt.Sprintf("hip: kernel %s: module load: hipErrorInvalidImage (200): device kernel image is invalid", ks[0].Name)},
		{"no such function", func(o map[string][]byte) { o[ks[1].Name] = image("other", 3) },
			fmt.Sprintf("hip: kernel %s: function lookup: hipErrorNotFound (500): named symbol not found", ks[1].Name)},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fakeHIP(t)
			o := objects(ks)
			c.objs(o)
			h := newHIP(t, f, o)
			wantErr(t, "Load", h.Load(ks), c.want)
			if c.want == "" {
				if err := h.Load(ks); err != nil { // again: kept
					t.Error(err)
				}
				if n := f.live("module"); n != 3 {
					t.Errorf("%d modules loaded, want 3", n)
				}
			}
			h.Close()
			if diff := cmp.Diff(map[string]int32{}, f.liveObjects()); diff != "" {
				t.Errorf("left behind (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("unknown family", func(t *testing.T) {
		f := fakeHIP(t)
		k := plan.Kernel{Name: "mystery", Family: "mystery"}
		h := newHIP(t, f, map[string][]byte{"mystery": image("mystery", 2)})
		wantErr(t, "Load", h.Load([]plan.Kernel{k}), `hip: kernel mystery: unknown family "mystery"`)
	})
}

// operands allocates a buffer per operand of k and returns them at
// 16-byte steps of offset: operand i at offset 16·i. The allocations are
// d<first>, d<first+1>, … in the fake's log.
func operands(t *testing.T, h *hip.HIP, k *plan.Kernel) []runtime.Ref {
	t.Helper()
	var refs []runtime.Ref
	for i := range kernels.Families[ir.Kind(k.Family)].Operands {
		m, err := h.Alloc(4096)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, runtime.Ref{Mem: m, Offset: int64(16 * i)})
	}
	return refs
}

// expect is the logged launch of l with the operands operands gives, the
// first allocated as d<first>; the parameter block is d1.
func expect(via string, k *plan.Kernel, l *plan.Launch, first, rows int, params runtime.Params) launch {
	w := launch{Via: via, Kernel: k.Name, Shared: l.SharedBytes, Params: params[:]}
	for i := range 3 {
		w.Grid[i], w.Block[i] = 1, 1
		if i < len(l.Grid) {
			w.Grid[i] = l.Grid[i]
		}
		if i < len(l.Block) {
			w.Block[i] = l.Block[i]
		}
	}
	for i := range kernels.Families[ir.Kind(k.Family)].Operands {
		w.Args = append(w.Args, fmt.Sprintf("d%d+%d", first+i, 16*i))
	}
	w.Args = append(w.Args, strconv.Itoa(rows), "d1+0")
	return w
}

// decodeLaunches picks the first decode launch of each of a few families
// of the frozen plan, with different operand counts.
func decodeLaunches(t *testing.T, p *plan.Plan) ([]*plan.Kernel, []*plan.Launch) {
	t.Helper()
	ph := phaseOf(t, p, plan.DecodeStep, 1)
	var ks []*plan.Kernel
	var ls []*plan.Launch
	seen := map[string]bool{}
	for i := range ph.Launches {
		l := &ph.Launches[i]
		k := kernelOf(t, p, l.Kernel)
		switch ir.Kind(k.Family) {
		case ir.Embedding, ir.MoEDown, ir.MoEDownGEMV, ir.MoEDecodeDown, ir.AttentionDecodeSplit, ir.RMSNorm, ir.RMSNormGEMV: // moe_decode_down and rmsnorm_gemv on GPU targets
			if !seen[k.Family] {
				seen[k.Family] = true
				ks, ls = append(ks, k), append(ls, l)
			}
		}
	}
	if len(ks) != 4 {
		t.Fatalf("found decode launches of %v; want 4 families", seen)
	}
	return ks, ls
}

func loaded(t *testing.T, f *fake, ks []*plan.Kernel) *hip.HIP {
	t.Helper()
	var list []plan.Kernel
	for _, k := range ks {
		list = append(list, *k)
	}
	h := newHIP(t, f, objects(list))
	if err := h.Load(list); err != nil {
		t.Fatal(err)
	}
	return h
}

func TestLaunch(t *testing.T) {
	f := fakeHIP(t)
	p := frozen(t)
	ks, ls := decodeLaunches(t, p)
	h := loaded(t, f, ks)
	var params runtime.Params
	params[ir.ParamPos] = 41
	params[ir.ParamTopK] = 20
	params[ir.ParamSlots-1] = -1
	if err := h.SetParams(&params); err != nil {
		t.Fatal(err)
	}
	var want []launch
	first := 2 // d1 is the parameter block
	for i, k := range ks {
		args := operands(t, h, k)
		rows := 5 + i
		if err := h.Launch(k, ls[i], args, rows, nil); err != nil {
			t.Fatal(err)
		}
		want = append(want, expect("launch", k, ls[i], first, rows, params))
		first += len(args)
	}
	if err := h.Sync(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, f.launches(t)); diff != "" {
		t.Errorf("launches (-want +got):\n%s", diff)
	}

	// Refused launches: nothing reaches the runtime.
	f.clearLog()
	k, l := ks[0], ls[0]
	args := operands(t, h, k)
	misaligned := append([]runtime.Ref(nil), args...)
	misaligned[1].Offset += 8
	cpuMem, _ := runtime.NewCPU().Alloc(64)
	foreign := append([]runtime.Ref(nil), args...)
	foreign[0] = runtime.Ref{Mem: cpuMem}
	badGrid := *l
	badGrid.Grid = []int{4, 0}
	noBlock := *l
	noBlock.Block = nil
	opName := func(i int) string { return kernels.Families[ir.Kind(k.Family)].Operands[i].Name }
	for _, c := range []struct {
		name string
		k    *plan.Kernel
		l    *plan.Launch
		args []runtime.Ref
		rows int
		want string
	}{
		{"misaligned", k, l, misaligned, 1, fmt.Sprintf("hip: kernel %s: argument 1 (%s) at offset %d is not 16-byte aligned", k.Name, opName(1), misaligned[1].Offset)},
		{"too few arguments", k, l, args[1:], 1, fmt.Sprintf("hip: kernel %s: %d arguments, family %s takes %d operands", k.Name, len(args)-1, k.Family, len(args))},
		{"foreign memory", k, l, foreign, 1, fmt.Sprintf("hip: kernel %s: argument 0 (%s): hip: memory from another backend", k.Name, opName(0))},
		{"empty grid dimension", k, &badGrid, args, 1, fmt.Sprintf("hip: kernel %s: grid [4 0] has an empty dimension", k.Name)},
		{"no block", k, &noBlock, args, 1, "want 1 to 3 dimensions each"},
		{"unknown family", &plan.Kernel{Name: "x", Family: "mystery"}, l, args, 1, `hip: kernel x: unknown kernel family "mystery"`},
		{"not loaded", &plan.Kernel{Name: "other", Family: k.Family}, l, args, 1, "hip: kernel other was not loaded"},
		{"no rows", k, l, args, 0, ""},
	} {
		wantErr(t, c.name, h.Launch(c.k, c.l, c.args, c.rows, nil), c.want)
	}
	if got := f.launches(t); len(got) != 0 {
		t.Errorf("refused launches reached the runtime: %v", got)
	}
	// A negative count names the slot holding it (KernelABI 5): launched,
	// the kernel reads it.
	if err := h.Launch(k, l, args, -16, nil); err != nil {
		t.Errorf("launch with the count in slot 15: %v", err)
	}
	if got := f.launches(t); len(got) != 1 {
		t.Errorf("%d launches with a slot's count reached the runtime, want 1", len(got))
	}
	f.clearLog()
}

func TestCaptureAndReplay(t *testing.T) {
	f := fakeHIP(t)
	p := frozen(t)
	ks, ls := decodeLaunches(t, p)
	ks, ls = ks[:2], ls[:2]
	h := loaded(t, f, ks)
	var args [][]runtime.Ref
	for _, k := range ks {
		args = append(args, operands(t, h, k))
	}
	launchAll := func() error {
		for i, k := range ks {
			if err := h.Launch(k, ls[i], args[i], 1, nil); err != nil {
				return err
			}
		}
		return nil
	}
	var prm runtime.Params
	prm[ir.ParamPos] = 3
	if err := h.SetParams(&prm); err != nil {
		t.Fatal(err)
	}
	earlier, err := h.Capture(launchAll)
	if err != nil {
		t.Fatal(err)
	}
	m := args[0][0].Mem
	var refused []string
	g, err := h.Capture(func() error {
		if err := launchAll(); err != nil {
			return err
		}
		for _, c := range []struct {
			name string
			err  error
			want string
		}{
			{"upload", h.Upload(runtime.Ref{Mem: m}, []byte{1}), "hip: only launches are allowed during graph capture"},
			{"download", h.Download(make([]byte, 1), runtime.Ref{Mem: m}), "hip: only launches are allowed during graph capture"},
			{"zero", h.Zero(runtime.Ref{Mem: m}, 16), "hip: only launches are allowed during graph capture"},
			{"set params", h.SetParams(&prm), "hip: parameter block written during graph capture"},
			{"sync", h.Sync(), "hip: only launches are allowed during graph capture"},
			{"nested capture", func() error { _, err := h.Capture(launchAll); return err }(), "hip: capture already in progress"},
			{"replay", earlier.Replay(), "hip: graph replayed during a capture"},
		} {
			refused = append(refused, c.name)
			wantErr(t, c.name+" during capture", c.err, c.want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(refused) != 7 {
		t.Errorf("checked %v during capture", refused)
	}
	if got := f.launches(t); len(got) != 0 {
		t.Errorf("captured launches ran: %v", got)
	}
	// Replays read the parameter block when they run: the second sees the
	// new position.
	if err := g.Replay(); err != nil {
		t.Fatal(err)
	}
	first := prm
	prm[ir.ParamPos] = 9
	if err := h.SetParams(&prm); err != nil {
		t.Fatal(err)
	}
	if err := g.Replay(); err != nil {
		t.Fatal(err)
	}
	if err := h.Sync(); err != nil {
		t.Fatal(err)
	}
	want := []launch{
		expect("replay", ks[0], ls[0], 2, 1, first),
		expect("replay", ks[1], ls[1], 2+len(args[0]), 1, first),
		expect("replay", ks[0], ls[0], 2, 1, prm),
		expect("replay", ks[1], ls[1], 2+len(args[0]), 1, prm),
	}
	if diff := cmp.Diff(want, f.launches(t)); diff != "" {
		t.Errorf("replays (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int32{"graph": 2, "exec": 2}, map[string]int32{"graph": f.live("graph"), "exec": f.live("exec")}); diff != "" {
		t.Errorf("graphs (-want +got):\n%s", diff)
	}
	g.Destroy()
	g.Destroy()
	wantErr(t, "replay after Destroy", g.Replay(), "hip: replay of a destroyed graph")
	if n := f.live("graph") + f.live("exec"); n != 2 {
		t.Errorf("%d graph objects live after destroying one of two graphs, want 2", n)
	}

	// A capture whose function fails returns its error and leaves no graph;
	// the stream captures again afterwards.
	f.clearLog()
	stop := errors.New("stop")
	_, err = h.Capture(func() error {
		if err := launchAll(); err != nil {
			return err
		}
		return stop
	})
	if !errors.Is(err, stop) {
		t.Errorf("failed capture: %v", err)
	}
	f.fail("hipModuleLaunchKernel", 98)
	_, err = h.Capture(launchAll)
	wantErr(t, "capture with a failed launch", err, fmt.Sprintf("hip: launch %s", ks[0].Name))
	if n := f.live("graph") + f.live("exec"); n != 2 {
		t.Errorf("%d graph objects live after failed captures, want 2", n)
	}
	g2, err := h.Capture(launchAll)
	if err != nil {
		t.Fatal(err)
	}
	if err := g2.Replay(); err != nil {
		t.Fatal(err)
	}
	if got := f.launches(t); len(got) != 2 {
		t.Errorf("%d launches logged, want the 2 of one replay", len(got))
	}
	// Close destroys the graphs left.
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int32{}, f.liveObjects()); diff != "" {
		t.Errorf("left behind (-want +got):\n%s", diff)
	}
	earlier.Destroy() // after Close: harmless
	wantErr(t, "replay after Close", g2.Replay(), "hip: backend is closed")
}

func TestFailures(t *testing.T) {
	p := frozen(t)
	ks, ls := decodeLaunches(t, p)
	k, l := ks[0], ls[0]
	for _, c := range []struct {
		name string
		fn   string // the entry point that fails
		code int32
		run  func(h *hip.HIP, args []runtime.Ref) error
		want string
	}{
		{"launch", "hipModuleLaunchKernel", 98, func(h *hip.HIP, args []runtime.Ref) error {
			return h.Launch(k, l, args, 1, nil)
		}, fmt.Sprintf("hip: launch %s (grid %v, block %v): hipErrorInvalidDeviceFunction (98): invalid device function", k.Name, pad(l.Grid), pad(l.Block))},
		{"sync after a launch", "hipStreamSynchronize", 719, func(h *hip.HIP, args []runtime.Ref) error {
			if err := h.Launch(k, l, args, 1, nil); err != nil {
				return err
			}
			return h.Sync()
		}, fmt.Sprintf("hip: synchronize (after launching %s): hipErrorLaunchFailure (719): unspecified launch failure", k.Name)},
		{"download after a launch", "hipMemcpyDtoH", 700, func(h *hip.HIP, args []runtime.Ref) error {
			if err := h.Launch(k, l, args, 1, nil); err != nil {
				return err
			}
			return h.Download(make([]byte, 4), args[0])
		}, fmt.Sprintf("hip: download (after launching %s): hipErrorIllegalAddress (700): an illegal memory access was encountered", k.Name)},
		{"sync", "hipStreamSynchronize", 719, func(h *hip.HIP, _ []runtime.Ref) error { return h.Sync() },
			"hip: synchronize: hipErrorLaunchFailure (719)"},
		{"upload", "hipMemcpyHtoD", 1, func(h *hip.HIP, args []runtime.Ref) error { return h.Upload(args[0], []byte{1}) },
			"hip: upload: hipErrorInvalidValue (1): invalid argument"},
		{"zero", "hipMemsetD8", 1, func(h *hip.HIP, args []runtime.Ref) error { return h.Zero(args[0], 4) },
			"hip: memset: hipErrorInvalidValue (1)"},
		{"set params", "hipMemcpyHtoD", 700, func(h *hip.HIP, _ []runtime.Ref) error { return h.SetParams(&runtime.Params{}) },
			"hip: parameter block upload: hipErrorIllegalAddress (700)"},
		{"alloc", "hipMalloc", 2, func(h *hip.HIP, _ []runtime.Ref) error { _, err := h.Alloc(100); return err },
			"hip: allocate 100 bytes: hipErrorOutOfMemory (2): out of memory"},
		{"begin capture", "hipStreamBeginCapture", 1, func(h *hip.HIP, _ []runtime.Ref) error { _, err := h.Capture(func() error { return nil }); return err },
			"hip: begin capture: hipErrorInvalidValue (1)"},
		{"end capture", "hipStreamEndCapture", 901, func(h *hip.HIP, _ []runtime.Ref) error { _, err := h.Capture(func() error { return nil }); return err },
			"hip: end capture: hipErrorStreamCaptureInvalidated (901)"},
		{"instantiate", "hipGraphInstantiateWithFlags", 2, func(h *hip.HIP, args []runtime.Ref) error {
			_, err := h.Capture(func() error { return h.Launch(k, l, args, 1, nil) })
			return err
		}, "hip: instantiate the graph: hipErrorOutOfMemory (2)"},
		{"replay", "hipGraphLaunch", 400, func(h *hip.HIP, args []runtime.Ref) error {
			g, err := h.Capture(func() error { return h.Launch(k, l, args, 1, nil) })
			if err != nil {
				return err
			}
			return g.Replay()
		}, "hip: graph launch (1 kernels): hipErrorInvalidHandle (400): invalid resource handle"},
		{"sync after a replay", "hipStreamSynchronize", 719, func(h *hip.HIP, args []runtime.Ref) error {
			g, err := h.Capture(func() error { return h.Launch(k, l, args, 1, nil) })
			if err != nil {
				return err
			}
			if err := g.Replay(); err != nil {
				return err
			}
			return h.Sync()
		}, "hip: synchronize (after launching a graph of 1 kernels): hipErrorLaunchFailure (719)"},
		{"close", "hipStreamSynchronize", 719, func(h *hip.HIP, args []runtime.Ref) error {
			if err := h.Launch(k, l, args, 1, nil); err != nil {
				return err
			}
			return h.Close()
		}, fmt.Sprintf("hip: synchronize (after launching %s): hipErrorLaunchFailure (719)", k.Name)},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := fakeHIP(t)
			h := loaded(t, f, ks[:1])
			args := operands(t, h, k)
			f.fail(c.fn, c.code)
			wantErr(t, c.name, c.run(h, args), c.want)
			if err := h.Close(); err != nil && c.name != "close" {
				t.Error(err)
			}
			if diff := cmp.Diff(map[string]int32{}, f.liveObjects()); diff != "" {
				t.Errorf("left behind after Close (-want +got):\n%s", diff)
			}
		})
	}
}

func pad(d []int) [3]uint32 {
	out := [3]uint32{1, 1, 1}
	for i, v := range d {
		out[i] = uint32(v)
	}
	return out
}

func TestClose(t *testing.T) {
	f := fakeHIP(t)
	p := frozen(t)
	ks, ls := decodeLaunches(t, p)
	h := loaded(t, f, ks)
	args := operands(t, h, ks[0])
	if _, err := h.Capture(func() error { return h.Launch(ks[0], ls[0], args, 1, nil) }); err != nil {
		t.Fatal(err)
	}
	kept, err := h.Alloc(32)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int32{"device": int32(2 + len(args)), "host": 1, "module": 4, "stream": 2, "event": 2, "graph": 1, "exec": 1}, f.liveObjects()); diff != "" {
		t.Errorf("before Close (-want +got):\n%s", diff)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int32{}, f.liveObjects()); diff != "" {
		t.Errorf("after Close (-want +got):\n%s", diff)
	}
	if err := h.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	h.Free(kept) // after Close: harmless
	for _, c := range []struct {
		name string
		err  error
	}{
		{"alloc", func() error { _, err := h.Alloc(16); return err }()},
		{"upload", h.Upload(runtime.Ref{Mem: kept}, []byte{1})},
		{"launch", h.Launch(ks[0], ls[0], args, 1, nil)},
		{"set params", h.SetParams(&runtime.Params{})},
		{"sync", h.Sync()},
		{"load", h.Load([]plan.Kernel{*ks[0]})},
		{"capture", func() error { _, err := h.Capture(func() error { return nil }); return err }()},
	} {
		if c.err == nil {
			t.Errorf("%s after Close: no error", c.name)
		}
	}
}

// TestEngine runs a tiny synthetic model's gfx1151 plan through the engine
// on the fake: every launch of a prefill step and of two decode steps
// reaches the runtime in plan order with the plan's grid and block and the
// step's position in the parameter block; the decode steps replay one
// captured graph, which reads each step's position when it runs.
func TestEngine(t *testing.T) {
	f := fakeHIP(t)
	cfgJSON, err := synth.ConfigJSON(synth.PresetTiny, 0)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := arch.ParseConfig(cfgJSON)
	if err != nil {
		t.Fatal(err)
	}
	const bucket = 8
	p, err := planner.Plan(planner.FromConfig("tiny", cfg), planner.Options{Target: hip.Target, Buckets: []int{bucket}, ContextTokens: 64, MoERouter: true})
	if err != nil {
		t.Fatal(err)
	}
	h := newHIP(t, f, objects(p.Kernels))
	e, err := runtime.NewEngine(p, h, runtime.SyntheticWeights(1))
	if err != nil {
		t.Fatal(err)
	}
	if !e.Graphs() {
		t.Error("the engine does not replay decode steps as graphs on this backend")
	}
	// The fake has no occupancy query: each fused router (a grid barrier)
	// runs as its fallback, the launches of the plan the engine runs.
	fused := 0
	for _, ph := range p.Phases {
		for _, l := range ph.Launches {
			if len(l.Fallback) > 0 {
				fused++
				for _, q := range e.Plan().Phases {
					for _, m := range q.Launches {
						if m.Kernel == l.Kernel {
							t.Errorf("phase %s: %s runs without the occupancy query", q.Name, l.Kernel)
						}
					}
				}
			}
		}
	}
	if fused == 0 {
		t.Error("the tiny gfx1151 plan has no launch with a fallback")
	}
	p = e.Plan()
	// expected lists the launches of a phase that have rows to run; in a
	// prefill, those with an operand offset from a slot are launched
	// between the bucket's graphs, the others replayed.
	expected := func(via string, ph *plan.Phase, dyn map[string]int64) []string {
		var out []string
		for _, l := range ph.Launches {
			via := via
			for _, a := range l.Args {
				if a.Dyn != nil && ph.Kind == plan.Prefill {
					via = "launch"
				}
			}
			k := kernelOf(t, p, l.Kernel)
			r, _ := k.Params.Rows()
			rows := int(r)
			if l.Rows != nil {
				rows = int(dyn[l.Rows.String()])
			}
			if rows > 0 {
				out = append(out, fmt.Sprintf("%s %s grid=%v block=%v pos=%d", via, l.Kernel, pad(l.Grid), pad(l.Block), dyn["pos"]))
			}
		}
		return out
	}
	logged := func() []string {
		var out []string
		for _, l := range f.launches(t) {
			out = append(out, fmt.Sprintf("%s %s grid=%v block=%v pos=%d", l.Via, l.Kernel, l.Grid, l.Block, l.Params[ir.ParamPos]))
		}
		f.clearLog()
		return out
	}
	logged()
	ctx := context.Background()
	// The bucket's graph: a prompt of one bucket prefilled, not run as
	// the decode tail a GPU engine gives prompts this short.
	if err := e.SetDecodeTail(0); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Prefill(ctx, []int32{1, 2, 3, 4, 5, 6, 7, 8}, nil); err != nil {
		t.Fatal(err)
	}
	prefill := expected("replay", phaseOf(t, p, plan.Prefill, bucket), map[string]int64{"n": bucket, "pos": 0, "last": bucket - 1})
	if diff := cmp.Diff(prefill, logged()); diff != "" {
		t.Errorf("prefill launches (-want +got):\n%s", diff)
	}
	decode := phaseOf(t, p, plan.DecodeStep, 1)
	for pos := bucket; pos < bucket+2; pos++ {
		if _, err := e.Decode(ctx, 9); err != nil {
			t.Fatal(err)
		}
		want := expected("replay", decode, map[string]int64{"n": 1, "pos": int64(pos), "last": 0})
		if diff := cmp.Diff(want, logged()); diff != "" {
			t.Errorf("decode at %d: launches (-want +got):\n%s", pos, diff)
		}
	}
	if n := f.live("exec"); n != 2 {
		t.Errorf("%d graphs instantiated, want the decode graph and the bucket's (its LM head launched after it)", n)
	}
	t.Logf("%d prefill and %d decode launches", len(prefill), len(decode.Launches))
	if err := e.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]int32{}, f.liveObjects()); diff != "" {
		t.Errorf("left behind (-want +got):\n%s", diff)
	}
}

// TestBackendFor: the loader picks this backend for gfx1151 plans.
func TestBackendFor(t *testing.T) {
	_, err := loader.BackendFor(hip.Target, nil)
	wantErr(t, "no code objects", err, "target gfx1151 needs the plan's kernels compiled to .hsaco code objects")
	be, err := loader.BackendFor(hip.Target, map[string][]byte{"k": image("k", 2)})
	if err != nil {
		// No ROCm here: the error names the library and what is missing.
		wantErr(t, "no runtime", err, "libamdhip64.so")
		wantErr(t, "no runtime", err, "a ROCm runtime is needed")
		return
	}
	if be.Name() != hip.Target {
		t.Errorf("backend %s", be.Name())
	}
	be.Close()
}

// TestUploadAll runs the parallel pinned-staging upload through the
// binding: staging buffers from hipHostMalloc, copies with
// hipMemcpyHtoDAsync on the workers' streams, events to reuse buffers; what
// it made is freed again.
func TestUploadAll(t *testing.T) {
	f := fakeHIP(t)
	h := newHIP(t, f, nil)
	gputest.UploadRoundTrip(t, h.Backend)
	if diff := cmp.Diff(map[string]int32{"device": 1, "host": 1, "stream": 2, "event": 2}, f.liveObjects()); diff != "" {
		t.Errorf("after the uploads (-want +got):\n%s", diff)
	}
	free, total, err := h.MemInfo()
	if err != nil || total != 96<<30 || free != total-4*ir.ParamSlots {
		t.Errorf("memory info: %d free of %d, %v", free, total, err)
	}
}

// TestFork captures a launch on the second stream between two on the
// first: the replay runs all four. The fake ends a capture whose second
// stream was not joined back with hipErrorStreamCaptureUnjoined, so the
// capture succeeding means the binding's events joined it.
func TestFork(t *testing.T) {
	f := fakeHIP(t)
	p := frozen(t)
	ks, ls := decodeLaunches(t, p)
	h := loaded(t, f, ks)
	var args [][]runtime.Ref
	for _, k := range ks {
		args = append(args, operands(t, h, k))
	}
	launch := func(i int) func() error { return func() error { return h.Launch(ks[i], ls[i], args[i], 1, nil) } }
	g, err := h.Capture(func() error {
		if err := launch(0)(); err != nil {
			return err
		}
		if err := h.Fork(launch(1), launch(2)); err != nil {
			return err
		}
		return launch(3)()
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Replay(); err != nil {
		t.Fatal(err)
	}
	if err := h.Sync(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range f.launches(t) {
		got = append(got, l.Via+" "+l.Kernel)
	}
	want := []string{"replay " + ks[0].Name, "replay " + ks[2].Name, "replay " + ks[1].Name, "replay " + ks[3].Name}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("replay (-want +got):\n%s", diff)
	}
	f.fail("hipStreamWaitEvent", 400) // the second stream's wait for the fork
	wantErr(t, "fork", h.Fork(launch(1), launch(2)), "hip: second stream waits for the fork: hipErrorInvalidHandle (400)")
	if _, err := h.Elapsed(func() error { return launch(0)() }); err != nil {
		t.Errorf("elapsed: %v", err)
	}
	wantErr(t, "launch attributes", h.WithLaunchAttrs(runtime.LaunchAttrs{ProgrammaticSerialization: true}, func() error { return nil }),
		"hip: launch attributes {ProgrammaticSerialization:true} need an extended launch")
}
