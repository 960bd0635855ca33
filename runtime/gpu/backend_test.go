package gpu

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/runtime"
)

// dialects are the two the bindings provide: the CUDA driver with the
// function attribute and the extended launch, HIP without.
var dialects = []string{"cuda", "hip"}

// open is a backend on a fresh fake of dialect, with fake code objects of
// kernels, closed at the end of the test.
func open(t *testing.T, dialect string, ks []plan.Kernel) (*Backend, *fake) {
	t.Helper()
	f := newFake(dialect, 1<<24)
	objs := map[string][]byte{}
	for _, k := range ks {
		objs[k.Name] = image(k.Name, len(declared(&k))+2)
	}
	released := 0
	b, err := New(f.driver(), Config{Target: "sm_test", Objects: objs, Release: func() { released++ }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
		if released != 1 {
			t.Errorf("Release called %d times, want once", released)
		}
		if diff := cmp.Diff(map[string]int{}, f.live()); diff != "" {
			t.Errorf("left behind after Close (-want +got):\n%s", diff)
		}
		if errs := f.misuses(); len(errs) > 0 {
			t.Errorf("driver misuse: %v", errs)
		}
	})
	return b, f
}

// kernels are three of the catalogue's families, with launches.
func kernels() ([]plan.Kernel, []plan.Launch) {
	ks := []plan.Kernel{
		{Name: "embed", Family: string(ir.Embedding)},
		{Name: "norm", Family: string(ir.RMSNorm)},
		{Name: "residual", Family: string(ir.Add)},
	}
	ls := []plan.Launch{
		{Kernel: "embed", Grid: []int{4}, Block: []int{256}},
		{Kernel: "norm", Grid: []int{1, 2}, Block: []int{128, 2}, SharedBytes: 1024},
		{Kernel: "residual", Grid: []int{8, 1, 3}, Block: []int{64}},
	}
	return ks, ls
}

func loaded(t *testing.T, dialect string) (*Backend, *fake, []plan.Kernel, []plan.Launch) {
	t.Helper()
	ks, ls := kernels()
	b, f := open(t, dialect, ks)
	if err := b.Load(ks); err != nil {
		t.Fatal(err)
	}
	return b, f, ks, ls
}

// operands allocates a buffer per operand of k, operand i at offset 16·i.
func operands(t *testing.T, b *Backend, k *plan.Kernel) []runtime.Ref {
	t.Helper()
	var refs []runtime.Ref
	for i := range declared(k) {
		m, err := b.Alloc(4096)
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, runtime.Ref{Mem: m, Offset: int64(16 * i)})
	}
	return refs
}

// expect is the record of launch l of k with operands from allocation
// first on (d1 is the parameter block).
func expect(via string, k *plan.Kernel, l *plan.Launch, first, rows int, params runtime.Params) ran {
	grid, block, _ := runtime.LaunchShape(l)
	w := ran{Via: via, Kernel: k.Name, Grid: grid, Block: block, Shared: uint32(l.SharedBytes), Params: params[:]}
	for i := range declared(k) {
		w.Args = append(w.Args, fmt.Sprintf("d%d+%d", first+i, 16*i))
	}
	w.Args = append(w.Args, strconv.Itoa(rows), "d1+0")
	return w
}

func wantErr(t *testing.T, what string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: %v", what, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: error %v, want one containing %q", what, err, want)
	}
}

func TestNew(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			b, f := open(t, dialect, nil)
			if diff := cmp.Diff(map[string]int{"device": 1, "host": 1, "stream": 2, "event": 2}, f.live()); diff != "" {
				t.Errorf("an open backend holds (-want +got):\n%s", diff)
			}
			if b.Name() != "sm_test" {
				t.Errorf("name %q", b.Name())
			}
			free, total, err := b.MemInfo()
			if err != nil || total != 1<<24 || free != total-512 {
				t.Errorf("memory info %d free of %d, %v", free, total, err)
			}
		})
	}
	for _, c := range []struct{ fn, want string }{
		{"StreamCreate", "cuda: create the stream: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"},
		{"EventCreate", "cuda: create the fork event: CUDA_ERROR_OUT_OF_MEMORY (2)"},
		{"HostAlloc", "cuda: pin the argument block: CUDA_ERROR_OUT_OF_MEMORY (2)"},
		{"MemAlloc", "cuda: allocate the parameter block: CUDA_ERROR_OUT_OF_MEMORY (2)"},
		{"MemsetD8", "cuda: clear the parameter block: CUDA_ERROR_OUT_OF_MEMORY (2)"},
	} {
		t.Run("failing "+c.fn, func(t *testing.T) {
			f := newFake("cuda", 1<<20)
			f.failNext(c.fn, 1, 2)
			_, err := New(f.driver(), Config{Target: "sm_test"})
			wantErr(t, "New", err, c.want)
			if diff := cmp.Diff(map[string]int{}, f.live()); diff != "" {
				t.Errorf("left behind (-want +got):\n%s", diff)
			}
		})
	}
	d := newFake("hip", 1).driver()
	d.GraphLaunch = nil
	_, err := New(d, Config{})
	wantErr(t, "a driver without GraphLaunch", err, "gpu: the hip driver has no GraphLaunch")
}

func TestMemory(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			b, _ := open(t, dialect, nil)
			m, err := b.Alloc(64)
			if err != nil {
				t.Fatal(err)
			}
			other, err := b.Alloc(64)
			if err != nil {
				t.Fatal(err)
			}
			read := func(m runtime.Mem) []byte {
				t.Helper()
				got := make([]byte, 64)
				if err := b.Download(got, runtime.Ref{Mem: m}); err != nil {
					t.Fatal(err)
				}
				return got
			}
			src := make([]byte, 32)
			for i := range src {
				src[i] = byte(i + 1)
			}
			want := make([]byte, 64)
			for _, s := range []struct {
				name string
				run  func() error
				edit func(b []byte)
			}{
				{"upload at 16", func() error { return b.Upload(runtime.Ref{Mem: m, Offset: 16}, src) }, func(b []byte) { copy(b[16:], src) }},
				{"upload of nothing", func() error { return b.Upload(runtime.Ref{Mem: m, Offset: 64}, nil) }, func([]byte) {}},
				{"zero 8 at 20", func() error { return b.Zero(runtime.Ref{Mem: m, Offset: 20}, 8) }, func(b []byte) { clear(b[20:28]) }},
				{"copy from the other", func() error {
					if err := b.Upload(runtime.Ref{Mem: other}, []byte{7, 7, 7, 7}); err != nil {
						return err
					}
					return b.Copy(runtime.Ref{Mem: m, Offset: 60}, runtime.Ref{Mem: other}, 4)
				}, func(b []byte) { copy(b[60:], []byte{7, 7, 7, 7}) }},
			} {
				if err := s.run(); err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				s.edit(want)
				if diff := cmp.Diff(want, read(m)); diff != "" {
					t.Errorf("after %s (-want +got):\n%s", s.name, diff)
				}
			}
			cpuMem, _ := runtime.NewCPU().Alloc(64)
			stranger, _ := open(t, dialect, nil)
			strangerMem, err := stranger.Alloc(64)
			if err != nil {
				t.Fatal(err)
			}
			freed, err := b.Alloc(16)
			if err != nil {
				t.Fatal(err)
			}
			b.Free(freed)
			b.Free(freed)
			p := dialect + ": "
			for _, c := range []struct {
				name string
				err  error
				want string
			}{
				{"upload overrun", b.Upload(runtime.Ref{Mem: m, Offset: 60}, make([]byte, 8)), p + "8 bytes at offset 60 overrun a 64-byte buffer"},
				{"download overrun", b.Download(make([]byte, 65), runtime.Ref{Mem: m}), p + "65 bytes at offset 0 overrun"},
				{"negative offset", b.Download(make([]byte, 4), runtime.Ref{Mem: m, Offset: -16}), "overrun a 64-byte buffer"},
				{"zero overrun", b.Zero(runtime.Ref{Mem: m, Offset: 1}, 64), p + "64 bytes at offset 1 overrun"},
				{"copy overrun", b.Copy(runtime.Ref{Mem: m}, runtime.Ref{Mem: other, Offset: 8}, 60), p + "60 bytes at offset 8 overrun"},
				{"foreign memory", b.Upload(runtime.Ref{Mem: cpuMem}, src), p + "memory from another backend"},
				{"another GPU backend's memory", b.Upload(runtime.Ref{Mem: strangerMem}, src), p + "memory from another backend"},
				{"after free", b.Download(src, runtime.Ref{Mem: freed}), p + "memory used after Free"},
				{"negative alloc", func() error { _, err := b.Alloc(-1); return err }(), p + "cannot allocate -1 bytes"},
			} {
				wantErr(t, c.name, c.err, c.want)
			}
		})
	}
}

func TestLoad(t *testing.T) {
	ks, _ := kernels()
	for _, c := range []struct {
		name string
		objs func(map[string][]byte)
		want string
	}{
		{"all there", func(map[string][]byte) {}, ""},
		{"missing", func(o map[string][]byte) { delete(o, "norm") }, "hip: no code object for 1 of the plan's 3 kernels: [norm]"},
		{"empty", func(o map[string][]byte) { o["residual"] = nil }, "hip: kernel residual: empty code object"},
		{"bad image", func(o map[string][]byte) { o["embed"] = []byte("\x7fELF\x00") },
			"hip: kernel embed: module load: hipErrorInvalidImage (200): device kernel image is invalid"},
		{"no such function", func(o map[string][]byte) { o["norm"] = image("other", 3) },
			"hip: kernel norm: function lookup: hipErrorNotFound (500): named symbol not found"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, f := open(t, "hip", ks)
			c.objs(b.objects)
			wantErr(t, "Load", b.Load(ks), c.want)
			if c.want == "" {
				if err := b.Load(ks); err != nil {
					t.Error(err)
				}
				if n := f.live()["module"]; n != 3 {
					t.Errorf("%d modules, want 3", n)
				}
			}
		})
	}
	b, _ := open(t, "cuda", nil)
	b.objects = map[string][]byte{"mystery": image("mystery", 2)}
	wantErr(t, "unknown family", b.Load([]plan.Kernel{{Name: "mystery", Family: "mystery"}}), `cuda: kernel mystery: unknown family "mystery"`)
}

func TestLaunch(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			b, f, ks, ls := loaded(t, dialect)
			var params runtime.Params
			params[ir.ParamPos] = 41
			params[ir.ParamSlots-1] = -1
			if err := b.SetParams(&params); err != nil {
				t.Fatal(err)
			}
			var want []ran
			first := 2
			for i := range ks {
				args := operands(t, b, &ks[i])
				if err := b.Launch(&ks[i], &ls[i], args, 5+i, nil); err != nil {
					t.Fatal(err)
				}
				want = append(want, expect("launch", &ks[i], &ls[i], first, 5+i, params))
				first += len(args)
			}
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, f.launches()); diff != "" {
				t.Errorf("launches (-want +got):\n%s", diff)
			}

			k, l := &ks[0], &ls[0]
			args := operands(t, b, k)
			misaligned := append([]runtime.Ref(nil), args...)
			misaligned[1].Offset += 8
			badGrid := *l
			badGrid.Grid = []int{4, 0}
			tooBig := *l
			tooBig.Block = []int{2048}
			p := dialect + ": "
			for _, c := range []struct {
				name string
				k    *plan.Kernel
				l    *plan.Launch
				args []runtime.Ref
				rows int
				want string
			}{
				{"misaligned", k, l, misaligned, 1, p + "kernel embed: argument 1 (" + declared(&plan.Kernel{Family: string(ir.Embedding)})[1].Name + ") at offset 24 is not 16-byte aligned"},
				{"too few arguments", k, l, args[1:], 1, fmt.Sprintf("%skernel embed: %d arguments, family embedding takes %d operands", p, len(args)-1, len(args))},
				{"empty grid dimension", k, &badGrid, args, 1, p + "kernel embed: grid [4 0] has an empty dimension"},
				{"unknown family", &plan.Kernel{Name: "x", Family: "mystery"}, l, args, 1, p + `kernel x: unknown kernel family "mystery"`},
				{"not loaded", &plan.Kernel{Name: "other", Family: k.Family}, l, args, 1, p + "kernel other was not loaded"},
				{"refused by the driver", k, &tooBig, args, 1, p + "launch embed (grid [4 1 1], block [2048 1 1]): "},
				{"no rows", k, l, args, 0, ""},
			} {
				wantErr(t, c.name, b.Launch(c.k, c.l, c.args, c.rows, nil), c.want)
			}
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			if got := f.launches(); len(got) != 0 {
				t.Errorf("refused launches ran: %v", got)
			}
		})
	}
}

// TestLargeShared: a launch with more than 48 KB of dynamic shared memory
// raises its function's limit first, once per size, where the driver needs
// it (CUDA); HIP launches up to the 64 KB of LDS without it.
func TestLargeShared(t *testing.T) {
	for _, c := range []struct {
		dialect string
		shared  []int
		calls   int // FuncSetAttribute
		want    []string
	}{
		{"cuda", []int{1024, 100 << 10, 100 << 10, 64 << 10, 200 << 10}, 2, []string{"", "", "", "", ""}},
		{"cuda", []int{300 << 10}, 1, []string{"cuda: kernel embed: raise the dynamic shared memory limit to 307200 bytes: CUDA_ERROR_INVALID_VALUE (1)"}},
		{"hip", []int{60 << 10, 70 << 10}, 0, []string{"", "hip: launch embed (grid [4 1 1], block [256 1 1]): hipErrorInvalidConfiguration (9)"}},
	} {
		t.Run(c.dialect, func(t *testing.T) {
			b, f, ks, ls := loaded(t, c.dialect)
			args := operands(t, b, &ks[0])
			for i, n := range c.shared {
				l := ls[0]
				l.SharedBytes = n
				wantErr(t, fmt.Sprintf("launch with %d bytes", n), b.Launch(&ks[0], &l, args, 1, nil), c.want[i])
			}
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			if got := f.calls["FuncSetAttribute"]; got != c.calls {
				t.Errorf("%d FuncSetAttribute calls, want %d", got, c.calls)
			}
		})
	}
}

func TestLaunchAttrs(t *testing.T) {
	b, f, ks, ls := loaded(t, "cuda")
	args := operands(t, b, &ks[0])
	pdl := runtime.LaunchAttrs{ProgrammaticSerialization: true}
	if err := b.WithLaunchAttrs(pdl, func() error {
		wantErr(t, "nested", b.WithLaunchAttrs(pdl, func() error { return nil }), "cuda: launch attributes are already set")
		return b.Launch(&ks[0], &ls[0], args, 3, nil)
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Launch(&ks[0], &ls[0], args, 3, nil); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	first := expect("launch", &ks[0], &ls[0], 2, 3, runtime.Params{})
	first.Programmatic = true
	second := expect("launch", &ks[0], &ls[0], 2, 3, runtime.Params{})
	if diff := cmp.Diff([]ran{first, second}, f.launches()); diff != "" {
		t.Errorf("launches (-want +got):\n%s", diff)
	}
	if f.calls["LaunchKernelEx"] != 1 || f.calls["LaunchKernel"] != 1 {
		t.Errorf("%d extended and %d plain launches, want 1 of each", f.calls["LaunchKernelEx"], f.calls["LaunchKernel"])
	}
	stop := errors.New("stop")
	if err := b.WithLaunchAttrs(pdl, func() error { return stop }); !errors.Is(err, stop) {
		t.Errorf("fn's error: %v", err)
	}
	if !b.attrs.Zero() {
		t.Error("attributes left set after WithLaunchAttrs")
	}

	h, _, _, _ := loaded(t, "hip")
	ran := false
	wantErr(t, "HIP", h.WithLaunchAttrs(pdl, func() error { ran = true; return nil }),
		"hip: launch attributes {ProgrammaticSerialization:true} need an extended launch, which this driver does not have")
	if ran {
		t.Error("fn ran although the attributes were refused")
	}
	if err := h.WithLaunchAttrs(runtime.LaunchAttrs{}, func() error { ran = true; return nil }); err != nil || !ran {
		t.Errorf("no attributes on HIP: ran %v, %v", ran, err)
	}
}

// TestLaunchCluster: a launch with a cluster dimension goes through the
// extended launch with CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION (beside
// programmatic serialization where that is set); HIP, without one, says so.
func TestLaunchCluster(t *testing.T) {
	b, f, ks, ls := loaded(t, "cuda")
	args := operands(t, b, &ks[0])
	l := ls[0]
	l.Cluster = 2
	if err := b.Launch(&ks[0], &l, args, 3, nil); err != nil {
		t.Fatal(err)
	}
	pdl := runtime.LaunchAttrs{ProgrammaticSerialization: true}
	if err := b.WithLaunchAttrs(pdl, func() error { return b.Launch(&ks[0], &l, args, 3, nil) }); err != nil {
		t.Fatal(err)
	}
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	first := expect("launch", &ks[0], &l, 2, 3, runtime.Params{})
	first.Cluster = 2
	second := first
	second.Programmatic = true
	if diff := cmp.Diff([]ran{first, second}, f.launches()); diff != "" {
		t.Errorf("launches (-want +got):\n%s", diff)
	}
	if f.calls["LaunchKernelEx"] != 2 || f.calls["LaunchKernel"] != 0 {
		t.Errorf("%d extended and %d plain launches, want 2 and 0", f.calls["LaunchKernelEx"], f.calls["LaunchKernel"])
	}
	odd := l
	odd.Cluster = 3
	wantErr(t, "a cluster that does not divide the grid", b.Launch(&ks[0], &odd, args, 3, nil), "clusters of 3 blocks do not divide grid [4]")

	h, _, hks, hls := loaded(t, "hip")
	hl := hls[0]
	hl.Cluster = 2
	wantErr(t, "HIP", h.Launch(&hks[0], &hl, operands(t, h, &hks[0]), 3, nil), "clusters of 2 blocks need an extended launch, which this driver does not have")
}

// TestLaunchConfigLayout: the extended launch's configuration has
// CUlaunchConfig's and CUlaunchAttribute's sizes and offsets.
func TestLaunchConfigLayout(t *testing.T) {
	var c launchConfig
	var a launchAttr
	got := map[string]uintptr{
		"sizeof(CUlaunchConfig)": unsafe.Sizeof(c), "hStream": unsafe.Offsetof(c.stream), "attrs": unsafe.Offsetof(c.attrs),
		"numAttrs": unsafe.Offsetof(c.numAttrs), "sharedMemBytes": unsafe.Offsetof(c.shared),
		"sizeof(CUlaunchAttribute)": unsafe.Sizeof(a), "value": unsafe.Offsetof(a.value),
	}
	want := map[string]uintptr{"sizeof(CUlaunchConfig)": 56, "hStream": 32, "attrs": 40, "numAttrs": 48, "sharedMemBytes": 24,
		"sizeof(CUlaunchAttribute)": launchAttrBytes, "value": 8}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layout (-want +got):\n%s", diff)
	}
	if attrsAt-configAt < unsafe.Sizeof(c) || attrsAt%8 != 0 {
		t.Errorf("attributes at %d overlap the configuration at %d", attrsAt, configAt)
	}
}

func TestCaptureAndReplay(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			b, f, ks, ls := loaded(t, dialect)
			var args [][]runtime.Ref
			for i := range ks {
				args = append(args, operands(t, b, &ks[i]))
			}
			launchAll := func() error {
				for i := range ks[:2] {
					if err := b.Launch(&ks[i], &ls[i], args[i], 1, nil); err != nil {
						return err
					}
				}
				return nil
			}
			var prm runtime.Params
			prm[ir.ParamPos] = 3
			if err := b.SetParams(&prm); err != nil {
				t.Fatal(err)
			}
			earlier, err := b.Capture(launchAll)
			if err != nil {
				t.Fatal(err)
			}
			m := args[0][0].Mem
			p := dialect + ": "
			var refused int
			g, err := b.Capture(func() error {
				if err := launchAll(); err != nil {
					return err
				}
				for _, c := range []struct {
					name string
					err  error
					want string
				}{
					{"upload", b.Upload(runtime.Ref{Mem: m}, []byte{1}), p + "only launches are allowed during graph capture"},
					{"download", b.Download(make([]byte, 1), runtime.Ref{Mem: m}), p + "only launches are allowed during graph capture"},
					{"copy", b.Copy(runtime.Ref{Mem: m}, runtime.Ref{Mem: m, Offset: 16}, 16), p + "only launches are allowed"},
					{"zero", b.Zero(runtime.Ref{Mem: m}, 16), p + "only launches are allowed during graph capture"},
					{"upload all", b.UploadAll([]runtime.UploadJob{{Name: "w", Dst: runtime.Ref{Mem: m}, Src: []byte{1}}}, nil), p + "only launches are allowed"},
					{"set params", b.SetParams(&prm), p + "parameter block written during graph capture"},
					{"sync", b.Sync(), p + "only launches are allowed during graph capture"},
					{"nested capture", func() error { _, err := b.Capture(launchAll); return err }(), p + "capture already in progress"},
					{"replay", earlier.Replay(), p + "graph replayed during a capture"},
				} {
					refused++
					wantErr(t, c.name+" during capture", c.err, c.want)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if refused != 9 {
				t.Errorf("checked %d calls during capture", refused)
			}
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			if got := f.launches(); len(got) != 0 {
				t.Errorf("captured launches ran: %v", got)
			}
			if err := g.Replay(); err != nil {
				t.Fatal(err)
			}
			first := prm
			prm[ir.ParamPos] = 9
			if err := b.SetParams(&prm); err != nil {
				t.Fatal(err)
			}
			if err := g.Replay(); err != nil {
				t.Fatal(err)
			}
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			second := 2 + len(args[0])
			want := []ran{
				expect("replay", &ks[0], &ls[0], 2, 1, first), expect("replay", &ks[1], &ls[1], second, 1, first),
				expect("replay", &ks[0], &ls[0], 2, 1, prm), expect("replay", &ks[1], &ls[1], second, 1, prm),
			}
			if diff := cmp.Diff(want, f.launches()); diff != "" {
				t.Errorf("replays (-want +got):\n%s", diff)
			}
			g.Destroy()
			g.Destroy()
			wantErr(t, "replay after Destroy", g.Replay(), p+"replay of a destroyed graph")
			if live := f.live(); live["graph"] != 1 || live["exec"] != 1 {
				t.Errorf("after destroying one of two graphs: %v", live)
			}

			stop := errors.New("stop")
			if _, err := b.Capture(func() error { launchAll(); return stop }); !errors.Is(err, stop) {
				t.Errorf("failed capture: %v", err)
			}
			f.failNext("LaunchKernel", 1, 98)
			_, err = b.Capture(launchAll)
			wantErr(t, "capture with a failed launch", err, p+"launch embed")
			f.failNext("StreamEndCapture", 1, 901)
			_, err = b.Capture(launchAll)
			wantErr(t, "end capture fails", err, p+"end capture: ")
			f.failNext("GraphInstantiate", 1, 2)
			_, err = b.Capture(launchAll)
			wantErr(t, "instantiate fails", err, p+"instantiate the graph: ")
			f.failNext("StreamBeginCapture", 1, 1)
			_, err = b.Capture(launchAll)
			wantErr(t, "begin capture fails", err, p+"begin capture: ")
			if live := f.live(); live["graph"] != 1 || live["exec"] != 1 {
				t.Errorf("after failed captures: %v", live)
			}
			g2, err := b.Capture(launchAll)
			if err != nil {
				t.Fatal(err)
			}
			f.failNext("GraphLaunch", 1, 400)
			wantErr(t, "replay fails", g2.Replay(), p+"graph launch (2 kernels): ")
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			earlier.Destroy()
			wantErr(t, "replay after Close", g2.Replay(), p+"backend is closed")
		})
	}
}

// TestFork: inside a capture, the second stream's launch depends on what
// came before the fork, and what comes after it depends on both sides;
// outside one, both sides run before Sync returns.
func TestFork(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			b, f, ks, ls := loaded(t, dialect)
			var args [][]runtime.Ref
			for i := range ks {
				args = append(args, operands(t, b, &ks[i]))
			}
			launch := func(i int) func() error {
				return func() error { return b.Launch(&ks[i], &ls[i], args[i], 1, nil) }
			}
			step := func() error {
				if err := launch(0)(); err != nil {
					return err
				}
				if err := b.Fork(launch(1), launch(2)); err != nil {
					return err
				}
				return launch(0)()
			}
			g, err := b.Capture(step)
			if err != nil {
				t.Fatal(err)
			}
			edges := f.graphEdges(g.(*graph))
			want := []string{"embed <- ", "residual <- embed", "norm <- embed", "embed <- residual, norm"}
			if diff := cmp.Diff(want, edges); diff != "" {
				t.Errorf("the captured graph (-want +got):\n%s", diff)
			}
			if err := g.Replay(); err != nil {
				t.Fatal(err)
			}
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			if n := len(f.launches()); n != 4 {
				t.Errorf("%d launches replayed, want 4", n)
			}
			if err := step(); err != nil {
				t.Fatal(err)
			}
			if err := b.Sync(); err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, r := range f.launches() {
				names = append(names, r.Kernel)
			}
			if len(names) != 4 || names[0] != "embed" || names[3] != "embed" {
				t.Errorf("launches outside capture ran as %v", names)
			}

			p := dialect + ": "
			wantErr(t, "fork in a fork", b.Fork(func() error { return b.Fork(nil, nil) }, func() error { return nil }), p+"Fork inside Fork")
			stop := errors.New("stop")
			if _, err := b.Capture(func() error { return b.Fork(launch(1), func() error { return stop }) }); !errors.Is(err, stop) {
				t.Errorf("a failing side in a capture: %v", err)
			}
			f.failNext("StreamWaitEvent", 1, 400)
			wantErr(t, "fork's wait fails", b.Fork(launch(1), launch(2)), p+"second stream waits for the fork: ")
			// The fake refuses a capture whose second stream is not joined
			// back: the join is what makes the graph end.
			f.failNext("StreamWaitEvent", 2, 400)
			_, err = b.Capture(func() error { return b.Fork(launch(1), launch(2)) })
			wantErr(t, "unjoined capture", err, p+"wait for the second stream: ")
			g3, err := b.Capture(step)
			if err != nil {
				t.Fatalf("capture after the failures: %v", err)
			}
			g3.Destroy()
			g.Destroy()
		})
	}
}

// TestUnjoinedCapture: the fake ends a capture whose second stream was
// never joined with CUDA_ERROR_STREAM_CAPTURE_UNJOINED, so TestFork's
// graphs can only come from a joined fork.
func TestUnjoinedCapture(t *testing.T) {
	b, _, ks, ls := loaded(t, "cuda")
	args := operands(t, b, &ks[0])
	_, err := b.Capture(func() error {
		d := b.d
		if rc := d.EventRecord(b.forked, b.stream); rc != 0 {
			return b.fail("record", rc)
		}
		if rc := d.StreamWaitEvent(b.side, b.forked, 0); rc != 0 {
			return b.fail("wait", rc)
		}
		b.launchOn = b.side
		defer func() { b.launchOn = b.stream }()
		return b.Launch(&ks[0], &ls[0], args, 1, nil)
	})
	wantErr(t, "unjoined", err, "cuda: end capture: CUDA_ERROR_STREAM_CAPTURE_UNJOINED (904)")
}

func TestElapsed(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			b, f, ks, ls := loaded(t, dialect)
			args := operands(t, b, &ks[0])
			d, err := b.Elapsed(func() error { return b.Launch(&ks[0], &ls[0], args, 1, nil) })
			if err != nil || d < 0 {
				t.Errorf("elapsed %v, %v", d, err)
			}
			if n := len(f.launches()); n != 1 {
				t.Errorf("%d launches ran by the time Elapsed returned, want 1", n)
			}
			stop := errors.New("stop")
			if _, err := b.Elapsed(func() error { return stop }); !errors.Is(err, stop) {
				t.Errorf("fn's error: %v", err)
			}
			f.failNext("EventElapsedTime", 1, 400)
			_, err = b.Elapsed(func() error { return nil })
			wantErr(t, "elapsed fails", err, dialect+": elapsed time: ")
			if ev := f.live()["event"]; ev != 2 {
				t.Errorf("%d events live, want the fork's 2", ev)
			}
		})
	}
}

func TestFailures(t *testing.T) {
	for _, c := range []struct {
		name string
		fn   string
		code int32
		run  func(b *Backend, k *plan.Kernel, l *plan.Launch, args []runtime.Ref) error
		want string
	}{
		{"sync after a launch", "StreamSynchronize", 719, func(b *Backend, k *plan.Kernel, l *plan.Launch, args []runtime.Ref) error {
			if err := b.Launch(k, l, args, 1, nil); err != nil {
				return err
			}
			return b.Sync()
		}, "cuda: synchronize (after launching embed): CUDA_ERROR_LAUNCH_FAILED (719): unspecified launch failure"},
		{"download after a launch", "MemcpyDtoH", 700, func(b *Backend, k *plan.Kernel, l *plan.Launch, args []runtime.Ref) error {
			if err := b.Launch(k, l, args, 1, nil); err != nil {
				return err
			}
			return b.Download(make([]byte, 4), args[0])
		}, "cuda: download (after launching embed): CUDA_ERROR_ILLEGAL_ADDRESS (700)"},
		{"sync after a replay", "StreamSynchronize", 719, func(b *Backend, k *plan.Kernel, l *plan.Launch, args []runtime.Ref) error {
			g, err := b.Capture(func() error { return b.Launch(k, l, args, 1, nil) })
			if err != nil {
				return err
			}
			if err := g.Replay(); err != nil {
				return err
			}
			return b.Sync()
		}, "cuda: synchronize (after launching a graph of 1 kernels): CUDA_ERROR_LAUNCH_FAILED (719)"},
		{"upload", "MemcpyHtoD", 1, func(b *Backend, _ *plan.Kernel, _ *plan.Launch, args []runtime.Ref) error {
			return b.Upload(args[0], []byte{1})
		}, "cuda: upload: CUDA_ERROR_INVALID_VALUE (1): invalid argument"},
		{"zero", "MemsetD8", 1, func(b *Backend, _ *plan.Kernel, _ *plan.Launch, args []runtime.Ref) error { return b.Zero(args[0], 4) },
			"cuda: memset: CUDA_ERROR_INVALID_VALUE (1)"},
		{"copy", "MemcpyDtoDAsync", 1, func(b *Backend, _ *plan.Kernel, _ *plan.Launch, args []runtime.Ref) error {
			return b.Copy(args[0], args[1], 4)
		}, "cuda: device copy: CUDA_ERROR_INVALID_VALUE (1)"},
		{"set params", "MemcpyHtoD", 700, func(b *Backend, _ *plan.Kernel, _ *plan.Launch, _ []runtime.Ref) error {
			return b.SetParams(&runtime.Params{})
		}, "cuda: parameter block upload: CUDA_ERROR_ILLEGAL_ADDRESS (700)"},
		{"alloc", "MemAlloc", 2, func(b *Backend, _ *plan.Kernel, _ *plan.Launch, _ []runtime.Ref) error {
			_, err := b.Alloc(100)
			return err
		},
			"cuda: allocate 100 bytes: CUDA_ERROR_OUT_OF_MEMORY (2): out of memory"},
		{"memory info", "MemGetInfo", 1, func(b *Backend, _ *plan.Kernel, _ *plan.Launch, _ []runtime.Ref) error {
			_, _, err := b.MemInfo()
			return err
		},
			"cuda: memory info: CUDA_ERROR_INVALID_VALUE (1)"},
		{"close", "StreamSynchronize", 719, func(b *Backend, k *plan.Kernel, l *plan.Launch, args []runtime.Ref) error {
			if err := b.Launch(k, l, args, 1, nil); err != nil {
				return err
			}
			return b.Close()
		}, "cuda: synchronize (after launching embed): CUDA_ERROR_LAUNCH_FAILED (719)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, f, ks, ls := loaded(t, "cuda")
			args := operands(t, b, &ks[0])
			f.failNext(c.fn, 1, c.code)
			wantErr(t, c.name, c.run(b, &ks[0], &ls[0], args), c.want)
		})
	}
}

func TestClose(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			b, f, ks, ls := loaded(t, dialect)
			args := operands(t, b, &ks[0])
			g, err := b.Capture(func() error { return b.Launch(&ks[0], &ls[0], args, 1, nil) })
			if err != nil {
				t.Fatal(err)
			}
			kept, err := b.Alloc(32)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int{"device": 2 + len(args), "host": 1, "module": 3, "stream": 2, "event": 2, "graph": 1, "exec": 1}
			if diff := cmp.Diff(want, f.live()); diff != "" {
				t.Errorf("before Close (-want +got):\n%s", diff)
			}
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(map[string]int{}, f.live()); diff != "" {
				t.Errorf("after Close (-want +got):\n%s", diff)
			}
			b.Free(kept)
			g.Destroy()
			calls := f.current
			p := dialect + ": backend is closed"
			for _, c := range []struct {
				name string
				err  error
			}{
				{"alloc", func() error { _, err := b.Alloc(16); return err }()},
				{"upload", b.Upload(runtime.Ref{Mem: kept}, []byte{1})},
				{"launch", b.Launch(&ks[0], &ls[0], args, 1, nil)},
				{"set params", b.SetParams(&runtime.Params{})},
				{"sync", b.Sync()},
				{"load", b.Load(ks[:1])},
				{"capture", func() error { _, err := b.Capture(func() error { return nil }); return err }()},
				{"replay", g.Replay()},
				{"fork", b.Fork(func() error { return nil }, func() error { return nil })},
				{"attributes", b.WithLaunchAttrs(runtime.LaunchAttrs{}, func() error { return nil })},
				{"upload all", b.UploadAll([]runtime.UploadJob{{Name: "w", Dst: args[0], Src: []byte{1}}}, nil)},
				{"memory info", func() error { _, _, err := b.MemInfo(); return err }()},
				{"elapsed", func() error { _, err := b.Elapsed(func() error { return nil }); return err }()},
			} {
				wantErr(t, c.name+" after Close", c.err, p)
			}
			if f.current != calls {
				t.Errorf("the context was made current %d times after Close", f.current-calls)
			}
		})
	}
}

// declared are the declared operands of k's family (none when unknown).
func declared(k *plan.Kernel) []ir.OperandSpec {
	f, err := runtime.KernelFamily(k)
	if err != nil {
		return nil
	}
	return f.Operands
}

// TestResident: a grid is resident when the occupancy query's blocks per
// multiprocessor times the multiprocessors cover it (asked with the
// function's dynamic shared memory limit raised to the launch's); without the query
// (hip's fake), without a multiprocessor count, or for a kernel not
// loaded, it is not (or an error); a failing query is an error.
func TestResident(t *testing.T) {
	ks, _ := kernels()
	k := &ks[0]
	launch := func(x, y int) *plan.Launch {
		return &plan.Launch{Kernel: k.Name, Grid: []int{x, y, 1}, Block: []int{256, 1, 1}}
	}
	shared := func(l *plan.Launch, bytes int) *plan.Launch { l.SharedBytes = bytes; return l }
	for _, c := range []struct {
		name     string
		dialect  string
		perSM    int32
		sms      int
		l        *plan.Launch
		resident bool
	}{
		{"fits", "cuda", 2, 132, launch(264, 1), true},
		{"one block over", "cuda", 2, 132, launch(265, 1), false},
		{"rows count", "cuda", 2, 132, launch(200, 2), false},
		// a block's dynamic shared memory above the default limit: the
		// query is asked after the limit is raised, as the launch raises it
		{"dynamic shared past the default", "cuda", 1, 132, shared(launch(128, 1), 128<<10), true},
		{"no multiprocessor count", "cuda", 2, 0, launch(1, 1), false},
		{"no occupancy query", "hip", 2, 40, launch(1, 1), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFake(c.dialect, 1<<24)
			f.perSM = c.perSM
			objs := map[string][]byte{}
			for _, k := range ks {
				objs[k.Name] = image(k.Name, len(declared(&k))+2)
			}
			b, err := New(f.driver(), Config{Target: "sm_test", Objects: objs, Multiprocessors: c.sms})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if _, err := b.Resident(k, c.l); err == nil || !strings.Contains(err.Error(), "was not loaded") {
				t.Errorf("before Load: %v", err)
			}
			if err := b.Load(ks); err != nil {
				t.Fatal(err)
			}
			got, err := b.Resident(k, c.l)
			if err != nil || got != c.resident {
				t.Errorf("Resident = %v, %v; want %v", got, err, c.resident)
			}
		})
	}
	b, f := open(t, "cuda", ks)
	b.multiprocessors = 132
	if err := b.Load(ks); err != nil {
		t.Fatal(err)
	}
	f.failNext("OccupancyMaxActiveBlocks", 1, 1)
	if _, err := b.Resident(k, launch(1, 1)); err == nil || !strings.Contains(err.Error(), "occupancy") {
		t.Errorf("a failing query: %v", err)
	}
}
