package codegen

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"github.com/aimaproject/aimac/ir"
	"github.com/aimaproject/aimac/kernels"
	"github.com/aimaproject/aimac/plan"
)

// A decode_persistent kernel is one source holding its members' entry
// points and the loop that runs them as work items
// (kernels/decode_persistent.tmpl, docs/persistent.md):
//
//	the prelude, once
//	the persistent helpers (below): the item's block in shared memory, the
//	  counters' atomics
//	the item macros: BID_*, GDIM_* read the item's block, PDL_WAIT() waits
//	  for the launch before the item's, KERNEL makes an entry point an
//	  inlined device function
//	namespace m0 { member 0: common helpers, family helpers, entry point }
//	…
//	the prelude's macros again, then the loop.
//
// A member's text is its own kernel's, byte for byte after the prelude, so
// an item computes what the launch would.

// persistentHelpers are the dialects' counters and item state.
var persistentHelpers = map[Dialect]string{
	CUDA: `// ---- decode_persistent helpers: CUDA ----
SHARED int stream_bx, stream_by, stream_gx, stream_gy, stream_need, stream_dep_launch, stream_seen;
SHARED int* stream_dep;
DEVICE int stream_take(int* c) {
  int r;
  asm volatile("atom.relaxed.gpu.global.add.s32 %0, [%1], 1;" : "=r"(r) : "l"(c) : "memory");
  return r;
}
// The block's writes are ordered before the count by the barrier before it (grid_arrive's rule).
DEVICE void stream_done(int* c) { asm volatile("red.release.gpu.global.add.s32 [%0], 1;" ::"l"(c) : "memory"); }
DEVICE unsigned int stream_leave(int* c) {
  unsigned int r;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], 1;" : "=r"(r) : "l"(c) : "memory");
  return r;
}
// Every calling thread acquires the count itself: a wait may sit in a branch of some warps.
DEVICE void stream_wait(const int* c, int need) {
  unsigned int spins = 0;
  for (;;) {
    int cur;
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];" : "=r"(cur) : "l"(c) : "memory");
    if (cur >= need) break;
    asm volatile("nanosleep.u32 32;" ::: "memory");
    if (++spins == (1u << 26)) asm volatile("trap;");  // ≈ a minute: a hang, not a slow launch
  }
}
// After a barrier behind thread 0's wait: nothing more on CUDA (its acquire invalidated the
// multiprocessor's L1 and the barrier orders the block after it).
DEVICE void stream_acquire() {}
DEVICE void stream_trap() { asm volatile("trap;"); }
// An item's PDL_WAIT: the launch before its own, unless an earlier wait of the block saw it
// done (what that wait acquired is still visible: the block's loads since came after it).
DEVICE void stream_wait_dep() {
  if (stream_dep == nullptr) return;
  stream_wait(stream_dep, stream_need);
  if (TID_X == 0) stream_seen = stream_dep_launch;
}
`,
	HIP: `// ---- decode_persistent helpers: HIP ----
SHARED int stream_bx, stream_by, stream_gx, stream_gy, stream_need, stream_dep_launch, stream_seen;
SHARED int* stream_dep;
DEVICE int stream_take(int* c) { return __atomic_fetch_add(c, 1, __ATOMIC_RELAXED); }
DEVICE void stream_done(int* c) {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "agent");
  __atomic_fetch_add(c, 1, __ATOMIC_RELAXED);
}
DEVICE unsigned int stream_leave(int* c) {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "agent");
  const unsigned int r = __atomic_fetch_add((unsigned int*)c, 1u, __ATOMIC_RELAXED);
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "agent");
  return r;
}
DEVICE void stream_wait(const int* c, int need) {
  unsigned int spins = 0;
  while (__atomic_load_n(c, __ATOMIC_RELAXED) < need) {
    __builtin_amdgcn_s_sleep(1);
    if (++spins == (1u << 26)) __builtin_trap();  // a hang, not a slow launch
  }
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "agent");
}
// After a barrier behind thread 0's wait: every thread's agent-scope acquire, as grid_wait's
// (the work-group barrier alone orders the work-group, not its caches against other CUs').
DEVICE void stream_acquire() { __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "agent"); }
DEVICE void stream_trap() { __builtin_trap(); }
// An item's PDL_WAIT: the launch before its own, unless an earlier wait of the block saw it
// done (what that wait acquired is still visible: the block's loads since came after it).
DEVICE void stream_wait_dep() {
  if (stream_dep == nullptr) return;
  stream_wait(stream_dep, stream_need);
  if (TID_X == 0) stream_seen = stream_dep_launch;
}
`,
}

// persistentArgs picks an entry point's argument i from a record by the
// entry point's own parameter type.
const persistentArgs = `template <int I, typename H, typename... T> struct stream_nth { typedef typename stream_nth<I - 1, T...>::type type; };
template <typename H, typename... T> struct stream_nth<0, H, T...> { typedef H type; };
template <int I, typename F> struct stream_param;
template <int I, typename... P> struct stream_param<I, void(P...)> { typedef typename stream_nth<I, P...>::type type; };
template <int I, typename F> DEVICE typename stream_param<I, F>::type stream_arg(const unsigned long long* a) {
  return (typename stream_param<I, F>::type)a[I];
}
`

// itemMacros are what a member's entry point sees in place of the
// launch's block, grid and wait.
var itemMacros = []struct{ name, def string }{
	{"KERNEL", "#define KERNEL DEVICE"},
	{"BID_X", "#define BID_X stream_bx"},
	{"BID_Y", "#define BID_Y stream_by"},
	{"BID_Z", "#define BID_Z 0"},
	{"GDIM_X", "#define GDIM_X stream_gx"},
	{"GDIM_Y", "#define GDIM_Y stream_gy"},
	{"PDL_WAIT", "#define PDL_WAIT() stream_wait_dep()"},
	{"PDL_TRIGGER", "#define PDL_TRIGGER() ((void)0)"},
	{"PDL_ENTRY", "#define PDL_ENTRY() stream_wait_dep()"},
}

// persistentMember is what the loop's template sees of a member.
type persistentMember struct {
	Index int
	NS    string
	Name  string
	Call  string
}

// RenderPersistent renders a decode_persistent kernel of plan p from its
// members' sources.
func RenderPersistent(p *plan.Plan, k plan.Kernel) (Source, error) {
	if ir.Kind(k.Family) != ir.DecodePersistent {
		return Source{}, fmt.Errorf("codegen: kernel %s: family %s is not %s", k.Name, k.Family, ir.DecodePersistent)
	}
	d, err := p.Target.Dialect()
	if err != nil {
		return Source{}, fmt.Errorf("codegen: %w", err)
	}
	if !isIdent(k.Name) {
		return Source{}, fmt.Errorf("codegen: kernel name %q is not a C identifier", k.Name)
	}
	if len(k.Members) == 0 {
		return Source{}, fmt.Errorf("codegen: kernel %s lists no members", k.Name)
	}
	byName := map[string]plan.Kernel{}
	for _, pk := range p.Kernels {
		byName[pk.Name] = pk
	}
	c := p.Target.Launch()
	pre, err := prelude(d, c)
	if err != nil {
		return Source{}, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "// %s: family %s, dialect %s. Generated by aimac codegen from %s and its %d members' templates; do not edit.\n",
		k.Name, k.Family, d, "decode_persistent.tmpl", len(k.Members))
	b.WriteString(pre)
	b.WriteString(persistentHelpers[d])
	b.WriteString(persistentArgs)
	for _, m := range itemMacros {
		fmt.Fprintf(&b, "#undef %s\n%s\n", m.name, m.def)
	}
	members := make([]persistentMember, len(k.Members))
	for i, name := range k.Members {
		mk, ok := byName[name]
		if !ok {
			return Source{}, fmt.Errorf("codegen: kernel %s: member %s is not a plan kernel", k.Name, name)
		}
		if !kernels.Persistent(ir.Kind(mk.Family)) {
			return Source{}, fmt.Errorf("codegen: kernel %s: member %s: family %s cannot run as a persistent item", k.Name, name, mk.Family)
		}
		r, err := renderKernel(p.Target, mk)
		if err != nil {
			return Source{}, err
		}
		if r.prelude != pre {
			return Source{}, fmt.Errorf("codegen: kernel %s: member %s renders with another prelude", k.Name, name)
		}
		if macroDef.MatchString(r.body) {
			return Source{}, fmt.Errorf("codegen: kernel %s: member %s defines macros, which would reach the other members", k.Name, name)
		}
		// The prelude's grid barrier reads the launch's grid, not the item's.
		if at := gridBarrier.FindString(r.body); at != "" {
			return Source{}, fmt.Errorf("codegen: kernel %s: member %s calls %s), which waits for its launch's grid", k.Name, name, at)
		}
		ns := fmt.Sprintf("m%d", i)
		fmt.Fprintf(&b, "namespace %s {  // member %d: %s\n%s}  // namespace %s\n", ns, i, name, r.body, ns)
		// Operands, then n and the parameter block (KernelABI).
		args := make([]string, len(r.family.Operands)+2)
		for j := range args {
			args[j] = fmt.Sprintf("stream_arg<%d, decltype(%s::%s)>(a)", j, ns, name)
		}
		if len(args) > kernels.PersistentArgs {
			return Source{}, fmt.Errorf("codegen: kernel %s: member %s takes %d arguments; a record holds %d", k.Name, name, len(args), kernels.PersistentArgs)
		}
		members[i] = persistentMember{Index: i, NS: ns, Name: name, Call: strings.Join(args, ", ")}
	}
	for _, m := range itemMacros {
		orig := preludeMacro(pre, m.name)
		if orig == "" {
			return Source{}, fmt.Errorf("codegen: the %s prelude defines no %s", d, m.name)
		}
		fmt.Fprintf(&b, "#undef %s\n%s\n", m.name, orig)
	}
	tm, err := templates()
	if err != nil {
		return Source{}, fmt.Errorf("codegen: templates: %w", err)
	}
	var loop bytes.Buffer
	if err := kernels.Families[ir.DecodePersistent].CheckParams(k.Params); err != nil {
		return Source{}, fmt.Errorf("codegen: kernel %s: %w", k.Name, err)
	}
	data := map[string]any{"name": k.Name, "members": members, "header": kernels.PersistentHeader, "record": kernels.PersistentRecord,
		"max_launches": k.Params.Int("max_launches")}
	if err := tm.ExecuteTemplate(&loop, "decode_persistent.tmpl", data); err != nil {
		return Source{}, fmt.Errorf("codegen: kernel %s: %w", k.Name, err)
	}
	b.WriteString(loop.String())
	return newSource(k, "decode_persistent.tmpl", b.String()), nil
}

var (
	macroDef    = regexp.MustCompile(`(?m)^\s*#\s*define\b`)
	gridBarrier = regexp.MustCompile(`\bgrid_(arrive|barrier|wait)\(`)
)

var macroLine = regexp.MustCompile(`(?m)^#define ([A-Z_0-9]+)\b.*$`)

// preludeMacro is the prelude's own #define line of name ("" if none).
func preludeMacro(prelude, name string) string {
	for _, m := range macroLine.FindAllStringSubmatch(prelude, -1) {
		if m[1] == name {
			return m[0]
		}
	}
	return ""
}
