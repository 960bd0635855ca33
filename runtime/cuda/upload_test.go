package cuda

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/runtime"
)

// TestPieces: chunks cut across jobs cover every byte once, in order,
// skipping empty jobs.
func TestPieces(t *testing.T) {
	sizes := []int64{0, 5, 0, 0, 17, 3, 0, 40, 1, 0}
	start := make([]int64, len(sizes)+1)
	for i, n := range sizes {
		start[i+1] = start[i] + n
	}
	total := start[len(sizes)]
	for _, chunk := range []int64{1, 2, 4, 7, 16, total, total + 3} {
		var got []piece
		for lo := int64(0); lo < total; lo += chunk {
			hi := min(lo+chunk, total)
			ps := pieces(nil, start, lo, hi)
			var at int64
			for _, p := range ps {
				if p.at != at || p.n <= 0 || sizes[p.job] == 0 {
					t.Fatalf("chunk %d [%d,%d): piece %+v", chunk, lo, hi, p)
				}
				at += p.n
			}
			if at != hi-lo {
				t.Fatalf("chunk %d [%d,%d): pieces cover %d bytes", chunk, lo, hi, at)
			}
			got = append(got, ps...)
		}
		// Every byte of every job, in order.
		pos := int64(0)
		for _, p := range got {
			if start[p.job]+p.off != pos {
				t.Fatalf("chunk %d: piece %+v starts at %d, want %d", chunk, p, start[p.job]+p.off, pos)
			}
			if p.off+p.n > sizes[p.job] {
				t.Fatalf("chunk %d: piece %+v overruns job of %d bytes", chunk, p, sizes[p.job])
			}
			pos += p.n
		}
		if pos != total {
			t.Fatalf("chunk %d: %d of %d bytes", chunk, pos, total)
		}
	}
}

func TestUploadWorkers(t *testing.T) {
	for _, c := range []struct{ chunks, min, max int }{{1, 1, 1}, {2, 2, 2}, {1000, 2, maxUploadWorkers}} {
		if w := uploadWorkers(c.chunks); w < c.min || w > c.max {
			t.Errorf("%d chunks: %d workers", c.chunks, w)
		}
	}
}

// TestUploadAllRefusesBadDestination: a job that does not fit its
// destination is named before anything is copied (no driver needed).
func TestUploadAllRefusesBadDestination(t *testing.T) {
	c := &CUDA{}
	jobs := []runtime.UploadJob{
		{Name: "fits", Dst: runtime.Ref{Mem: &mem{ptr: 1 << 20, size: 8}}, Src: make([]byte, 8)},
		{Name: "layers.0.mlp.gate.weight", Dst: runtime.Ref{Mem: &mem{ptr: 2 << 20, size: 4}}, Src: make([]byte, 8)},
	}
	err := c.UploadAll(jobs, nil)
	if err == nil || !strings.Contains(err.Error(), "layers.0.mlp.gate.weight") {
		t.Errorf("error %v", err)
	}
}

// TestUploadAllRoundTrip copies jobs of odd sizes (empty, one byte, a
// chunk and one more, several chunks, into the middle of a buffer) through
// small staging chunks, and reads them back; the bytes around the one at an
// offset are untouched, and progress rises to the total.
func TestUploadAllRoundTrip(t *testing.T) {
	if err := Available(); err != nil {
		t.Skipf("no CUDA driver: %v", err)
	}
	defer func(n int64) { uploadChunk = n }(uploadChunk)
	uploadChunk = 4096
	c, err := NewCUDA(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

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
