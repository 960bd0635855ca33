package codegen

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Resource budgets of a gfx1151 kernel: no scratch (spills or private
// arrays), at most 256 VGPRs per lane (wave32), at most 64 KiB of LDS.
const (
	maxVGPRs = 256
	maxLDS   = 64 << 10
)

const installHint = "install clang-19 lld-19 llvm-19 (apt-get install -y clang-19 lld-19 llvm-19)"

// tool finds a required LLVM 19 program; a missing one fails the test
// rather than skipping it, since CI relies on this check.
func tool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found: %s", name, installHint)
	}
	return path
}

// compileJob is one distinct source to compile; names lists every plan
// kernel that rendered to it.
type compileJob struct {
	names []string
	src   Source
	out   string // compiler output, set by the worker
	err   error
	res   map[string]int
}

// uniqueSources renders a frozen plan and groups identical sources.
func uniqueSources(t *testing.T, target string) []*compileJob {
	t.Helper()
	srcs, err := RenderPlan(frozen(t, target))
	if err != nil {
		t.Fatal(err)
	}
	byHash := map[string]*compileJob{}
	var jobs []*compileJob
	for _, s := range srcs {
		if j, ok := byHash[s.Hash]; ok {
			j.names = append(j.names, s.Kernel)
			continue
		}
		j := &compileJob{names: []string{s.Kernel}, src: s}
		byHash[s.Hash] = j
		jobs = append(jobs, j)
	}
	sort.Slice(jobs, func(a, b int) bool { return jobs[a].src.Kernel < jobs[b].src.Kernel })
	return jobs
}

// runAll runs f on every job with one worker per CPU.
func runAll(jobs []*compileJob, f func(*compileJob)) {
	work := make(chan *compileJob)
	var wg sync.WaitGroup
	for range max(1, runtime.NumCPU()) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				f(j)
			}
		}()
	}
	for _, j := range jobs {
		work <- j
	}
	close(work)
	wg.Wait()
}

// notes reads the AMDGPU metadata values of a code object that the budget
// check needs (one kernel per object).
func notes(readelf, obj string) (map[string]int, error) {
	out, err := exec.Command(readelf, "--notes", obj).CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s --notes: %v\n%s", readelf, err, out)
	}
	want := map[string]bool{".vgpr_count": true, ".sgpr_count": true, ".group_segment_fixed_size": true,
		".private_segment_fixed_size": true, ".vgpr_spill_count": true, ".sgpr_spill_count": true}
	res := map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			continue
		}
		key := strings.TrimSuffix(f[0], ":")
		if !want[key] {
			continue
		}
		if _, seen := res[key]; seen {
			continue
		}
		v, err := strconv.Atoi(f[1])
		if err != nil {
			return nil, fmt.Errorf("%s: %s %q", obj, key, f[1])
		}
		res[key] = v
	}
	for _, k := range []string{".vgpr_count", ".group_segment_fixed_size", ".private_segment_fixed_size"} {
		if _, ok := res[k]; !ok {
			return nil, fmt.Errorf("%s: no %s in the notes:\n%s", obj, k, out)
		}
	}
	return res, nil
}

// TestCompileGfx1151 compiles every kernel of the frozen gfx1151 plan to a
// code object with clang-19 (no device libraries, no headers) and checks
// the resource report: no scratch, VGPRs and LDS within budget. go test -v
// prints the budget table.
func TestCompileGfx1151(t *testing.T) {
	clang := tool(t, "clang++-19")
	tool(t, "ld.lld-19")
	readelf := tool(t, "llvm-readelf-19")
	jobs := uniqueSources(t, "gfx1151")
	dir := t.TempDir()
	runAll(jobs, func(j *compileJob) {
		src := filepath.Join(dir, j.src.Kernel+".hip")
		obj := filepath.Join(dir, j.src.Kernel+".hsaco")
		if j.err = os.WriteFile(src, []byte(j.src.Code), 0o644); j.err != nil {
			return
		}
		out, err := exec.Command(clang, "-x", "hip", "--offload-arch=gfx1151", "--cuda-device-only",
			"--no-gpu-bundle-output", "-nogpulib", "-nogpuinc", "-O3", "-c", src, "-o", obj).CombinedOutput()
		j.out = string(out)
		if err != nil {
			j.err = fmt.Errorf("clang: %v", err)
			return
		}
		j.res, j.err = notes(readelf, obj)
	})
	var table strings.Builder
	fmt.Fprintf(&table, "%-34s %5s %5s %7s %7s  %s\n", "kernel", "vgpr", "sgpr", "lds", "scratch", "family")
	maxV := 0
	for _, j := range jobs {
		if j.err != nil {
			t.Errorf("%s: %v\n%s", j.src.Kernel, j.err, j.out)
			continue
		}
		r := j.res
		maxV = max(maxV, r[".vgpr_count"])
		fmt.Fprintf(&table, "%-34s %5d %5d %7d %7d  %s\n", j.src.Kernel, r[".vgpr_count"], r[".sgpr_count"],
			r[".group_segment_fixed_size"], r[".private_segment_fixed_size"], j.src.Family)
		if r[".private_segment_fixed_size"] != 0 || r[".vgpr_spill_count"] != 0 || r[".sgpr_spill_count"] != 0 {
			t.Errorf("%s: uses scratch (private segment %d bytes, %d VGPR and %d SGPR spills)", j.src.Kernel,
				r[".private_segment_fixed_size"], r[".vgpr_spill_count"], r[".sgpr_spill_count"])
		}
		if r[".vgpr_count"] > maxVGPRs {
			t.Errorf("%s: %d VGPRs, budget %d", j.src.Kernel, r[".vgpr_count"], maxVGPRs)
		}
		if r[".group_segment_fixed_size"] > maxLDS {
			t.Errorf("%s: %d bytes of LDS, budget %d", j.src.Kernel, r[".group_segment_fixed_size"], maxLDS)
		}
		if strings.Contains(j.out, "warning") {
			t.Errorf("%s: compiler warnings:\n%s", j.src.Kernel, j.out)
		}
	}
	t.Logf("gfx1151: %d distinct sources for %d plan kernels, max %d VGPRs\n%s", len(jobs), len(frozen(t, "gfx1151").Kernels), maxV, table.String())
}

// TestCompileSm90 parses and compiles every kernel of the frozen sm_90 plan
// to PTX with clang-19's CUDA front end (no CUDA headers or libdevice) and
// checks each PTX file defines the kernel's entry point.
func TestCompileSm90(t *testing.T) {
	clang := tool(t, "clang++-19")
	jobs := uniqueSources(t, "sm_90")
	dir := t.TempDir()
	runAll(jobs, func(j *compileJob) {
		src := filepath.Join(dir, j.src.Kernel+".cu")
		ptx := filepath.Join(dir, j.src.Kernel+".ptx")
		if j.err = os.WriteFile(src, []byte(j.src.Code), 0o644); j.err != nil {
			return
		}
		out, err := exec.Command(clang, "-x", "cuda", "--cuda-gpu-arch=sm_90a", "--cuda-device-only",
			"-nocudainc", "-nocudalib", "-O3", "-S", "-o", ptx, src).CombinedOutput()
		j.out = string(out)
		if err != nil {
			j.err = fmt.Errorf("clang: %v", err)
			return
		}
		b, err := os.ReadFile(ptx)
		if err != nil {
			j.err = err
			return
		}
		if !bytes.Contains(b, []byte(".entry "+j.src.Kernel)) {
			j.err = fmt.Errorf("no .entry %s in the PTX", j.src.Kernel)
		}
	})
	for _, j := range jobs {
		if j.err != nil {
			t.Errorf("%s: %v\n%s", j.src.Kernel, j.err, j.out)
		} else if strings.Contains(j.out, "warning") {
			t.Errorf("%s: compiler warnings:\n%s", j.src.Kernel, j.out)
		}
	}
	t.Logf("sm_90: %d distinct sources compiled to PTX", len(jobs))
}
