package loader

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/synth"
)

// TestProgressOnlyWhenAsked: the weights' bar goes to Options.Progress and
// ends cleared; without it nothing is written to stdout or stderr.
func TestProgressOnlyWhenAsked(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	if err := synth.Write(synth.Options{Preset: "tiny", Seed: 1, Out: dir}); err != nil {
		t.Fatal(err)
	}
	var bar bytes.Buffer
	l, err := Open(Options{ModelDir: dir, Buckets: []int{8}, ContextTokens: 64, Progress: &bar})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	out := bar.String()
	if !strings.Contains(out, "weights") || !strings.HasSuffix(out, "\r") {
		t.Errorf("progress output %q: want the weights bar, cleared", out)
	}

	// Without Progress: nothing on stdout or stderr.
	stdout, stderr := os.Stdout, os.Stderr
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	os.Stdout, os.Stderr = f, f
	l, err = Open(Options{ModelDir: dir, Buckets: []int{8}, ContextTokens: 64})
	os.Stdout, os.Stderr = stdout, stderr
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if fi.Size() != 0 {
		t.Errorf("%d bytes written without Progress", fi.Size())
	}
}
