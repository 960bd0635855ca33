package runtime

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// Copier is implemented by backends that copy between their own buffers
// (a device-to-device copy on a GPU). With it, snapshots can stay in
// device memory: taking one and restoring it are copies at the device's
// bandwidth instead of transfers over the host link (a 128K-token context
// is ≈ 2.7 GB of KV cache and state).
type Copier interface {
	Copy(dst, src Ref, n int64) error
}

// ErrReleased reports the restore of a snapshot after Release.
var ErrReleased = errors.New("snapshot was released")

// Snapshot is the engine's sequence state at one position: the GDN
// recurrent and conv states, the KV cache rows written so far and the
// logits that predict the next token. Its content is immutable: restoring
// it never changes it, so one snapshot can seed many requests. It lives in
// device memory while the engine's device budget holds it
// (Engine.SetSnapshotDeviceBytes) and in host memory otherwise; the engine
// moves the least recently used device snapshots to the host when a new
// one needs the room, which changes where the bytes are, never what they
// are.
type Snapshot struct {
	pos    int
	logits []float32
	parts  []snapPart // the plan's state and KV buffers, in plan order
	total  int64      // bytes of the parts

	mu       sync.Mutex
	host     map[string][]byte // the parts in host memory; nil while on the device
	dev      Mem               // the parts packed in one device buffer; nil on the host
	eng      *Engine           // the engine whose device budget holds dev
	lru      *list.Element     // dev's place in the engine's list
	released bool
}

// snapPart is one buffer of a snapshot: its bytes and, on the device, its
// offset in the packed buffer.
type snapPart struct {
	name   string
	bytes  int64
	offset int64
	kv     bool // KV cache rows (the rest are states)
}

// Restored is what a restore did: where the snapshot was and the bytes it
// moved into the engine's buffers.
type Restored struct {
	Tier   Tier
	Copied int64 // bytes copied (device to device, or uploaded from the host)
	// Adopted are the KV bytes the KV cache already held: the snapshot was
	// taken from this engine's current sequence (an exact repeat, a
	// conversation's next turn), so its rows were not copied.
	Adopted int64
}

// Tier is where a snapshot's state is.
type Tier string

// The tiers.
const (
	TierDevice Tier = "device"
	TierHost   Tier = "host"
)

// maxHeld bounds Engine.held: a long conversation in one sequence adds a
// snapshot a turn.
const maxHeld = 64

// Position is the number of tokens the snapshot holds.
func (s *Snapshot) Position() int { return s.pos }

// Bytes is the host memory the snapshot takes now (its logits, and its
// state unless that is on the device).
func (s *Snapshot) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := int64(4 * len(s.logits))
	if s.host != nil {
		n += s.total
	}
	return n
}

// DeviceBytes is the device memory the snapshot takes now.
func (s *Snapshot) DeviceBytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dev != nil {
		return s.total
	}
	return 0
}

// Logits predict the token after the snapshot's last one.
func (s *Snapshot) Logits() []float32 { return s.logits }

// kvRowBytes is the size of one position of a KV buffer.
func kvRowBytes(shape []int64, bytes int64) int64 {
	if len(shape) == 0 || shape[0] == 0 {
		return 0
	}
	return bytes / shape[0]
}

// SetSnapshotDeviceBytes bounds the device memory that snapshots may hold
// (0, the default: every snapshot in host memory). It has an effect only
// on backends that implement Copier; lowering it moves device snapshots
// to the host until the rest fit.
func (e *Engine) SetSnapshotDeviceBytes(n int64) error {
	_, end, err := e.begin(context.Background())
	if err != nil {
		return err
	}
	defer end()
	e.snaps.limit = max(n, 0)
	return e.snapRoom(0)
}

// SnapshotDevice reports the device memory snapshots hold and its bound
// (both 0 where the backend cannot copy on the device).
func (e *Engine) SnapshotDevice() (used, limit int64) {
	e.snaps.mu.Lock()
	defer e.snaps.mu.Unlock()
	if _, ok := e.be.(Copier); !ok {
		return 0, 0
	}
	return e.snaps.used, e.snaps.limit
}

// snapshots is the engine's device tier: the bound, the bytes held and the
// device snapshots from most to least recently used.
type snapshots struct {
	mu    sync.Mutex // guards used and list for SnapshotDevice; the step lock guards the rest
	limit int64
	used  int64
	list  list.List // of *Snapshot
}

// Snapshot copies the sequence state. logits are the ones the last step
// returned (they predict the next token).
func (e *Engine) Snapshot(logits []float32) (*Snapshot, error) {
	_, end, err := e.begin(context.Background())
	if err != nil {
		return nil, err
	}
	defer end()
	if e.broken {
		return nil, ErrBroken
	}
	if e.pos == 0 {
		return nil, errors.New("snapshot of an empty sequence")
	}
	s := &Snapshot{pos: e.pos, logits: append([]float32(nil), logits...)}
	for _, b := range e.plan.Buffers {
		n := b.Bytes
		switch b.Role {
		case "state":
		case "kv":
			n = int64(e.pos) * kvRowBytes(b.Shape, b.Bytes)
		default:
			continue
		}
		s.parts = append(s.parts, snapPart{name: b.Name, bytes: n, offset: s.total, kv: b.Role == "kv"})
		s.total += align256(n)
	}
	if ok, err := e.snapToDevice(s); err != nil {
		return nil, err
	} else if !ok {
		if s.host, err = downloadParts(e.be, s.parts, func(p snapPart) Ref { return Ref{Mem: e.globals[p.name]} }); err != nil {
			return nil, fmt.Errorf("snapshot: %w", err)
		}
	}
	e.hold(s)
	return s, nil
}

// hold records that the KV cache holds s's rows: they were copied from it
// just now, or into it by a restore, and every later step writes rows at
// or past the position, never below.
func (e *Engine) hold(s *Snapshot) {
	if len(e.held) >= maxHeld {
		e.held = slices.Delete(e.held, 0, 1)
	}
	e.held = append(e.held, s)
}

// downloadParts copies a snapshot's parts, each from where at says, into
// host memory.
func downloadParts(be Backend, parts []snapPart, at func(snapPart) Ref) (map[string][]byte, error) {
	host := map[string][]byte{}
	for _, p := range parts {
		buf := make([]byte, p.bytes)
		if err := be.Download(buf, at(p)); err != nil {
			return nil, fmt.Errorf("%s: %w", p.name, err)
		}
		host[p.name] = buf
	}
	return host, nil
}

// align256 keeps every part of a packed device snapshot on a 256-byte
// boundary, as the device copies like.
func align256(n int64) int64 { return (n + 255) &^ 255 }

// snapToDevice copies the state into a new device buffer when the device
// tier can hold it (moving older snapshots to the host for room); false
// when the snapshot must go to the host instead.
func (e *Engine) snapToDevice(s *Snapshot) (bool, error) {
	cp, ok := e.be.(Copier)
	if !ok || s.total > e.snaps.limit || s.total == 0 {
		return false, nil
	}
	if err := e.snapRoom(s.total); err != nil {
		return false, err
	}
	m, err := e.be.Alloc(s.total)
	if err != nil {
		return false, nil // out of device memory: the host holds it
	}
	for _, p := range s.parts {
		if err := cp.Copy(Ref{Mem: m, Offset: p.offset}, Ref{Mem: e.globals[p.name]}, p.bytes); err != nil {
			e.be.Free(m)
			return false, fmt.Errorf("snapshot %s: %w", p.name, err)
		}
	}
	s.dev, s.eng = m, e
	e.snaps.mu.Lock()
	s.lru = e.snaps.list.PushFront(s)
	e.snaps.used += s.total
	e.snaps.mu.Unlock()
	return true, nil
}

// snapRoom moves the least recently used device snapshots to the host
// until need more bytes fit in the bound. The caller holds the step lock.
func (e *Engine) snapRoom(need int64) error {
	for {
		e.snaps.mu.Lock()
		back := e.snaps.list.Back()
		full := e.snaps.used+need > e.snaps.limit
		e.snaps.mu.Unlock()
		if !full || back == nil {
			return nil
		}
		if err := back.Value.(*Snapshot).toHost(); err != nil {
			return err
		}
	}
}

// toHost copies a device snapshot's state to host memory and frees its
// device buffer. The caller holds its engine's step lock.
func (s *Snapshot) toHost() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dev == nil {
		return nil
	}
	host, err := downloadParts(s.eng.be, s.parts, func(p snapPart) Ref { return Ref{Mem: s.dev, Offset: p.offset} })
	if err != nil {
		return fmt.Errorf("snapshot to host: %w", err)
	}
	s.host = host
	s.dropDevice()
	return nil
}

// dropDevice frees the device buffer and leaves the engine's list. The
// caller holds s.mu and the step lock.
func (s *Snapshot) dropDevice() {
	e := s.eng
	// A restore's copy from the buffer may still be queued: let it finish.
	_ = e.be.Sync()
	e.be.Free(s.dev)
	e.snaps.mu.Lock()
	e.snaps.list.Remove(s.lru)
	e.snaps.used -= s.total
	e.snaps.mu.Unlock()
	s.dev, s.eng, s.lru = nil, nil, nil
}

// dropSnapshots frees the device tier when the engine closes: its
// snapshots cannot be restored after that (ErrReleased).
func (e *Engine) dropSnapshots() {
	e.snaps.mu.Lock()
	var all []*Snapshot
	for el := e.snaps.list.Front(); el != nil; el = el.Next() {
		all = append(all, el.Value.(*Snapshot))
	}
	e.snaps.list.Init()
	e.snaps.used = 0
	e.snaps.mu.Unlock()
	for _, s := range all {
		s.mu.Lock()
		e.be.Free(s.dev)
		s.dev, s.eng, s.lru, s.host, s.released = nil, nil, nil, nil, true
		s.mu.Unlock()
	}
}

// Release frees the snapshot's memory (device and host) once nothing will
// restore it: the prefix cache calls it on eviction, the server for the
// snapshots of a request that failed. Restoring it afterwards fails with
// ErrReleased. Safe to call more than once.
func (s *Snapshot) Release() {
	s.mu.Lock()
	e := s.eng
	s.mu.Unlock()
	if e != nil {
		// The device buffer is freed under its engine's step lock, so no
		// restore is copying from it. A closed engine has freed it already.
		if _, end, err := e.begin(context.Background()); err == nil {
			defer end()
		} else {
			s.mu.Lock()
			s.dev, s.eng, s.lru, s.host, s.released = nil, nil, nil, nil, true
			s.mu.Unlock()
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dev != nil {
		s.dropDevice()
	}
	s.host, s.released = nil, true
}

// Restore puts the engine at the snapshot's position with its state; the
// KV rows past it are left as they are, never read before being written.
// When the KV cache still holds the snapshot's rows (it was taken from, or
// last restored into, the current sequence, and nothing has rewound it
// since), only the states are copied: an exact repeat of a 128K-token
// prompt moves its 63 MB of states, not its 2.7 GB of KV rows. The device
// copies are queued on the backend's stream: the next step runs after them.
func (e *Engine) Restore(s *Snapshot) (Restored, error) {
	_, end, err := e.begin(context.Background())
	if err != nil {
		return Restored{}, err
	}
	defer end()
	if s.pos > e.plan.ContextTokens {
		return Restored{}, fmt.Errorf("snapshot of %d tokens exceeds the %d-token context", s.pos, e.plan.ContextTokens)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.released {
		return Restored{}, ErrReleased
	}
	if s.dev != nil && s.eng != e {
		return Restored{}, errors.New("snapshot is in another engine's device memory")
	}
	have := map[string]bool{}
	for _, p := range s.parts {
		have[p.name] = true
	}
	for _, b := range e.plan.Buffers {
		if (b.Role == "state" || b.Role == "kv") && !have[b.Name] {
			e.broken = true
			return Restored{}, fmt.Errorf("snapshot lacks buffer %s (made by another plan?)", b.Name)
		}
	}
	adopt := !e.broken && slices.Contains(e.held, s)
	r := Restored{Tier: TierHost}
	if s.dev != nil {
		r.Tier = TierDevice
	}
	for _, p := range s.parts {
		dst, ok := e.globals[p.name]
		if !ok || dst.Size() < p.bytes {
			e.broken = true
			return Restored{}, fmt.Errorf("snapshot buffer %s does not fit this engine (made by another plan?)", p.name)
		}
		if p.kv && adopt {
			r.Adopted += p.bytes
			continue
		}
		if s.dev != nil {
			err = e.be.(Copier).Copy(Ref{Mem: dst}, Ref{Mem: s.dev, Offset: p.offset}, p.bytes)
		} else {
			err = e.be.Upload(Ref{Mem: dst}, s.host[p.name])
		}
		if err != nil {
			e.broken, e.held = true, nil
			return Restored{}, fmt.Errorf("restore %s: %w", p.name, err)
		}
		r.Copied += p.bytes
	}
	if s.dev != nil {
		e.snaps.mu.Lock()
		e.snaps.list.MoveToFront(s.lru)
		e.snaps.mu.Unlock()
	}
	if adopt {
		// Steps from here write rows at s.pos and past: the snapshots
		// beyond it lose their rows, those up to it keep them.
		e.held = slices.DeleteFunc(e.held, func(h *Snapshot) bool { return h.pos > s.pos })
	} else {
		e.held = nil
		e.hold(s)
	}
	e.pos, e.broken = s.pos, false
	return r, nil
}
