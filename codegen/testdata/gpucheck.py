"""CUDA differential check of the rendered kernels against the Go reference kernels.

Cases (rendered .cu, random inputs, reference outputs; rows >= n poisoned) are
written on the development machine by

    go test ./codegen -run WriteGPUCases -gpucases $PWD/bin/gpucases/cases

and run on a machine with an NVIDIA GPU, nvcc, PyTorch and libcuda:

    python3 codegen/testdata/gpucheck.py bin/gpucases/cases

Each case is compiled with nvcc -cubin -arch=sm_90a, launched through the
driver API (ctypes) with the plan's grid rule and 256 threads, and every
written operand is compared in full (tails included): within tolerance, or
bit for bit where meta.json says "exact" (the fill_uniform cases), or, where it
says "sample" (the sampler), ids exactly and the logprob (out[1], float bits)
to 1e-5; an i32 operand marked "tagged" (gdn_decode_peer's slots) holds (tag, f32)
pairs: tags exactly, floats within tolerance. gpucheck_sm90.json holds the last result on an H200.

A case whose meta.json gives "time_reps" is then launched that many times back to
back between two CUDA events, five times over: the median microseconds per
launch are reported, and with
"bytes" (what one launch must move) the achieved GB/s, beside the kernel's registers a
thread, local (spill) bytes and resident blocks per SM; with "flops" (the
floating-point operations of one launch) the achieved TFLOP/s. "atol" and
"rtol" replace the f32 tolerance 2e-4 + 1e-3·|want| (the tensor-core families
state theirs beside their cases). ptxas's register and spill report of every
kernel goes into the json (-Xptxas -v), and is printed for speed cases and
kernels with a stack frame or spills. "block" and "shared"
(dynamic shared memory bytes) default to 256 threads and 0; "cluster": C launches
clusters of C blocks along x (cuLaunchKernelEx, its cluster dimension). A case with
"inputs_from" reads its input and want files from that sibling case (an old
family timed on the new one's bytes); an argument with "elements" longer than
its file is zero-extended to that length on the device, or, with "repeat",
tiled to it (a long KV cache written as one period of positions). A case with
"graph": true also times the same launches captured into one CUDA graph and replayed,
without and with programmatic dependent launch (graph_us, graph_pdl_us: no host
launch rate in the figure, as inside the engine's step graph).
"rotate": R holds R copies of every operand on the device (each 256-byte aligned,
the file's bytes in each) and its timed launch i takes copy i mod R, so that a
working set smaller than the L2 is timed as it runs in a step, from HBM; the
correctness launch takes copy 0. A want file shorter than its output is compared
over its own length (a speed case whose reference covers its first rows only).
With "flops" (what one launch must compute) the rate is reported in TFLOP/s.
An f32 output argument with "want64" (a file of float64 values, over the output's
first elements) is also compared against that float64 reference: the log line and
the json give the largest and the mean absolute error relative to the reference's
rms ("y.in: maxerr 1.2e-07 (rel) meanerr 3e-08 (rel ...)"; in the json y_maxerr_rel,
y_meanerr_rel, y_scale_rms): the precision cases (docs/prefill-gemm.md, "Sums over K").

GPUCHECK_ONLY, a regular expression, keeps the cases (and chains) whose names
it matches: a subset when the whole set does not fit one run.

A case that faults (an illegal address: the CUDA context is lost) does not end
the check: the script runs the cases in a child process, which names each case
in $OUT/gpucheck.progress before it runs it; when the child dies, the case it
named is reported "FAULT" and a new child goes on after it, reusing the cubins
(and nvcc's report, nvcc.json beside each) the first child compiled.

A directory whose meta.json gives "chain" (a list of case names, no kernel of
its own) times those cases as a chain, the way the decode step launches them
(gpuchain.py, beside this file): "reps" rounds of one launch of each in turn
(round i takes each case's copy i mod its "rotate"), all on one stream through
cuLaunchKernelEx, five times over, once with
CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION on every launch ("pdl")
and once without ("serial"); it reports the median microseconds a round and a
launch both ways, and, per pair of neighbours, the blocks of the later one that
fit on an SM beside the earlier one's (registers, shared memory, threads): what
of a programmatic launch can be resident before the one before it ends. The
chains run after the cases, in the child that ran their members; a chain whose
member failed (or ran in a child before a fault) is BAD.
"""
import ctypes, json, os, subprocess, sys
cases = os.path.abspath(sys.argv[1])
out_dir = os.environ.get("OUT", "/tmp")
os.makedirs(out_dir, exist_ok=True)
progress = os.path.join(out_dir, "gpucheck.progress")
partial = os.path.join(out_dir, "gpucheck.partial.json")
if os.environ.get("GPUCHECK_CHILD") is None:
    # The parent: children run the cases; a child that dies took its case's
    # context with it, and the next child starts after that case.
    after, results = "", []
    if os.path.exists(partial): os.remove(partial)
    while True:
        if os.path.exists(progress): os.remove(progress)
        rc = subprocess.run([sys.executable, __file__, cases], env=dict(os.environ, GPUCHECK_CHILD=after)).returncode
        done = json.load(open(partial)) if os.path.exists(partial) else []
        results += done
        if os.path.exists(partial): os.remove(partial)
        faulted = open(progress).read().strip() if os.path.exists(progress) else ""
        if rc == 0 or not faulted:
            break
        print(f"{faulted:16s} FAULT the case's launch lost the CUDA context (exit {rc}); going on after it", flush=True)
        results.append({"case": faulted, "ok": "fault", "max_abs_err": None})
        after = faulted
    json.dump(results, open(os.path.join(out_dir, "gpucheck_sm90.json"), "w"))
    print("ALL OK" if results and all(r["ok"] is True for r in results) else "FAILURES")
    sys.exit(0)
skip_through = os.environ["GPUCHECK_CHILD"]
import torch
torch.zeros(1, device="cuda"); torch.cuda.synchronize()
cuda = ctypes.CDLL("libcuda.so.1")
DT = {"f32": torch.float32, "i32": torch.int32, "bf16": torch.int16, "i8": torch.int8}
results = []
class LaunchAttr(ctypes.Structure):  # CUlaunchAttribute: id, 4 bytes of padding, a 64-byte value union
    _fields_ = [("id", ctypes.c_uint), ("pad", ctypes.c_uint), ("value", ctypes.c_ubyte * 64)]
class LaunchConfig(ctypes.Structure):  # CUlaunchConfig (CUDA 12)
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(LaunchAttr)), ("num_attrs", ctypes.c_uint)]
def chk(rc, what):
    if rc != 0: raise RuntimeError(f"{what}: CUresult {rc}")
def graph_us(fn, g, blk, shared, pargs, reps, pdl):
    """The median µs a launch of reps launches captured into one CUDA graph (copy i of
    the operands for launch i, as the back-to-back timing), five replays; with pdl every
    launch but the first carries programmatic stream serialization, as the step's."""
    stream = ctypes.c_void_p()
    chk(cuda.cuStreamCreate(ctypes.byref(stream), 1), "cuStreamCreate")
    chk(cuda.cuStreamBeginCapture_v2(stream, 2), "cuStreamBeginCapture")
    attr = LaunchAttr(); attr.id = 6; attr.value[0] = 1  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    try:
        for i in range(reps):
            if pdl and i > 0:
                cfg = LaunchConfig((ctypes.c_uint * 3)(*g), (ctypes.c_uint * 3)(*blk), shared, stream, ctypes.pointer(attr), 1)
                chk(cuda.cuLaunchKernelEx(ctypes.byref(cfg), fn, pargs[i % len(pargs)][1], None), "cuLaunchKernelEx")
            else:
                chk(cuda.cuLaunchKernel(fn, g[0], g[1], g[2], blk[0], blk[1], blk[2], shared, stream, pargs[i % len(pargs)][1], None), "cuLaunchKernel")
    finally:
        graph = ctypes.c_void_p()
        rc = cuda.cuStreamEndCapture(stream, ctypes.byref(graph))
    chk(rc, "cuStreamEndCapture")
    exe = ctypes.c_void_p()
    chk(cuda.cuGraphInstantiateWithFlags(ctypes.byref(exe), graph, ctypes.c_ulonglong(0)), "cuGraphInstantiate")
    ext = torch.cuda.ExternalStream(stream.value)
    chk(cuda.cuGraphLaunch(exe, stream), "cuGraphLaunch"); chk(cuda.cuStreamSynchronize(stream), "cuStreamSynchronize")
    times = []
    for _ in range(5):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record(ext); chk(cuda.cuGraphLaunch(exe, stream), "cuGraphLaunch"); e1.record(ext); e1.synchronize()
        times.append(e0.elapsed_time(e1) * 1000 / reps)
    cuda.cuGraphExecDestroy(exe); cuda.cuGraphDestroy(graph); cuda.cuStreamDestroy_v2(stream)
    return sorted(times)[len(times) // 2]
def nvcc(name):
    """nvcc's result for a case, compiled once: a child started after a fault
    reuses the cubins and ptxas reports the children before it wrote."""
    d = os.path.join(cases, name)
    log = os.path.join(d, "nvcc.json")
    if os.path.exists(log) and os.path.exists(os.path.join(d, "k.cubin")):
        saved = json.load(open(log))
        return subprocess.CompletedProcess(saved["args"], saved["returncode"], "", saved["stderr"])
    r = subprocess.run(["nvcc", "-cubin", "-arch=sm_90a", "-O3", "-Werror", "all-warnings", "-Xptxas", "-v", os.path.join(d, "kernel.cu"), "-o", os.path.join(d, "k.cubin")], capture_output=True, text=True)
    if r.returncode == 0:
        json.dump({"args": r.args, "returncode": r.returncode, "stderr": r.stderr}, open(log, "w"))
    return r
# Every case compiles first, in parallel: nvcc dominates the run otherwise.
# GPUCHECK_ONLY (a regular expression) keeps the cases whose names it matches.
import re
from concurrent.futures import ThreadPoolExecutor
only = re.compile(os.environ.get("GPUCHECK_ONLY") or ".")
metas = {n: json.load(open(os.path.join(cases, n, "meta.json"))) for n in sorted(os.listdir(cases)) if only.search(n)}
chains = {n: m for n, m in metas.items() if m.get("chain") and n > skip_through and all(c in metas for c in m["chain"])}
# A child started after a chain that faulted runs only the chains after it.
names = [] if skip_through in metas and metas[skip_through].get("chain") else [n for n in metas if n > skip_through and not metas[n].get("chain")]
members = {c for m in chains.values() for c in m["chain"]}
kept = {}  # a chain member's launch: function, shape, argument arrays (its buffers stay alive)
with ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
    compiled = dict(zip(names, pool.map(nvcc, names)))
def save():
    json.dump([dict({"case": r[0], "ok": r[1], "max_abs_err": r[2]}, **(r[3] if len(r) > 3 else {})) for r in results], open(partial, "w"))
for name in names:
    open(progress, "w").write(name)
    save()
    d = os.path.join(cases, name)
    meta = metas[name]
    cub = os.path.join(d, "k.cubin")
    r = compiled[name]
    if r.returncode != 0:
        print(name, "NVCC FAIL", r.stderr[:3000]); results.append((name, "nvcc", None)); continue
    # ptxas -v: keep its resource lines apart from anything else nvcc says.
    info = [l.strip() for l in r.stderr.splitlines() if ("ptxas info" in l and "Used" in l) or "spill" in l]
    rest = [l for l in r.stderr.splitlines() if "ptxas info" not in l and "spill" not in l and l.strip()]
    if rest: print(name, "nvcc says:", "\n".join(rest)[:1000])
    resources = "; ".join(l.split(":", 1)[-1].strip() if "ptxas info" in l else l for l in info)
    spills = any(("spill" in l or "stack" in l) and not l.startswith("0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads") for l in info)
    mod = ctypes.c_void_p(); data = open(cub, "rb").read()
    assert cuda.cuModuleLoadData(ctypes.byref(mod), data) == 0
    fn = ctypes.c_void_p()
    assert cuda.cuModuleGetFunction(ctypes.byref(fn), mod, meta["kernel"].encode()) == 0
    src = os.path.join(cases, meta["inputs_from"]) if meta.get("inputs_from") else d  # a case timed on another's files
    ts = []; rot = meta.get("rotate") or 1; copies = []
    for a in meta["args"]:
        raw = bytearray(open(os.path.join(src, a["file"]), "rb").read())
        t = torch.frombuffer(raw, dtype=DT[a["dtype"]]).clone()
        if a.get("elements", 0) > t.numel() and a.get("repeat"):  # tiled to the operand's length (a long KV cache)
            t = t.repeat((a["elements"] + t.numel() - 1) // t.numel())[:a["elements"]].clone()
        elif a.get("elements", 0) > t.numel():  # zero-extended to the operand's length (unread experts)
            t = torch.cat([t, torch.zeros(a["elements"] - t.numel(), dtype=t.dtype)])
        stride = -(-t.numel() * t.element_size() // 256) * 256 // t.element_size()  # elements per copy
        big = torch.zeros(rot, stride, dtype=t.dtype, device="cuda")
        big[:, :t.numel()] = t.cuda()
        ts.append(big[0, :t.numel()]); copies.append((big, stride * t.element_size()))
    block = torch.tensor(meta["params"], dtype=torch.int32, device="cuda")  # the parameter block
    pargs = []  # the argument array of each copy
    for r in range(rot):
        cargs = [ctypes.c_void_p(big.data_ptr() + r * nb) for big, nb in copies] + [ctypes.c_int(meta["n"]), ctypes.c_void_p(block.data_ptr())]
        pargs.append((cargs, (ctypes.c_void_p * len(cargs))(*[ctypes.addressof(c) for c in cargs])))
    g = meta["grid"]
    blk = meta.get("block") or [256, 1, 1]; shared = meta.get("shared") or 0
    if shared > 48 * 1024:  # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
        assert cuda.cuFuncSetAttribute(fn, 8, shared) == 0
    cluster = meta.get("cluster") or 0
    if cluster > 1:  # clusters of that many blocks along x: CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
        cattr = LaunchAttr(); cattr.id = 4
        ctypes.memmove(ctypes.addressof(cattr.value), (ctypes.c_uint * 3)(cluster, 1, 1), 12)
        ccfg = LaunchConfig((ctypes.c_uint * 3)(*g), (ctypes.c_uint * 3)(*blk), shared, None, ctypes.pointer(cattr), 1)
        launch = lambda i=0: cuda.cuLaunchKernelEx(ctypes.byref(ccfg), fn, pargs[i % rot][1], None)
    else:
        launch = lambda i=0: cuda.cuLaunchKernel(fn, g[0], g[1], g[2], blk[0], blk[1], blk[2], shared, None, pargs[i % rot][1], None)
    rc = launch()
    torch.cuda.synchronize()
    worst = 0.0; ok = rc == 0; notes = []; figures = {}
    for a, t in zip(meta["args"], ts):
        if not a["out"]: continue
        raw = bytearray(open(os.path.join(src, a["file"].replace(".in", ".want")), "rb").read())
        want = torch.frombuffer(raw, dtype=DT[a["dtype"]]).cuda()
        got = t[:want.numel()]  # a shorter want checks the first rows only
        if meta.get("sample"):  # sample: ids exactly; out[1] is the logprob's float bits, to 1e-5
            if a["file"] == "out.in":
                lg, lw = got[1:2].view(torch.float32), want[1:2].view(torch.float32)
                err = float((lg - lw).abs()) if bool(lw.isfinite()) else 0.0
                worst = max(worst, err)
                same_nan = bool(lg.isnan()) and bool(lw.isnan())
                if not same_nan and not err <= 1e-5 + 1e-6 * float(lw.abs()):
                    ok = False; notes.append(f"logprob got {float(lg)} want {float(lw)}")
                got, want = torch.cat([got[:1], got[2:]]), torch.cat([want[:1], want[2:]])
            bad = got != want
            if bad.any():
                ok = False; i = int(bad.nonzero()[0]); notes.append(f"{a['file']}: {int(bad.sum())} ids differ, first @{i} got {int(got[i])} want {int(want[i])}")
            continue
        if meta.get("exact"):  # bit for bit (fill_uniform): compare the raw bits, NaN poison included
            bits = torch.int32 if a["dtype"] == "f32" else DT[a["dtype"]]
            bad = got.view(bits) != want.view(bits)
            if bad.any():
                ok = False; i = int(bad.nonzero()[0]); notes.append(f"{a['file']}: {int(bad.sum())} bits differ, first @{i} got {int(got.view(bits)[i])} want {int(want.view(bits)[i])}")
            continue
        if a.get("tagged"):  # (tag, f32 bits) pairs: the tags exactly, the floats as f32 below
            bad = got[0::2] != want[0::2]
            if bad.any():
                ok = False; i = int(bad.nonzero()[0]); notes.append(f"{a['file']}: {int(bad.sum())} tags differ, first pair @{i} got {int(got[2*i])} want {int(want[2*i])}")
            got, want = got[1::2].contiguous().view(torch.float32), want[1::2].contiguous().view(torch.float32)
            a = dict(a, dtype="f32")
        if a["dtype"] == "f32":
            err = (got - want).abs()
            tol = meta.get("atol", 2e-4) + meta.get("rtol", 1e-3) * want.abs()
            same = (got == want) | (got.isnan() & want.isnan())  # infinities (bounds) and NaN poison alike
            bad = ~((err <= tol) | same)
            worst = max(worst, float(torch.where(same, torch.zeros_like(err), err).max()))
            if bad.any():
                ok = False; i = int(bad.nonzero()[0]); notes.append(f"{a['file']}: {int(bad.sum())} bad, first @{i} got {float(got[i])} want {float(want[i])}")
            if a.get("want64"):  # a float64 reference: the error relative to its scale (rms)
                ref = torch.frombuffer(bytearray(open(os.path.join(src, a["want64"]), "rb").read()), dtype=torch.float64).cuda()
                e = (got[:ref.numel()].double() - ref).abs()
                scale = float(ref.pow(2).mean().sqrt()) or 1.0
                op = a["file"].removesuffix(".in")
                figures.update({op + "_maxerr_rel": float(e.max()) / scale, op + "_meanerr_rel": float(e.mean()) / scale, op + "_scale_rms": scale})
                notes.append(f"{a['file']}: maxerr {float(e.max()) / scale:.3g} (rel) meanerr {float(e.mean()) / scale:.3g} (rel, against float64, rms {scale:.3g})")
        else:
            diff = (got.to(torch.int64) - want.to(torch.int64)).abs()
            if a["dtype"] == "bf16":
                bad = diff > 1
            else:
                bad = diff != 0
            if bad.any():
                ok = False; i = int(bad.nonzero()[0]); notes.append(f"{a['file']}: {int(bad.sum())} bad, first @{i} got {int(got[i])} want {int(want[i])}")
    timing = {}
    if ok and meta.get("time_reps"):
        # Back-to-back launches between one pair of events, five times: an
        # event pair around each launch would time the host's launch call
        # (10-20 us), not the kernel.
        times = []
        for _ in range(5):
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for i in range(meta["time_reps"]):
                launch(i)
            e1.record(); e1.synchronize()
            times.append(e0.elapsed_time(e1) * 1000 / meta["time_reps"])
        us = sorted(times)[len(times) // 2]
        timing = {"us": round(us, 2)}
        if meta.get("bytes"):
            timing["gb_s"] = round(meta["bytes"] / us / 1e3, 1)
        if meta.get("flops"):
            timing["tflop_s"] = round(meta["flops"] / us / 1e6, 1)
        # What bounds the launch's residency: registers a thread (CU_FUNC_ATTRIBUTE_NUM_REGS),
        # local memory (spills, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES), blocks resident per SM.
        regs, local, per_sm = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        cuda.cuFuncGetAttribute(ctypes.byref(regs), 4, fn)
        cuda.cuFuncGetAttribute(ctypes.byref(local), 3, fn)
        cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(per_sm), fn, ctypes.c_int(blk[0]), ctypes.c_size_t(shared))
        timing.update({"regs": regs.value, "local_bytes": local.value, "blocks_per_sm": per_sm.value})
        if meta.get("graph") and cluster > 1:
            timing["graph_us"] = "error: graph timing launches no clusters"
        elif meta.get("graph"):
            for key, pdl in (("graph_us", False), ("graph_pdl_us", True)):
                try:
                    timing[key] = round(graph_us(fn, g, blk, shared, pargs, meta["time_reps"], pdl), 2)
                    if meta.get("bytes"):
                        timing[key.replace("_us", "_gb_s")] = round(meta["bytes"] / timing[key] / 1e3, 1)
                except Exception as e:  # a driver without graphs or PDL: say so, keep the rest
                    timing[key] = f"error: {e}"
        notes.append(" ".join(f"{k}={v}" for k, v in timing.items()))
    timing.update(figures)
    if resources:
        timing["ptxas"] = resources
        if meta.get("time_reps") or spills:  # printed where it matters: speed cases, spills
            notes.append("ptxas: " + resources)
    print(f"{name:16s} {'OK ' if ok else 'BAD'} max_abs_err={worst:.3g} {' | '.join(notes)}", flush=True)
    results.append((name, ok, worst, timing))
    if name in members and ok:
        kept[name] = dict(fn=fn, grid=g, block=blk, shared=shared, args=[p[1] for p in pargs], keep=(pargs, copies, ts, block))
# The chains, after every case (their members' buffers kept alive); a chain that
# raises is reported and does not cost the cases' results.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
for cname, cm in chains.items():
    open(progress, "w").write(cname)
    save()
    try:
        import gpuchain  # codegen/testdata/gpuchain.py, beside this file
        ok, timing, line = gpuchain.run(cuda, cm, kept)
    except Exception as e:  # a harness error in one chain, not a kernel's
        ok, timing, line = False, {}, f"chain harness error: {e!r}"
    print(f"{cname:16s} {'OK ' if ok else 'BAD'} {line}", flush=True)
    results.append((cname, ok, 0.0, timing))
save()
os.remove(progress)
