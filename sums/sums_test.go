package sums

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/aimaproject/aimac/synth"
)

func sumOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

var (
	a = sumOf("a")
	b = sumOf("b")
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    []Entry
		wantErr string
	}{
		{"empty", "", nil, ""},
		{"two", a + "  config.json\n" + b + " *sub/model.safetensors\n", []Entry{{"config.json", a}, {"sub/model.safetensors", b}}, ""},
		{"no final newline", a + "  x", []Entry{{"x", a}}, ""},
		{"upper case sum", strings.ToUpper(a) + "  x\n", []Entry{{"x", a}}, ""},
		{"escaped", `\` + a + `  dir\\with\nnewline` + "\n", []Entry{{"dir\\with\nnewline", a}}, ""},
		{"literal backslash", a + `  back\slash` + "\n", []Entry{{`back\slash`, a}}, ""},
		{"short", "abc  x\n", nil, "SHA256SUMS: line 1: want <64 hex digits>"},
		{"not hex", strings.Repeat("g", 64) + "  x\n", nil, `line 1: "gggggggggggggggg…" is not a sha256 sum`},
		{"one space", a + " x\n", nil, "line 1: want two spaces"},
		{"bad separator", a + "\tx y\n", nil, "line 1: want two spaces"},
		{"blank line", a + "  x\n\n", nil, "line 2: want <64 hex digits>"},
		{"absolute", a + "  /etc/passwd\n", nil, `line 1: "/etc/passwd" is not a file name relative to the directory`},
		{"dot dot", a + "  ../x\n", nil, `"../x" is not a file name`},
		{"itself", a + "  SHA256SUMS\n", nil, "line 1: SHA256SUMS cannot list itself"},
		{"duplicate", a + "  x\n" + b + "  x\n", nil, `line 2: "x" is listed again (first on line 1)`},
		{"bad escape", `\` + a + `  x\t` + "\n", nil, `line 1: unknown escape \t`},
		{"every problem", "x\n" + a + "  ok\n" + a + "  /abs\n", nil, "line 1: want <64 hex digits>, two spaces (or a space and *), and a file name; line 3: "},
	}
	for _, tt := range tests {
		got, err := Parse([]byte(tt.in))
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: error %v, want %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tt.name, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: (-want +got)\n%s", tt.name, diff)
		}
	}
}

func TestFormat(t *testing.T) {
	got := string(Format([]Entry{{"z", b}, {"a\nb", a}, {"m", a}}))
	want := `\` + a + `  a\nb` + "\n" + a + "  m\n" + b + "  z\n"
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got)\n%s", diff)
	}
}

// FuzzParse: no input panics the parser, and what it accepts survives
// Format and Parse unchanged.
func FuzzParse(f *testing.F) {
	f.Add([]byte(a + "  config.json\n" + b + " *model.safetensors\n"))
	f.Add([]byte(`\` + a + `  x\\y\nz` + "\n"))
	f.Add([]byte(a + "  ../x\n\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := Parse(data)
		if err != nil {
			return
		}
		again, err := Parse(Format(entries))
		if err != nil {
			t.Fatalf("Format of %q does not parse: %v", entries, err)
		}
		byPath := func(es []Entry) map[string]string {
			m := map[string]string{}
			for _, e := range es {
				m[e.Path] = e.Sum
			}
			return m
		}
		if diff := cmp.Diff(byPath(entries), byPath(again)); diff != "" {
			t.Fatalf("round trip (-want +got)\n%s", diff)
		}
	})
}

func tiny(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny")
	if err := synth.Write(synth.Options{Preset: "tiny", Seed: 1, Out: dir}); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestWriteVerify: a written manifest verifies (and GNU sha256sum agrees
// with it when installed); a flipped byte in a shard, a missing file and an
// unlisted file are each caught and named.
func TestWriteVerify(t *testing.T) {
	dir := tiny(t)
	// Files a download tool leaves are not covered.
	if err := os.MkdirAll(filepath.Join(dir, ".cache", "huggingface"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".cache", "huggingface", "x.lock"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var last, total int64
	entries, err := Write(ctx, dir, Options{Jobs: 3, Progress: func(done, all int64) { last, total = done, all }})
	if err != nil {
		t.Fatal(err)
	}
	files, _ := List(dir)
	if len(entries) != len(files) || len(files) < 4 || last != total || total == 0 {
		t.Fatalf("%d entries for %d files %v; progress %d of %d", len(entries), len(files), files, last, total)
	}
	for _, f := range files {
		if strings.HasPrefix(f, ".") || f == File {
			t.Errorf("the manifest covers %s", f)
		}
	}
	if leftovers, _ := filepath.Glob(filepath.Join(dir, ".SHA256SUMS.tmp-*")); len(leftovers) > 0 {
		t.Errorf("temporary files left: %v", leftovers)
	}
	rep, err := Verify(ctx, dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Files != len(files) || rep.Bytes != total || len(rep.Problems) != 0 {
		t.Errorf("report %+v", rep)
	}
	if sha, err := exec.LookPath("sha256sum"); err == nil {
		cmd := exec.Command(sha, "-c", "--quiet", File)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c: %v\n%s", err, out)
		}
	}

	shards, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(shards) == 0 {
		t.Fatal("no shards")
	}
	shard := shards[len(shards)-1]
	data, err := os.ReadFile(shard)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)/2] ^= 0x01
	if err := os.WriteFile(shard, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "extra.bin"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	rep, err = Verify(ctx, dir, Options{Jobs: 2})
	var se *Error
	if !errors.As(err, &se) {
		t.Fatalf("Verify of a damaged directory: %v", err)
	}
	name := filepath.Base(shard)
	want := []string{
		"extra.bin: not listed in SHA256SUMS",
		name + ": sha256 ",
		"tokenizer.json: missing",
	}
	if len(se.Problems) != len(want) {
		t.Fatalf("problems %q, want %d", se.Problems, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(se.Problems[i], w) {
			t.Errorf("problem %d: %q, want %q…", i, se.Problems[i], w)
		}
	}
	if !strings.Contains(se.Problems[1], "(damaged or changed)") || rep == nil || len(rep.Problems) != 3 {
		t.Errorf("shard problem %q, report %+v", se.Problems[1], rep)
	}
	if !strings.Contains(err.Error(), name) {
		t.Errorf("error does not name the shard: %v", err)
	}
}

func TestVerifyErrors(t *testing.T) {
	dir := t.TempDir()
	_, err := Verify(context.Background(), dir, Options{})
	if !errors.Is(err, ErrNoManifest) || !strings.Contains(err.Error(), "--write-manifest") {
		t.Errorf("no manifest: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, File), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(context.Background(), dir, Options{}); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("malformed manifest: %v", err)
	}
	// Cancellation stops hashing with the context's error.
	d := tiny(t)
	if _, err := Write(context.Background(), d, Options{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Verify(ctx, d, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if _, err := Write(ctx, d, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled write: %v", err)
	}
}
