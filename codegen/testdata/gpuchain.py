"""Chain timing for gpucheck.py: cases launched in turn on one stream, the way the
decode step launches them, with and without programmatic dependent launch.

run(cuda, meta, kept) takes the driver library (ctypes), a chain's meta.json
("chain": case names, "reps": rounds, "bytes": what one round must move) and the
launches of its member cases (kept[name]: fn, grid, block, shared, args: one
argument array per rotated copy). Each round launches every member once (round i
takes copy i mod the member's copies) through cuLaunchKernelEx on a stream of its
own, "reps" rounds between two events, five times over; once with
CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION on every launch and once
without. It returns (ok, timing, line): the median microseconds a round and a
launch both ways, and for each pair of neighbours how many blocks of the later
member fit on an SM beside the earlier one's (what a programmatic launch can hold
resident before the launch before it ends). Only the driver API: no torch.
"""
import ctypes

class LaunchAttr(ctypes.Structure):  # CUlaunchAttribute: the id, 4 bytes of padding, a 64-byte value union
    _fields_ = [("id", ctypes.c_uint), ("pad", ctypes.c_uint), ("value", ctypes.c_ubyte * 64)]

class LaunchConfig(ctypes.Structure):  # CUlaunchConfig (CUDA 12): 7 uints, the stream at 32, attrs at 40, their count at 48
    _fields_ = [("grid", ctypes.c_uint * 3), ("block", ctypes.c_uint * 3), ("shared", ctypes.c_uint),
                ("stream", ctypes.c_void_p), ("attrs", ctypes.POINTER(LaunchAttr)), ("num_attrs", ctypes.c_uint)]

PROGRAMMATIC = 6  # CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
# H200 (sm_90) per SM: registers, shared memory (228 KiB), threads, blocks; SMs.
SM_REGS, SM_SMEM, SM_THREADS, SM_BLOCKS, SMS = 65536, 233472, 2048, 32, 132

def check(rc, what):
    if rc != 0:
        raise RuntimeError(f"{what}: CUresult {rc}")

def resources(cuda, k):
    """A block's registers (allocated per warp in units of 256), shared bytes (with the
    1 KiB the SM reserves a block) and threads; its occupancy alone, and the blocks it
    has on an SM when alone (its grid over the SMs, within that occupancy)."""
    regs, static, occ = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    check(cuda.cuFuncGetAttribute(ctypes.byref(regs), 4, k["fn"]), "registers")  # CU_FUNC_ATTRIBUTE_NUM_REGS
    check(cuda.cuFuncGetAttribute(ctypes.byref(static), 1, k["fn"]), "shared")  # CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
    threads = k["block"][0] * k["block"][1] * k["block"][2]
    check(cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(ctypes.byref(occ), k["fn"], ctypes.c_int(threads), ctypes.c_size_t(k["shared"])), "occupancy")
    warps = -(-threads // 32)
    blocks = k["grid"][0] * k["grid"][1] * k["grid"][2]
    return dict(regs=regs.value, reg_alloc=max(1, warps * (-(-regs.value * 32 // 256) * 256)),
                smem=static.value + k["shared"] + 1024, threads=threads, occupancy=occ.value,
                per_sm=min(occ.value, -(-blocks // SMS)))

def beside(a, b):
    """Blocks of b that fit on an SM holding a's per_sm blocks."""
    free = [(SM_REGS - a["per_sm"] * a["reg_alloc"]) // b["reg_alloc"], (SM_SMEM - a["per_sm"] * a["smem"]) // b["smem"],
            (SM_THREADS - a["per_sm"] * a["threads"]) // b["threads"], SM_BLOCKS - a["per_sm"]]
    return max(0, min(free))

def run(cuda, meta, kept):
    names = meta["chain"]
    missing = [c for c in names if c not in kept]
    if missing:
        return False, {}, f"chain members failed or absent: {missing}"
    ks = [kept[c] for c in names]
    stream = ctypes.c_void_p()
    check(cuda.cuStreamCreate(ctypes.byref(stream), 1), "stream")  # CU_STREAM_NON_BLOCKING
    attr = LaunchAttr(); attr.id = PROGRAMMATIC; attr.value[0] = 1  # programmaticStreamSerializationAllowed = 1
    e0, e1 = ctypes.c_void_p(), ctypes.c_void_p()
    check(cuda.cuEventCreate(ctypes.byref(e0), 0), "event"); check(cuda.cuEventCreate(ctypes.byref(e1), 0), "event")
    timing = {}
    try:
        for pdl in (False, True):
            cfgs = []
            for k in ks:
                c = LaunchConfig()
                c.grid[:] = list(k["grid"]); c.block[:] = list(k["block"]); c.shared = k["shared"]; c.stream = stream.value
                c.attrs = ctypes.pointer(attr) if pdl else None; c.num_attrs = 1 if pdl else 0
                cfgs.append(c)
            def round_(i):
                for k, c in zip(ks, cfgs):
                    args = k["args"]
                    check(cuda.cuLaunchKernelEx(ctypes.byref(c), k["fn"], args[i % len(args)], None), f"cuLaunchKernelEx (programmatic {pdl})")
            round_(0)
            check(cuda.cuStreamSynchronize(stream), "warm-up round")
            times = []
            for _ in range(5):
                check(cuda.cuEventRecord(e0, stream), "event record")
                for i in range(meta["reps"]):
                    round_(i)
                check(cuda.cuEventRecord(e1, stream), "event record")
                check(cuda.cuEventSynchronize(e1), "rounds")
                ms = ctypes.c_float()
                check(cuda.cuEventElapsedTime(ctypes.byref(ms), e0, e1), "elapsed time")
                times.append(ms.value * 1000 / meta["reps"])
            us = sorted(times)[len(times) // 2]
            key = "pdl" if pdl else "serial"
            timing[key + "_us_round"] = round(us, 2)
            timing[key + "_us_launch"] = round(us / len(ks), 2)
            if meta.get("bytes"):
                timing[key + "_gb_s"] = round(meta["bytes"] / us / 1e3, 1)
    finally:
        cuda.cuEventDestroy_v2(e0); cuda.cuEventDestroy_v2(e1); cuda.cuStreamDestroy_v2(stream)
    res = [resources(cuda, k) for k in ks]
    timing["resources"] = {n: r for n, r in zip(names, res)}
    pairs = []
    for i in range(len(ks)):
        j = (i + 1) % len(ks)
        a, b = res[i], res[j]
        pairs.append(f"{names[j]}: {beside(a, b)} of its {b['per_sm']} blocks/SM fit beside {a['per_sm']} of {names[i]} "
                     f"(regs {b['regs']}, smem {b['smem']}, occupancy {b['occupancy']})")
    timing["beside"] = pairs
    line = " ".join(f"{k}={v}" for k, v in timing.items() if k not in ("beside", "resources"))
    return True, timing, f"chain {' -> '.join(names)} | {line} | " + " | ".join(pairs)
