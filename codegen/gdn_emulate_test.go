package codegen

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// The chunked GDN kernels run on the CPU before a GPU sees them: the
// rendered source, with the dialect's prelude swapped for a host one (a
// thread per GPU thread, barriers for block_sync and for the lane
// exchanges of shfl_xor), compiled by the host C++ compiler. The CUDA
// rendering keeps its tensor-core code paths; its two inline-asm atoms
// are emulated — cvt.rna.tf32.f32 rounds the mantissa to 10 bits, ties
// away from zero, and mma.sync m16n8k8 gathers the warp's fragments in the
// PTX ISA's layout and multiplies them — so the emulation checks the
// kernels' indexing, tiling, edges and the precision of the tf32 splits;
// only the fragment layout itself is taken from the ISA manual rather than
// from a GPU.

// emulateAll runs every emulation case; by default a few that cover both
// launches, the asynchronous staging and the conv (each host compile takes
// seconds, and the package shares the test timeout).
var emulateAll = flag.Bool("emulate-all", false, "run every case of the chunked GDN's host emulation")

const emuPrelude = `// ---- prelude: host emulation ----
#include <barrier>
#include <sys/mman.h>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#define KERNEL extern "C"
#define DEVICE static inline __attribute__((unused))
#define SHARED
#define CONSTANT
static thread_local int emu_tid, emu_bx, emu_by, emu_bz;
#define TID_X emu_tid
#define BID_X emu_bx
#define BID_Y emu_by
#define BID_Z emu_bz
#define BDIM_X {THREADS}
#define WARP_SIZE {WARP}
#define LANE (TID_X & (WARP_SIZE - 1))
#define WARP (TID_X / WARP_SIZE)
typedef unsigned short bf16;
static std::barrier<>* emu_block;
static std::barrier<>* emu_warp[{THREADS} / {WARP}];
static float emu_lanes[{THREADS} / {WARP}][{WARP}];
extern "C" { __attribute__((aligned(16))) float smem[1 << 16]; }
DEVICE void block_sync() { emu_block->arrive_and_wait(); }
DEVICE unsigned int f32_bits(float x) { unsigned int u; memcpy(&u, &x, 4); return u; }
DEVICE float bits_f32(unsigned int u) { float x; memcpy(&x, &u, 4); return x; }
DEVICE float shfl_xor(float v, int m) {
  emu_lanes[WARP][LANE] = v;
  emu_warp[WARP]->arrive_and_wait();
  const float r = emu_lanes[WARP][LANE ^ m];
  emu_warp[WARP]->arrive_and_wait();
  return r;
}
DEVICE float fexp(float x) { return expf(x); }
DEVICE float flog(float x) { return logf(x); }
DEVICE float fsqrt(float x) { return sqrtf(x); }
DEVICE double drint(double x) { return rint(x); }
#define PDL_WAIT() ((void)0)
#define PDL_TRIGGER() ((void)0)
#define PDL_ENTRY() ((void)0)
`

// emuAtoms replace gdn_mma.tmpl's CUDA atoms; the asynchronous copy
// copies at once (the kernels wait for it before any read anyway).
const emuCopy = `DEVICE void f32_copy16(float* dst, const float* src, bool ok) {
  f32x4 x = {0.0f, 0.0f, 0.0f, 0.0f};
  if (ok) x = *(const f32x4*)src;
  *(f32x4*)dst = x;
}
DEVICE void f32_copy_commit() {}
DEVICE void f32_copy_wait_all() {}
DEVICE void f32_copy_wait_but_last() {}
`

const emuAtoms = `DEVICE unsigned int tf32_of(float x) {
  const unsigned int u = f32_bits(x);
  if ((u & 0x7f800000u) == 0x7f800000u) return u;
  return (u + 0x1000u) & 0xffffe000u;
}
static float emu_a[{THREADS} / {WARP}][16][8], emu_b[{THREADS} / {WARP}][8][8];
DEVICE void mma_tf32(float (&c)[4], const unsigned int (&a)[4], const unsigned int (&b)[2]) {
  const int w = WARP, g = LANE / 4, t = LANE % 4;
  emu_a[w][g][t] = bits_f32(a[0]);
  emu_a[w][g + 8][t] = bits_f32(a[1]);
  emu_a[w][g][t + 4] = bits_f32(a[2]);
  emu_a[w][g + 8][t + 4] = bits_f32(a[3]);
  emu_b[w][t][g] = bits_f32(b[0]);
  emu_b[w][t + 4][g] = bits_f32(b[1]);
  emu_warp[w]->arrive_and_wait();
  for (int i = 0; i < 4; ++i) {
    const int r = g + 8 * (i / 2), col = 2 * t + i % 2;
    float s = 0.0f;
    for (int k = 0; k < 8; ++k) s += emu_a[w][r][k] * emu_b[w][k][col];
    c[i] += s;
  }
  emu_warp[w]->arrive_and_wait();
}
`

var (
	preludeSpan = regexp.MustCompile(`(?s)// ---- prelude: .*?(// ---- common helpers)`)
	asmAtoms    = regexp.MustCompile(`(?s)DEVICE unsigned int tf32_of\(float x\) \{.*?\n\}\nDEVICE void mma_tf32\(.*?\n\}\n`)
	copyAtoms   = regexp.MustCompile(`(?s)DEVICE void f32_copy16\(.*?\nDEVICE void f32_copy_wait_but_last\(\) \{[^\n]*\}\n`)
)

// emulate compiles kernel k rendered for target as a host program and runs
// one launch over a's operands (rows a.N, grid and shared memory from the
// family's launch rule on target), writing the written operands back into a.
func (e *emulator) emulate(t *testing.T, target plan.Target, k plan.Kernel, a *ir.Args) {
	t.Helper()
	src, err := Render(target, k)
	if err != nil {
		t.Fatal(err)
	}
	c := target.Launch()
	host := strings.NewReplacer("{THREADS}", fmt.Sprint(c.Threads), "{WARP}", fmt.Sprint(c.Warp))
	code := preludeSpan.ReplaceAllString(src.Code, strings.ReplaceAll(host.Replace(emuPrelude), "$", "$$")+"$1")
	if target == plan.SM90 && strings.Contains(code, "mma_tf32") {
		if !asmAtoms.MatchString(code) {
			t.Fatal("the CUDA rendering has no tf32 atoms to emulate")
		}
		code = asmAtoms.ReplaceAllString(code, strings.ReplaceAll(host.Replace(emuAtoms), "$", "$$"))
		code = copyAtoms.ReplaceAllString(code, emuCopy)
	}
	if strings.Contains(code, "asm(") || strings.Contains(code, "asm volatile") {
		t.Fatal("inline assembly left in the emulated source")
	}
	f := a.Family
	ls := f.Launch(k.Params, a.N, c)
	var args []string
	for i := range f.Operands {
		args = append(args, fmt.Sprintf("(float*)mem[%d]", i))
	}
	code += fmt.Sprintf(`
int main(int argc, char** argv) {
  const int ops = %d;
  std::vector<void*> mem(ops);
  std::vector<long> size(ops);
  for (int i = 0; i < ops; ++i) {
    FILE* f = fopen(argv[6 + i], "rb");
    fseek(f, 0, SEEK_END); size[i] = ftell(f); fseek(f, 0, SEEK_SET);
    // The operand ends where a page without access begins: a read or a
    // write past its extent faults, as on a GPU.
    const size_t body = (size[i] + 15) / 16 * 16, pages = (body + 4095) / 4096 + 1;
    unsigned char* m = (unsigned char*)mmap(nullptr, pages * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || mprotect(m + (pages - 1) * 4096, 4096, PROT_NONE) != 0) return 4;
    mem[i] = m + (pages - 1) * 4096 - body;
    if (fread(mem[i], 1, size[i], f) != (size_t)size[i]) return 2;
    fclose(f);
  }
  static int params[64];
  // argv: n, grid x, y, z, the launch's dynamic shared bytes, then the operands' files.
  const int n = atoi(argv[1]), gx = atoi(argv[2]), gy = atoi(argv[3]), gz = atoi(argv[4]), shared = atoi(argv[5]), threads = %d;
  std::barrier<> block(threads);
  emu_block = &block;
  std::vector<std::barrier<>*> warps;
  for (int w = 0; w < threads / WARP_SIZE; ++w) emu_warp[w] = new std::barrier<>(WARP_SIZE);
  for (int bz = 0; bz < gz; ++bz)
    for (int by = 0; by < gy; ++by)
      for (int bx = 0; bx < gx; ++bx) {
        memset(smem, 0xff, sizeof smem);  // NaN: a read before a write shows
        std::vector<std::thread> th;
        for (int i = 0; i < threads; ++i)
          th.emplace_back([=] { emu_tid = i; emu_bx = bx; emu_by = by; emu_bz = bz; %s(%s, n, params); });
        for (auto& x : th) x.join();
        // Shared memory past the launch's bytes must be untouched (on a GPU a
        // write there faults).
        for (size_t b = shared; b < sizeof smem; ++b)
          if (((unsigned char*)smem)[b] != 0xff) {
            fprintf(stderr, "block (%%d, %%d, %%d) wrote shared byte %%zu past the launch's %%d\n", bx, by, bz, b, shared);
            return 3;
          }
      }
  for (int i = 0; i < ops; ++i) {
    FILE* f = fopen(argv[6 + i], "wb");
    fwrite(mem[i], 1, size[i], f);
    fclose(f);
  }
  return 0;
}
`, len(f.Operands), ls.Block[0], k.Name, strings.Join(args, ", "))
	if ls.SharedBytes > 4<<16 {
		t.Fatalf("%s: %d bytes of shared memory exceed the emulator's", k.Name, ls.SharedBytes)
	}
	dir := t.TempDir()
	bin, ok := e.bins[code]
	if !ok {
		bin = e.compile(t, k.Name, code)
		e.bins[code] = bin
	}
	var files []string
	for i, o := range f.Operands {
		p := filepath.Join(dir, o.Name+".bin")
		if err := os.WriteFile(p, a.Mem[i], 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	argv := append([]string{fmt.Sprint(a.N), fmt.Sprint(ls.Grid[0]), fmt.Sprint(ls.Grid[1]), fmt.Sprint(ls.Grid[2]), fmt.Sprint(ls.SharedBytes)}, files...)
	if out, err := exec.Command(bin, argv...).CombinedOutput(); err != nil {
		t.Fatalf("%s: emulated launch: %v\n%s", k.Name, err, out)
	}
	for i, o := range f.Operands {
		if o.Access == ir.Read {
			continue
		}
		b, err := os.ReadFile(files[i])
		if err != nil {
			t.Fatal(err)
		}
		copy(a.Mem[i], b)
	}
}

// emulator holds the host programs compiled so far, by source (a kernel
// run at several lengths compiles once), in dir.
type emulator struct {
	dir  string
	bins map[string]string
}

func newEmulator(t *testing.T) *emulator {
	return &emulator{dir: t.TempDir(), bins: map[string]string{}}
}

// compile compiles one host program.
func (e *emulator) compile(t *testing.T, name, code string) string {
	t.Helper()
	dir, err := os.MkdirTemp(e.dir, name)
	if err != nil {
		t.Fatal(err)
	}
	cc := filepath.Join(dir, "k.cc")
	if err := os.WriteFile(cc, []byte(code), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "emulated")
	comp := clang(t)
	cxx := strings.Replace(comp.Path, "clang-", "clang++-", 1)
	if _, err := os.Stat(cxx); err != nil {
		cxx = comp.Path
	}
	out, err := exec.CommandContext(context.Background(), cxx, "-x", "c++", "-std=c++20", "-O1", "-pthread", "-Wno-unknown-pragmas", "-o", bin, cc).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: host compile: %v\n%s", name, err, out)
	}
	return bin
}

// gdnFill fills the inputs of a chunked-GDN case as the model makes them:
// q and k l2-normalized per key head (q scaled by 1/sqrt(k_dim)), v in
// [−1, 1), β in [0, 1), g in [−gmax, 0]; for gated_delta_state the rows
// gated_delta_wy makes of them (and its out as the intra-chunk part), the
// state in [−0.5, 0.5) or zero. Written operands are poisoned (7) past
// what the kernel writes.
func gdnFill(a *ir.Args, rng *rand.Rand, rows int, gmax float64, zeroState bool) {
	p := a.Params
	hk, hv, dk, dv := p.Int("k_heads"), p.Int("v_heads"), p.Int("k_dim"), p.Int("v_dim")
	stride := 2*hk*dk + hv*dv
	qkv := make([]float32, rows*stride)
	for i := range qkv {
		qkv[i] = float32(rng.Float64()*2 - 1)
	}
	kernels.L2NormHeads(qkv, stride, rows, hk, dk, 1e-6, float32(1/math.Sqrt(float64(dk))))
	kernels.L2NormHeads(qkv[hk*dk:], stride, rows, hk, dk, 1e-6, 1)
	beta, g := make([]float32, rows*hv), make([]float32, rows*hv)
	for i := range beta {
		beta[i] = float32(rng.Float64())
		g[i] = float32(-rng.Float64() * gmax)
	}
	if a.Family.Kind == ir.GatedDeltaWY {
		copy(a.F32("q"), qkv)
		copy(a.F32("k"), qkv[hk*dk:])
		copy(a.F32("v"), qkv[2*hk*dk:])
		copy(a.F32("beta"), beta)
		copy(a.F32("g"), g)
		return
	}
	n := a.N
	out := a.F32("out")
	kernels.GatedDeltaWY(a.F32("w"), a.F32("qw"), a.F32("kd"), a.F32("u"), a.F32("gc"), out,
		qkv, qkv[hk*dk:], qkv[2*hk*dk:], stride, beta, g, n, hk, hv, dk, dv, p.Int("chunk"))
	for i := n * hv * dv; i < len(out); i++ {
		out[i] = 7
	}
	st := a.F32("state")
	for i := range st {
		st[i] = 0
		if !zeroState {
			st[i] = float32(rng.Float64() - 0.5)
		}
	}
}

// gdnArgs allocates a case's operands for rows rows and fills them.
func gdnArgs(k plan.Kernel, n, rows int, seed uint64, gmax float64, zeroState bool) *ir.Args {
	f := kernels.Families[ir.Kind(k.Family)]
	a := &ir.Args{Family: f, Params: k.Params, N: n, Block: &[ir.ParamSlots]int32{}, Mem: make([][]byte, len(f.Operands))}
	rng := rand.New(rand.NewPCG(seed, 7))
	for i, o := range f.Operands {
		a.Mem[i] = aligned(o.Extent(k.Params, int64(rows)) * int64(o.DType.Size()))
		if o.Access == ir.Write {
			v := a.F32(o.Name)
			for j := range v {
				v[j] = 7
			}
		}
	}
	gdnFill(a, rng, rows, gmax, zeroState)
	return a
}

// clone copies a's memory.
func cloneArgs(a *ir.Args) *ir.Args {
	b := *a
	b.Mem = make([][]byte, len(a.Mem))
	for i, m := range a.Mem {
		b.Mem[i] = append(aligned(int64(len(m)))[:0], m...)
	}
	return &b
}

// worstError is the largest |got − want| − rtol·|want| of every written
// f32 operand (> atol fails), poison past the logical rows included.
func worstError(got, want *ir.Args) (float64, string) {
	var worst float64
	where := ""
	for i, o := range got.Family.Operands {
		if o.Access == ir.Read {
			continue
		}
		g, w := got.F32(o.Name), want.F32(o.Name)
		for j := range w {
			d := math.Abs(float64(g[j]) - float64(w[j]))
			if math.IsNaN(d) {
				d = math.Inf(1)
			}
			if d > worst {
				worst, where = d, fmt.Sprintf("%s[%d]: got %g want %g", o.Name, j, g[j], w[j])
			}
		}
		_ = i
	}
	return worst, where
}

// TestEmulateGDNChunk runs both chunked-GDN launches and the parallel conv
// through the host emulation, sm_90's rendering (tf32 atoms) and
// gfx1151's (f32 multiply-adds), against the Go references at the edges:
// 1, 63, 64, 65 and 200 tokens, the tiny fixtures' heads, a group of three,
// the model's head dims, strong decays, from a zero state. With the split
// the tensor-core products carry ≈ 21 bits: the runner's f32 tolerance
// (2e-4 absolute) holds with margin; plain tf32 (10 bits) is reported.
func TestEmulateGDNChunk(t *testing.T) {
	type tc struct {
		name      string
		wy, st    plan.Kernel
		n         int
		gmax      float64
		zeroState bool
		target    plan.Target
		tol       float64
	}
	emu := newEmulator(t)
	tiny := func(split bool) (plan.Kernel, plan.Kernel) {
		return gdnWY(2, 4, 16, 16, 64, 16, split), gdnState(2, 4, 16, 16, 64, 16, 8, split)
	}
	wyT, stT := tiny(true)
	wyP, stP := tiny(false)
	cases := []tc{
		{"tiny_t1", wyT, stT, 1, 0.3, false, plan.SM90, 2e-4},
		{"tiny_t63", wyT, stT, 63, 0.3, false, plan.SM90, 2e-4},
		{"tiny_t65", wyT, stT, 65, 0.3, true, plan.SM90, 2e-4},
		{"tiny_t200_decay", wyT, stT, 200, 4, false, plan.SM90, 2e-4},
		{"tiny_t200_plain", wyP, stP, 200, 0.3, false, plan.SM90, 5e-2},
		{"tiny_t130_gfx", wyT, stT, 130, 0.3, false, plan.GFX1151, 2e-4},
		{"group3_t70", gdnWY(1, 3, 32, 16, 64, 16, true), gdnState(1, 3, 32, 16, 64, 32, 16, true), 70, 0.3, false, plan.SM90, 2e-4},
		{"model_t64", gdnWY(1, 1, 128, 128, 64, 64, true), gdnState(1, 1, 128, 128, 64, 128, 32, true), 64, 0.3, false, plan.SM90, 2e-4},
		{"model_t70_async", gdnWY(1, 1, 128, 128, 64, 64, true), gdnStateAsync(1, 1, 128, 128, 64, 128, 32, true, true), 70, 0.3, false, plan.SM90, 2e-4},
		{"tiny_t65_async", wyT, gdnStateAsync(2, 4, 16, 16, 64, 16, 16, true, true), 65, 0.3, false, plan.SM90, 2e-4},
		// four chunks: the two [w; qw] buffers taken in turn, the last chunk partial
		{"tiny_t200_async", wyT, gdnStateAsync(2, 4, 16, 16, 64, 16, 16, true, true), 200, 0.3, false, plan.SM90, 2e-4},
		// the split's corrections summed apart, operands rounded by integer arithmetic
		{"tiny_t200_lo", gdnInt(wyT), gdnLoAcc(gdnInt(gdnStateAsync(2, 4, 16, 16, 64, 16, 16, true, true))), 200, 4, false, plan.SM90, 2e-4},
		{"model_t130_lo", gdnInt(gdnWY(1, 1, 128, 128, 64, 64, true)), gdnLoAcc(gdnInt(gdnStateAsync(1, 1, 128, 128, 64, 128, 32, true, true))), 130, 0.3, false, plan.SM90, 2e-4},
		{"model_t130_gfx", gdnWY(1, 1, 128, 128, 64, 32, true), gdnState(1, 1, 128, 128, 64, 32, 32, true), 130, 0.3, false, plan.GFX1151, 2e-4},
	}
	// The host runs a thread per GPU thread: by default the two cases that
	// cover both launches, the ragged chunk and the async staging; every
	// case with -emulate-all.
	quick := map[string]bool{"tiny_t65": true, "tiny_t200_async": true, "tiny_t200_lo": true}
	for i, c := range cases {
		if !*emulateAll && !quick[c.name] {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			for j, k := range []plan.Kernel{c.wy, c.st} {
				a := gdnArgs(k, c.n, c.n+2, uint64(100+i), c.gmax, c.zeroState)
				want := cloneArgs(a)
				if err := want.Family.Reference(want); err != nil {
					t.Fatal(err)
				}
				emu.emulate(t, c.target, k, a)
				worst, where := worstError(a, want)
				t.Logf("%s: max abs error %.3g (%s)", k.Family, worst, where)
				if worst > c.tol {
					t.Errorf("%s (launch %d): max abs error %.3g > %g at %s", k.Family, j, worst, c.tol, where)
				}
			}
		})
	}
	// int_tf32 rounds like cvt.rna.tf32.f32 (the emulator's tf32_of), and
	// pre_split splits the same terms: the same bits out of both launches,
	// at the model's dims and the tiny ones.
	t.Run("int_tf32", func(t *testing.T) {
		pairs := [][2]plan.Kernel{
			{wyT, gdnStateAsync(2, 4, 16, 16, 64, 16, 16, true, true)},
			{gdnWY(1, 1, 128, 128, 64, 64, true), gdnStateAsync(1, 1, 128, 128, 64, 128, 32, true, true)},
			{gdnWY(1, 1, 128, 128, 64, 32, false), gdnStateAsync(1, 1, 128, 128, 64, 128, 32, false, true)},
		}
		for i, pr := range pairs {
			if i > 0 && !*emulateAll {
				break
			}
			for _, k := range pr {
				a := gdnArgs(k, 130, 132, uint64(300+i), 0.3, false)
				b, want := cloneArgs(a), cloneArgs(a)
				if err := want.Family.Reference(want); err != nil {
					t.Fatal(err)
				}
				emu.emulate(t, plan.SM90, k, a)
				fast := gdnInt(k)
				if ir.Kind(k.Family) == ir.GatedDeltaState && k.Params.Flag("split") {
					fast = gdnPre(fast) // and its B operands split once: the same bits still
				}
				emu.emulate(t, plan.SM90, fast, b)
				for j, o := range a.Family.Operands {
					if o.Access != ir.Read && !bytes.Equal(a.Mem[j], b.Mem[j]) {
						t.Errorf("%s: %s differs in %s", k.Name, o.Name, fast.Name)
					}
				}
				worst, where := worstError(b, want)
				t.Logf("%s: max abs error %.3g (%s)", fast.Name, worst, where)
				if tol := map[bool]float64{true: 2e-4, false: 5e-2}[k.Params.Flag("split")]; worst > tol {
					t.Errorf("%s: max abs error %.3g > %g at %s", fast.Name, worst, tol, where)
				}
			}
		}
	})
	t.Run("conv", func(t *testing.T) {
		for _, n := range []int{1, 2, 3, 7, 64} {
			k := gdnConv(300, 4, 3)
			f := kernels.Families[ir.Kind(k.Family)]
			a := &ir.Args{Family: f, Params: k.Params, N: n, Block: &[ir.ParamSlots]int32{}, Mem: make([][]byte, len(f.Operands))}
			rng := rand.New(rand.NewPCG(uint64(n), 9))
			for i, o := range f.Operands {
				a.Mem[i] = aligned(o.Extent(k.Params, int64(n+2)) * 4)
				v := a.F32(o.Name)
				for j := range v {
					v[j] = float32(rng.Float64()*2 - 1)
					if o.Access == ir.Write {
						v[j] = 7
					}
				}
			}
			want := cloneArgs(a)
			if err := f.Reference(want); err != nil {
				t.Fatal(err)
			}
			emu.emulate(t, plan.SM90, k, a)
			if worst, where := worstError(a, want); worst > 1e-5 {
				t.Errorf("n=%d: max abs error %.3g at %s", n, worst, where)
			}
		}
	})
}
