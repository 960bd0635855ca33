// Package checkpoint reads, validates and writes safetensors checkpoints of
// the qwen3_5_moe text model: config.json, model.safetensors.index.json and
// the shards it names.
//
// Open maps every shard read-only and checks everything it can before any
// byte of weights is used: each header field, the index against the shard
// headers, and every tensor's name, dtype and shape against the tensor table
// arch derives from the config. All problems are collected into one *Error,
// a line each, so a damaged download is diagnosed in one run.
package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/aimaproject/aimac/arch"
)

// File names inside a checkpoint directory.
const (
	ConfigFile = "config.json"
	IndexFile  = "model.safetensors.index.json"
	SingleFile = "model.safetensors" // the one shard of an unsharded checkpoint
)

// Checkpoint is an opened, fully validated checkpoint.
type Checkpoint struct {
	Dir        string
	ConfigJSON []byte // raw config.json
	IndexJSON  []byte // raw index, nil for a single model.safetensors
	Config     *arch.Config
	// Prefix is arch.NestedPrefix or arch.FlatPrefix, detected from which
	// embed_tokens name exists.
	Prefix string
	// Tensors holds every tensor of every shard: the text model's and the
	// ignored ones (vision tower, MTP head).
	Tensors map[string]TensorInfo

	shards map[string]*shard // by file name
}

// shard is one mapped safetensors file.
type shard struct {
	name      string
	data      []byte // the whole file; nil once unmapped
	dataStart int64
	tensors   []TensorInfo // sorted by Begin; nil when the header is unusable
}

// Error lists every problem found in a checkpoint, one line each:
// "<file>: <what>" or "<file>: tensor <name>: <what>".
type Error struct {
	Dir      string
	Problems []string
}

// maxErrorLines bounds Error's text; Problems keeps every line.
const maxErrorLines = 200

func (e *Error) Error() string {
	if len(e.Problems) == 1 {
		return fmt.Sprintf("checkpoint %s: %s", e.Dir, e.Problems[0])
	}
	var b strings.Builder
	fmt.Fprintf(&b, "checkpoint %s: %d problems:", e.Dir, len(e.Problems))
	for i, p := range e.Problems {
		if i == maxErrorLines {
			fmt.Fprintf(&b, "\n  … and %d more", len(e.Problems)-i)
			break
		}
		b.WriteString("\n  ")
		b.WriteString(p)
	}
	return b.String()
}

// Bytes returns the tensor's raw bytes: a slice of the mapping, valid until
// Close. Its capacity ends with the tensor so an append cannot write into the
// read-only mapping.
func (c *Checkpoint) Bytes(name string) ([]byte, error) {
	info, ok := c.Tensors[name]
	if !ok {
		return nil, fmt.Errorf("checkpoint %s: no tensor %s", c.Dir, show(name))
	}
	s := c.shards[info.File]
	if s == nil || s.data == nil {
		return nil, fmt.Errorf("checkpoint %s: tensor %s: checkpoint is closed", c.Dir, show(name))
	}
	lo, hi := s.dataStart+info.Begin, s.dataStart+info.End
	return s.data[lo:hi:hi], nil
}

// Resolve returns the TensorInfo of a text-model tensor named relative to
// Prefix ("layers.3.self_attn.q_proj.weight", "embed_tokens.weight").
// "lm_head.weight" is at the root, or is embed_tokens when the config ties
// the embeddings.
func (c *Checkpoint) Resolve(rel string) (TensorInfo, error) {
	name := c.Prefix + rel
	if rel == arch.LMHead {
		name = arch.LMHead
		if c.Config != nil && c.Config.TieWordEmbeddings {
			name = c.Prefix + "embed_tokens.weight"
		}
	}
	info, ok := c.Tensors[name]
	if !ok {
		return TensorInfo{}, fmt.Errorf("checkpoint %s: no tensor %s", c.Dir, show(name))
	}
	return info, nil
}

// Close unmaps every shard; byte slices from Bytes are invalid afterwards.
func (c *Checkpoint) Close() error {
	if c == nil {
		return nil
	}
	var errs []error
	for _, name := range sortedKeys(c.shards) {
		s := c.shards[name]
		if s.data == nil {
			continue
		}
		if err := unmapFile(s.data); err != nil {
			errs = append(errs, fmt.Errorf("unmap %s: %w", name, err))
		}
		s.data = nil
	}
	return errors.Join(errs...)
}

// Open reads, maps and validates the checkpoint in dir. Every problem is
// returned at once as *Error; nothing is left mapped on failure.
func Open(dir string) (*Checkpoint, error) {
	o := &opener{
		c:      &Checkpoint{Dir: dir, Tensors: map[string]TensorInfo{}, shards: map[string]*shard{}},
		broken: map[string]bool{},
	}
	o.open()
	if len(o.probs) > 0 {
		o.c.Close()
		return nil, &Error{Dir: dir, Problems: o.probs}
	}
	return o.c, nil
}

// How Open found the shards.
const (
	modeIndex  = iota // from a usable index
	modeSingle        // no index: model.safetensors alone
	modeScan          // the index is unusable: every *.safetensors in dir, for header checks
)

type opener struct {
	c         *Checkpoint
	probs     []string
	mode      int
	weightMap map[string]string // modeIndex only
	order     []string          // shard names, sorted
	broken    map[string]bool   // shards missing or with an unusable header
}

func (o *opener) add(file, format string, args ...any) {
	o.probs = append(o.probs, file+": "+fmt.Sprintf(format, args...))
}

func (o *opener) addTensor(file, name, format string, args ...any) {
	o.add(file, "tensor %s: %s", show(name), fmt.Sprintf(format, args...))
}

func (o *opener) path(name string) string { return filepath.Join(o.c.Dir, name) }

func (o *opener) open() {
	if fi, err := os.Stat(o.c.Dir); err != nil || !fi.IsDir() {
		o.probs = append(o.probs, "not a readable directory")
		return
	}
	o.readConfig()
	o.findShards()
	for _, name := range o.order {
		o.openShard(name)
	}
	o.checkIndex()
	o.collect()
	if o.c.Config != nil {
		o.checkModel()
	}
}

func (o *opener) readConfig() {
	data, err := os.ReadFile(o.path(ConfigFile))
	if err != nil {
		o.add(ConfigFile, "%s", fileError(err))
		return
	}
	o.c.ConfigJSON = data
	cfg, err := arch.ParseConfig(data)
	if err != nil {
		for _, line := range errorLines(err) {
			o.add(ConfigFile, "%s", line)
		}
		return
	}
	o.c.Config = cfg
}

func (o *opener) findShards() {
	data, err := os.ReadFile(o.path(IndexFile))
	if errors.Is(err, fs.ErrNotExist) {
		o.mode = modeSingle
		o.order = []string{SingleFile}
		return
	}
	if err == nil {
		o.c.IndexJSON = data
		wm, _, probs := parseIndex(data)
		for _, p := range probs {
			o.add(IndexFile, "%s", p)
		}
		if len(probs) == 0 {
			o.mode = modeIndex
			o.weightMap = wm
			for _, f := range wm {
				o.order = append(o.order, f)
			}
			slices.Sort(o.order)
			o.order = slices.Compact(o.order)
			return
		}
	} else {
		o.add(IndexFile, "%s", fileError(err))
	}
	// The index is unusable: still check the headers of the shards present.
	o.mode = modeScan
	entries, _ := os.ReadDir(o.c.Dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".safetensors") {
			o.order = append(o.order, e.Name())
		}
	}
}

func (o *opener) openShard(name string) {
	o.broken[name] = true
	f, err := os.Open(o.path(name))
	if err != nil {
		switch {
		case !errors.Is(err, fs.ErrNotExist):
			o.add(name, "%s", fileError(err))
		case o.mode == modeIndex:
			n := 0
			for _, file := range o.weightMap {
				if file == name {
					n++
				}
			}
			o.add(name, "missing (named by %s for %d tensors)", IndexFile, n)
		default:
			o.add(name, "missing (and no %s)", IndexFile)
		}
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		o.add(name, "%s", fileError(err))
		return
	}
	if !fi.Mode().IsRegular() {
		o.add(name, "not a regular file")
		return
	}
	size := fi.Size()
	s := &shard{name: name}
	if size >= 8 { // shorter files are reported by parseHeader; mmap rejects length 0
		if int64(int(size)) != size {
			o.add(name, "%d bytes is too large to map", size)
			return
		}
		if s.data, err = mapFile(f, int(size)); err != nil {
			o.add(name, "mmap: %v", err)
			return
		}
		o.c.shards[name] = s
	}
	tensors, _, start, probs := parseHeader(s.data, size)
	for _, p := range probs {
		o.add(name, "%s", p)
	}
	if len(probs) > 0 {
		return
	}
	for i := range tensors {
		tensors[i].File = name
	}
	s.tensors, s.dataStart = tensors, start
	o.broken[name] = false
}

// usable lists the shards whose headers parsed, in name order.
func (o *opener) usable() []*shard {
	var out []*shard
	for _, name := range o.order {
		if !o.broken[name] {
			out = append(out, o.c.shards[name])
		}
	}
	return out
}

// checkIndex checks the weight_map against the shard headers: every shard
// tensor mapped to its shard, every mapped tensor present, none in two shards.
func (o *opener) checkIndex() {
	holders := map[string][]string{}
	for _, s := range o.usable() {
		for _, t := range s.tensors {
			holders[t.Name] = append(holders[t.Name], s.name)
		}
	}
	for _, s := range o.usable() {
		for _, t := range s.tensors {
			h := holders[t.Name]
			if h[0] != s.name {
				o.addTensor(s.name, t.Name, "also in %s", h[0])
				continue
			}
			if o.mode != modeIndex {
				continue
			}
			m, ok := o.weightMap[t.Name]
			switch {
			case !ok:
				o.addTensor(s.name, t.Name, "not in %s", IndexFile)
			case m != s.name && !slices.Contains(h, m) && !o.broken[m]:
				o.addTensor(IndexFile, t.Name, "mapped to %s, but stored in %s", m, s.name)
			}
		}
	}
	if o.mode != modeIndex {
		return
	}
	anyBroken := slices.ContainsFunc(o.order, func(n string) bool { return o.broken[n] })
	for _, name := range sortedKeys(o.weightMap) {
		f := o.weightMap[name]
		if o.broken[f] || len(holders[name]) > 0 {
			continue // reported with the shard, or above
		}
		if anyBroken {
			o.addTensor(IndexFile, name, "missing from %s", f)
		} else {
			o.addTensor(IndexFile, name, "missing from every shard")
		}
	}
}

// collect fills Tensors and detects Prefix.
func (o *opener) collect() {
	c := o.c
	for _, s := range o.usable() {
		for _, t := range s.tensors {
			if _, dup := c.Tensors[t.Name]; !dup {
				c.Tensors[t.Name] = t
			}
		}
	}
	c.Prefix = arch.NestedPrefix
	if _, nested := c.Tensors[arch.NestedPrefix+"embed_tokens.weight"]; !nested {
		if _, flat := c.Tensors[arch.FlatPrefix+"embed_tokens.weight"]; flat {
			c.Prefix = arch.FlatPrefix
		} else if !o.anyNamed(arch.NestedPrefix) && o.anyNamed(arch.FlatPrefix+"layers.") {
			// embed_tokens itself is missing: guess from the layers, so the
			// problems name the tensors the way the checkpoint does.
			c.Prefix = arch.FlatPrefix
		}
	}
}

func (o *opener) anyNamed(prefix string) bool {
	for name := range o.c.Tensors {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	for name := range o.weightMap {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// checkModel checks the tensors against the architecture's tensor table:
// each present with an accepted dtype and exactly its shape, and nothing
// else outside the ignored prefixes.
func (o *opener) checkModel() {
	c, cfg := o.c, o.c.Config
	specs := cfg.Tensors(c.Prefix)
	want := make(map[string]bool, len(specs))
	missingFile := IndexFile
	if o.mode == modeSingle {
		missingFile = SingleFile
	}
	for _, sp := range specs {
		want[sp.Name] = true
		info, ok := c.Tensors[sp.Name]
		if !ok {
			// Only a tensor no usable index entry or header accounts for is
			// reported here; the rest were reported with their shard.
			_, mapped := o.weightMap[sp.Name]
			if o.mode == modeIndex && !mapped || o.mode == modeSingle && !o.broken[SingleFile] {
				o.addTensor(missingFile, sp.Name, "missing")
			}
			continue
		}
		if !slices.Contains(sp.DTypes, info.DType) {
			o.addTensor(info.File, sp.Name, "dtype %s, want %s", info.DType, dtypeList(sp.DTypes))
		}
		if !slices.Equal(info.Shape, sp.Shape) {
			o.addTensor(info.File, sp.Name, "shape %v, want %v", info.Shape, sp.Shape)
		}
	}

	// Unexpected tensors, per-expert layouts summarised per layer and shard.
	type group struct{ line, count int }
	groups := map[string]*group{}
	for _, s := range o.usable() {
		for _, t := range s.tensors {
			if want[t.Name] || arch.Ignored(t.Name) || c.Tensors[t.Name].File != s.name {
				continue
			}
			layer, rest, isLayer := splitLayer(t.Name, c.Prefix)
			switch {
			case t.Name == arch.LMHead && cfg.TieWordEmbeddings:
				o.addTensor(s.name, t.Name, "unexpected: tie_word_embeddings is true")
			case isLayer && layer >= cfg.NumHiddenLayers:
				o.addTensor(s.name, t.Name, "unexpected: layer %d is beyond num_hidden_layers %d", layer, cfg.NumHiddenLayers)
			case isLayer && isPerExpert(rest):
				key := fmt.Sprintf("%s%slayers.%d.mlp.experts.*", s.name, c.Prefix, layer)
				if g := groups[key]; g != nil {
					g.count++
					o.probs[g.line] = perExpertLine(s.name, c.Prefix, layer, g.count)
					continue
				}
				groups[key] = &group{line: len(o.probs), count: 1}
				o.probs = append(o.probs, perExpertLine(s.name, c.Prefix, layer, 1))
			default:
				o.addTensor(s.name, t.Name, "unexpected: not a tensor of the qwen3_5_moe text model")
			}
		}
	}
}

func perExpertLine(file, prefix string, layer, n int) string {
	return fmt.Sprintf("%s: tensor %slayers.%d.mlp.experts.*: unexpected per-expert layout (%d tensors), want fused mlp.experts.gate_up_proj and mlp.experts.down_proj",
		file, prefix, layer, n)
}

// splitLayer splits PREFIXlayers.N.REST into N and REST.
func splitLayer(name, prefix string) (int, string, bool) {
	rest, ok := strings.CutPrefix(name, prefix+"layers.")
	if !ok {
		return 0, "", false
	}
	num, rest, ok := strings.Cut(rest, ".")
	if !ok {
		return 0, "", false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || strconv.Itoa(n) != num {
		return 0, "", false
	}
	return n, rest, true
}

// isPerExpert matches mlp.experts.<N>.…, the unfused expert layout.
func isPerExpert(rest string) bool {
	rest, ok := strings.CutPrefix(rest, "mlp.experts.")
	if !ok {
		return false
	}
	num, _, ok := strings.Cut(rest, ".")
	return ok && num != "" && strings.Trim(num, "0123456789") == ""
}

func dtypeList(ds []arch.DType) string {
	s := make([]string, len(ds))
	for i, d := range ds {
		s[i] = string(d)
	}
	return strings.Join(s, " or ")
}

// fileError describes a failed file operation without repeating the path,
// which the problem line already names.
func fileError(err error) string {
	if errors.Is(err, fs.ErrNotExist) {
		return "missing"
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

// errorLines splits a joined error into its problems, a line each.
func errorLines(err error) []string {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	var lines []string
	for _, e := range errs {
		for _, l := range strings.Split(e.Error(), "\n") {
			if l = strings.TrimSpace(l); l != "" {
				lines = append(lines, l)
			}
		}
	}
	return lines
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
