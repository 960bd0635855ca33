// Package doctor checks a machine before it serves: the GPU driver and
// device, whether the plan's memory fits the device and the host, the
// engine bundle against its manifest and the device, the checkpoint, its
// sums manifest and the port. Every check yields one line; `aima-engine
// doctor` prints them and fails when any does.
package doctor

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aimaproject/aimac/arch"
	"github.com/aimaproject/aimac/bundle"
	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/loader"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/runtime/cuda"
	"github.com/aimaproject/aimac/runtime/hip"
	"github.com/aimaproject/aimac/sums"
)

// Check is one check's outcome.
type Check struct {
	Name   string `json:"check"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// String is the check as doctor prints it: "ok   gpu: …" or "FAIL gpu: …".
func (c Check) String() string {
	mark := "ok  "
	if !c.OK {
		mark = "FAIL"
	}
	return mark + " " + c.Name + ": " + c.Detail
}

// GPU is a GPU API, the target it runs and how to describe its device 0.
type GPU struct {
	API    string
	Target string
	Via    string // what the binary loads to drive it
	Probe  func() (runtime.DeviceInfo, error)
}

// GPUs are the drivers this build drives: CUDA for sm_90, HIP for gfx1151.
func GPUs() []GPU {
	return []GPU{
		{API: "CUDA", Target: cuda.Target, Via: "the CUDA driver (libcuda.so.1)", Probe: cuda.Probe},
		{API: "HIP", Target: hip.Target, Via: "the HIP runtime (" + strings.Join(hip.LibraryNames, ", ") + ")", Probe: hip.Probe},
	}
}

// Target is a plan target the binary can drive and whether this machine
// has what it needs.
type Target struct {
	Name      string `json:"name"`
	Via       string `json:"via"`
	Available bool   `json:"available"`
	Detail    string `json:"detail"`
}

// Targets lists the targets: the CPU always, and each GPU's, available
// when its driver loads and device 0 runs it (gpus nil: GPUs()).
func Targets(gpus []GPU) []Target {
	if gpus == nil {
		gpus = GPUs()
	}
	out := []Target{{Name: "cpu", Via: "built in (the reference kernels)", Available: true, Detail: "always"}}
	for _, g := range gpus {
		t := Target{Name: g.Target, Via: g.Via}
		d, err := g.Probe()
		switch {
		case err != nil:
			t.Detail = err.Error()
		case d.Target != g.Target:
			t.Detail = fmt.Sprintf("%s %s (compute capability %d.%d) does not run %s", d.API, d.Name, d.Major, d.Minor, g.Target)
		default:
			t.Available, t.Detail = true, d.String()
		}
		out = append(out, t)
	}
	return out
}

// Options say what to check.
type Options struct {
	ModelDir  string // "": no checkpoint checks; the memory check plans the embedded real config
	BundleDir string // "": no bundle checks
	// ContextTokens and Buckets shape the plan made for the memory check
	// when there is no bundle (a bundle's plan decides them).
	ContextTokens int
	Buckets       []int
	// PrefixCacheBytes is the prefix cache's bound, counted as serve counts it.
	PrefixCacheBytes int64
	Host             string
	Port             int
	// GPUs are probed for devices (nil: GPUs()); HostAvailable is the
	// host's available memory (nil: runtime.HostAvailable).
	GPUs          []GPU
	HostAvailable func() int64
}

// Run runs every check that applies, in order: gpu, checkpoint, sums,
// bundle, bundle-device, memory, port.
func Run(o Options) []Check {
	gpus := o.GPUs
	if gpus == nil {
		gpus = GPUs()
	}
	hostAvailable := o.HostAvailable
	if hostAvailable == nil {
		hostAvailable = runtime.HostAvailable
	}
	var checks []Check
	add := func(name string, ok bool, format string, args ...any) {
		checks = append(checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, args...)})
	}

	// The bundle first: its target decides whether a missing GPU fails.
	var b *bundle.Bundle
	var bundleErr error
	bundleTarget := ""
	if o.BundleDir != "" {
		b, bundleErr = bundle.Open(o.BundleDir)
		if b != nil {
			bundleTarget = b.Manifest.Target
		} else {
			bundleTarget = manifestTarget(o.BundleDir)
		}
	}

	var devices []runtime.DeviceInfo
	var why []string
	for _, g := range gpus {
		d, err := g.Probe()
		if err != nil {
			why = append(why, err.Error())
			continue
		}
		devices = append(devices, d)
	}
	switch {
	case len(devices) > 0:
		var s []string
		for _, d := range devices {
			s = append(s, d.String())
		}
		add("gpu", true, "%s", strings.Join(s, "; "))
	case bundleTarget != "" && bundleTarget != "cpu":
		add("gpu", false, "no GPU driver, but the bundle is for %s (%s)", bundleTarget, strings.Join(why, "; "))
	default:
		add("gpu", true, "no GPU driver: CPU only (%s)", strings.Join(why, "; "))
	}

	var model *planner.Model
	if o.ModelDir != "" {
		model = checkCheckpoint(o.ModelDir, add)
		checkSums(o.ModelDir, add)
	}

	if o.BundleDir != "" {
		switch {
		case bundleErr != nil:
			add("bundle", false, "%s", oneLine(bundleErr))
		case model != nil && b.Plan.Model.Fingerprint != model.Fingerprint():
			add("bundle", false, "%s: its plan was made for model %s, but %s is %s", o.BundleDir, b.Plan.Model.Fingerprint, o.ModelDir, model.Fingerprint())
		default:
			add("bundle", true, "%s verified: target %s, plan %s, %d kernels, %d files", o.BundleDir, bundleTarget, b.Manifest.PlanHash, len(b.Objects), len(b.Manifest.Files)+1)
		}
		if bundleTarget != "" {
			if d, ok := runs(devices, bundleTarget); ok {
				add("bundle-device", true, "%s runs %s", d.Name, bundleTarget)
			} else {
				add("bundle-device", false, "the bundle is for %s, but no device here runs it%s", bundleTarget, found(devices))
			}
		}
	}

	// The memory plan: the bundle's, or one made now for the device.
	var p *plan.Plan
	switch {
	case b != nil:
		p = b.Plan
	case o.BundleDir != "":
		add("memory", false, "not checked: the bundle did not open")
	default:
		target := "cpu"
		for _, d := range devices {
			if d.Target != "" {
				target = d.Target
				break
			}
		}
		if model == nil && o.ModelDir != "" {
			var err error
			if model, err = loader.ConfigModel(o.ModelDir); err != nil {
				add("memory", false, "not checked: %s", oneLine(err))
				break
			}
		}
		if model == nil {
			model = planner.FromConfig(arch.RealName, arch.Real())
		}
		var err error
		if p, err = planner.Plan(model, planner.Options{Target: plan.Target(target), Buckets: o.Buckets, ContextTokens: o.ContextTokens}); err != nil {
			add("memory", false, "planning %s for %s: %s", model.Name, target, oneLine(err))
		}
	}
	if p != nil {
		ok, detail := checkMemory(p, o.PrefixCacheBytes, devices, hostAvailable())
		add("memory", ok, "%s", detail)
	}

	addr := net.JoinHostPort(o.Host, strconv.Itoa(o.Port))
	if ln, err := net.Listen("tcp", addr); err != nil {
		add("port", false, "%s: %v", addr, err)
	} else {
		ln.Close()
		add("port", true, "%s is free", addr)
	}
	return checks
}

// Failed counts the failed checks.
func Failed(checks []Check) int {
	n := 0
	for _, c := range checks {
		if !c.OK {
			n++
		}
	}
	return n
}

// checkCheckpoint validates the checkpoint and returns its model (nil when
// it is not valid).
func checkCheckpoint(dir string, add func(string, bool, string, ...any)) *planner.Model {
	ck, err := checkpoint.Open(dir)
	if err != nil {
		var ce *checkpoint.Error
		if errors.As(err, &ce) {
			add("checkpoint", false, "%s: %d problem(s): %s", dir, len(ce.Problems), strings.Join(ce.Problems, "; "))
		} else {
			add("checkpoint", false, "%s", oneLine(err))
		}
		return nil
	}
	defer ck.Close()
	m, err := planner.FromCheckpoint(filepath.Base(dir), ck)
	if err != nil {
		add("checkpoint", false, "%s: %s", dir, oneLine(err))
		return nil
	}
	add("checkpoint", true, "%s valid: %d tensors, %d layers, hidden size %d, model %s", dir, len(ck.Tensors),
		ck.Config.NumHiddenLayers, ck.Config.HiddenSize, m.Fingerprint())
	return m
}

// checkSums says whether the model directory has a sums manifest; hashing
// it is `aima-engine verify`'s work (minutes for a full checkpoint).
func checkSums(dir string, add func(string, bool, string, ...any)) {
	data, err := os.ReadFile(filepath.Join(dir, sums.File))
	switch {
	case errors.Is(err, os.ErrNotExist):
		add("sums", true, "no %s in %s: write one with `aima-engine verify --model-dir %s --write-manifest` from a copy known to be good", sums.File, dir, dir)
	case err != nil:
		add("sums", false, "%v", err)
	default:
		entries, err := sums.Parse(data)
		if err != nil {
			add("sums", false, "%s", oneLine(err))
			return
		}
		add("sums", true, "%s lists %d files (`aima-engine verify --model-dir %s` checks them)", sums.File, len(entries), dir)
	}
}

// checkMemory holds the plan's memory to the loader's host rule and, on a
// GPU target, to the free memory of the device that runs it.
func checkMemory(p *plan.Plan, prefixCache int64, devices []runtime.DeviceInfo, hostAvailable int64) (bool, string) {
	m := runtime.MemoryOf(p, prefixCache)
	h := runtime.HumanBytes
	need := fmt.Sprintf("the %s plan at %d context tokens needs %s: weights %s, KV cache %s, GDN/conv state %s, activations %s, buffers %s, prefix cache %s",
		p.Target, p.ContextTokens, h(m.Total()), h(m.Weights), h(m.KV), h(m.State), h(m.Activations), h(m.Buffers), h(m.PrefixCache))
	if err := loader.Fits(m, hostAvailable, p.ContextTokens); err != nil {
		return false, need + "; " + err.Error()
	}
	host := "host has " + h(hostAvailable) + " available"
	if p.Target == "cpu" {
		return true, need + " (weights mapped from the files); " + host
	}
	d, ok := runs(devices, string(p.Target))
	if !ok {
		return false, need + "; no device here runs " + string(p.Target) + found(devices)
	}
	if m.Total() > d.FreeBytes {
		return false, fmt.Sprintf("%s; %s has only %s free of %s: lower --context-tokens or the prefix cache size", need, d.Name, h(d.FreeBytes), h(d.TotalBytes))
	}
	return true, fmt.Sprintf("%s; %s has %s free; %s", need, d.Name, h(d.FreeBytes), host)
}

// runs is the first device that runs target.
func runs(devices []runtime.DeviceInfo, target string) (runtime.DeviceInfo, bool) {
	for _, d := range devices {
		if d.Target == target {
			return d, true
		}
	}
	return runtime.DeviceInfo{}, false
}

func found(devices []runtime.DeviceInfo) string {
	if len(devices) == 0 {
		return " (no GPU driver found)"
	}
	var s []string
	for _, d := range devices {
		s = append(s, fmt.Sprintf("%s %s, compute capability %d.%d", d.API, d.Name, d.Major, d.Minor))
	}
	return " (found " + strings.Join(s, "; ") + ")"
}

// manifestTarget reads the target a bundle that failed to open claims, so
// the gpu check knows a GPU is wanted ("" when unreadable).
func manifestTarget(dir string) string {
	data, err := os.ReadFile(filepath.Join(dir, bundle.ManifestFile))
	if err != nil {
		return ""
	}
	var head struct {
		Target string `json:"target"`
	}
	if json.Unmarshal(data, &head) != nil {
		return ""
	}
	return head.Target
}

// oneLine joins a multi-line error into one line.
func oneLine(err error) string {
	lines := strings.Split(err.Error(), "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	return strings.Join(lines, " ")
}
