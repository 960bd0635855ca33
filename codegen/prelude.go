package codegen

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/aimaproject/aimac/ir"
)

// The preludes are the only dialect-specific text: they spell the keywords,
// thread indices, barrier, lane shuffle, bit casts and the transcendental
// functions the templates use. Templates see the same vocabulary in both:
//
//	KERNEL                  extern "C" entry point with the block-size bound
//	DEVICE                  an inlined device function
//	SHARED                  a block-shared (LDS) variable
//	TID_X BID_X BID_Y BID_Z BDIM_X WARP_SIZE LANE WARP
//	block_sync()            __syncthreads
//	shfl_xor(v, m)          lane v of lane^m (float), within the 32-lane warp
//	f32_bits / bits_f32     bit casts
//	fexp flog fsqrt         float expf, logf, sqrtf
//	bf16                    unsigned short BF16 storage
//	PDL_WAIT()              wait until the launches before this one have
//	                        finished and their writes are visible
//	PDL_TRIGGER()           let the next launch start (its blocks then sit
//	                        in its own PDL_WAIT)
//	PDL_ENTRY()             PDL_WAIT(); PDL_TRIGGER();
//	PDL_PREFETCH_L2(p, b)   ask the L2 for the b bytes of weights at p (b and
//	                        p multiples of 16) without holding a register or
//	                        waiting: what a kernel streams first, before its
//	                        PDL_WAIT() (docs/pdl.md)
//	GDIM_X GDIM_Y           the grid's blocks in x and y (blocks are 1-D)
//	grid_arrive(c, leader)  a block's arrival at the grid barrier on count c
//	grid_wait(c, ticket)    wait until every block of the grid has arrived
//	grid_barrier(c)         both, block 0 the leader (docs/fusion.md)
//	grid_load(p)            a float another block wrote before the barrier
//	grid_load_int(p)        the same for an int (also: what a launch two
//	                        before wrote, read before PDL_WAIT(); docs/pdl.md)
//	grid_arrive_of(c, leader, blocks)  grid_arrive for a grid of blocks arrivals
//	grid_last(old, leader, blocks)     whether the arrival that returned old
//	                        was the last of the blocks (thread 0's answer)
//	grid_acquire()          the last block's acquire: after it plain loads
//	                        and grid_load see every block's writes
//
// The grid barrier is a count in global memory whose low 31 bits are 0
// between launches (the runtime's reset zeroes state): every block's thread
// 0 adds 1 once the block's writes are done, the leader adds 2³¹ − (blocks
// − 1), so the top bit flips exactly when the last block arrives and the
// low bits are 0 again — the next launch reuses the count without a host
// reset, graph replays included. It needs the whole grid resident at once
// (the runtime checks the occupancy at load and takes the plan's fallback
// launches when it is not); a wait that never ends traps after 2²²
// polls instead of hanging. Before the arrival every thread may write; after
// the wait every thread reads other blocks' writes through grid_load (CUDA:
// a gpu-scope load past the L1) or after the acquire the wait ends with (HIP).
//
// The PDL_ macros are programmatic dependent launch (docs/pdl.md): on sm_90
// a launch made with programmatic stream serialization may start while the
// launch before it still runs, so a kernel must not read what earlier
// launches wrote, nor write anything, before PDL_WAIT(); only the weights
// and the parameter block (written by copies, never by kernels) may be
// read before it. Render puts PDL_ENTRY() first in every kernel whose
// template does not call PDL_WAIT() itself (pdlEntry), so a new family is
// safe without doing anything; a template that calls it itself (to issue
// its first weight loads before the wait) calls PDL_TRIGGER() too. On HIP
// all three are no-ops. PDL_PREFETCH_L2 reads only what PDL_WAIT's rule lets
// a kernel read before the wait (weights); on HIP it is a no-op too (gfx1151
// has no bulk prefetch into its L2, and nothing overlaps the launch before).
//
// {THREADS} and {WARP} stand for the target's launch configuration
// (plan.TargetSpec.Launch): the block every kernel is launched with and the
// lanes of a warp or wave.
var preludes = map[Dialect]string{HIP: hipPrelude, CUDA: cudaPrelude}

// prelude is the dialect's prelude for a launch configuration.
func prelude(d Dialect, c ir.LaunchConfig) (string, error) {
	text, ok := preludes[d]
	if !ok {
		return "", fmt.Errorf("codegen: unknown dialect %q", d)
	}
	if c.Threads < 1 || c.Warp < 1 || c.Threads%c.Warp != 0 {
		return "", fmt.Errorf("codegen: launch configuration %+v: want whole warps", c)
	}
	return strings.NewReplacer("{THREADS}", strconv.Itoa(c.Threads), "{WARP}", strconv.Itoa(c.Warp)).Replace(text), nil
}

// hipPrelude targets gfx1151 in wave32 with clang builtins only (no
// __ocml/__ockl calls), so `-nogpulib -nogpuinc` links.
const hipPrelude = `// ---- prelude: HIP (gfx1151, wave32), self-contained ----
#define KERNEL extern "C" __attribute__((global)) __attribute__((amdgpu_flat_work_group_size(1, {THREADS})))
#define DEVICE static __attribute__((device)) inline __attribute__((always_inline, unused))
#define SHARED __attribute__((shared))
#define CONSTANT __attribute__((constant))
#define TID_X ((int)__builtin_amdgcn_workitem_id_x())
#define BID_X ((int)__builtin_amdgcn_workgroup_id_x())
#define BID_Y ((int)__builtin_amdgcn_workgroup_id_y())
#define BID_Z ((int)__builtin_amdgcn_workgroup_id_z())
#define BDIM_X {THREADS}
#define WARP_SIZE {WARP}
#define LANE (TID_X & (WARP_SIZE - 1))
#define WARP (TID_X / WARP_SIZE)
typedef unsigned short bf16;
// __syncthreads as HIP spells it: release fence, s_barrier, acquire fence.
DEVICE void block_sync() {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
DEVICE unsigned int f32_bits(float x) { return __builtin_bit_cast(unsigned int, x); }
DEVICE float bits_f32(unsigned int u) { return __builtin_bit_cast(float, u); }
// Butterfly shuffle through ds_bpermute (byte addresses of the source lane).
DEVICE float shfl_xor(float v, int mask) {
  int lane = (int)__builtin_amdgcn_mbcnt_lo(~0u, 0u);
  return __builtin_bit_cast(float, __builtin_amdgcn_ds_bpermute((lane ^ mask) << 2, __builtin_bit_cast(int, v)));
}
DEVICE float fexp(float x) { return __builtin_expf(x); }
DEVICE float flog(float x) { return __builtin_logf(x); }
DEVICE float fsqrt(float x) { return __builtin_sqrtf(x); }
DEVICE double drint(double x) { return __builtin_rint(x); }
// Programmatic dependent launch is an sm_90 feature: nothing to wait for here.
#define PDL_WAIT() ((void)0)
#define PDL_TRIGGER() ((void)0)
#define PDL_ENTRY() ((void)0)
#define PDL_PREFETCH_L2(p, bytes) ((void)(p), (void)(bytes))
// The grid's blocks (the dispatch's work-items over the 1-D block's size: 1 in y).
#define GDIM_X ((int)(__builtin_amdgcn_grid_size_x() / (unsigned int)BDIM_X))
#define GDIM_Y ((int)__builtin_amdgcn_grid_size_y())
// Grid barrier (see codegen/prelude.go): agent-scope release before the
// arrival, acquire after the wait in every thread (it invalidates the CU's
// caches, so plain loads see the other blocks' writes).
DEVICE unsigned int grid_arrive_of(int* count, bool leader, unsigned int blocks) {
  block_sync();
  unsigned int old = 0;
  if (TID_X == 0) {
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "agent");
    old = __atomic_fetch_add((unsigned int*)count, leader ? 0x80000000u - (blocks - 1u) : 1u, __ATOMIC_RELAXED);
  }
  return old;
}
DEVICE unsigned int grid_arrive(int* count, bool leader) {
  return grid_arrive_of(count, leader, (unsigned int)GDIM_X * (unsigned int)GDIM_Y);
}
DEVICE void grid_acquire() { __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "agent"); }
DEVICE void grid_wait(int* count, unsigned int ticket) {
  if (TID_X == 0) {
    unsigned int spins = 0;
    while (((__atomic_load_n((unsigned int*)count, __ATOMIC_RELAXED) ^ ticket) & 0x80000000u) == 0u) {
      __builtin_amdgcn_s_sleep(1);
      if (++spins == (1u << 22)) __builtin_trap();
    }
  }
  block_sync();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "agent");
}
DEVICE void grid_barrier(int* count) { grid_wait(count, grid_arrive(count, BID_X == 0 && BID_Y == 0)); }
DEVICE float grid_load(const float* p) { return *p; }
DEVICE int grid_load_int(const int* p) { return __atomic_load_n(p, __ATOMIC_RELAXED); }
` + gridLast

// gridLast is both dialects' grid_last: the arrivals add up to 2³¹ (the
// leader's 2³¹ − (blocks − 1) and one from each other block), so the last
// arrival is the one after which the count's low 31 bits are 0 again.
const gridLast = `DEVICE bool grid_last(unsigned int old, bool leader, unsigned int blocks) {
  return ((old + (leader ? 0x80000000u - (blocks - 1u) : 1u)) & 0x7fffffffu) == 0u;
}
`

// cudaPrelude works for nvcc (which predefines the CUDA keywords) and for
// clang's CUDA front end without headers or libdevice: thread indices,
// barrier and shuffles are inline PTX, and exp/log are written out (range
// reduction + polynomial, within 2 ulp) because clang cannot lower
// __builtin_expf for NVPTX without libdevice.
const cudaPrelude = `// ---- prelude: CUDA (sm_90), self-contained ----
#ifndef __NVCC__
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
#define __shared__ __attribute__((shared))
#define __constant__ __attribute__((constant))
#define __launch_bounds__(...) __attribute__((launch_bounds(__VA_ARGS__)))
#endif
#define KERNEL extern "C" __global__ __launch_bounds__({THREADS})
#define DEVICE static __device__ inline __attribute__((always_inline, unused))
#define SHARED __shared__
#define CONSTANT __constant__
DEVICE int sreg_tid_x() { int r; asm("mov.u32 %0, %%tid.x;" : "=r"(r)); return r; }
DEVICE int sreg_ctaid_x() { int r; asm("mov.u32 %0, %%ctaid.x;" : "=r"(r)); return r; }
DEVICE int sreg_ctaid_y() { int r; asm("mov.u32 %0, %%ctaid.y;" : "=r"(r)); return r; }
DEVICE int sreg_ctaid_z() { int r; asm("mov.u32 %0, %%ctaid.z;" : "=r"(r)); return r; }
#define TID_X sreg_tid_x()
#define BID_X sreg_ctaid_x()
#define BID_Y sreg_ctaid_y()
#define BID_Z sreg_ctaid_z()
#define BDIM_X {THREADS}
#define WARP_SIZE {WARP}
#define LANE (TID_X & (WARP_SIZE - 1))
#define WARP (TID_X / WARP_SIZE)
typedef unsigned short bf16;
DEVICE void block_sync() { asm volatile("bar.sync 0;" ::: "memory"); }
DEVICE unsigned int f32_bits(float x) { unsigned int u; asm("mov.b32 %0, %1;" : "=r"(u) : "f"(x)); return u; }
DEVICE float bits_f32(unsigned int u) { float x; asm("mov.b32 %0, %1;" : "=f"(x) : "r"(u)); return x; }
DEVICE float shfl_xor(float v, int mask) {
  float r;
  asm volatile("shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;" : "=f"(r) : "f"(v), "r"(mask));
  return r;
}
DEVICE float fsqrt(float x) { float r; asm("sqrt.rn.f32 %0, %1;" : "=f"(r) : "f"(x)); return r; }
// Programmatic dependent launch (sm_90): griddepcontrol.wait returns once the
// launches this one depends on have completed with their writes flushed (at
// once without programmatic serialization); launch_dependents lets the next
// launch's blocks be scheduled. The memory clobber keeps loads below the wait.
DEVICE void pdl_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
DEVICE void pdl_trigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
#define PDL_WAIT() pdl_wait()
#define PDL_TRIGGER() pdl_trigger()
#define PDL_ENTRY() (pdl_wait(), pdl_trigger())
// A bulk prefetch into the L2 (sm_90, the copy engine's cp.async.bulk): one
// instruction for up to a row's bytes, no register, no shared memory, no
// completion to wait for; the lines arrive while the thread goes on.
DEVICE void pdl_prefetch_l2(const void* p, unsigned int bytes) {
  asm volatile("{ .reg .u64 g; cvta.to.global.u64 g, %0; cp.async.bulk.prefetch.L2.global [g], %1; }" ::"l"(p), "r"(bytes));
}
#define PDL_PREFETCH_L2(p, bytes) pdl_prefetch_l2((p), (bytes))
DEVICE int sreg_nctaid_x() { int r; asm("mov.u32 %0, %%nctaid.x;" : "=r"(r)); return r; }
DEVICE int sreg_nctaid_y() { int r; asm("mov.u32 %0, %%nctaid.y;" : "=r"(r)); return r; }
#define GDIM_X sreg_nctaid_x()
#define GDIM_Y sreg_nctaid_y()
// Grid barrier (see codegen/prelude.go), as cooperative groups spell it:
// the block's writes ordered by the barrier, thread 0's gpu-scope release
// add, its acquire polls, the block released by a second barrier.
DEVICE unsigned int grid_arrive_of(int* count, bool leader, unsigned int blocks) {
  block_sync();
  unsigned int old = 0;
  if (TID_X == 0) {
    asm volatile("atom.release.gpu.global.add.u32 %0, [%1], %2;" : "=r"(old) : "l"(count), "r"(leader ? 0x80000000u - (blocks - 1u) : 1u) : "memory");
  }
  return old;
}
DEVICE unsigned int grid_arrive(int* count, bool leader) {
  return grid_arrive_of(count, leader, (unsigned int)GDIM_X * (unsigned int)GDIM_Y);
}
DEVICE void grid_acquire() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }
DEVICE void grid_wait(int* count, unsigned int ticket) {
  if (TID_X == 0) {
    unsigned int spins = 0, cur;
    for (;;) {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(cur) : "l"(count) : "memory");
      if (((cur ^ ticket) & 0x80000000u) != 0u) break;
      if (++spins == (1u << 22)) asm volatile("trap;");
    }
  }
  block_sync();
}
DEVICE void grid_barrier(int* count) { grid_wait(count, grid_arrive(count, BID_X == 0 && BID_Y == 0)); }
DEVICE float grid_load(const float* p) {
  float v;
  asm volatile("ld.relaxed.gpu.global.f32 %0, [%1];" : "=f"(v) : "l"(p) : "memory");
  return v;
}
DEVICE int grid_load_int(const int* p) {
  int v;
  asm volatile("ld.relaxed.gpu.global.s32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
DEVICE double drint(double x) { double r; asm("cvt.rni.f64.f64 %0, %1;" : "=d"(r) : "d"(x)); return r; }
DEVICE float frint(float x) { float r; asm("cvt.rni.f32.f32 %0, %1;" : "=f"(r) : "f"(x)); return r; }
// expf: x = k·ln2 + r, |r| ≤ ln2/2, e^r by its Taylor series to r^8, 2^k in two steps.
DEVICE float fexp(float x) {
  if (x != x) return x;
  if (x > 88.7228394f) return bits_f32(0x7f800000u);
  if (x < -103.972084f) return 0.0f;
  float k = frint(x * 1.44269502f);
  float r = x - k * 0.693145752f;
  r = r - k * 1.42860677e-06f;
  float p = 2.48015873e-05f;
  p = p * r + 1.98412698e-04f;
  p = p * r + 1.38888889e-03f;
  p = p * r + 8.33333333e-03f;
  p = p * r + 4.16666667e-02f;
  p = p * r + 1.66666667e-01f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  int ki = (int)k;
  int k1 = ki / 2, k2 = ki - ki / 2;
  return p * bits_f32((unsigned int)(k1 + 127) << 23) * bits_f32((unsigned int)(k2 + 127) << 23);
}
// logf for positive normal x: x = m·2^e with m in [√½, √2), log m = 2·atanh(f/(2+f)).
DEVICE float flog(float x) {
  unsigned int u = f32_bits(x);
  int e = (int)((u >> 23) & 0xff) - 127;
  float m = bits_f32((u & 0x007fffffu) | 0x3f800000u);
  if (m > 1.41421356f) { m = m * 0.5f; e += 1; }
  float f = m - 1.0f;
  float s = f / (2.0f + f);
  float s2 = s * s;
  float p = 1.0f / 11.0f;
  p = p * s2 + 1.0f / 9.0f;
  p = p * s2 + 1.0f / 7.0f;
  p = p * s2 + 1.0f / 5.0f;
  p = p * s2 + 1.0f / 3.0f;
  p = p * s2 + 1.0f;
  return (float)e * 0.693147181f + 2.0f * s * p;
}
` + gridLast
