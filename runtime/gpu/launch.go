package gpu

import (
	"fmt"
	"unsafe"

	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/runtime"
)

// The pinned block: runtime.PackArgs' values and pointers, then the
// extended launch's CUlaunchConfig and its CUlaunchAttribute array.
const (
	configAt    = 16 * runtime.MaxKernelArgs
	attrsAt     = configAt + 64
	maxAttrs    = 4
	pinnedBytes = attrsAt + maxAttrs*launchAttrBytes
)

// launchConfig is CUlaunchConfig (cuda.h, CUDA 12) as C lays it out on a
// 64-bit machine: seven unsigned ints, the stream at offset 32, the
// attribute array at 40, their count at 48; 56 bytes.
type launchConfig struct {
	grid     [3]uint32
	block    [3]uint32
	shared   uint32
	stream   uintptr
	attrs    uintptr // *CUlaunchAttribute, in the pinned block
	numAttrs uint32
}

// launchAttr is CUlaunchAttribute: the CUlaunchAttributeID, 4 bytes of
// padding, then the 64-byte CUlaunchAttributeValue union; 72 bytes.
type launchAttr struct {
	id    uint32
	_     uint32
	value [64]byte
}

const launchAttrBytes = 72

// CUlaunchAttributeID values.
const (
	// attrProgrammaticSerialization is
	// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION; its value is
	// the int programmaticStreamSerializationAllowed.
	attrProgrammaticSerialization = 6
	// attrClusterDimension is CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION; its
	// value is the cluster's x, y and z in blocks (unsigned ints).
	attrClusterDimension = 4
)

// Launch enqueues one kernel: a device pointer per operand (in catalogue
// order), then n = rows, then the parameter block's device address. The
// dynamic values come from the device block (SetParams), not from p.
func (b *Backend) Launch(k *plan.Kernel, l *plan.Launch, args []runtime.Ref, rows int, _ *runtime.Params) error {
	return b.launch(k, l, args, rows)
}

func (b *Backend) launch(k *plan.Kernel, l *plan.Launch, args []runtime.Ref, rows int) error {
	dialect := b.d.Dialect
	vals, err := runtime.KernelArgs(k, args, rows, b.block, func(r runtime.Ref) (uint64, error) { return b.device(r, 0) })
	if err != nil {
		return fmt.Errorf("%s: %w", dialect, err)
	}
	grid, block, err := runtime.LaunchShape(l)
	if err != nil {
		return fmt.Errorf("%s: kernel %s: %w", dialect, k.Name, err)
	}
	if rows == 0 { // nothing to do; a negative count names its slot (KernelABI 5)
		return nil
	}
	unlock := b.enter()
	defer unlock()
	if err := b.ready(false); err != nil {
		return err
	}
	f, ok := b.funcs[k.Name]
	if !ok {
		return fmt.Errorf("%s: kernel %s was not loaded", dialect, k.Name)
	}
	if err := b.raiseShared(k.Name, f, l.SharedBytes); err != nil {
		return err
	}
	// The driver copies the values when the launch is enqueued.
	ptrs := runtime.PackArgs(b.pinned, vals)
	var rc int32
	switch {
	case b.attrs.Zero() && l.Cluster <= 1:
		rc = b.d.LaunchKernel(f.fn, grid[0], grid[1], grid[2], block[0], block[1], block[2],
			uint32(l.SharedBytes), b.launchOn, ptrs, nil)
	case b.d.LaunchKernelEx == nil:
		return fmt.Errorf("%s: kernel %s: clusters of %d blocks need an extended launch, which this driver does not have", dialect, k.Name, l.Cluster)
	default:
		cfg := b.launchConfig(grid, block, uint32(l.SharedBytes), b.attrs, l.Cluster)
		rc = b.d.LaunchKernelEx(cfg, f.fn, ptrs, nil)
	}
	b.last = k.Name
	if b.capturing {
		b.captured++
	}
	if rc != 0 {
		return b.fail(fmt.Sprintf("launch %s (grid %v, block %v)", k.Name, grid, block), rc)
	}
	return nil
}

// raiseShared raises a function's dynamic shared memory limit to bytes
// when it needs more than the default (FuncSetAttribute), once per size.
func (b *Backend) raiseShared(name string, f *function, bytes int) error {
	if bytes <= DefaultSharedLimit || bytes <= f.shared || b.d.FuncSetAttribute == nil {
		return nil
	}
	if rc := b.d.FuncSetAttribute(f.fn, funcAttrMaxDynamicShared, int32(bytes)); rc != 0 {
		return b.fail(fmt.Sprintf("kernel %s: raise the dynamic shared memory limit to %d bytes", name, bytes), rc)
	}
	f.shared = bytes
	return nil
}

// launchConfig writes the extended launch's configuration into the pinned
// block and returns its address; b.mu is held.
// cluster > 1 launches clusters of that many blocks along x.
func (b *Backend) launchConfig(grid, block [3]uint32, shared uint32, a runtime.LaunchAttrs, cluster int) unsafe.Pointer {
	attrs := unsafe.Slice((*launchAttr)(unsafe.Add(b.pinned, attrsAt)), maxAttrs)
	n := 0
	if a.ProgrammaticSerialization {
		attrs[n] = launchAttr{id: attrProgrammaticSerialization}
		*(*int32)(unsafe.Pointer(&attrs[n].value[0])) = 1
		n++
	}
	if cluster > 1 {
		attrs[n] = launchAttr{id: attrClusterDimension}
		dims := (*[3]uint32)(unsafe.Pointer(&attrs[n].value[0]))
		*dims = [3]uint32{uint32(cluster), 1, 1}
		n++
	}
	cfg := (*launchConfig)(unsafe.Add(b.pinned, configAt))
	*cfg = launchConfig{grid: grid, block: block, shared: shared, stream: b.launchOn,
		attrs: uintptr(unsafe.Add(b.pinned, attrsAt)), numAttrs: uint32(n)}
	return unsafe.Pointer(cfg)
}

// WithLaunchAttrs runs fn with attrs applied to each launch it makes (the
// extended launch). A driver without one refuses attributes before fn runs.
func (b *Backend) WithLaunchAttrs(attrs runtime.LaunchAttrs, fn func() error) error {
	unlock := b.enter()
	if err := b.ready(false); err != nil {
		unlock()
		return err
	}
	if !attrs.Zero() && b.d.LaunchKernelEx == nil {
		unlock()
		return fmt.Errorf("%s: launch attributes %+v need an extended launch, which this driver does not have", b.d.Dialect, attrs)
	}
	if !b.attrs.Zero() {
		unlock()
		return fmt.Errorf("%s: launch attributes are already set", b.d.Dialect)
	}
	b.attrs = attrs
	unlock()
	defer func() {
		unlock := b.enter()
		b.attrs = runtime.LaunchAttrs{}
		unlock()
	}()
	return fn()
}

// Fork enqueues main's launches on the backend's stream and side's on the
// second one: the second stream waits for an event recorded on the first,
// takes side's launches and records the join event, which the first stream
// waits for after main's. Inside Capture this forks and joins the graph;
// outside it the two run concurrently.
func (b *Backend) Fork(main, side func() error) error {
	unlock := b.enter()
	if err := b.ready(false); err != nil {
		unlock()
		return err
	}
	if b.forking {
		unlock()
		return fmt.Errorf("%s: Fork inside Fork", b.d.Dialect)
	}
	d := b.d
	if rc := d.EventRecord(b.forked, b.stream); rc != 0 {
		unlock()
		return b.fail("record the fork event", rc)
	}
	if rc := d.StreamWaitEvent(b.side, b.forked, 0); rc != 0 {
		unlock()
		return b.fail("second stream waits for the fork", rc)
	}
	b.forking, b.launchOn = true, b.side
	unlock()
	serr := side()

	unlock = b.enter()
	b.launchOn = b.stream
	if err := b.ready(false); err != nil {
		unlock()
		return err
	}
	// The join is recorded even when side failed: a capture must end with
	// every stream joined.
	rc := d.EventRecord(b.joined, b.side)
	unlock()
	var merr error
	if rc == 0 && serr == nil {
		merr = main()
	}

	unlock = b.enter()
	defer unlock()
	b.forking = false
	if err := b.ready(false); err != nil {
		return err
	}
	if rc != 0 {
		return b.fail("record the join event", rc)
	}
	if rc := d.StreamWaitEvent(b.stream, b.joined, 0); rc != 0 {
		return b.fail("wait for the second stream", rc)
	}
	if serr != nil {
		return serr
	}
	return merr
}

// ArgValues are the values a launch of k passes (runtime.PersistentBackend): what
// a decode_persistent kernel's item table holds for it.
func (b *Backend) ArgValues(k *plan.Kernel, args []runtime.Ref, rows int) ([]uint64, error) {
	vals, err := runtime.KernelArgs(k, args, rows, b.block, func(r runtime.Ref) (uint64, error) { return b.device(r, 0) })
	if err != nil {
		return nil, fmt.Errorf("%s: %w", b.d.Dialect, err)
	}
	return vals, nil
}

// ResidentBlocks is how many blocks of k the device holds at once
// (runtime.PersistentBackend): the occupancy of its multiprocessors times
// their count; 0 where the driver does not say, −1 where not one fits.
func (b *Backend) ResidentBlocks(k *plan.Kernel, threads, shared int) (int, error) {
	unlock := b.enter()
	defer unlock()
	if err := b.ready(false); err != nil {
		return 0, err
	}
	f, ok := b.funcs[k.Name]
	if !ok {
		return 0, fmt.Errorf("%s: kernel %s was not loaded", b.d.Dialect, k.Name)
	}
	if b.d.OccupancyMaxActiveBlocks == nil || b.multiprocessors <= 0 {
		return 0, nil
	}
	// The driver counts no block that needs more dynamic shared memory
	// than the function's limit: raise it first, as the launch will.
	if err := b.raiseShared(k.Name, f, shared); err != nil {
		return 0, err
	}
	var per int32
	if rc := b.d.OccupancyMaxActiveBlocks(&per, f.fn, int32(threads), uint64(shared)); rc != 0 {
		return 0, b.fail("kernel "+k.Name+": occupancy", rc)
	}
	if per <= 0 {
		return -1, nil // not one block fits: the launch would fail
	}
	return int(per) * b.multiprocessors, nil
}
