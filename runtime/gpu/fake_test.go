package gpu

import (
	"encoding/binary"
	"fmt"
	"github.com/aimaproject/aimac/ir"
	"math/rand/v2"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"
)

// fake is a Driver over host memory for the tests of the shared backend,
// in either dialect: "cuda" binds the function attribute and the extended
// launch, "hip" leaves them out, as the real bindings do. It cannot run
// kernels; it records them.
//
//   - Device memory is a byte slice; addresses are devBase + offset. Copies
//     that leave an allocation, or come from host memory the fake did not
//     pin, fail.
//   - Each stream runs its operations on a goroutine, after a random delay,
//     in order; events mark points in a stream, and a stream that waits for
//     one holds its later operations until that point ran. A staging buffer
//     refilled before its copy ran shows up as wrong bytes.
//   - A launch "runs" by appending a ran record to the log: the kernel, its
//     shape, every argument (d<k>+<offset> for a pointer into the k-th
//     allocation), the parameter block as the launch reads it when it runs,
//     and its launch attributes (decoded from the CUlaunchConfig at the
//     offsets of cuda.h, not through the backend's own types).
//   - Stream capture records launches as graph nodes with their
//     dependencies instead of running them; a stream that waits for an event
//     recorded in a capture joins it, and ending the capture fails unless
//     every joined stream was joined back (CUDA_ERROR_STREAM_CAPTURE_UNJOINED).
//     A graph launch runs the nodes in order as "replay" records.
//   - failNext makes the n-th next call of an entry point return a code.
//   - live counts what is still allocated, by kind.
type fake struct {
	dialect string

	mu      sync.Mutex
	dev     []byte
	next    uint64
	allocs  map[uint64]*fakeAlloc // by address
	serial  int
	pinned  map[uintptr][]byte
	modules map[uintptr][]*fakeFunc
	funcs   map[uintptr]*fakeFunc
	streams map[uintptr]*fakeStream
	events  map[uintptr]*fakeEvent
	graphs  map[uintptr]*fakeGraph
	execs   map[uintptr]*fakeGraph
	ids     uintptr
	fails   map[string][2]int32 // entry point → calls left before it fails, the code
	calls   map[string]int
	log     []ran
	errs    []string // misuse the backend should never commit
	current int      // MakeCurrent calls
	// perSM is what the occupancy query ("cuda" only) answers: blocks of
	// a 256-thread function one multiprocessor holds (fewer for more
	// threads, in proportion).
	perSM int32
}

const (
	devBase      = 1 << 32
	fakeMaxShare = 227 << 10 // the largest dynamic shared memory a function may opt into
)

type fakeAlloc struct {
	id   int
	addr uint64
	size uint64
}

type fakeFunc struct {
	name   string
	nargs  int
	mod    uintptr
	shared int32 // FuncSetAttribute's limit
}

type fakeStream struct {
	ops     chan func()
	pending sync.WaitGroup
	capture *fakeCapture
	tails   []int // capture: the nodes the stream's next node depends on
}

type fakeEvent struct {
	flags   uint32
	done    chan struct{} // closed when the point recorded last was reached
	at      time.Time
	capture *fakeCapture
	nodes   []int // recorded in a capture: the nodes before it
}

type fakeCapture struct {
	invalid bool // a launch failed in it
	origin  uintptr
	members map[uintptr]bool
	nodes   []fakeNode
}

type fakeNode struct {
	rec  launchRec
	deps []int
	// copy is a captured copy's or event record's work (rec is then empty).
	copy func()
}

type fakeGraph struct{ nodes []fakeNode }

// launchRec is a launch as enqueued.
type launchRec struct {
	fn           *fakeFunc
	grid, block  [3]uint32
	shared       uint32
	args         []uint64
	programmatic bool
	cluster      uint32 // blocks of a cluster along x; 0 none
}

// ran is a launch as it ran.
type ran struct {
	Via    string // "launch", or "replay" from a graph
	Kernel string
	Grid   [3]uint32
	Block  [3]uint32
	Shared uint32
	Args   []string
	Params []int32 // the parameter block when it ran
	// Programmatic: the launch allowed programmatic stream serialization.
	Programmatic bool
	// Cluster: the blocks of a thread-block cluster along x (0: none).
	Cluster uint32
}

// Result codes, with CUDA's and HIP's names.
var fakeCodes = map[int32][3]string{
	1:   {"CUDA_ERROR_INVALID_VALUE", "hipErrorInvalidValue", "invalid argument"},
	2:   {"CUDA_ERROR_OUT_OF_MEMORY", "hipErrorOutOfMemory", "out of memory"},
	98:  {"CUDA_ERROR_INVALID_SOURCE", "hipErrorInvalidDeviceFunction", "invalid device function"},
	200: {"CUDA_ERROR_INVALID_IMAGE", "hipErrorInvalidImage", "device kernel image is invalid"},
	400: {"CUDA_ERROR_INVALID_HANDLE", "hipErrorInvalidHandle", "invalid resource handle"},
	500: {"CUDA_ERROR_NOT_FOUND", "hipErrorNotFound", "named symbol not found"},
	700: {"CUDA_ERROR_ILLEGAL_ADDRESS", "hipErrorIllegalAddress", "an illegal memory access was encountered"},
	719: {"CUDA_ERROR_LAUNCH_FAILED", "hipErrorLaunchFailure", "unspecified launch failure"},
	900: {"CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "hipErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing"},
	901: {"CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "hipErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture"},
	904: {"CUDA_ERROR_STREAM_CAPTURE_UNJOINED", "hipErrorStreamCaptureUnjoined", "capture was not joined"},
	9:   {"CUDA_ERROR_INVALID_CONFIGURATION", "hipErrorInvalidConfiguration", "invalid configuration argument"},
}

func newFake(dialect string, devBytes int) *fake {
	return &fake{dialect: dialect, dev: make([]byte, devBytes), allocs: map[uint64]*fakeAlloc{},
		pinned: map[uintptr][]byte{}, modules: map[uintptr][]*fakeFunc{}, funcs: map[uintptr]*fakeFunc{},
		streams: map[uintptr]*fakeStream{}, events: map[uintptr]*fakeEvent{}, graphs: map[uintptr]*fakeGraph{},
		execs: map[uintptr]*fakeGraph{}, fails: map[string][2]int32{}, calls: map[string]int{}}
}

// failNext makes the n-th next call of entry point fn (1: the next) return code.
func (f *fake) failNext(fn string, n int, code int32) {
	f.mu.Lock()
	f.fails[fn] = [2]int32{int32(n), code}
	f.mu.Unlock()
}

// enter counts a call of fn and returns its injected failure, if due; f.mu
// is held.
func (f *fake) enter(fn string) int32 {
	f.calls[fn]++
	if c, ok := f.fails[fn]; ok {
		c[0]--
		f.fails[fn] = c
		if c[0] == 0 {
			delete(f.fails, fn)
			return c[1]
		}
	}
	return 0
}

func (f *fake) misuse(format string, args ...any) {
	f.errs = append(f.errs, fmt.Sprintf(format, args...))
}

// live counts the objects still allocated, by kind.
func (f *fake) live() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]int{}
	for k, n := range map[string]int{"device": len(f.allocs), "host": len(f.pinned), "module": len(f.modules),
		"stream": len(f.streams), "event": len(f.events), "graph": len(f.graphs), "exec": len(f.execs)} {
		if n != 0 {
			out[k] = n
		}
	}
	return out
}

// launches returns the log and clears it.
func (f *fake) launches() []ran {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.log
	f.log = nil
	return out
}

func (f *fake) misuses() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.errs...)
}

// span finds the allocation holding [p, p+n); f.mu is held.
func (f *fake) span(p, n uint64) *fakeAlloc {
	for _, a := range f.allocs {
		if p >= a.addr && p+n <= a.addr+a.size {
			return a
		}
	}
	return nil
}

// host finds the pinned buffer that holds [p, p+n); f.mu is held.
func (f *fake) host(p unsafe.Pointer, n uint64) []byte {
	for base, b := range f.pinned {
		if uintptr(p) >= base && uintptr(p)+uintptr(n) <= base+uintptr(len(b)) {
			off := uintptr(p) - base
			return b[off : off+uintptr(n)]
		}
	}
	return nil
}

func (f *fake) id() uintptr {
	f.ids++
	return 0x1000 + f.ids
}

// quiesce waits for every stream (a synchronous copy on the legacy null
// stream waits for the blocking streams); f.mu is not held.
func (f *fake) quiesce() {
	f.mu.Lock()
	var ss []*fakeStream
	for _, s := range f.streams {
		ss = append(ss, s)
	}
	f.mu.Unlock()
	for _, s := range ss {
		s.pending.Wait()
	}
}

// capturing reports whether a stream captures; f.mu is held.
func (f *fake) capturing() bool {
	for _, s := range f.streams {
		if s.capture != nil {
			return true
		}
	}
	return false
}

// enqueue runs op on stream s after a random delay, after what s already
// has; f.mu is held.
func (f *fake) enqueue(s *fakeStream, op func()) {
	delay := time.Duration(rand.IntN(100)) * time.Microsecond
	s.pending.Add(1)
	s.ops <- func() {
		time.Sleep(delay)
		op()
	}
}

// run logs a launch as it runs now; f.mu is not held.
func (f *fake) run(via string, r launchRec) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := ran{Via: via, Kernel: r.fn.name, Grid: r.grid, Block: r.block, Shared: r.shared, Programmatic: r.programmatic, Cluster: r.cluster}
	for _, v := range r.args {
		if a := f.within(v); a != nil {
			out.Args = append(out.Args, fmt.Sprintf("d%d+%d", a.id, v-a.addr))
		} else {
			out.Args = append(out.Args, fmt.Sprint(v))
		}
	}
	if n := len(r.args); n > 0 {
		if a := f.span(r.args[n-1], 4*ir.ParamSlots); a != nil {
			at := r.args[n-1] - devBase
			for i := range ir.ParamSlots {
				out.Params = append(out.Params, int32(binary.LittleEndian.Uint32(f.dev[at+uint64(4*i):])))
			}
		}
	}
	f.log = append(f.log, out)
}

// within finds the allocation p points into (or just past); f.mu is held.
func (f *fake) within(p uint64) *fakeAlloc {
	for _, a := range f.allocs {
		if p >= a.addr && p <= a.addr+a.size {
			return a
		}
	}
	return nil
}

// image is a fake code object declaring one kernel with nargs arguments.
func image(name string, nargs int) []byte {
	return []byte(fmt.Sprintf("fake kernel=%s args=%d\n\x00", name, nargs))
}

// driver is the fake's entry points as a Driver.
func (f *fake) driver() *Driver {
	d := &Driver{
		Dialect: f.dialect,
		MakeCurrent: func() int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.current++
			return f.enter("MakeCurrent")
		},
		ErrorName: func(rc int32) string {
			if c, ok := fakeCodes[rc]; ok {
				if f.dialect == "cuda" {
					return c[0]
				}
				return c[1]
			}
			return ""
		},
		ErrorString: func(rc int32) string { return fakeCodes[rc][2] },
		MemAlloc: func(p *uint64, n uint64) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if rc := f.enter("MemAlloc"); rc != 0 {
				return rc
			}
			if f.next+n > uint64(len(f.dev)) {
				return 2
			}
			f.serial++
			a := &fakeAlloc{id: f.serial, addr: devBase + f.next, size: n}
			f.allocs[a.addr] = a
			f.next += (n+255)&^255 + 256 // a gap: no pointer just past one allocation is the start of the next
			*p = a.addr
			return 0
		},
		MemFree: func(p uint64) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if rc := f.enter("MemFree"); rc != 0 {
				return rc
			}
			if f.allocs[p] == nil {
				f.misuse("MemFree of %#x, not allocated", p)
				return 1
			}
			delete(f.allocs, p)
			return 0
		},
		MemGetInfo: func(free, total *uint64) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if rc := f.enter("MemGetInfo"); rc != 0 {
				return rc
			}
			*total = uint64(len(f.dev))
			*free = *total - f.next
			return 0
		},
		HostAlloc: func(p *unsafe.Pointer, n uint64, flags uint32) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if rc := f.enter("HostAlloc"); rc != 0 {
				return rc
			}
			if flags != 0 {
				return 1
			}
			b := make([]byte, max(n, 1))
			f.pinned[uintptr(unsafe.Pointer(&b[0]))] = b
			*p = unsafe.Pointer(&b[0])
			return 0
		},
		HostFree: func(p unsafe.Pointer) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if _, ok := f.pinned[uintptr(p)]; !ok {
				f.misuse("HostFree of memory not pinned")
				return 1
			}
			delete(f.pinned, uintptr(p))
			return 0
		},
		MemcpyHtoD: func(dst uint64, src unsafe.Pointer, n uint64) int32 {
			return f.syncOp("MemcpyHtoD", func() int32 {
				if f.span(dst, n) == nil {
					return 1
				}
				copy(f.dev[dst-devBase:], unsafe.Slice((*byte)(src), n))
				return 0
			})
		},
		MemcpyDtoH: func(dst unsafe.Pointer, src uint64, n uint64) int32 {
			return f.syncOp("MemcpyDtoH", func() int32 {
				if f.span(src, n) == nil {
					return 1
				}
				copy(unsafe.Slice((*byte)(dst), n), f.dev[src-devBase:])
				return 0
			})
		},
		MemsetD8: func(dst uint64, v uint8, n uint64) int32 {
			return f.syncOp("MemsetD8", func() int32 {
				if f.span(dst, n) == nil {
					return 1
				}
				for i := range n {
					f.dev[dst-devBase+i] = v
				}
				return 0
			})
		},
		MemcpyHtoDAsync: func(dst uint64, src unsafe.Pointer, n uint64, stream uintptr) int32 {
			return f.asyncOp("MemcpyHtoDAsync", stream, true, func() (func(), int32) {
				h := f.host(src, n)
				if h == nil {
					f.misuse("MemcpyHtoDAsync from %d bytes not pinned by the driver", n)
					return nil, 1
				}
				if f.span(dst, n) == nil {
					return nil, 1
				}
				return func() {
					f.mu.Lock()
					defer f.mu.Unlock()
					// The staging buffer must still be pinned; it is read now.
					if f.host(src, n) == nil {
						f.misuse("pinned buffer freed with a copy pending")
						return
					}
					copy(f.dev[dst-devBase:], h)
				}, 0
			})
		},
		MemcpyDtoDAsync: func(dst, src uint64, n uint64, stream uintptr) int32 {
			return f.asyncOp("MemcpyDtoDAsync", stream, false, func() (func(), int32) {
				if f.span(dst, n) == nil || f.span(src, n) == nil {
					return nil, 1
				}
				return func() {
					f.mu.Lock()
					defer f.mu.Unlock()
					copy(f.dev[dst-devBase:dst-devBase+n], f.dev[src-devBase:])
				}, 0
			})
		},
		MemcpyDtoHAsync: func(dst unsafe.Pointer, src uint64, n uint64, stream uintptr) int32 {
			return f.asyncOp("MemcpyDtoHAsync", stream, true, func() (func(), int32) {
				h := f.host(dst, n)
				if h == nil {
					f.misuse("MemcpyDtoHAsync into %d bytes not pinned by the driver", n)
					return nil, 1
				}
				if f.span(src, n) == nil {
					return nil, 1
				}
				return func() {
					f.mu.Lock()
					defer f.mu.Unlock()
					if f.host(dst, n) == nil {
						f.misuse("pinned buffer freed with a copy pending")
						return
					}
					copy(h, f.dev[src-devBase:src-devBase+n])
				}, 0
			})
		},
		ModuleLoadData: func(mod *uintptr, image unsafe.Pointer) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if rc := f.enter("ModuleLoadData"); rc != 0 {
				return rc
			}
			text := CString(image)
			var fns []*fakeFunc
			for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
				fn := &fakeFunc{}
				if _, err := fmt.Sscanf(line, "fake kernel=%s args=%d", &fn.name, &fn.nargs); err != nil {
					return 200
				}
				fns = append(fns, fn)
			}
			id := f.id()
			for _, fn := range fns {
				fn.mod = id
			}
			f.modules[id] = fns
			*mod = id
			return 0
		},
		ModuleUnload: func(mod uintptr) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if _, ok := f.modules[mod]; !ok {
				f.misuse("ModuleUnload of an unknown module")
				return 400
			}
			delete(f.modules, mod)
			for h, fn := range f.funcs {
				if fn.mod == mod {
					delete(f.funcs, h)
				}
			}
			return 0
		},
		ModuleGetFunction: func(fn *uintptr, mod uintptr, name string) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if rc := f.enter("ModuleGetFunction"); rc != 0 {
				return rc
			}
			for _, k := range f.modules[mod] {
				if k.name == name {
					id := f.id()
					f.funcs[id] = k
					*fn = id
					return 0
				}
			}
			return 500
		},
		LaunchKernel: func(fn uintptr, gx, gy, gz, bx, by, bz, shared uint32, stream uintptr, params, extra unsafe.Pointer) int32 {
			return f.launch("LaunchKernel", fn, [3]uint32{gx, gy, gz}, [3]uint32{bx, by, bz}, shared, stream, params, extra, false, 0)
		},
		StreamCreate: func(stream *uintptr, flags uint32) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if rc := f.enter("StreamCreate"); rc != 0 {
				return rc
			}
			s := &fakeStream{ops: make(chan func(), 1<<12)}
			go func() {
				for op := range s.ops {
					op()
					s.pending.Done()
				}
			}()
			id := f.id()
			f.streams[id] = s
			*stream = id
			return 0
		},
		StreamDestroy: func(stream uintptr) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			s := f.streams[stream]
			if s == nil {
				f.misuse("StreamDestroy of an unknown stream")
				return 400
			}
			delete(f.streams, stream)
			close(s.ops)
			return 0
		},
		StreamSynchronize: func(stream uintptr) int32 {
			f.mu.Lock()
			rc := f.enter("StreamSynchronize")
			s := f.streams[stream]
			f.mu.Unlock()
			switch {
			case rc != 0:
				return rc
			case s == nil:
				return 400
			case s.capture != nil:
				return 900
			}
			s.pending.Wait()
			return 0
		},
		StreamWaitEvent: func(stream, event uintptr, flags uint32) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if rc := f.enter("StreamWaitEvent"); rc != 0 {
				return rc
			}
			s, e := f.streams[stream], f.events[event]
			if s == nil || e == nil || flags != 0 {
				return 400
			}
			if e.capture != nil {
				// A stream that waits for a captured point joins the capture.
				if s.capture == nil {
					s.capture, s.tails = e.capture, nil
					e.capture.members[stream] = true
				}
				s.tails = union(s.tails, e.nodes)
				return 0
			}
			if s.capture != nil {
				return 900
			}
			done := e.done
			f.enqueue(s, func() { <-done })
			return 0
		},
		EventCreate: func(event *uintptr, flags uint32) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if rc := f.enter("EventCreate"); rc != 0 {
				return rc
			}
			done := make(chan struct{})
			close(done)
			id := f.id()
			f.events[id] = &fakeEvent{flags: flags, done: done}
			*event = id
			return 0
		},
		EventDestroy: func(event uintptr) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.events[event] == nil {
				f.misuse("EventDestroy of an unknown event")
				return 400
			}
			delete(f.events, event)
			return 0
		},
		EventRecord: func(event, stream uintptr) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if rc := f.enter("EventRecord"); rc != 0 {
				return rc
			}
			e, s := f.events[event], f.streams[stream]
			if e == nil || s == nil {
				return 400
			}
			if s.capture != nil {
				e.capture, e.nodes = s.capture, append([]int(nil), s.tails...)
				return 0
			}
			e.capture, e.nodes = nil, nil
			done := make(chan struct{})
			e.done = done
			f.enqueue(s, func() {
				f.mu.Lock()
				e.at = time.Now()
				f.mu.Unlock()
				close(done)
			})
			return 0
		},
		EventSynchronize: func(event uintptr) int32 {
			f.mu.Lock()
			rc := f.enter("EventSynchronize")
			e := f.events[event]
			f.mu.Unlock()
			if rc != 0 {
				return rc
			}
			if e == nil {
				f.mu.Lock()
				f.misuse("EventSynchronize of an unknown event")
				f.mu.Unlock()
				return 400
			}
			f.mu.Lock()
			done := e.done
			f.mu.Unlock()
			<-done
			return 0
		},
		EventElapsedTime: func(ms *float32, start, end uintptr) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if rc := f.enter("EventElapsedTime"); rc != 0 {
				return rc
			}
			a, b := f.events[start], f.events[end]
			if a == nil || b == nil || a.flags&eventDisableTiming != 0 || b.flags&eventDisableTiming != 0 || a.at.IsZero() || b.at.IsZero() {
				return 400
			}
			*ms = float32(b.at.Sub(a.at).Seconds() * 1000)
			return 0
		},
		StreamBeginCapture: func(stream uintptr, mode uint32) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if rc := f.enter("StreamBeginCapture"); rc != 0 {
				return rc
			}
			s := f.streams[stream]
			if s == nil || mode > 2 {
				return 1
			}
			if s.capture != nil {
				return 900
			}
			s.capture = &fakeCapture{origin: stream, members: map[uintptr]bool{stream: true}}
			s.tails = nil
			return 0
		},
		StreamEndCapture: func(stream uintptr, g *uintptr) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			rc := f.enter("StreamEndCapture")
			s := f.streams[stream]
			if s == nil || s.capture == nil || s.capture.origin != stream {
				return 1
			}
			c := s.capture
			// Every stream that joined must be joined back: its last nodes
			// are among the origin's last nodes or their ancestors.
			before := ancestors(c.nodes, s.tails)
			for m := range c.members {
				for _, n := range f.streams[m].tails {
					if !before[n] && rc == 0 {
						rc = 904
					}
				}
				f.streams[m].capture, f.streams[m].tails = nil, nil
			}
			*g = 0
			if c.invalid && rc == 0 {
				rc = 901
			}
			if rc != 0 {
				return rc
			}
			id := f.id()
			f.graphs[id] = &fakeGraph{nodes: c.nodes}
			*g = id
			return 0
		},
		GraphInstantiate: func(exec *uintptr, g uintptr, flags uint64) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if rc := f.enter("GraphInstantiate"); rc != 0 {
				return rc
			}
			gr := f.graphs[g]
			if gr == nil || flags != 0 {
				return 1
			}
			id := f.id()
			f.execs[id] = &fakeGraph{nodes: append([]fakeNode(nil), gr.nodes...)}
			*exec = id
			return 0
		},
		GraphLaunch: func(exec, stream uintptr) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if rc := f.enter("GraphLaunch"); rc != 0 {
				return rc
			}
			e, s := f.execs[exec], f.streams[stream]
			if e == nil || s == nil {
				return 400
			}
			if s.capture != nil {
				return 900
			}
			nodes := e.nodes
			f.enqueue(s, func() {
				for _, n := range nodes {
					if n.copy != nil {
						n.copy()
						continue
					}
					f.run("replay", n.rec)
				}
			})
			return 0
		},
		GraphExecDestroy: func(exec uintptr) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.execs[exec] == nil {
				f.misuse("GraphExecDestroy of an unknown graph")
				return 400
			}
			delete(f.execs, exec)
			return 0
		},
		GraphDestroy: func(g uintptr) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.graphs[g] == nil {
				f.misuse("GraphDestroy of an unknown graph")
				return 400
			}
			delete(f.graphs, g)
			return 0
		},
	}
	if f.dialect == "cuda" {
		d.OccupancyMaxActiveBlocks = func(blocks *int32, fn uintptr, blockSize int32, dynamicShared uint64) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if rc := f.enter("OccupancyMaxActiveBlocks"); rc != 0 {
				return rc
			}
			k := f.funcs[fn]
			if k == nil || blockSize <= 0 || dynamicShared > fakeMaxShare {
				return 1
			}
			// As the driver: above the function's dynamic shared memory
			// limit (48 KB until FuncSetAttribute raises it) no block fits.
			if dynamicShared > uint64(max(k.shared, DefaultSharedLimit)) {
				*blocks = 0
				return 0
			}
			*blocks = f.perSM * 256 / blockSize
			return 0
		}
		d.FuncSetAttribute = func(fn uintptr, attr int32, value int32) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if rc := f.enter("FuncSetAttribute"); rc != 0 {
				return rc
			}
			k := f.funcs[fn]
			if k == nil {
				return 400
			}
			if attr != 8 || value < 0 || value > fakeMaxShare {
				return 1
			}
			k.shared = value
			return 0
		}
		// An external record in a capture is a node that stamps the event
		// when the replay reaches it.
		d.EventRecordWithFlags = func(event, stream uintptr, flags uint32) int32 {
			f.mu.Lock()
			defer f.mu.Unlock()
			if rc := f.enter("EventRecordWithFlags"); rc != 0 {
				return rc
			}
			e, s := f.events[event], f.streams[stream]
			if e == nil || s == nil || flags != 1 || s.capture == nil {
				return 400
			}
			c := s.capture
			c.nodes = append(c.nodes, fakeNode{deps: s.tails, copy: func() {
				f.mu.Lock()
				e.at = time.Now()
				f.mu.Unlock()
			}})
			s.tails = []int{len(c.nodes) - 1}
			return 0
		}
		d.LaunchKernelEx = func(config unsafe.Pointer, fn uintptr, params, extra unsafe.Pointer) int32 {
			// CUlaunchConfig as cuda.h lays it out.
			u32 := func(off uintptr) uint32 { return *(*uint32)(unsafe.Add(config, off)) }
			stream := *(*uintptr)(unsafe.Add(config, 32))
			attrs := *(*unsafe.Pointer)(unsafe.Add(config, 40))
			programmatic, cluster := false, uint32(0)
			for i := range uintptr(u32(48)) {
				a := unsafe.Add(attrs, 72*i)
				switch id := *(*uint32)(a); id {
				case 6: // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
					programmatic = *(*int32)(unsafe.Add(a, 8)) != 0
				case 4: // CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: x, y, z
					dims := *(*[3]uint32)(unsafe.Add(a, 8))
					if dims[1] != 1 || dims[2] != 1 || dims[0] == 0 || u32(0)%dims[0] != 0 {
						return 1 // CUDA_ERROR_INVALID_VALUE: the cluster does not divide the grid
					}
					cluster = dims[0]
				default:
					return 1
				}
			}
			return f.launch("LaunchKernelEx", fn, [3]uint32{u32(0), u32(4), u32(8)}, [3]uint32{u32(12), u32(16), u32(20)}, u32(24), stream, params, extra, programmatic, cluster)
		}
	}
	return d
}

// syncOp runs a synchronous copy or memset on the legacy null stream.
func (f *fake) syncOp(name string, op func() int32) int32 {
	f.mu.Lock()
	rc := f.enter(name)
	capturing := f.capturing()
	f.mu.Unlock()
	switch {
	case rc != 0:
		return rc
	case capturing:
		f.mu.Lock()
		f.misuse("%s during a capture", name)
		f.mu.Unlock()
		return 900
	}
	f.quiesce()
	f.mu.Lock()
	defer f.mu.Unlock()
	return op()
}

// asyncOp enqueues what check returns on a stream, or, on a capturing
// stream, records it as a graph node when the copy may be captured (to or
// from pinned host memory: a step graph's copies).
func (f *fake) asyncOp(name string, stream uintptr, capturable bool, check func() (func(), int32)) int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rc := f.enter(name); rc != 0 {
		return rc
	}
	s := f.streams[stream]
	if s == nil {
		f.misuse("%s on an unknown stream", name)
		return 400
	}
	if s.capture != nil && !capturable {
		f.misuse("%s during a capture", name)
		return 900
	}
	op, rc := check()
	if rc != 0 {
		if s.capture != nil {
			s.capture.invalid = true
		}
		return rc
	}
	if c := s.capture; c != nil {
		c.nodes = append(c.nodes, fakeNode{copy: op, deps: s.tails})
		s.tails = []int{len(c.nodes) - 1}
		return 0
	}
	f.enqueue(s, op)
	return 0
}

// launch checks and enqueues (or captures) a launch.
func (f *fake) launch(name string, fn uintptr, grid, block [3]uint32, shared uint32, stream uintptr, params, extra unsafe.Pointer, programmatic bool, cluster uint32) int32 {
	f.mu.Lock()
	defer f.mu.Unlock()
	if rc := f.enter(name); rc != 0 {
		if s := f.streams[stream]; s != nil && s.capture != nil {
			s.capture.invalid = true
		}
		return rc
	}
	k, s := f.funcs[fn], f.streams[stream]
	if k == nil || s == nil {
		return 400
	}
	limit := uint32(DefaultSharedLimit)
	if f.dialect == "cuda" {
		limit = uint32(max(k.shared, DefaultSharedLimit))
	} else {
		limit = 64 << 10 // gfx11 LDS, no opt-in
	}
	if grid[0]*grid[1]*grid[2] == 0 || block[0]*block[1]*block[2] == 0 || block[0]*block[1]*block[2] > 1024 || shared > limit {
		return 9
	}
	if extra != nil || (k.nargs > 0 && params == nil) {
		return 1
	}
	r := launchRec{fn: k, grid: grid, block: block, shared: shared, programmatic: programmatic, cluster: cluster}
	ptrs := unsafe.Slice((*unsafe.Pointer)(params), k.nargs)
	for _, p := range ptrs {
		r.args = append(r.args, *(*uint64)(p))
	}
	if c := s.capture; c != nil {
		c.nodes = append(c.nodes, fakeNode{rec: r, deps: s.tails})
		s.tails = []int{len(c.nodes) - 1}
		return 0
	}
	f.enqueue(s, func() { f.run("launch", r) })
	return 0
}

// ancestors is the set of nodes, tails and everything they depend on.
func ancestors(nodes []fakeNode, tails []int) map[int]bool {
	out := map[int]bool{}
	var walk func(n int)
	walk = func(n int) {
		if out[n] {
			return
		}
		out[n] = true
		for _, d := range nodes[n].deps {
			walk(d)
		}
	}
	for _, t := range tails {
		walk(t)
	}
	return out
}

func union(a, b []int) []int {
	seen := map[int]bool{}
	var out []int
	for _, x := range append(append([]int(nil), a...), b...) {
		if !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	sort.Ints(out)
	return out
}

// graphEdges describes the nodes of the graph exec was instantiated from:
// "kernel <- dep, dep", in capture order.
func (f *fake) graphEdges(g *graph) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	nodes := f.execs[g.exec].nodes
	for _, n := range nodes {
		name := func(n fakeNode) string {
			if n.copy != nil {
				return "copy"
			}
			return n.rec.fn.name
		}
		var deps []string
		for _, d := range n.deps {
			deps = append(deps, name(nodes[d]))
		}
		out = append(out, name(n)+" <- "+strings.Join(deps, ", "))
	}
	return out
}
