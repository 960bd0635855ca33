// Package gputest holds tests of a GPU backend that run the same against
// any driver: the fake of the shared backend's tests and a real GPU.
package gputest

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/aimaproject/aimac/runtime"
	"github.com/aimaproject/aimac/runtime/gpu"
)

// UploadRoundTrip copies jobs of odd sizes (empty, one byte, a
// chunk and one more, several chunks, into the middle of a buffer) through
// small staging chunks, and reads them back; the bytes around the one at an
// offset are untouched, and progress rises to the total.
func UploadRoundTrip(t *testing.T, c *gpu.Backend) {
	t.Helper()
	c.SetUploadChunk(4096)
	defer c.SetUploadChunk(0)

	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{0, 1, 4095, 4096, 4097, 3*4096 + 77, 0, 13, 2*4096 + 1, 100003, 3, 0}
	var jobs []runtime.UploadJob
	var mems []runtime.Mem
	for i, n := range sizes {
		src := make([]byte, n)
		for k := range src {
			src[k] = byte(rng.Uint32())
		}
		m, err := c.Alloc(int64(n))
		if err != nil {
			t.Fatal(err)
		}
		mems = append(mems, m)
		jobs = append(jobs, runtime.UploadJob{Name: "job" + string(rune('a'+i)), Dst: runtime.Ref{Mem: m}, Src: src})
	}
	// One job lands at an offset inside a larger, zeroed buffer.
	big, err := c.Alloc(3 * 4096)
	if err != nil {
		t.Fatal(err)
	}
	mems = append(mems, big)
	if err := c.Zero(runtime.Ref{Mem: big}, big.Size()); err != nil {
		t.Fatal(err)
	}
	mid := make([]byte, 5000)
	for k := range mid {
		mid[k] = byte(k%251 + 1)
	}
	jobs = append(jobs, runtime.UploadJob{Name: "mid", Dst: runtime.Ref{Mem: big, Offset: 1001}, Src: mid})
	defer func() {
		for _, m := range mems {
			c.Free(m)
		}
	}()

	var total int64
	for _, j := range jobs {
		total += int64(len(j.Src))
	}
	for round := range 2 { // the staging buffers are freed and made again
		var seen []int64
		calls := 0
		if err := c.UploadAll(jobs, func(done int64) { calls++; seen = append(seen, done) }); err != nil {
			t.Fatal(err)
		}
		if len(seen) == 0 || seen[len(seen)-1] != total || !slices.IsSorted(seen) || calls != len(seen) {
			t.Fatalf("round %d: progress %v, want increasing to %d", round, seen, total)
		}
		for _, j := range jobs[:len(sizes)] {
			got := make([]byte, len(j.Src))
			if err := c.Download(got, j.Dst); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, j.Src) {
				t.Fatalf("round %d: %s (%d bytes) differs after the round trip", round, j.Name, len(j.Src))
			}
		}
		all := make([]byte, big.Size())
		if err := c.Download(all, runtime.Ref{Mem: big}); err != nil {
			t.Fatal(err)
		}
		want := make([]byte, len(all))
		copy(want[1001:], mid)
		if !bytes.Equal(all, want) {
			t.Fatalf("round %d: the buffer with a job at an offset differs", round)
		}
		for _, k := range []int{4, 9} { // new bytes for the second round
			for i := range jobs[k].Src {
				jobs[k].Src[i]++
			}
		}
	}
}

// Bound checks a binding's symbol list: every func field of d is bound
// exactly once but MakeCurrent and those named in unbound (entry points
// the vendor lacks, or that the binding sets itself), which are not bound
// at all; and no symbol name repeats.
func Bound(t *testing.T, d *gpu.Driver, syms []gpu.Symbol, unbound ...string) {
	t.Helper()
	bound := map[uintptr]int{}
	names := map[string]bool{}
	for _, s := range syms {
		if names[s.Name] {
			t.Errorf("symbol %s bound twice", s.Name)
		}
		names[s.Name] = true
		bound[reflect.ValueOf(s.Func).Pointer()]++
	}
	skip := map[string]bool{"MakeCurrent": true}
	for _, u := range unbound {
		skip[u] = true
	}
	v := reflect.ValueOf(d).Elem()
	for i := range v.NumField() {
		f := v.Type().Field(i)
		if f.Type.Kind() != reflect.Func {
			continue
		}
		n := bound[v.Field(i).Addr().Pointer()]
		switch {
		case skip[f.Name] && n > 0:
			t.Errorf("%s is bound although it is said not to be", f.Name)
		case !skip[f.Name] && n != 1:
			t.Errorf("entry point %s is bound %d times, want once", f.Name, n)
		}
	}
}
