package codegen

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/aimaproject/aimac/bf16"
	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// tensorCase is one case of a tensor-core family written from operands
// the caller filled: rows is the logical n, mem every operand's device
// memory (outputs poisoned), stored the elements of an operand written to
// its file (the rest zero-extended on the device), want the elements of an
// output's reference compared (0: all), ref the reference that fills the
// wanted part (nil: the family's over every row).
type tensorCase struct {
	name     string
	k        plan.Kernel
	rows     int
	mem      map[string][]byte
	stored   map[string]int64
	want     map[string]int64
	ref      func(a *ir.Args) error
	timeReps int
	bytes    int64
	flops    int64
	note     string
	// want64: an output's float64 reference (its first elements), written
	// as <name>.want64 for the runner's relative error figures.
	want64 map[string][]float64
}

// tensorMeta is caseMeta with the speed fields gpucheck reads.
type tensorMeta struct {
	caseMeta
	Flops int64 `json:"flops,omitempty"`
	// Shared is the launch's dynamic shared memory (the family's launch rule).
	Shared int `json:"shared,omitempty"`
}

// caseBlockOf is the block of a launch of k over rows (the family's launch
// rule: 256 threads, the warp-specialized tile's three warpgroups).
func caseBlockOf(k plan.Kernel, rows int) []int {
	s := caseLaunch(k, rows)
	return s.Block[:]
}

func writeTensorCase(t *testing.T, dir string, c tensorCase) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	f := kernels.Families[ir.Kind(c.k.Family)]
	if err := f.CheckParams(c.k.Params); err != nil {
		t.Fatalf("case %s: %v", c.name, err)
	}
	var block [ir.ParamSlots]int32
	a := &ir.Args{Family: f, Params: c.k.Params, N: c.rows, Block: &block, Mem: make([][]byte, len(f.Operands))}
	meta := tensorMeta{caseMeta: caseMeta{Kernel: c.k.Name, Grid: caseGrid(c.k, c.rows), Block: caseBlockOf(c.k, c.rows), N: c.rows, Params: block,
		TimeReps: c.timeReps, Bytes: c.bytes, Note: c.note, Cluster: caseLaunch(c.k, c.rows).Cluster}, Flops: c.flops,
		Shared: f.Launch(c.k.Params, c.rows, plan.SM90.Launch()).SharedBytes}
	write := func(name string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, o := range f.Operands {
		// An output checked over a prefix is stored over it (poisoned); the
		// device zero-extends the rest.
		if w := c.want[o.Name]; w > 0 && o.Access != ir.Read {
			if _, ok := c.stored[o.Name]; !ok {
				if c.stored == nil {
					c.stored = map[string]int64{}
				}
				c.stored[o.Name] = w
			}
		}
	}
	for i, o := range f.Operands {
		m, ok := c.mem[o.Name]
		if !ok {
			t.Fatalf("case %s: no memory for operand %s", c.name, o.Name)
		}
		a.Mem[i] = m
		size := int64(o.DType.Size())
		arg := caseArg{File: o.Name + ".in", DType: string(o.DType), Out: o.Access != ir.Read}
		if v, ok := c.want64[o.Name]; ok {
			arg.Want64 = o.Name + ".want64"
			b := make([]byte, 0, 8*len(v))
			for _, x := range v {
				b = binary.LittleEndian.AppendUint64(b, math.Float64bits(x))
			}
			write(arg.Want64, b)
		}
		b := m
		if s, ok := c.stored[o.Name]; ok {
			b = m[:s*size]
			arg.Elements = int64(len(m)) / size
		}
		meta.Args = append(meta.Args, arg)
		write(o.Name+".in", b)
	}
	if err := a.Check(); err != nil {
		t.Fatalf("case %s: %v", c.name, err)
	}
	ref := f.Reference
	if c.ref != nil {
		ref = c.ref
	}
	if err := ref(a); err != nil {
		t.Fatalf("case %s: reference: %v", c.name, err)
	}
	for i, o := range f.Operands {
		if o.Access == ir.Read {
			continue
		}
		b := a.Mem[i]
		if w := c.want[o.Name]; w > 0 {
			b = b[:w*int64(o.DType.Size())]
		}
		write(o.Name+".want", b)
	}
	src, err := Render(plan.SM90, c.k)
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := json.MarshalIndent(meta, "", " ")
	write("meta.json", mb)
	write("kernel.cu", []byte(src.Code))
}

// filler makes the operand memories of the cases: random f32 rows in
// [-1, 1), bf16 weights ~ N(0, 0.05), outputs poisoned with 7.
type filler struct{ rng *rand.Rand }

func (f filler) f32(n int64) []byte {
	b := aligned(4 * n)
	v := f32View(b)
	for i := range v {
		v[i] = float32(f.rng.Float64()*2 - 1)
	}
	return b
}

func (f filler) poison(n int64) []byte {
	b := aligned(4 * n)
	for i, v := 0, f32View(b); i < len(v); i++ {
		v[i] = 7
	}
	return b
}

func (f filler) bf16(n int64) []byte {
	b := aligned(2 * n)
	w := bf16View(b)
	for i := range w {
		w[i] = bf16.FromFloat32(float32(f.rng.NormFloat64() * 0.05))
	}
	return b
}

// routing is ids (k distinct experts below pool per token; pair 0's last
// slot outside the experts when odd is set) and weights summing to 1.
func (f filler) routing(rows, k, pool int, odd bool) (ids, weights []byte) {
	ids, weights = aligned(int64(4*rows*k)), aligned(int64(4*rows*k))
	iv, wv := i32View(ids), f32View(weights)
	for t := range rows {
		perm := f.rng.Perm(pool)
		var s float32
		for j := range k {
			iv[t*k+j] = int32(perm[j])
			wv[t*k+j] = float32(f.rng.Float64()) + 0.01
			s += wv[t*k+j]
		}
		for j := range k {
			wv[t*k+j] /= s
		}
	}
	if odd {
		iv[k-1] = -1
	}
	return ids, weights
}

// gemmCase is a dense case: x and W random, y poisoned (gemm) or random
// (gemm_add); with check < rows the reference covers the first check rows.
func gemmCase(name string, kk plan.Kernel, rows, check int, seed uint64) tensorCase {
	f := filler{rand.New(rand.NewPCG(seed, 11))}
	family, k, n := kk.Family, kk.Params.Int("k"), kk.Params.Int("n")
	phys := int64(rows + 2)
	y := f.poison(phys * int64(n))
	if family == "gemm_add" {
		y = f.f32(phys * int64(n))
	}
	c := tensorCase{name: name, k: kk, rows: rows, mem: map[string][]byte{"y": y, "x": f.f32(phys * int64(k)), "w": f.bf16(int64(n) * int64(k))}}
	if check < rows {
		c.want = map[string]int64{"y": int64(check) * int64(n)}
		c.ref = func(a *ir.Args) error {
			b := *a
			b.N = check
			return a.Family.Reference(&b)
		}
	}
	return c
}

// moeCases are the five launches of one grouped MoE (moe_count, moe_sort,
// the grouped gate_up, the grouped down, moe_slot_sum) on one routing: each
// case's
// inputs are the previous launches' reference outputs. pool < experts
// routes to the first pool experts only (whose weights are the stored part);
// terms stages the activations as that many bf16 terms; grid puts
// x and act on the bf16 grid (lo zero: a one-term kernel on the same files
// has the same reference).
func moeCases(prefix string, experts, hidden, inter, k, rows, pool int, odd bool, terms int, grid bool, seed uint64) []tensorCase {
	f := filler{rand.New(rand.NewPCG(seed, 17))}
	mp := termsParams(map[string]float64{"experts": float64(experts), "hidden": float64(hidden), "inter": float64(inter), "k": float64(k), "wgmma": 0, "wgmma_ws": 0}, terms)
	sortK := kern("moe_sort", map[string]float64{"experts": float64(experts), "k": float64(k)})
	countK := kern("moe_count", map[string]float64{"experts": float64(experts), "k": float64(k)})
	guK, dnK := kern("moe_gate_up_group", mp), kern("moe_down_group", mp)
	sumK := kern("moe_slot_sum", map[string]float64{"experts": float64(experts), "hidden": float64(hidden), "k": float64(k)})
	phys := rows + 2
	tiles := int64(kernels.MoETiles(phys, k, experts))
	ids, weights := f.routing(phys, k, pool, odd)
	order, tilesB := aligned(4*tiles*kernels.GEMMTileRows), aligned(4*(1+tiles))
	kernels.MoESort(i32View(order), i32View(tilesB), i32View(ids), rows, k, experts)
	counts := poisonI32(int64(kernels.MoESortBlocks(phys, k) * experts))
	kernels.MoECount(i32View(counts), i32View(ids), rows, k, experts)
	pairs := int64(phys * k)
	x := f.f32(int64(phys * hidden))
	onGrid := func(b []byte) {
		if grid {
			copy(f32View(b), kernels.RoundBF16(f32View(b)))
		}
	}
	onGrid(x)
	// Only the pool's experts are random; the others are read by no pair.
	pooled := func(per int64) []byte {
		b := aligned(2 * int64(experts) * per)
		copy(b, f.bf16(int64(pool)*per))
		return b
	}
	gateUp := pooled(2 * int64(inter) * int64(hidden))
	down := pooled(int64(hidden) * int64(inter))
	act := f.poison(pairs * int64(inter))
	if err := kernels.MoEGateUpGroup(f32View(act), f32View(x), i32View(order), i32View(tilesB), bf16View(gateUp), rows, hidden, inter, k, experts, terms); err != nil {
		panic(err)
	}
	onGrid(act)
	ys := f.poison(pairs * int64(hidden))
	if err := kernels.MoEDownGroup(f32View(ys), f32View(act), i32View(order), i32View(tilesB), f32View(weights), bf16View(down), rows, hidden, inter, k, experts, terms); err != nil {
		panic(err)
	}
	clone := func(b []byte) []byte { c := aligned(int64(len(b))); copy(c, b); return c }
	var stored map[string]int64
	if pool < experts {
		stored = map[string]int64{"gate_up": int64(pool) * 2 * int64(inter) * int64(hidden), "down": int64(pool) * int64(hidden) * int64(inter)}
	}
	// act rows of pairs whose slot is left out stay poisoned on both sides.
	return []tensorCase{
		{name: prefix + "_count", k: countK, rows: rows, mem: map[string][]byte{"counts": poisonI32(int64(len(counts)) / 4), "ids": ids}},
		{name: prefix + "_sort", k: sortK, rows: rows,
			mem: map[string][]byte{"order": poisonI32(int64(len(order)) / 4), "tiles": poisonI32(int64(len(tilesB)) / 4), "ids": ids, "counts": counts}},
		{name: prefix + "_gate_up", k: guK, rows: rows, stored: stored,
			mem: map[string][]byte{"act": f.poison(pairs * int64(inter)), "x": x, "order": order, "tiles": tilesB, "gate_up": gateUp}},
		{name: prefix + "_down", k: dnK, rows: rows, stored: stored,
			mem: map[string][]byte{"ys": f.poison(pairs * int64(hidden)), "act": clone(act), "order": order, "tiles": tilesB, "weights": weights, "down": down}},
		{name: prefix + "_slot_sum", k: sumK, rows: rows, mem: map[string][]byte{"y": f.poison(int64(phys * hidden)), "ys": ys, "ids": ids}},
	}
}

// tensorCorrectness are the correctness cases of the tensor-core families
// (gemmCases with the grouped MoE's): the tiny fixtures' experts (16, hidden
// 64, inter 32, top-4) at 1, 63 and 65 tokens, odd sizes (K % 8 ≠ 0, inter
// not a multiple of the 64-column half tile), experts with more pairs than
// one tile, and the model's widths. Outputs poisoned; tolerances as
// gemmCases says (each grouped reference rounds its activation to bf16 as
// the kernel does).
func tensorCorrectness() []tensorCase {
	var out []tensorCase
	for i, c := range gemmCases {
		out = append(out, gemmCase(c.name, c.k, c.n, c.n, uint64(300+i)))
	}
	out = append(out, moeCases("moe_tiny_t1", 16, 64, 32, 4, 1, 16, false, 3, false, 401)...)
	out = append(out, moeCases("moe_tiny_t63", 16, 64, 32, 4, 63, 16, true, 3, false, 402)...)
	out = append(out, moeCases("moe_tiny_t65", 16, 64, 32, 4, 65, 16, false, 3, false, 403)...)
	out = append(out, moeCases("moe_odd", 5, 20, 6, 3, 7, 5, true, 3, false, 404)...)
	out = append(out, moeCases("moe_tiles", 4, 256, 72, 2, 300, 4, false, 3, false, 405)...)
	out = append(out, moeCases("moe_wide", 16, 2048, 512, 8, 65, 16, true, 3, false, 406)...)
	// One bf16 term: the grouped GEMMs only (the sort and the sum do not
	// depend on it).
	// Two terms (gfx1151's plans): the grouped GEMMs only.
	out = append(out, moeCases("moe_s2_t65", 16, 64, 32, 4, 65, 16, true, 2, false, 411)[2:4]...)
	out = append(out, moeCases("moe_s2_wide", 16, 2048, 512, 8, 65, 16, false, 2, false, 412)[2:4]...)
	out = append(out, moeCases("moe_plain_t65", 16, 64, 32, 4, 65, 16, true, 1, false, 407)[2:4]...)
	out = append(out, moeCases("moe_plain_wide", 16, 2048, 512, 8, 65, 16, false, 1, false, 408)[2:4]...)
	// The grouped GEMMs on the wgmma tile (sm_90a), on the mma tile's cases
	// (the same operands and references): the tiny fixtures' experts, odd
	// sizes, several tiles of one expert, the model's widths, two terms, one.
	wg := map[string]bool{"moe_tiny_t1": true, "moe_tiny_t65": true, "moe_odd": true, "moe_tiles": true, "moe_wide": true, "moe_s2_wide": true, "moe_plain_wide": true}
	for _, c := range out {
		prefix := strings.TrimSuffix(strings.TrimSuffix(c.name, "_gate_up"), "_down")
		if !wg[prefix] || !strings.HasSuffix(c.k.Family, "_group") {
			continue
		}
		c.name = "moe_wg_" + strings.TrimPrefix(c.name, "moe_")
		c.k = wgmmaKernel(c.k)
		// Its own memory: writing a case runs the reference in place.
		c.mem, c.stored = cloneMem(c.mem), maps.Clone(c.stored)
		out = append(out, c)
	}
	// flush_k on both tiles' grouped GEMMs, on the same operands: the tiny
	// fixtures' experts, odd sizes, several tiles of one expert, the model's
	// widths, two terms (gfx1151's plans).
	fk := map[string]bool{"tiny_t1": true, "tiny_t65": true, "odd": true, "tiles": true, "wide": true, "s2_t65": true, "s2_wide": true,
		"wg_tiny_t65": true, "wg_odd": true, "wg_tiles": true, "wg_wide": true, "wg_s2_wide": true}
	for _, c := range out {
		prefix := strings.TrimSuffix(strings.TrimSuffix(c.name, "_gate_up"), "_down")
		if !fk[strings.TrimPrefix(prefix, "moe_")] || !strings.HasSuffix(c.k.Family, "_group") {
			continue
		}
		for _, v := range []struct {
			prefix string
			k      plan.Kernel
		}{{"moe_fk_", flushKern(c.k)}, {"moe_fk16_", flush16Kern(c.k)}} {
			if v.prefix == "moe_fk16_" && !strings.HasPrefix(prefix, "moe_wg_") {
				continue // (the mma tile's grain is the slice with flush_k alone)
			}
			d := c
			d.name = v.prefix + strings.TrimPrefix(c.name, "moe_")
			d.k = v.k
			d.mem, d.stored = cloneMem(c.mem), maps.Clone(c.stored)
			out = append(out, d)
		}
	}
	// persistent (a block per multiprocessor walking the tiles, each issuing
	// its next tile's first copies before its stores) on the plans' tile
	// (wgmma, flush_k), on the same operands: the tiny fixture's experts,
	// odd sizes, several tiles of one expert, the model's widths (more tiles
	// than blocks), two terms.
	for _, c := range out {
		if !strings.HasPrefix(c.name, "moe_fk_wg_") || !strings.HasSuffix(c.k.Family, "_group") {
			continue
		}
		d := c
		d.name = "moe_pst_" + strings.TrimPrefix(c.name, "moe_fk_wg_")
		d.k = persistentKern(c.k)
		d.mem, d.stored = cloneMem(c.mem), maps.Clone(c.stored)
		out = append(out, d)
	}
	// The wgmma tile's 256 columns (wide_tile, the plans'), with and without
	// flush_k (half the columns at a time), on the wgmma cases' operands.
	var wide []tensorCase
	for _, c := range out {
		if !strings.HasPrefix(c.name, "moe_wg_") || !strings.HasSuffix(c.k.Family, "_group") {
			continue
		}
		for _, v := range []struct {
			prefix string
			flush  bool
		}{{"moe_wg256_", false}, {"moe_wg256_fk_", true}} {
			d := c
			d.name = v.prefix + strings.TrimPrefix(c.name, "moe_wg_")
			d.k = wideGroupKern(c.k, v.flush)
			d.mem, d.stored = cloneMem(c.mem), maps.Clone(c.stored)
			wide = append(wide, d)
		}
	}
	out = append(out, wide...)
	// cluster_a (two column tiles sharing their A rows by multicast) on the
	// plans' tiles, on the same operands: every dense wgmma case with
	// flush_k (256 columns in halves, 128) and every grouped one, where K
	// is whole 16-byte rows — rows 1, 3, 63, 65, 200, 257, K of one slice
	// to 4096 and 2056, N odd, narrower than a tile and an odd number of
	// tiles (a partner past the weight rows), the tiny fixtures' shapes,
	// gemm_add, three, two and one terms; the grouped ones with the tiny
	// fixture's experts, several tiles of one expert, the model's widths.
	for _, c := range out {
		if !strings.HasPrefix(c.name, "gemm_wg256_fk_") && !strings.HasPrefix(c.name, "gemm_add_wg256_fk_") &&
			!strings.HasPrefix(c.name, "gemm_wg_fk_") && !strings.HasPrefix(c.name, "gemm_add_wg_fk_") && !strings.HasPrefix(c.name, "moe_fk_wg_") {
			continue
		}
		k := clusterKern(c.k)
		if kernels.Families[ir.Kind(k.Family)].CheckParams(k.Params) == nil { // (else K is not whole 16-byte rows: the planner keeps the flag off)
			d := c
			d.name = "cl_" + c.name
			d.k = k
			d.mem, d.stored = cloneMem(c.mem), maps.Clone(c.stored)
			out = append(out, d)
		}
		// ss_a (the A terms rounded once a k-tile into shared memory) on the same cases,
		// every K included.
		d := c
		d.name = "ss_" + c.name
		d.k = ssKern(c.k)
		d.mem, d.stored = cloneMem(c.mem), maps.Clone(c.stored)
		out = append(out, d)
	}
	// Several chunks of moe_count and moe_sort: 1000 tokens × top-8 over 256
	// experts (4 blocks, the last one partial), and 2048 pairs exactly.
	out = append(out, wsCorrectness(out)...)
	out = append(out, moeCases("moe_chunks", 256, 64, 32, 8, 1000, 256, true, 3, false, 409)[:2]...)
	out = append(out, moeCases("moe_chunk_edge", 16, 64, 32, 8, 256, 16, false, 3, false, 410)[:2]...)
	return out
}

// TestWriteGPUCasesTensor writes the correctness cases of the tensor-core
// families.
func TestWriteGPUCasesTensor(t *testing.T) {
	out := *gpuCases
	if out == "" {
		out = t.TempDir()
	}
	for _, c := range tensorCorrectness() {
		writeTensorCase(t, filepath.Join(out, c.name), c)
	}
}

// TestWriteGPUCasesTensorSpeed writes the speed cases at the real model's
// prefill sizes (8192 tokens): the dense projections 2048 → 8192, 2048 →
// 4096 and 4096 → 2048 (with the residual add), the old matmul on the first
// one's files, and the grouped MoE at top-8 (hidden 2048, inter 512) with
// its tokens routed over 64 of the 256 experts (256 MB of gate_up weights,
// past the L2; the rest are zeros). Every one with the activations as three
// bf16 terms (sm_90's plans), and the tensor-core ones again as two and as
// one on the same files (what each term costs: one more product): the activations
// are on the bf16 grid there, so lo is zero and both take the same
// reference. References cover the first rows (64 tokens) so that writing
// them stays cheap; every row is timed. Without -gpucases the same cases
// are written at 256 tokens to a temporary directory.
func TestWriteGPUCasesTensorSpeed(t *testing.T) {
	out, T, E, pool := *gpuCases, 8192, 256, 64
	if out == "" {
		out, T, E, pool = t.TempDir(), 256, 16, 8
	}
	const check = 64
	flops := func(k, n int) int64 { return 2 * int64(T) * int64(k) * int64(n) }
	dense := func(name, family string, k, n int, seed uint64) tensorCase {
		c := gemmCase(name, gemmKern(family, float64(k), float64(n), 3), T, check, seed)
		// x on the bf16 grid: the old matmul and the one-term gemm timed on
		// these files agree with the reference up to the order of the sums.
		copy(f32View(c.mem["x"]), kernels.RoundBF16(f32View(c.mem["x"])))
		c.timeReps, c.flops = 20, flops(k, n)
		c.bytes = int64(T)*int64(k)*4 + int64(k)*int64(n)*2 + int64(T)*int64(n)*4
		c.note = fmt.Sprintf("%d×%d → %d: %.0f GFLOP, x as three bf16 terms (3 products); ≈ 790 TFLOP/s is the measured bf16 matrix rate", T, k, n, float64(c.flops)/1e9)
		return c
	}
	cases := []tensorCase{
		dense("speed_gemm_8192", "gemm", 2048, 8192, 501),
		dense("speed_gemm_4096", "gemm", 2048, 4096, 502),
		dense("speed_gemm_add_2048", "gemm_add", 4096, 2048, 503),
	}
	// The attention layer's k and v projections (2048 → 512): 16 column
	// tiles of 128 rows, on the mma wide tile and the wgmma tile only.
	kv := dense("speed_gemm_512", "gemm", 2048, 512, 506)
	kv.k.Params.SetInt("tile_n", kernels.GEMMTileColsWide)
	const H, I, top = 2048, 512, 8
	moe := moeCasesChecked("speed_moe", E, H, I, top, T, pool, check, 504)
	pairs := int64(T * top)
	moe[0].timeReps, moe[0].bytes, moe[0].note = 20, pairs*4, "moe_count of 65536 pairs: 32 blocks of 2048"
	moe[1].timeReps, moe[1].bytes, moe[1].note = 20, pairs*4*2, "moe_sort of 65536 pairs: 32 blocks of 2048 (was one block: 262 µs)"
	// The grouped gate_up's and down's work at tokens rows over pool experts:
	// the products of every pair, x (or act) read, the used experts' weights,
	// act (or ys) written.
	groupFigures := func(c *tensorCase, gateUp bool, tokens int) {
		p := int64(tokens * top)
		if gateUp {
			c.flops, c.bytes = 2*p*2*I*H, int64(tokens)*H*4+int64(pool)*2*I*H*2+p*I*4
		} else {
			c.flops, c.bytes = 2*p*H*I, p*I*4+int64(pool)*H*I*2+p*H*4
		}
	}
	moe[2].timeReps = 20
	groupFigures(&moe[2], true, T)
	moe[2].note = "grouped gate_up, 64 experts used (256 MB), 1024 pairs each, x as three terms"
	moe[3].timeReps = 20
	groupFigures(&moe[3], false, T)
	moe[3].note = "grouped down, 64 experts used (128 MB), ys written per pair, act as three terms"
	moe[4].timeReps, moe[4].bytes = 20, pairs*H*4+int64(T)*H*4
	moe[4].note = "sum over 8 slots per token"
	cases = append(cases, moe...)
	for _, c := range cases {
		writeTensorCase(t, filepath.Join(out, c.name), c)
	}
	// On the same files: the one-term variants, and the old matmul (one
	// launch is ≈ 45 ms).
	plain := func(k plan.Kernel) plan.Kernel {
		k.Params = k.Params.Clone()
		k.Params.SetFlag("split_a", false)
		k.Params.SetFlag("split_a3", false)
		return k
	}
	two := func(k plan.Kernel) plan.Kernel {
		k.Params = k.Params.Clone()
		k.Params.SetFlag("split_a3", false)
		return k
	}
	wide := func(k plan.Kernel) plan.Kernel {
		k.Params = k.Params.Clone()
		k.Params.SetInt("tile_n", kernels.GEMMTileColsWide)
		return k
	}
	wgmma := func(k plan.Kernel, cols int) plan.Kernel {
		k.Params = k.Params.Clone()
		k.Params.SetFlag("wgmma", true)
		k.Params.SetInt("tile_n", int64(cols))
		return k
	}
	for _, c := range cases[:3] {
		writeSibling(t, out, c.name+"_plain", plain(c.k), T, c.name, 20, "one bf16 term (1 product), on "+c.name+"'s files")
		writeSibling(t, out, c.name+"_wide", wide(c.k), T, c.name, 20, "the 128 × 256 tile, three terms, on "+c.name+"'s files")
		writeSibling(t, out, c.name+"_s2", two(c.k), T, c.name, 20, "two bf16 terms (2 products), on "+c.name+"'s files")
		writeSibling(t, out, c.name+"_wide_s2", two(wide(c.k)), T, c.name, 20, "the 128 × 256 tile, two terms, on "+c.name+"'s files")
	}
	writeSibling(t, out, "speed_moe_gate_up_s2", two(moe[2].k), T, moe[2].name, 20, "two bf16 terms, on speed_moe_gate_up's files")
	writeSibling(t, out, "speed_moe_down_s2", two(moe[3].k), T, moe[3].name, 20, "two bf16 terms, on speed_moe_down's files")
	// The wgmma tile on the same files: 256 and 128 columns with three
	// terms, 256 with two and one (what each term costs there), beside the mma tiles above.
	writeTensorCase(t, filepath.Join(out, kv.name), kv)
	for _, c := range append(cases[:3:3], kv) {
		writeSibling(t, out, c.name+"_wg", wgmma(c.k, kernels.GEMMTileColsWide), T, c.name, 20, "the wgmma tile, 128 × 256, three terms, on "+c.name+"'s files")
		writeSibling(t, out, c.name+"_wg128", wgmma(c.k, kernels.GEMMTileCols), T, c.name, 20, "the wgmma tile, 128 × 128, three terms, on "+c.name+"'s files")
		writeSibling(t, out, c.name+"_wg_s2", two(wgmma(c.k, kernels.GEMMTileColsWide)), T, c.name, 20, "the wgmma tile, 128 × 256, two terms, on "+c.name+"'s files")
		writeSibling(t, out, c.name+"_wg_plain", plain(wgmma(c.k, kernels.GEMMTileColsWide)), T, c.name, 20, "the wgmma tile, 128 × 256, one bf16 term, on "+c.name+"'s files")
	}
	writeSibling(t, out, "speed_moe_gate_up_plain", plain(moe[2].k), T, moe[2].name, 20, "one bf16 term, on speed_moe_gate_up's files")
	writeSibling(t, out, "speed_moe_down_plain", plain(moe[3].k), T, moe[3].name, 20, "one bf16 term, on speed_moe_down's files")
	writeSibling(t, out, "speed_moe_gate_up_wg", wgmmaKernel(moe[2].k), T, moe[2].name, 20, "the wgmma tile, three terms, on speed_moe_gate_up's files")
	writeSibling(t, out, "speed_moe_down_wg", wgmmaKernel(moe[3].k), T, moe[3].name, 20, "the wgmma tile, three terms, on speed_moe_down's files")
	// flush_k (each k-tile's sum added in round to nearest) on the same
	// files, beside the flag's absence above: the wgmma tile of 128 columns
	// (the flag's; 256 is the plans' today) and the mma tile of 128.
	for _, c := range []tensorCase{cases[0], cases[2], moe[2], moe[3]} {
		wg := wgmmaKernel(c.k)
		if c.k.Params.Int("tile_n") != 0 {
			wg = wgmma(c.k, kernels.GEMMTileCols)
		}
		wgName := c.name + "_wg"
		if c.k.Params.Int("tile_n") != 0 {
			wgName += "128"
		}
		writeSibling(t, out, wgName+"_fk", flushKern(wg), T, c.name, 20, "the wgmma tile, 128 columns, three terms, flush_k, on "+c.name+"'s files (against "+wgName+")")
		writeSibling(t, out, wgName+"_fk16", flush16Kern(wg), T, c.name, 20, "the wgmma tile, 128 columns, three terms, flush_k16 (every slice), on "+c.name+"'s files (against "+wgName+")")
		if c.k.Params.Int("tile_n") != 0 {
			writeSibling(t, out, c.name+"_wg_fk", flushHalvesKern(wgmma(c.k, kernels.GEMMTileColsWide)), T, c.name, 20,
				"the wgmma tile, 256 columns, three terms, flush_k half the columns at a time, on "+c.name+"'s files (against "+c.name+"_wg)")
			writeSibling(t, out, c.name+"_wg_fk_cl", clusterKern(flushHalvesKern(wgmma(c.k, kernels.GEMMTileColsWide))), T, c.name, 20,
				"the plans' dense tile (wgmma, 256 columns flushed in halves, three terms) as clusters of two sharing their A rows (cluster_a), on "+c.name+"'s files (against "+c.name+"_wg_fk)")
			writeSibling(t, out, c.name+"_wg_fk_ss", ssKern(flushHalvesKern(wgmma(c.k, kernels.GEMMTileColsWide))), T, c.name, 20,
				"the plans' dense tile with the A terms rounded once a k-tile into shared memory (ss_a), on "+c.name+"'s files (against "+c.name+"_wg_fk)")
		} else {
			writeSibling(t, out, wgName+"_fk_cl", clusterKern(flushKern(wg)), T, c.name, 20,
				"the plans' grouped tile (wgmma, 128 columns, three terms, flush_k) as clusters of two sharing their A rows (cluster_a), on "+c.name+"'s files (against "+wgName+"_fk)")
			writeSibling(t, out, wgName+"_fk_ss", ssKern(flushKern(wg)), T, c.name, 20,
				"the plans' grouped tile with the A terms rounded once a k-tile into shared memory (ss_a), on "+c.name+"'s files (against "+wgName+"_fk)")
		}
		writeSibling(t, out, c.name+"_fk", flushKern(c.k), T, c.name, 20, "the mma tile, 128 columns, three terms, flush_k, on "+c.name+"'s files (against "+c.name+")")
	}
	// The grouped MoE with the real model's tile fill: 64 experts at 2048
	// tokens get ≈ 256 ± 16 pairs each (an 8K prompt over 256 experts),
	// at 256 tokens ≈ 32 (a 1K prompt), so many experts' last tiles hold
	// 64 rows or fewer and their second warpgroup issues no products
	// (gemm_mainloop's live).
	if *gpuCases != "" {
		for _, fill := range []struct {
			name   string
			tokens int
		}{{"speed_moe_fill8k", 2048}, {"speed_moe_fill1k", 256}} {
			fc := moeCasesChecked(fill.name, E, H, I, top, fill.tokens, pool, check, 507)
			fpairs := int64(fill.tokens * top)
			for i, c := range fc[2:4] {
				c.timeReps = 20
				groupFigures(&c, i == 0, fill.tokens)
				c.note = fmt.Sprintf("%d pairs over %d experts (≈ %d each): partial last tiles", fpairs, pool, fpairs/int64(pool))
				writeTensorCase(t, filepath.Join(out, c.name), c)
				writeSibling(t, out, c.name+"_wg_fk", flushKern(wgmmaKernel(c.k)), fill.tokens, c.name, 20,
					"the wgmma tile, 128 columns, three terms, flush_k, on "+c.name+"'s files")
				writeSibling(t, out, c.name+"_wg256_fk", wideGroupKern(c.k, true), fill.tokens, c.name, 20,
					"the wgmma tile, 256 columns flushed half at a time, three terms, on "+c.name+"'s files")
				writeSibling(t, out, c.name+"_wg_fk_ss", ssKern(flushKern(wgmmaKernel(c.k))), fill.tokens, c.name, 20,
					"the wgmma tile, 128 columns, three terms, flush_k, the A terms in shared memory, on "+c.name+"'s files (against "+c.name+"_wg_fk)")
				writeSibling(t, out, c.name+"_wg_fk_cl", clusterKern(flushKern(wgmmaKernel(c.k))), fill.tokens, c.name, 20,
					"the wgmma tile, 128 columns, three terms, flush_k, as clusters of two sharing their A rows, on "+c.name+"'s files (against "+c.name+"_wg_fk)")
				writeSibling(t, out, c.name+"_pst", persistentKern(flushKern(wgmmaKernel(c.k))), fill.tokens, c.name, 20,
					"the wgmma tile, 128 columns, three terms, flush_k, a block per multiprocessor walking the tiles, on "+c.name+"'s files (against "+c.name+"_wg_fk)")
			}
		}
	}
	writeSibling(t, out, "speed_moe_gate_up_pst", persistentKern(flushKern(wgmmaKernel(moe[2].k))), T, moe[2].name, 20,
		"the plans' tile (wgmma, 128 columns, three terms, flush_k) as a block per multiprocessor walking the tiles, on speed_moe_gate_up's files (against speed_moe_gate_up_wg_fk)")
	writeSibling(t, out, "speed_moe_down_pst", persistentKern(flushKern(wgmmaKernel(moe[3].k))), T, moe[3].name, 20,
		"the plans' tile (wgmma, 128 columns, three terms, flush_k) as a block per multiprocessor walking the tiles, on speed_moe_down's files (against speed_moe_down_wg_fk)")
	writeSibling(t, out, "speed_moe_gate_up_wg256_fk", wideGroupKern(moe[2].k, true), T, moe[2].name, 20, "the wgmma tile, 256 columns flushed half at a time (the plans'), on speed_moe_gate_up's files (against speed_moe_gate_up_wg_fk)")
	writeSibling(t, out, "speed_moe_down_wg256_fk", wideGroupKern(moe[3].k, true), T, moe[3].name, 20, "the wgmma tile, 256 columns flushed half at a time (the plans'), on speed_moe_down's files (against speed_moe_down_wg_fk)")
	writeSibling(t, out, "speed_matmul_8192", kern("matmul", map[string]float64{"k": 2048, "n": 8192}), T, "speed_gemm_8192", 1,
		"the family gemm replaces, on its files")
	writeWSSpeed(t, out, T, append(cases[:3:3], kv), moe[2], moe[3])
}

// writeSibling writes a speed case of kernel k that reads the input and
// want files of case from (same operands, same reference): its meta.json
// is from's with the kernel's launch, time_reps and note.
func writeSibling(t *testing.T, out, name string, k plan.Kernel, rows int, from string, reps int, note string) {
	t.Helper()
	var meta tensorMeta
	b, err := os.ReadFile(filepath.Join(out, from, "meta.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &meta); err != nil {
		t.Fatal(err)
	}
	f := kernels.Families[ir.Kind(k.Family)]
	if err := f.CheckParams(k.Params); err != nil {
		t.Fatalf("case %s: %v", name, err)
	}
	s := f.Launch(k.Params, rows, plan.SM90.Launch())
	meta.Kernel, meta.Grid, meta.Block, meta.Shared, meta.Cluster = k.Name, s.Grid[:], s.Block[:], s.SharedBytes, s.Cluster
	meta.TimeReps, meta.Note, meta.InputsFrom = reps, note, from
	src, err := Render(plan.SM90, k)
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := json.MarshalIndent(meta, "", " ")
	dir := filepath.Join(out, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for file, content := range map[string][]byte{"meta.json": mb, "kernel.cu": []byte(src.Code)} {
		if err := os.WriteFile(filepath.Join(dir, file), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// moeCasesChecked is moeCases at speed-case sizes: the device runs every
// token, the references (sorted anew over the first check tokens, the same
// rows' arithmetic) cover the pairs of the first check tokens. Split, with
// the activations on the bf16 grid.
// cloneMem copies a case's operands into memory of its own (aligned): writing
// a case runs its reference in place, so cases on the same operands each need one.
func cloneMem(mem map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(mem))
	for name, b := range mem {
		out[name] = aligned(int64(len(b)))
		copy(out[name], b)
	}
	return out
}

// ssKern is a wgmma-tile kernel with flush_k whose A terms are rounded once
// a k-tile into shared memory (ss_a).
func ssKern(k plan.Kernel) plan.Kernel {
	k.Params = k.Params.Clone()
	k.Params.SetFlag("ss_a", true)
	return k
}

// clusterKern is a wgmma-tile kernel launched as clusters of two column
// tiles that share their A rows (cluster_a).
func clusterKern(k plan.Kernel) plan.Kernel {
	k.Params = k.Params.Clone()
	k.Params.SetFlag("cluster_a", true)
	return k
}

// persistentKern is a grouped MoE kernel (on the wgmma tile) as a block per
// multiprocessor walking the tiles.
func persistentKern(k plan.Kernel) plan.Kernel {
	k.Params = k.Params.Clone()
	k.Params.SetFlag("persistent", true)
	return k
}

// wideGroupKern is a grouped MoE kernel on the wgmma tile's 256 columns
// (wide_tile), with flush_k where flush says.
func wideGroupKern(k plan.Kernel, flush bool) plan.Kernel {
	k = wgmmaKernel(k)
	k.Params.SetFlag("wide_tile", true)
	if flush {
		k.Params.SetFlag("flush_k", true)
	}
	k.Name += "_w"
	return k
}

func moeCasesChecked(prefix string, experts, hidden, inter, k, rows, pool, check int, seed uint64) []tensorCase {
	cs := moeCases(prefix, experts, hidden, inter, k, check, pool, false, 3, true, seed)
	f := filler{rand.New(rand.NewPCG(seed, 19))}
	phys := rows + 2
	tiles := int64(kernels.MoETiles(phys, k, experts))
	ids, weights := f.routing(phys, k, pool, false)
	// The first check tokens keep the routing the small references used.
	copy(ids, cs[0].mem["ids"][:4*check*k])
	copy(weights, cs[3].mem["weights"][:4*check*k])
	order, tilesB := aligned(4*tiles*kernels.GEMMTileRows), aligned(4*(1+tiles))
	kernels.MoESort(i32View(order), i32View(tilesB), i32View(ids), rows, k, experts)
	counts := poisonI32(int64(kernels.MoESortBlocks(phys, k) * experts))
	kernels.MoECount(i32View(counts), i32View(ids), rows, k, experts)
	pairs := int64(phys * k)
	grow := func(small []byte, n int64, fill func(int64) []byte) []byte {
		b := fill(n)
		copy(b, small)
		return b
	}
	grid := func(n int64) []byte {
		b := f.f32(n)
		copy(f32View(b), kernels.RoundBF16(f32View(b)))
		return b
	}
	// On the bf16 grid, as the small cases' (the one-term variants share the files).
	x := grow(cs[2].mem["x"][:4*check*hidden], int64(phys*hidden), grid)
	act := grow(cs[3].mem["act"][:4*check*k*inter], pairs*int64(inter), grid)
	want := func(name string, per int) map[string]int64 { return map[string]int64{name: int64(check * k * per)} }
	// The small references' wants are the first rows of the full runs'.
	small := map[int]func(a *ir.Args) error{}
	for i := range cs {
		c := cs[i]
		small[i] = func(a *ir.Args) error {
			f := a.Family
			b := &ir.Args{Family: f, Params: a.Params, N: check, Block: a.Block, Mem: make([][]byte, len(f.Operands))}
			for j, o := range f.Operands {
				b.Mem[j] = c.mem[o.Name]
			}
			if err := f.Reference(b); err != nil {
				return err
			}
			for j, o := range f.Operands {
				if o.Access != ir.Read {
					copy(a.Mem[j], b.Mem[j])
				}
			}
			return nil
		}
	}
	return []tensorCase{
		{name: prefix + "_count", k: cs[0].k, rows: rows, mem: map[string][]byte{"counts": poisonI32(int64(len(counts)) / 4), "ids": ids}},
		{name: prefix + "_sort", k: cs[1].k, rows: rows,
			mem: map[string][]byte{"order": poisonI32(int64(len(order)) / 4), "tiles": poisonI32(int64(len(tilesB)) / 4), "ids": ids, "counts": counts}},
		{name: prefix + "_gate_up", k: cs[2].k, rows: rows, stored: cs[2].stored, want: want("act", inter), ref: small[2],
			mem: map[string][]byte{"act": f.poison(pairs * int64(inter)), "x": x, "order": order, "tiles": tilesB, "gate_up": cs[2].mem["gate_up"]}},
		{name: prefix + "_down", k: cs[3].k, rows: rows, stored: cs[3].stored, want: want("ys", hidden), ref: small[3],
			mem: map[string][]byte{"ys": f.poison(pairs * int64(hidden)), "act": act, "order": order, "tiles": tilesB, "weights": weights, "down": cs[3].mem["down"]}},
		// Past the checked tokens the slots' rows are zeros: the sum's time
		// does not depend on their values.
		{name: prefix + "_slot_sum", k: cs[4].k, rows: rows, mem: map[string][]byte{"y": f.poison(int64(phys * hidden)), "ys": grow(cs[4].mem["ys"][:4*check*k*hidden], pairs*int64(hidden), aligned4), "ids": ids},
			want: map[string]int64{"y": int64(check * hidden)}, stored: map[string]int64{"ys": int64(check * k * hidden)}, ref: small[4]},
	}
}

// poisonI32 is n int32 of 0x07070707, what no sort writes.
func poisonI32(n int64) []byte {
	b := aligned(4 * n)
	for i := range b {
		b[i] = 7
	}
	return b
}

// aligned4 is n zero floats.
func aligned4(n int64) []byte { return aligned(4 * n) }

// Typed views of case memory (8-byte aligned by aligned).
func f32View(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func i32View(b []byte) []int32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(b)/4)
}

func bf16View(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}
