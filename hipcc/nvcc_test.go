package hipcc

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
)

// TestCompileSM90 compiles with a real nvcc where one is installed (the GPU
// machines; CI has none): a clean kernel, a kernel with a stack array and a
// register-starved kernel that spills, reported through ptxas -v.
func TestCompileSM90(t *testing.T) {
	c, err := Find(SM90)
	if err != nil {
		t.Skipf("no nvcc here: %v", err)
	}
	t.Logf("%s %s", c.Path, c.Version)
	srcs := []Source{
		{Name: "twice", Code: `extern "C" __global__ void twice(float* x) { x[threadIdx.x] *= 2.f; }
`},
		{Name: "stack", Code: `extern "C" __global__ void stack(float* x, int n) {
  __shared__ float s[1024];
  float a[64];
  for (int i = 0; i < 64; i++) a[i] = x[threadIdx.x + i * n];
  s[threadIdx.x] = a[n & 63];
  __syncthreads();
  x[threadIdx.x] = s[(threadIdx.x + 1) & 1023];
}
`},
		{Name: "pressure", Code: `extern "C" __global__ void pressure(float* x, int n) {
  float a[96];
#pragma unroll
  for (int i = 0; i < 96; i++) a[i] = x[threadIdx.x + i * n];
  for (int j = 0; j < n; j++) {
#pragma unroll
    for (int i = 0; i < 96; i++) a[i] = a[i] * a[(i + 7) % 96] + a[(i + 13) % 96];
  }
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 96; i++) s += a[i];
  x[threadIdx.x] = s;
}
`},
	}
	res, err := c.Compile(context.Background(), SM90, srcs, Options{CacheDir: t.TempDir(), Flags: []string{"-maxrregcount=32"}})
	for _, r := range res {
		t.Logf("%s: %+v\n%s", r.Name, r.Resources, r.Log)
	}
	var ce *Error
	if !errors.As(err, &ce) || len(ce.Failures) != 1 || ce.Failures[0].Kernel != "pressure" || ce.Failures[0].Reason != ReasonSpill {
		t.Fatalf("err = %v, want one spill failure naming pressure", err)
	}
	if !bytes.HasPrefix(res[0].Object, elfMagic) || res[0].Resources.Registers <= 0 || res[0].Resources.Spills() != "" {
		t.Errorf("twice: %+v", res[0].Resources)
	}
	if r := res[1].Resources; r.SharedBytes != 4096 || r.StackBytes <= 0 || r.Spills() != "" {
		t.Errorf("stack: %+v, want 4096 bytes smem, a stack frame, no spill", r)
	}
	if r := res[2].Resources; r.SpillStores <= 0 || r.SpillLoads <= 0 || r.Registers > 32 {
		t.Errorf("pressure: %+v, want spills within 32 registers", r)
	}
	if !strings.Contains(res[0].Log, "ptxas info") {
		t.Errorf("twice: log lacks ptxas -v output: %q", res[0].Log)
	}
}
