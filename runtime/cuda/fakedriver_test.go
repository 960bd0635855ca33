package cuda

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/aimaproject/aimac/runtime"
)

// fakeGPU stands in for the driver in tests of the upload's discipline
// without a GPU: device memory is a byte slice, each stream runs its
// operations on a goroutine after a random delay, so a staging buffer
// refilled before its copy completed shows up as wrong bytes; and a copy
// from memory the fake did not pin, or a pinned buffer freed with a copy
// pending, is an error.
type fakeGPU struct {
	mu      sync.Mutex
	dev     []byte // device memory; addresses are devBase + offset
	next    uint64
	pinned  map[uintptr][]byte // pinned host buffers by address
	streams map[uintptr]*fakeStream
	events  map[uintptr]*fakeEvent
	ids     uintptr
	errs    []string
	// failCopy makes cuMemcpyHtoDAsync fail once this many copies were made.
	failCopy int
	copies   int
}

const devBase = 1 << 32

type fakeStream struct {
	ops     chan func()
	pending sync.WaitGroup
}

type fakeEvent struct {
	done chan struct{} // closed when the last recorded point is reached
}

func newFakeGPU(devBytes int) *fakeGPU {
	return &fakeGPU{dev: make([]byte, devBytes), pinned: map[uintptr][]byte{}, streams: map[uintptr]*fakeStream{},
		events: map[uintptr]*fakeEvent{}, failCopy: -1}
}

func (f *fakeGPU) errorf(format string, args ...any) {
	f.mu.Lock()
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

// host finds the pinned buffer that holds [p, p+n).
func (f *fakeGPU) host(p unsafe.Pointer, n uint64) []byte {
	f.mu.Lock()
	defer f.mu.Unlock()
	for base, b := range f.pinned {
		if uintptr(p) >= base && uintptr(p)+uintptr(n) <= base+uintptr(len(b)) {
			off := uintptr(p) - base
			return b[off : off+uintptr(n)]
		}
	}
	return nil
}

func (f *fakeGPU) enqueue(stream uintptr, op func()) int32 {
	f.mu.Lock()
	s := f.streams[stream]
	f.mu.Unlock()
	if s == nil {
		f.errorf("operation on unknown stream %d", stream)
		return 400
	}
	s.pending.Add(1)
	s.ops <- op
	return 0
}

func (f *fakeGPU) driver() *driver {
	return &driver{
		cuCtxSetCurrent: func(uintptr) int32 { return 0 },
		cuGetErrorName: func(res int32, str *unsafe.Pointer) int32 {
			*str = nil
			return 0
		},
		cuGetErrorString: func(res int32, str *unsafe.Pointer) int32 {
			*str = nil
			return 0
		},
		cuMemAlloc: func(dptr *uint64, n uint64) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.next+n > uint64(len(f.dev)) {
				return 2
			}
			*dptr = devBase + f.next
			f.next += (n + 255) &^ 255
			return 0
		},
		cuMemFree: func(uint64) int32 { return 0 },
		cuMemAllocHost: func(pp *unsafe.Pointer, n uint64) int32 {
			b := make([]byte, n)
			f.mu.Lock()
			f.pinned[uintptr(unsafe.Pointer(&b[0]))] = b
			f.mu.Unlock()
			*pp = unsafe.Pointer(&b[0])
			return 0
		},
		cuMemFreeHost: func(p unsafe.Pointer) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if _, ok := f.pinned[uintptr(p)]; !ok {
				f.errs = append(f.errs, "cuMemFreeHost of memory not pinned")
			}
			delete(f.pinned, uintptr(p))
			return 0
		},
		cuMemcpyDtoH: func(dst unsafe.Pointer, src uint64, n uint64) int32 {
			copy(unsafe.Slice((*byte)(dst), n), f.dev[src-devBase:])
			return 0
		},
		cuMemsetD8: func(dst uint64, v uint8, n uint64) int32 {
			for i := range n {
				f.dev[dst-devBase+i] = v
			}
			return 0
		},
		cuStreamCreate: func(stream *uintptr, flags uint32) int32 {
			f.mu.Lock()
			f.ids++
			id := f.ids
			s := &fakeStream{ops: make(chan func(), 1024)}
			f.streams[id] = s
			f.mu.Unlock()
			go func() {
				for op := range s.ops {
					op()
					s.pending.Done()
				}
			}()
			*stream = id
			return 0
		},
		cuStreamDestroy: func(stream uintptr) int32 {
			f.mu.Lock()
			s := f.streams[stream]
			delete(f.streams, stream)
			f.mu.Unlock()
			if s == nil {
				f.errorf("cuStreamDestroy of unknown stream %d", stream)
				return 400
			}
			close(s.ops)
			return 0
		},
		cuStreamSynchronize: func(stream uintptr) int32 {
			f.mu.Lock()
			s := f.streams[stream]
			f.mu.Unlock()
			if s != nil {
				s.pending.Wait()
			}
			return 0
		},
		cuMemcpyHtoDAsync: func(dst uint64, src unsafe.Pointer, n uint64, stream uintptr) int32 {
			f.mu.Lock()
			f.copies++
			fail := f.copies == f.failCopy
			f.mu.Unlock()
			if fail {
				return 700
			}
			h := f.host(src, n)
			if h == nil {
				f.errorf("cuMemcpyHtoDAsync from %d bytes not pinned by the driver", n)
				return 1
			}
			delay := time.Duration(rand.IntN(200)) * time.Microsecond
			return f.enqueue(stream, func() {
				time.Sleep(delay)
				// The staging buffer must still be pinned and hold what it
				// held when the copy was enqueued (it is read now).
				if f.host(src, n) == nil {
					f.errorf("pinned buffer freed with a copy pending")
					return
				}
				copy(f.dev[dst-devBase:], h)
			})
		},
		cuEventCreate: func(ev *uintptr, flags uint32) int32 {
			f.mu.Lock()
			f.ids++
			f.events[f.ids] = &fakeEvent{done: closed()}
			*ev = f.ids
			f.mu.Unlock()
			return 0
		},
		cuEventDestroy: func(ev uintptr) int32 {
			f.mu.Lock()
			delete(f.events, ev)
			f.mu.Unlock()
			return 0
		},
		cuEventRecord: func(ev, stream uintptr) int32 {
			done := make(chan struct{})
			f.mu.Lock()
			e := f.events[ev]
			if e != nil {
				e.done = done
			}
			f.mu.Unlock()
			if e == nil {
				f.errorf("cuEventRecord of unknown event")
				return 400
			}
			return f.enqueue(stream, func() { close(done) })
		},
		cuEventSynchronize: func(ev uintptr) int32 {
			f.mu.Lock()
			e := f.events[ev]
			f.mu.Unlock()
			if e == nil {
				f.errorf("cuEventSynchronize of unknown event")
				return 400
			}
			f.mu.Lock()
			done := e.done
			f.mu.Unlock()
			<-done
			return 0
		},
	}
}

func closed() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// newFakeCUDA is a backend on the fake driver with its own stream.
func newFakeCUDA(t *testing.T, f *fakeGPU) *CUDA {
	c := &CUDA{d: f.driver(), ctx: 1}
	if rc := c.d.cuStreamCreate(&c.stream, 0); rc != 0 {
		t.Fatal(rc)
	}
	return c
}

// TestUploadAllFakeDriver runs the worker discipline against the fake
// driver: copies land, no staging buffer is refilled or freed while its copy
// is pending, only pinned memory is copied from, everything made is freed.
func TestUploadAllFakeDriver(t *testing.T) {
	defer func(n int64) { uploadChunk = n }(uploadChunk)
	uploadChunk = 512
	f := newFakeGPU(1 << 22)
	c := newFakeCUDA(t, f)
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
		m, err := c.Alloc(int64(n))
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
	if err := c.UploadAll(jobs, func(done int64) { seen = append(seen, done) }); err != nil {
		t.Fatal(err)
	}
	if len(seen) == 0 || seen[len(seen)-1] != total || !slices.IsSorted(seen) {
		t.Errorf("progress %v, want increasing to %d", seen, total)
	}
	for _, j := range jobs {
		got := make([]byte, len(j.Src))
		if err := c.Download(got, j.Dst); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, j.Src) {
			t.Fatalf("%s (%d bytes) differs", j.Name, len(j.Src))
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) > 0 {
		t.Errorf("driver misuse: %v", f.errs)
	}
	if len(f.pinned) != 0 || len(f.events) != 0 || len(f.streams) != 1 {
		t.Errorf("left behind: %d pinned buffers, %d events, %d streams (want the backend's 1)", len(f.pinned), len(f.events), len(f.streams))
	}
}

// TestUploadAllFakeDriverFailure: a copy the driver refuses names its job,
// stops the upload and still frees everything.
func TestUploadAllFakeDriverFailure(t *testing.T) {
	defer func(n int64) { uploadChunk = n }(uploadChunk)
	uploadChunk = 100
	f := newFakeGPU(1 << 20)
	c := newFakeCUDA(t, f)
	var jobs []runtime.UploadJob
	for i := range 50 {
		m, err := c.Alloc(250)
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, runtime.UploadJob{Name: fmt.Sprintf("layers.%d.weight", i), Dst: runtime.Ref{Mem: m}, Src: make([]byte, 250)})
	}
	f.failCopy = 40
	err := c.UploadAll(jobs, nil)
	if err == nil || !strings.Contains(err.Error(), "cuda: upload layers.") {
		t.Fatalf("error %v", err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.copies > 40+2*maxUploadWorkers {
		t.Errorf("%d copies after the failure at 40: the others did not stop", f.copies)
	}
	if len(f.errs) > 0 || len(f.pinned) != 0 || len(f.events) != 0 || len(f.streams) != 1 {
		t.Errorf("driver misuse %v; left behind %d pinned, %d events, %d streams", f.errs, len(f.pinned), len(f.events), len(f.streams))
	}
}
