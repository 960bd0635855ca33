// Package sums keeps a model directory's manifest of sha256 sums, so a
// damaged or changed file is caught before it is served.
//
// The manifest is DIR/SHA256SUMS in the text format of GNU sha256sum, so
// `cd DIR && sha256sum -c SHA256SUMS` checks it as well:
//
//	<64 hex digits><space><space or *><path>
//
// one line per file, paths relative to DIR with slashes, sorted. A path
// holding a backslash or a newline is written escaped (\\ and \n) on a
// line that begins with a backslash, as sha256sum does. The manifest covers
// every regular file under DIR (symbolic links to files followed) except
// itself and names beginning with a dot (.cache/, .gitattributes: download
// tools' own files).
package sums

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
)

// File is the manifest's name inside the directory.
const File = "SHA256SUMS"

// Entry is one file's sum.
type Entry struct {
	Path string // slash-separated, relative to the directory
	Sum  string // 64 lowercase hex digits
}

// Parse reads a manifest. Every malformed line is reported, by number, in
// one error; an empty manifest is valid (it lists no files).
func Parse(data []byte) ([]Entry, error) {
	var out []Entry
	var probs []string
	seen := map[string]int{}
	lines := strings.Split(string(data), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1] // the final newline (optional, as for sha256sum)
	}
	for i, line := range lines {
		n := i + 1
		e, err := parseLine(line)
		if err != nil {
			probs = append(probs, fmt.Sprintf("line %d: %v", n, err))
			continue
		}
		if first, dup := seen[e.Path]; dup {
			probs = append(probs, fmt.Sprintf("line %d: %s is listed again (first on line %d)", n, quote(e.Path), first))
			continue
		}
		seen[e.Path] = n
		out = append(out, e)
	}
	if len(probs) > 0 {
		return nil, fmt.Errorf("%s: %s", File, strings.Join(probs, "; "))
	}
	return out, nil
}

func parseLine(line string) (Entry, error) {
	escaped := strings.HasPrefix(line, `\`)
	if escaped {
		line = line[1:]
	}
	if len(line) < 64+2 {
		return Entry{}, errors.New("want <64 hex digits>, two spaces (or a space and *), and a file name")
	}
	sum, sep, name := line[:64], line[64:66], line[66:]
	if _, err := hex.DecodeString(sum); err != nil {
		return Entry{}, fmt.Errorf("%q is not a sha256 sum of 64 hex digits", clip(sum))
	}
	if sep != "  " && sep != " *" {
		return Entry{}, errors.New("want two spaces (or a space and *) after the sum")
	}
	if escaped {
		var err error
		if name, err = unescape(name); err != nil {
			return Entry{}, err
		}
	}
	if !fs.ValidPath(name) || name == "." {
		return Entry{}, fmt.Errorf("%s is not a file name relative to the directory", quote(name))
	}
	if name == File {
		return Entry{}, fmt.Errorf("%s cannot list itself", File)
	}
	return Entry{Path: name, Sum: strings.ToLower(sum)}, nil
}

// unescape undoes sha256sum's escapes of a file name: \\ and \n.
func unescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 == len(s) {
			return "", errors.New("the escaped file name ends in a lone backslash")
		}
		i++
		switch s[i] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		default:
			return "", fmt.Errorf("unknown escape \\%c in the file name", s[i])
		}
	}
	return b.String(), nil
}

// Format writes entries as a manifest, sorted by path.
func Format(entries []Entry) []byte {
	sorted := slices.Clone(entries)
	slices.SortFunc(sorted, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	var b bytes.Buffer
	for _, e := range sorted {
		name := e.Path
		if strings.ContainsAny(name, "\\\n") {
			b.WriteByte('\\')
			name = strings.NewReplacer(`\`, `\\`, "\n", `\n`).Replace(name)
		}
		b.WriteString(e.Sum)
		b.WriteString("  ")
		b.WriteString(name)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// List is the files a manifest of dir covers, sorted.
func List(dir string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path == dir {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if rel == File || d.IsDir() {
			return nil
		}
		mode := d.Type()
		if mode&fs.ModeSymlink != 0 {
			fi, err := os.Stat(path)
			if err != nil {
				return err
			}
			mode = fi.Mode()
		}
		if mode.IsRegular() {
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(out)
	return out, nil
}

// Options tune hashing.
type Options struct {
	// Jobs is how many files are hashed at once; ≤ 0 means GOMAXPROCS.
	Jobs int
	// Progress, when not nil, gets the bytes hashed so far and the total,
	// from one goroutine at a time.
	Progress func(done, total int64)
}

// chunk is how much of a file is hashed between checks of the context and
// progress reports.
const chunk = 4 << 20

// Hash sums the files (paths relative to dir) in parallel. A file that
// cannot be read is an error naming it.
func Hash(ctx context.Context, dir string, paths []string, o Options) ([]Entry, error) {
	res := hashAll(ctx, dir, paths, o)
	out := make([]Entry, len(paths))
	var errs []error
	for i, r := range res {
		if r.err != nil {
			errs = append(errs, r.err)
		}
		out[i] = Entry{Path: paths[i], Sum: r.sum}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

type result struct {
	sum string
	err error
}

// hashAll hashes every path, a result per path in order.
func hashAll(ctx context.Context, dir string, paths []string, o Options) []result {
	res := make([]result, len(paths))
	sizes := make([]int64, len(paths))
	var total int64
	for i, p := range paths {
		if fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); err == nil {
			sizes[i] = fi.Size()
			total += fi.Size()
		}
	}
	var mu sync.Mutex
	var done int64
	report := func(n int64) {
		if o.Progress == nil {
			return
		}
		mu.Lock()
		done += n
		o.Progress(done, total)
		mu.Unlock()
	}
	jobs := o.Jobs
	if jobs <= 0 {
		jobs = goruntime.GOMAXPROCS(0)
	}
	jobs = max(1, min(jobs, len(paths)))
	// Largest files first, so one big shard does not start last.
	order := make([]int, len(paths))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return int(min(1, max(-1, sizes[b]-sizes[a]))) })
	next := make(chan int)
	var wg sync.WaitGroup
	for range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, chunk)
			for i := range next {
				res[i].sum, res[i].err = hashFile(ctx, filepath.Join(dir, filepath.FromSlash(paths[i])), paths[i], buf, report)
			}
		}()
	}
	for _, i := range order {
		if ctx.Err() != nil {
			res[i].err = ctx.Err()
			continue
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return res
}

func hashFile(ctx context.Context, path, name string, buf []byte, report func(int64)) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	defer f.Close()
	h := sha256.New()
	for {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		n, err := f.Read(buf)
		h.Write(buf[:n])
		report(int64(n))
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// Write hashes every file of dir and writes the manifest atomically (a
// temporary file renamed over it), returning its entries.
func Write(ctx context.Context, dir string, o Options) ([]Entry, error) {
	paths, err := List(dir)
	if err != nil {
		return nil, err
	}
	entries, err := Hash(ctx, dir, paths, o)
	if err != nil {
		return nil, err
	}
	if err := writeAtomic(filepath.Join(dir, File), Format(entries)); err != nil {
		return nil, err
	}
	return entries, nil
}

func writeAtomic(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return err
	}
	if err = f.Chmod(0o644); err != nil {
		return err
	}
	if err = f.Sync(); err != nil {
		return err
	}
	if err = f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

// Report is what Verify checked.
type Report struct {
	Files    int      // files listed in the manifest
	Bytes    int64    // bytes hashed
	Problems []string // one line each: "<path>: <what>"
}

// Error lists every problem Verify found.
type Error struct {
	Dir      string
	Problems []string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s: %d problem(s) against %s:\n  %s", e.Dir, len(e.Problems), File, strings.Join(e.Problems, "\n  "))
}

// ErrNoManifest is returned (wrapped) by Verify for a directory without a
// manifest.
var ErrNoManifest = errors.New("no " + File)

// Verify hashes every file the manifest of dir lists and holds it to its
// sum, and reports missing files and files the manifest does not list. On
// any problem it returns the report and an *Error listing them all.
func Verify(ctx context.Context, dir string, o Options) (*Report, error) {
	data, err := os.ReadFile(filepath.Join(dir, File))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w (write one with `aima-engine verify --model-dir %s --write-manifest` from a copy known to be good)", dir, ErrNoManifest, dir)
	}
	if err != nil {
		return nil, err
	}
	entries, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	present, err := List(dir)
	if err != nil {
		return nil, err
	}
	rep := &Report{Files: len(entries)}
	listed := map[string]bool{}
	var check []string
	var want []string
	for _, e := range entries {
		listed[e.Path] = true
		fi, err := os.Stat(filepath.Join(dir, filepath.FromSlash(e.Path)))
		switch {
		case errors.Is(err, fs.ErrNotExist):
			rep.Problems = append(rep.Problems, e.Path+": missing")
		case err != nil:
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: %v", e.Path, err))
		case !fi.Mode().IsRegular():
			rep.Problems = append(rep.Problems, e.Path+": not a regular file")
		default:
			check, want = append(check, e.Path), append(want, e.Sum)
			rep.Bytes += fi.Size()
		}
	}
	for _, p := range present {
		if !listed[p] {
			rep.Problems = append(rep.Problems, p+": not listed in "+File)
		}
	}
	for i, r := range hashAll(ctx, dir, check, o) {
		switch {
		case r.err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case r.err != nil:
			rep.Problems = append(rep.Problems, r.err.Error())
		case r.sum != want[i]:
			rep.Problems = append(rep.Problems, fmt.Sprintf("%s: sha256 %s, %s says %s (damaged or changed)", check[i], r.sum, File, want[i]))
		}
	}
	slices.Sort(rep.Problems)
	if len(rep.Problems) > 0 {
		return rep, &Error{Dir: dir, Problems: rep.Problems}
	}
	return rep, nil
}

func quote(s string) string { return fmt.Sprintf("%q", s) }

func clip(s string) string {
	if len(s) > 16 {
		return s[:16] + "…"
	}
	return s
}
