package gpu

import (
	"cmp"
	"errors"
	"fmt"
	goruntime "runtime"
	"runtime/debug"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/aimaproject/aimac/runtime"
)

// Bulk upload: the sources (the weights, mapped from the checkpoint) are
// cut into chunks (DefaultUploadChunk bytes), consecutive across jobs, that a few
// workers take in order. A worker copies its chunk into one of its two
// pinned staging buffers (the copy's page faults are the disk reads, so the
// reads run in parallel), enqueues the device copies on its own stream and
// records an event; before it refills that buffer it waits for the event,
// so one chunk is read while the previous one crosses the bus.
//
// The backend's mutex guards its state and is held around driver calls
// that enqueue, create or free; the copies into staging and the waits run
// without it (the driver is thread-safe, and the context is current on each
// worker's locked OS thread), so the workers do not serialize. Close waits
// for an UploadAll in progress, whose workers stop at their next chunk.

// DefaultUploadChunk is the size of a staging buffer and the unit of work
// of UploadAll unless SetUploadChunk says otherwise.
const DefaultUploadChunk = 64 << 20

// SetUploadChunk sets the size of UploadAll's staging buffers and chunks
// (at least 1 byte; 0 restores DefaultUploadChunk).
func (b *Backend) SetUploadChunk(n int64) {
	b.mu.Lock()
	b.chunk = n
	b.mu.Unlock()
}

// maxUploadWorkers bounds the workers, and so the pinned memory: two
// staging buffers each.
const maxUploadWorkers = 8

// uploadWorkers is how many workers copy n chunks: min(8, GOMAXPROCS), at
// least 2, at most one a chunk.
func uploadWorkers(n int) int {
	w := max(min(maxUploadWorkers, goruntime.GOMAXPROCS(0)), 2)
	return max(min(w, n), 1)
}

// UploadAll copies every job to the device with several workers (see
// runtime.BulkUploader). It waits for the backend's launches first, and
// returns after every copy has completed; the staging buffers and streams
// it used are freed by then.
func (b *Backend) UploadAll(jobs []runtime.UploadJob, progress func(done int64)) error {
	b.uploads.RLock()
	defer b.uploads.RUnlock()
	u := &uploader{b: b, jobs: jobs, dst: make([]uint64, len(jobs)), start: make([]int64, len(jobs)+1)}
	for i, j := range jobs {
		p, err := b.device(j.Dst, int64(len(j.Src)))
		if err != nil {
			return fmt.Errorf("%s: upload %s: %w", b.d.Dialect, j.Name, err)
		}
		u.dst[i] = p
		u.start[i+1] = u.start[i] + int64(len(j.Src))
	}
	u.total = u.start[len(jobs)]
	if err := b.drain(); err != nil || u.total == 0 {
		return err
	}
	b.mu.Lock()
	u.chunk = cmp.Or(max(b.chunk, 0), DefaultUploadChunk)
	b.mu.Unlock()
	chunks := (u.total + u.chunk - 1) / u.chunk
	u.size = min(u.chunk, u.total)
	n := uploadWorkers(int(min(chunks, maxUploadWorkers)))
	done := make(chan int64, 4*n)
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() { u.work(done) })
	}
	go func() {
		wg.Wait()
		close(done)
	}()
	var sum int64
	for b := range done {
		sum += b
		if progress != nil {
			progress(sum)
		}
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.err
}

// drain waits for the backend's stream, so that the copies are ordered
// after every launch already enqueued.
func (b *Backend) drain() error {
	unlock := b.enter()
	defer unlock()
	if err := b.ready(true); err != nil {
		return err
	}
	if rc := b.d.StreamSynchronize(b.stream); rc != 0 {
		return b.async("synchronize before upload", rc)
	}
	return nil
}

// uploader is one UploadAll: the jobs and what the workers share.
type uploader struct {
	b     *Backend
	jobs  []runtime.UploadJob
	dst   []uint64 // device address of each job
	start []int64  // start[i]: job i's first byte among all sources; start[len(jobs)] is the total
	total int64
	chunk int64 // bytes of a chunk
	size  int64 // bytes of a staging buffer

	next   atomic.Int64 // the next chunk to take
	failed atomic.Bool
	mu     sync.Mutex
	err    error // the first error
}

// stopped reports whether the workers should stop: one failed, or the
// backend is closing.
func (u *uploader) stopped() bool { return u.failed.Load() || u.b.closing.Load() }

func (u *uploader) fail(err error) {
	u.mu.Lock()
	if u.err == nil {
		u.err = err
	}
	u.mu.Unlock()
	u.failed.Store(true)
}

// piece is the part of one job inside a chunk.
type piece struct {
	job int   // the job
	off int64 // offset in the job's source (and destination)
	at  int64 // offset in the chunk (and staging buffer)
	n   int64
}

// pieces appends the parts of the jobs that bytes [lo, hi) of all sources
// cover; start is as in uploader.
func pieces(out []piece, start []int64, lo, hi int64) []piece {
	jobs := len(start) - 1
	// The first job that ends after lo (empty jobs end where they start).
	j := sort.Search(jobs, func(j int) bool { return start[j+1] > lo })
	for pos := lo; pos < hi && j < jobs; j++ {
		end := min(start[j+1], hi)
		if end <= pos {
			continue
		}
		out = append(out, piece{job: j, off: pos - start[j], at: pos - lo, n: end - pos})
		pos = end
	}
	return out
}

// stage is a pinned staging buffer of a worker.
type stage struct {
	host   unsafe.Pointer // pinned (driver memory, never Go's); nil until first used
	ev     uintptr        // recorded after the copies from host
	n      int64          // bytes of the copies in flight from host; 0 when idle
	jobs   [2]int         // first and last job of those copies, for errors
	events bool           // ev exists
}

// worker is one worker's stream and staging buffers.
type worker struct {
	u      *uploader
	stream uintptr
	stages [2]stage
	pieces []piece
}

// work takes chunks until there are none or a worker failed, then waits
// for its copies, frees what it allocated and reports the bytes done.
func (u *uploader) work(done chan<- int64) {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	b := u.b
	if rc := b.d.MakeCurrent(); rc != 0 {
		u.fail(b.fail("make the device current", rc))
		return
	}
	w := &worker{u: u}
	for i := 0; !u.stopped(); i++ {
		lo := (u.next.Add(1) - 1) * u.chunk
		if lo >= u.total {
			break
		}
		s := &w.stages[i%2]
		if err := w.wait(s, done); err != nil {
			u.fail(err)
			break
		}
		if err := w.prepare(s); err != nil {
			u.fail(err)
			break
		}
		if err := w.copyChunk(s, lo, min(lo+u.chunk, u.total)); err != nil {
			u.fail(err)
			break
		}
	}
	if w.stream != 0 {
		rc := b.d.StreamSynchronize(w.stream)
		for k := range w.stages {
			s := &w.stages[k]
			if rc != 0 && s.n > 0 {
				u.fail(w.asyncErr(s, rc))
			}
			if rc == 0 && s.n > 0 && !u.stopped() {
				done <- s.n
			}
			s.n = 0
		}
	}
	w.release()
}

// wait waits for the copies from s and reports their bytes.
func (w *worker) wait(s *stage, done chan<- int64) error {
	if s.n == 0 {
		return nil
	}
	if rc := w.u.b.d.EventSynchronize(s.ev); rc != 0 {
		return w.asyncErr(s, rc)
	}
	done <- s.n
	s.n = 0
	return nil
}

// asyncErr names the jobs of a failed copy from s.
func (w *worker) asyncErr(s *stage, rc int32) error {
	jobs := w.u.jobs
	what := jobs[s.jobs[0]].Name
	if s.jobs[1] != s.jobs[0] {
		what += " … " + jobs[s.jobs[1]].Name
	}
	return w.u.b.fail("upload "+what, rc)
}

// prepare creates the worker's stream and the staging buffer s on first use.
func (w *worker) prepare(s *stage) error {
	if s.host != nil {
		return nil
	}
	b := w.u.b
	unlock := b.enter()
	defer unlock()
	if err := b.ready(false); err != nil {
		return err
	}
	if w.stream == 0 {
		if rc := b.d.StreamCreate(&w.stream, streamDefault); rc != 0 {
			w.stream = 0
			return b.fail("create an upload stream", rc)
		}
	}
	if !s.events {
		if rc := b.d.EventCreate(&s.ev, eventBlockingSync|eventDisableTiming); rc != 0 {
			return b.fail("create an upload event", rc)
		}
		s.events = true
	}
	var p unsafe.Pointer
	if rc := b.d.HostAlloc(&p, uint64(w.u.size), 0); rc != 0 {
		return b.fail(fmt.Sprintf("pin a %d-byte staging buffer", w.u.size), rc)
	}
	s.host = p
	return nil
}

// copyChunk stages bytes [lo, hi) of all sources in s and enqueues their
// copies to the device, then the event.
func (w *worker) copyChunk(s *stage, lo, hi int64) error {
	u := w.u
	w.pieces = pieces(w.pieces[:0], u.start, lo, hi)
	buf := unsafe.Slice((*byte)(s.host), hi-lo)
	for _, p := range w.pieces {
		if u.stopped() {
			return nil
		}
		if err := read(buf[p.at:p.at+p.n], u.jobs[p.job].Src[p.off:p.off+p.n]); err != nil {
			return fmt.Errorf("%s: upload %s: %w", u.b.d.Dialect, u.jobs[p.job].Name, err)
		}
	}
	b := u.b
	unlock := b.enter()
	defer unlock()
	if err := b.ready(true); err != nil {
		return err
	}
	for _, p := range w.pieces {
		rc := b.d.MemcpyHtoDAsync(u.dst[p.job]+uint64(p.off), unsafe.Add(s.host, p.at), uint64(p.n), w.stream)
		if rc != 0 {
			return b.fail("upload "+u.jobs[p.job].Name, rc)
		}
		// Counted from the first copy enqueued: the stream is drained at
		// the end in any case.
		s.n += p.n
		s.jobs = [2]int{w.pieces[0].job, p.job}
	}
	if rc := b.d.EventRecord(s.ev, w.stream); rc != 0 {
		return b.fail("record an upload event", rc)
	}
	return nil
}

// release frees the worker's staging buffers, events and stream; its
// stream has been synchronized.
func (w *worker) release() {
	b := w.u.b
	unlock := b.enter()
	defer unlock()
	if b.closed {
		return
	}
	for k := range w.stages {
		s := &w.stages[k]
		if s.events {
			b.d.EventDestroy(s.ev)
			s.events = false
		}
		if s.host != nil {
			b.d.HostFree(s.host)
			s.host = nil
		}
	}
	if w.stream != 0 {
		b.d.StreamDestroy(w.stream)
		w.stream = 0
	}
}

// read copies src into dst. src is usually mapped from a file: a read error
// there (a file truncated since it was mapped, a failing disk) faults, and
// becomes an error instead of a crash.
func read(dst, src []byte) (err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(interface{ Addr() uintptr })
			if !ok {
				panic(r)
			}
			err = fmt.Errorf("reading the source faulted at %#x: %w", f.Addr(), errFault)
		}
	}()
	copy(dst, src)
	return nil
}

var errFault = errors.New("the mapped file could not be read (truncated since it was opened, or an I/O error)")
