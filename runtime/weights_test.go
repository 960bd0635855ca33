package runtime_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/checkpoint"
	"github.com/aimaproject/aimac/plan"
	"github.com/aimaproject/aimac/planner"
	"github.com/aimaproject/aimac/runtime"
)

// copying is the CPU backend without in-place binding: every weight is
// copied, as on a GPU.
type copying struct{ runtime.Backend }

// failing fails the upload of some bytes.
type failing struct {
	runtime.Backend
	src []byte
}

func (f failing) Upload(dst runtime.Ref, src []byte) error {
	if bytes.Equal(src, f.src) {
		return errors.New("device lost")
	}
	return f.Backend.Upload(dst, src)
}

// bulk records UploadAll's jobs and reports progress in uneven steps.
type bulk struct {
	runtime.Backend
	jobs  []runtime.UploadJob
	fail  string // a job that fails
	calls int
}

func (b *bulk) UploadAll(jobs []runtime.UploadJob, progress func(done int64)) error {
	b.calls++
	b.jobs = slices.Clone(jobs)
	var done int64
	for _, j := range jobs {
		if j.Name == b.fail {
			return errors.New("cuda: upload " + j.Name + ": device lost")
		}
		if err := b.Backend.Upload(j.Dst, j.Src); err != nil {
			return err
		}
		progress(done + int64(len(j.Src)/2)) // mid-way, then done
		done += int64(len(j.Src))
		progress(done)
	}
	return nil
}

// weightsOf returns the tiny model's plan and checkpoint.
func weightsOf(t *testing.T) (*plan.Plan, *checkpoint.Checkpoint) {
	t.Helper()
	p := open(t, []int{8}, 64).Plan
	ck, err := checkpoint.Open(tiny(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	return p, ck
}

// wantBytes is what the engine should hold for a weight buffer: the
// checkpoint's bytes, widened to f32 for f32 buffers.
func wantBytes(t *testing.T, ck *checkpoint.Checkpoint, b plan.Buffer) []byte {
	t.Helper()
	info, err := ck.Resolve(b.Tensor)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ck.Bytes(info.Name)
	if err != nil {
		t.Fatal(err)
	}
	if b.DType != "f32" {
		return raw
	}
	vals, err := checkpoint.Float32s(info, raw)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, 4*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
	}
	return out
}

// progressLog records progress calls and checks them: increasing, the same
// total each time, ending at it.
type progressLog struct {
	done  []int64
	total int64
}

func (l *progressLog) record(done, total int64) {
	l.done = append(l.done, done)
	l.total = total
}

func (l *progressLog) check(t *testing.T, total int64) {
	t.Helper()
	if l.total != total || len(l.done) == 0 || l.done[len(l.done)-1] != total || !slices.IsSorted(l.done) {
		t.Errorf("progress %v of %d, want increasing to %d", l.done, l.total, total)
	}
}

func weightBytes(t *testing.T, p *plan.Plan, ck *checkpoint.Checkpoint) (total int64, n int) {
	for _, b := range p.Buffers {
		if b.Role == "weight" && b.Derive == nil {
			total += int64(len(wantBytes(t, ck, b)))
			n++
		}
	}
	return total, n
}

// TestBulkUpload: a backend with UploadAll gets every weight in one call,
// with the right bytes, and the engine runs as it does on weights bound in
// place; progress rises to the bytes of all weights.
func TestBulkUpload(t *testing.T) {
	p, ck := weightsOf(t)
	total, n := weightBytes(t, p, ck)
	be := &bulk{Backend: runtime.NewCPU()}
	var log progressLog
	e, err := runtime.NewEngine(p, be, runtime.CheckpointWeightsProgress(ck, log.record))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	log.check(t, total)
	if be.calls != 1 || len(be.jobs) != n {
		t.Fatalf("%d UploadAll calls with %d jobs, want 1 with %d", be.calls, len(be.jobs), n)
	}
	byName := map[string]runtime.UploadJob{}
	for _, j := range be.jobs {
		byName[j.Name] = j
	}
	for _, b := range p.Buffers {
		if b.Role != "weight" || b.Derive != nil {
			continue
		}
		j, ok := byName[b.Name]
		if !ok {
			t.Fatalf("weight %s was not uploaded", b.Name)
		}
		if want := wantBytes(t, ck, b); !bytes.Equal(j.Src, want) || j.Dst.Mem.Size() != int64(len(want)) || j.Dst.Offset != 0 {
			t.Errorf("weight %s: %d bytes to a %d-byte buffer, want its %d bytes", b.Name, len(j.Src), j.Dst.Mem.Size(), len(want))
		}
	}

	ref, err := runtime.NewEngine(p, runtime.NewCPU(), runtime.CheckpointWeights(ck))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	tokens := prompt(11, e.Vocab())
	want, got := teacherForced(t, ref, tokens), teacherForced(t, e, tokens)
	for i := range want {
		if !slices.Equal(want[i], got[i]) {
			t.Fatalf("position %d: logits differ from the engine on bound weights", i)
		}
	}
}

// TestUploadOneByOne: without UploadAll every weight goes through Upload;
// on the CPU, which binds matrices in place, progress counts them at once.
func TestUploadOneByOne(t *testing.T) {
	p, ck := weightsOf(t)
	total, _ := weightBytes(t, p, ck)
	for _, be := range []runtime.Backend{copying{runtime.NewCPU()}, runtime.NewCPU()} {
		var log progressLog
		e, err := runtime.NewEngine(p, be, runtime.CheckpointWeightsProgress(ck, log.record))
		if err != nil {
			t.Fatal(err)
		}
		log.check(t, total)
		if _, err := e.Prefill(t.Context(), prompt(5, e.Vocab()), nil); err != nil {
			t.Fatal(err)
		}
		e.Close()
	}
}

// TestUploadFailureNamesTheWeight: a failed upload names the weight, by
// Upload and by UploadAll.
func TestUploadFailureNamesTheWeight(t *testing.T) {
	p, ck := weightsOf(t)
	// A weight whose bytes no other has.
	var victim plan.Buffer
	seen := map[string]int{}
	for _, b := range p.Buffers {
		if b.Role == "weight" {
			seen[string(wantBytes(t, ck, b))]++
		}
	}
	for _, b := range p.Buffers {
		if b.Role == "weight" && seen[string(wantBytes(t, ck, b))] == 1 {
			victim = b
			break
		}
	}
	if victim.Name == "" {
		t.Fatal("no weight with bytes of its own")
	}
	_, err := runtime.NewEngine(p, failing{copying{runtime.NewCPU()}, wantBytes(t, ck, victim)}, runtime.CheckpointWeights(ck))
	if err == nil || !strings.Contains(err.Error(), "weight "+victim.Name+": device lost") {
		t.Errorf("Upload: error %v, want it to name %s", err, victim.Name)
	}
	_, err = runtime.NewEngine(p, &bulk{Backend: runtime.NewCPU(), fail: victim.Name}, runtime.CheckpointWeights(ck))
	if err == nil || !strings.Contains(err.Error(), victim.Name) {
		t.Errorf("UploadAll: error %v, want it to name %s", err, victim.Name)
	}
}

// TestConcatenatedWeights: a plan with the projections concatenated
// (fusion on) gets each concatenated weight as one buffer with one upload
// per part, at the part's rows, of that tensor's checkpoint bytes, and every
// checkpoint tensor once; a part whose rows disagree with its tensor's
// shape is refused with both named.
func TestConcatenatedWeights(t *testing.T) {
	ck, err := checkpoint.Open(tiny(t))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	m, err := planner.FromCheckpoint("tiny", ck)
	if err != nil {
		t.Fatal(err)
	}
	p, err := planner.Plan(m, planner.Options{Target: "cpu", Buckets: []int{8}, ContextTokens: 64, Fusion: planner.FuseOn})
	if err != nil {
		t.Fatal(err)
	}
	be := &bulk{Backend: runtime.NewCPU()}
	e, err := runtime.NewEngine(p, be, runtime.CheckpointWeights(ck))
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	jobs := map[string][]runtime.UploadJob{}
	for _, j := range be.jobs {
		jobs[j.Name] = append(jobs[j.Name], j)
	}
	concatenated := 0
	for _, b := range p.Buffers {
		if len(b.Parts) == 0 {
			continue
		}
		concatenated++
		js := jobs[b.Name]
		if len(js) != len(b.Parts) {
			t.Fatalf("%s: %d uploads for %d parts", b.Name, len(js), len(b.Parts))
		}
		rowBytes := b.Bytes / b.Shape[0]
		for i, part := range b.Parts {
			want := wantBytes(t, ck, plan.Buffer{Tensor: part.Tensor, DType: b.DType})
			if j := js[i]; !bytes.Equal(j.Src, want) || j.Dst.Offset != part.Rows[0]*rowBytes || j.Dst.Mem.Size() != b.Bytes {
				t.Errorf("%s part %s: %d bytes at %d of %d, want %d at %d of %d", b.Name, part.Tensor,
					len(j.Src), j.Dst.Offset, j.Dst.Mem.Size(), len(want), part.Rows[0]*rowBytes, b.Bytes)
			}
		}
	}
	// Every layer's input projections: the tiny fixture's GDN and attention layers both align.
	if concatenated != m.Config.NumHiddenLayers {
		t.Errorf("%d concatenated weights, want one per layer (%d)", concatenated, m.Config.NumHiddenLayers)
	}

	for i, b := range p.Buffers {
		if len(b.Parts) > 1 {
			p.Buffers[i].Parts[0].Rows[1]--
			p.Buffers[i].Parts[1].Rows[0]--
			_, err := runtime.NewEngine(p, runtime.NewCPU(), runtime.CheckpointWeights(ck))
			if err == nil || !strings.Contains(err.Error(), "weight "+b.Name+" part "+b.Parts[0].Tensor+": checkpoint shape") {
				t.Errorf("a part one row short: error %v", err)
			}
			break
		}
	}
}
