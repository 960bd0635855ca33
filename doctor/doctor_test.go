package doctor

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/bundler"
	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/hipcc"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/synth"
)

func tiny(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(synth.Options{Preset: "tiny", Seed: 1, Out: dir}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// noGPU is a machine without GPU drivers.
var noGPU = []GPU{
	{API: "CUDA", Target: "sm_90", Via: "the CUDA driver", Probe: func() (runtime.DeviceInfo, error) {
		return runtime.DeviceInfo{}, errors.New("cuda: load libcuda.so.1: not found")
	}},
	{API: "HIP", Target: "gfx1151", Via: "the HIP runtime", Probe: func() (runtime.DeviceInfo, error) {
		return runtime.DeviceInfo{}, errors.New("hip: cannot load the HIP runtime library")
	}},
}

func device(d runtime.DeviceInfo) GPU {
	target := map[string]string{"CUDA": "sm_90", "HIP": "gfx1151"}[d.API]
	return GPU{API: d.API, Target: target, Via: "the " + d.API + " library", Probe: func() (runtime.DeviceInfo, error) { return d, nil }}
}

var (
	h200    = runtime.DeviceInfo{API: "CUDA", Name: "NVIDIA H200", Major: 9, Driver: "12.8", FreeBytes: 140 << 30, TotalBytes: 141 << 30, Target: "sm_90"}
	strix   = runtime.DeviceInfo{API: "HIP", Name: "AMD Radeon 8060S Graphics", Major: 11, Minor: 5, Driver: "6.4.43483", FreeBytes: 96 << 30, TotalBytes: 96 << 30, Target: "gfx1151"}
	plenty  = func() int64 { return 64 << 30 }
	options = func(o Options) Options {
		if o.GPUs == nil {
			o.GPUs = noGPU
		}
		if o.HostAvailable == nil {
			o.HostAvailable = plenty
		}
		if o.ContextTokens == 0 {
			o.ContextTokens = 64
		}
		if o.Buckets == nil {
			o.Buckets = []int{16}
		}
		o.Host = "127.0.0.1"
		return o
	}
)

// outcome is what a test holds a run to: each check's name and verdict,
// and a piece of its detail.
type outcome struct {
	Name string
	OK   bool
	Has  string
}

func hold(t *testing.T, name string, got []Check, want []outcome) {
	t.Helper()
	var names, wantNames []string
	for _, c := range got {
		names = append(names, c.Name)
	}
	for _, w := range want {
		wantNames = append(wantNames, w.Name)
	}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Fatalf("%s: checks (-want +got)\n%s", name, diff)
	}
	for i, w := range want {
		c := got[i]
		if c.OK != w.OK || !strings.Contains(c.Detail, w.Has) || strings.Contains(c.Detail, "\n") {
			t.Errorf("%s: %s, want ok=%v and %q on one line", name, c, w.OK, w.Has)
		}
	}
}

func TestCPU(t *testing.T) {
	good := tiny(t)

	damaged := tiny(t)
	shards, _ := filepath.Glob(filepath.Join(damaged, "*.safetensors"))
	if len(shards) < 2 {
		t.Fatalf("shards %v", shards)
	}
	if err := os.Truncate(shards[0], 100); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(shards[1]); err != nil {
		t.Fatal(err)
	}

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port

	tests := []struct {
		name string
		o    Options
		want []outcome
	}{
		{"good", Options{ModelDir: good}, []outcome{
			{"gpu", true, "no GPU driver: CPU only (cuda: load libcuda.so.1: not found; hip: cannot load"},
			{"checkpoint", true, good + " valid: "},
			{"sums", true, "no SHA256SUMS"},
			{"memory", true, "the cpu plan at 64 context tokens needs"},
			{"port", true, "is free"},
		}},
		{"damaged", Options{ModelDir: damaged}, []outcome{
			{"gpu", true, "CPU only"},
			{"checkpoint", false, filepath.Base(shards[0])},
			{"sums", true, "no SHA256SUMS"},
			{"memory", true, "the cpu plan at 64 context tokens"},
			{"port", true, "is free"},
		}},
		{"missing bundle", Options{ModelDir: good, BundleDir: filepath.Join(t.TempDir(), "nope")}, []outcome{
			{"gpu", true, "CPU only"},
			{"checkpoint", true, "valid"},
			{"sums", true, ""},
			{"bundle", false, "build one with `aimac build`"},
			{"memory", false, "not checked: the bundle did not open"},
			{"port", true, ""},
		}},
		{"busy port", Options{Port: busyPort}, []outcome{
			{"gpu", true, "CPU only"},
			{"memory", true, "the cpu plan"},
			{"port", false, "127.0.0.1:" + strconv.Itoa(busyPort) + ": listen tcp"},
		}},
		{"host too small", Options{ModelDir: good, HostAvailable: func() int64 { return 1 << 10 }}, []outcome{
			{"gpu", true, ""},
			{"checkpoint", true, ""},
			{"sums", true, ""},
			{"memory", false, "but only 1.0 KiB is available"},
			{"port", true, ""},
		}},
	}
	for _, tt := range tests {
		hold(t, tt.name, Run(options(tt.o)), tt.want)
	}
	if n := Failed(Run(options(Options{ModelDir: damaged}))); n != 1 {
		t.Errorf("damaged: %d failed, want 1", n)
	}
}

// TestSums: a written manifest is counted; a malformed one fails.
func TestSums(t *testing.T) {
	dir := tiny(t)
	if err := os.WriteFile(filepath.Join(dir, "SHA256SUMS"), []byte("nonsense\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := Run(options(Options{ModelDir: dir}))[2]
	if c.Name != "sums" || c.OK || !strings.Contains(c.Detail, "line 1") {
		t.Errorf("malformed manifest: %s", c)
	}
}

// TestGPU: the real model's plan against a GPU's free memory: an H200
// holds it at 4096 tokens, 8 GiB free does not.
func TestGPU(t *testing.T) {
	o := Options{ContextTokens: 4096, Buckets: []int{64, 256, 1024}, GPUs: []GPU{noGPU[1], device(h200)}}
	hold(t, "h200", Run(options(o)), []outcome{
		{"gpu", true, "CUDA NVIDIA H200: compute capability 9.0, 140.0 GiB free of 141.0 GiB, driver 12.8, runs sm_90"},
		{"memory", true, "the sm_90 plan at 4096 context tokens needs"},
		{"port", true, ""},
	})
	small := h200
	small.FreeBytes = 8 << 30
	o.GPUs = []GPU{device(small)}
	hold(t, "8 GiB free", Run(options(o)), []outcome{
		{"gpu", true, "8.0 GiB free"},
		{"memory", false, "NVIDIA H200 has only 8.0 GiB free of 141.0 GiB"},
		{"port", true, ""},
	})
	// A GPU that no target of the build runs: the plan is the CPU's.
	old := runtime.DeviceInfo{API: "CUDA", Name: "Tesla V100", Major: 7, FreeBytes: 16 << 30, TotalBytes: 16 << 30, Driver: "12.8"}
	o.GPUs = []GPU{device(old)}
	hold(t, "V100", Run(options(o)), []outcome{
		{"gpu", true, "no target of this build runs it"},
		{"memory", true, "the cpu plan"},
		{"port", true, ""},
	})
}

// TestBundle: a gfx1151 bundle (built with clang-19, required) verified
// and held to the device: it fails without a GPU and on an H200, passes on
// a gfx1151 device; a damaged one is refused naming the file.
func TestBundle(t *testing.T) {
	c, err := hipcc.Find(hipcc.GFX1151)
	if err != nil {
		t.Fatalf("%v\ninstall clang-19 lld-19 llvm-19", err)
	}
	model := tiny(t)
	ck, err := checkpoint.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	m, err := planner.FromCheckpoint("tiny", ck)
	ck.Close()
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{Target: "gfx1151", Buckets: []int{16}, ContextTokens: 64})
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "bundle")
	if _, err := bundler.Build(context.Background(), p, "gfx1151", bundler.Options{Out: dir, Compiler: c}); err != nil {
		t.Fatal(err)
	}

	hold(t, "no GPU", Run(options(Options{ModelDir: model, BundleDir: dir})), []outcome{
		{"gpu", false, "no GPU driver, but the bundle is for gfx1151"},
		{"checkpoint", true, ""},
		{"sums", true, ""},
		{"bundle", true, "verified: target gfx1151, plan " + p.Hash()},
		{"bundle-device", false, "the bundle is for gfx1151, but no device here runs it (no GPU driver found)"},
		{"memory", false, "no device here runs gfx1151"},
		{"port", true, ""},
	})
	hold(t, "H200", Run(options(Options{BundleDir: dir, GPUs: []GPU{device(h200)}})), []outcome{
		{"gpu", true, "NVIDIA H200"},
		{"bundle", true, "verified"},
		{"bundle-device", false, "(found CUDA NVIDIA H200, compute capability 9.0)"},
		{"memory", false, "no device here runs gfx1151"},
		{"port", true, ""},
	})
	hold(t, "gfx1151", Run(options(Options{ModelDir: model, BundleDir: dir, GPUs: []GPU{noGPU[0], device(strix)}})), []outcome{
		{"gpu", true, "HIP AMD Radeon 8060S Graphics: compute capability 11.5"},
		{"checkpoint", true, ""},
		{"sums", true, ""},
		{"bundle", true, "verified"},
		{"bundle-device", true, "AMD Radeon 8060S Graphics runs gfx1151"},
		{"memory", true, "the gfx1151 plan at 64 context tokens needs"},
		{"port", true, ""},
	})
	other := filepath.Join(t.TempDir(), "other")
	if err := synth.Write(synth.Options{Preset: "tiny", Layers: 2, Seed: 1, Out: other}); err != nil {
		t.Fatal(err)
	}
	if c := Run(options(Options{ModelDir: other, BundleDir: dir, GPUs: []GPU{device(strix)}}))[3]; c.Name != "bundle" || c.OK || !strings.Contains(c.Detail, "its plan was made for model") {
		t.Errorf("bundle of another model: %s", c)
	}

	objs, _ := filepath.Glob(filepath.Join(dir, "kernels", "*.hsaco"))
	if err := os.WriteFile(objs[0], []byte("damaged"), 0o644); err != nil {
		t.Fatal(err)
	}
	hold(t, "damaged bundle", Run(options(Options{BundleDir: dir, GPUs: []GPU{device(strix)}})), []outcome{
		{"gpu", true, ""},
		{"bundle", false, filepath.Base(objs[0]) + ": 7 bytes"},
		{"bundle-device", true, "runs gfx1151"},
		{"memory", false, "not checked"},
		{"port", true, ""},
	})
}

func TestTargets(t *testing.T) {
	old := runtime.DeviceInfo{API: "CUDA", Name: "Tesla V100", Major: 7, Driver: "12.8"}
	got := Targets([]GPU{device(old), device(strix)})
	want := []Target{
		{Name: "cpu", Via: "built in (the reference kernels)", Available: true, Detail: "always"},
		{Name: "sm_90", Via: "the CUDA library", Detail: "CUDA Tesla V100 (compute capability 7.0) does not run sm_90"},
		{Name: "gfx1151", Via: "the HIP library", Available: true, Detail: strix.String()},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
	got = Targets(noGPU)
	if len(got) != 3 || got[1].Available || got[1].Detail != "cuda: load libcuda.so.1: not found" || got[2].Available {
		t.Errorf("no GPU: %+v", got)
	}
	// The real drivers: this machine may have none; the CPU is always there.
	if real := Targets(nil); len(real) != 3 || !real[0].Available || real[1].Name != "sm_90" || real[2].Name != "gfx1151" {
		t.Errorf("Targets(nil) = %+v", real)
	}
}
