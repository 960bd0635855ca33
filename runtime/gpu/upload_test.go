package gpu

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/runtime"
	"testing"
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

// TestUploadAllFake runs the worker discipline against the fake driver in
// both dialects: copies land, no staging buffer is refilled or freed while
// its copy is pending, only pinned memory is copied from, everything made
// is freed; a job that does not fit its destination is named before
// anything is copied.
func TestUploadAllFake(t *testing.T) {
	for _, dialect := range dialects {
		t.Run(dialect, func(t *testing.T) {
			b, f := open(t, dialect, nil)
			b.SetUploadChunk(512)
			rng := rand.New(rand.NewPCG(3, 4))
			var jobs []runtime.UploadJob
			for i := range 200 {
				n := rng.IntN(3000)
				if i%17 == 0 {
					n = 0
				}
				src := make([]byte, n)
				for k := range src {
					src[k] = byte(rng.Uint32())
				}
				m, err := b.Alloc(int64(n))
				if err != nil {
					t.Fatal(err)
				}
				jobs = append(jobs, runtime.UploadJob{Name: fmt.Sprint("w", i), Dst: runtime.Ref{Mem: m}, Src: src})
			}
			var total int64
			for _, j := range jobs {
				total += int64(len(j.Src))
			}
			var seen []int64
			if err := b.UploadAll(jobs, func(done int64) { seen = append(seen, done) }); err != nil {
				t.Fatal(err)
			}
			if len(seen) == 0 || seen[len(seen)-1] != total || !slices.IsSorted(seen) {
				t.Errorf("progress %v, want increasing to %d", seen, total)
			}
			for _, j := range jobs {
				got := make([]byte, len(j.Src))
				if err := b.Download(got, j.Dst); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, j.Src) {
					t.Fatalf("%s (%d bytes) differs", j.Name, len(j.Src))
				}
			}
			if f.calls["HostAlloc"] < 3 || f.calls["StreamCreate"] < 3 {
				t.Errorf("%d staging buffers and %d streams made: the upload did not run in parallel", f.calls["HostAlloc"]-1, f.calls["StreamCreate"]-2)
			}
			if diff := cmp.Diff(map[string]int{"device": 201, "host": 1, "stream": 2, "event": 2}, f.live()); diff != "" {
				t.Errorf("after the upload (-want +got):\n%s", diff)
			}
			short, err := b.Alloc(4)
			if err != nil {
				t.Fatal(err)
			}
			bad := append(jobs[:1:1], runtime.UploadJob{Name: "layers.0.mlp.gate.weight", Dst: runtime.Ref{Mem: short}, Src: make([]byte, 8)})
			wantErr(t, "a job that does not fit", b.UploadAll(bad, nil), dialect+": upload layers.0.mlp.gate.weight: "+dialect+": 8 bytes at offset 0 overrun a 4-byte buffer")
		})
	}
}

// TestUploadAllFailures: a copy, an event wait or a staging buffer the
// driver refuses names its job (or what failed), stops the upload and still
// frees everything; so does a Close while the workers run.
func TestUploadAllFailures(t *testing.T) {
	for _, c := range []struct {
		fn   string
		nth  int
		want string
	}{
		{"MemcpyHtoDAsync", 40, "cuda: upload layers."},
		{"EventSynchronize", 5, "cuda: upload layers."},
		{"HostAlloc", 3, "cuda: pin a 100-byte staging buffer: CUDA_ERROR_OUT_OF_MEMORY (2)"},
		{"StreamCreate", 2, "cuda: create an upload stream: CUDA_ERROR_OUT_OF_MEMORY (2)"},
		{"EventRecord", 7, "cuda: record an upload event: "},
	} {
		t.Run(c.fn, func(t *testing.T) {
			b, f := open(t, "cuda", nil)
			b.SetUploadChunk(100)
			var jobs []runtime.UploadJob
			for i := range 50 {
				m, err := b.Alloc(250)
				if err != nil {
					t.Fatal(err)
				}
				jobs = append(jobs, runtime.UploadJob{Name: fmt.Sprintf("layers.%d.weight", i), Dst: runtime.Ref{Mem: m}, Src: make([]byte, 250)})
			}
			f.failNext(c.fn, c.nth, 2)
			wantErr(t, "UploadAll", b.UploadAll(jobs, nil), c.want)
			if n := f.calls["MemcpyHtoDAsync"]; n > 40+2*maxUploadWorkers*3 {
				t.Errorf("%d copies: the workers did not stop", n)
			}
			if live := f.live(); live["host"] != 1 || live["stream"] != 2 || live["event"] != 2 {
				t.Errorf("left behind by the failed upload: %v", live)
			}
		})
	}
	t.Run("close", func(t *testing.T) {
		b, f := open(t, "hip", nil)
		b.SetUploadChunk(64)
		m, err := b.Alloc(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		jobs := []runtime.UploadJob{{Name: "big", Dst: runtime.Ref{Mem: m}, Src: make([]byte, 1<<20)}}
		done := make(chan error)
		go func() { done <- b.UploadAll(jobs, nil) }()
		for {
			f.mu.Lock()
			n := f.calls["MemcpyHtoDAsync"]
			f.mu.Unlock()
			if n > 0 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		<-done // an error, or done before Close stopped it
		if n := f.calls["MemcpyHtoDAsync"]; n >= (1<<20)/64 {
			t.Logf("the upload finished before Close stopped it (%d copies)", n)
		}
	})
}
