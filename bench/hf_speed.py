#!/usr/bin/env python3
"""HuggingFace transformers speed on the shapes `aima-engine probe bench` times.

  hf_speed.py [run] [--lengths 1024,8192] [--decode-contexts 1024,8192]
      [--decode-tokens 16] [--repeats 3] [--layers 40] [--attn eager,sdpa]
      [--time-limit S] --out hf.json

Builds transformers' Qwen3_5MoeForCausalLM from the nested text_config of
arch/qwen3.6-35b-a3b.config.json (all 40 layers by default) directly on the
GPU in bf16, fills every parameter in place from a seeded generator (no
checkpoint: about 67 GB of weights made in a second), checks that every
parameter and buffer is finite and that the logits are, then for each
attention implementation in --attn (eager first; the model is the same,
only the attention function changes):

  prefill: for each length N, --warmup untimed then --repeats timed forwards
           of N fresh random ids (use_cache=True, logits_to_keep=1: what a
           prompt costs in generation); torch.cuda events around each call,
           after a synchronize; tok/s median, min, max.
  decode:  for each context C, on the cache of C's last prefill,
           --decode-warmup untimed then --decode-tokens timed single-token
           steps with the cache, greedy (argmax on the GPU, outside the timed
           region); tok/s of the median step and of the total.

Writes JSON after every measurement (so a run cut short keeps what it did)
with the versions, the GPU, which fast paths transformers found
(flash-linear-attention, causal-conv1d) and which experts implementation it
chose, and every figure with its min/max. The JSON's keys match
`aima-engine probe bench --json`'s.

  hf_speed.py combine --ours ours.json --hf hf.json [--gpu gpu.csv]
      --json speed.json --md speed.md

Puts both side by side: our tok/s, HF's (each attention implementation), and
the ratio ours/HF, as JSON and a Markdown table (printed too). Needs no torch.

  hf_speed.py run --tiny --device cpu --out tiny.json

checks the whole path on a 4-layer model of tiny widths, on any machine.
"""

import argparse
import contextlib
import gc
import json
import os
import platform
import random
import signal
import statistics
import sys
import time
import traceback

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARCH_CONFIG = os.path.join(ROOT, "arch", "qwen3.6-35b-a3b.config.json")
TOKEN_LIMIT = 248077  # ids below this are ordinary tokens of the real tokenizer
INIT_STD = 0.02


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def parse_ints(s):
    return [int(x) for x in str(s).split(",") if x.strip()]


def summarize(xs):
    if not xs:
        return None
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "n": len(xs)}


def rate(n, s):
    """Seconds of n-token runs as tokens per second (the slowest run is the minimum)."""
    if s is None:
        return None
    return {"median": round(n / s["median"], 1), "min": round(n / s["max"], 1), "max": round(n / s["min"], 1), "n": s["n"]}


class Results:
    def __init__(self, path, data):
        self.path = path
        self.data = data
        self.t0 = time.time()

    def save(self):
        self.data["elapsed_s"] = round(time.time() - self.t0, 3)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(self.data, fh, indent=1)
            fh.write("\n")
        os.replace(tmp, self.path)


# ---------------------------------------------------------------------------
# the model
# ---------------------------------------------------------------------------


def layer_types(n, interval):
    return ["full_attention" if (i + 1) % interval == 0 else "linear_attention" for i in range(n)]


def text_config_kwargs(path, layers, tiny):
    """The keyword arguments of Qwen3_5MoeTextConfig, as oracle/compare_full4.py builds them."""
    with open(path) as fh:
        cfg_json = json.load(fh)
    tc = cfg_json["text_config"]
    kwargs = {k: v for k, v in tc.items() if k not in ("dtype", "model_type")}
    kwargs["tie_word_embeddings"] = bool(cfg_json.get("tie_word_embeddings", False))
    if tiny:
        layers = layers or 4
        kwargs.update(
            hidden_size=64,
            head_dim=32,
            num_attention_heads=4,
            num_key_value_heads=2,
            linear_key_head_dim=16,
            linear_value_head_dim=16,
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            moe_intermediate_size=32,
            shared_expert_intermediate_size=32,
            num_experts=8,
            num_experts_per_tok=2,
            vocab_size=1024,
        )
        rp = dict(kwargs["rope_parameters"])
        rp["mrope_section"] = [2, 1, 1]  # head_dim 32 * 0.25 / 2 = 4 frequencies
        kwargs["rope_parameters"] = rp
    if layers and layers != kwargs["num_hidden_layers"]:
        kwargs["num_hidden_layers"] = layers
        kwargs["layer_types"] = layer_types(layers, kwargs.get("full_attention_interval", 4))
    return kwargs


def set_attn(model, attn):
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(attn)
    else:
        model.config._attn_implementation = attn
    return getattr(model.config, "_attn_implementation", attn)


def set_experts(model, experts):
    if hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation(experts)
    else:
        model.config._experts_implementation = experts
    return getattr(model.config, "_experts_implementation", experts)


def build_model(torch, kwargs, attn, experts, device, dtype):
    from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as hf_modeling
    from transformers.models.qwen3_5_moe.configuration_qwen3_5_moe import Qwen3_5MoeTextConfig

    extra = {"attn_implementation": attn}
    if experts:
        extra["experts_implementation"] = experts
    cfg = Qwen3_5MoeTextConfig(**kwargs, **extra)
    place = torch.device(device)
    if not hasattr(place, "__enter__"):  # torch < 2.0: made on the host, moved below
        place = contextlib.nullcontext()
    prev = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        # Parameters are made where they live, in bf16: nothing passes through the host.
        with place:
            model = hf_modeling.Qwen3_5MoeForCausalLM(cfg)
    finally:
        torch.set_default_dtype(prev)
    wrong = sorted({str(p.device) for p in model.parameters() if p.device != torch.device(device)})
    if wrong:
        log(f"parameters made on {wrong}: moving them to {device}")
        model.to(device)
    model.eval()
    if getattr(model.config, "_attn_implementation", None) != attn:
        set_attn(model, attn)
    if experts and getattr(model.config, "_experts_implementation", experts) != experts:
        set_experts(model, experts)
    return model


def fill_weights(torch, model, seed, device):
    """Every parameter, in place, from one seeded generator: matrices N(0, 0.02),
    the (1+w) RMSNorms 0, the gated RMSNorm 1, A_log = log U[1,16], dt_bias 1."""
    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    counts = {}
    seen = set()

    def count(rule, p):
        c = counts.setdefault(rule, [0, 0])
        c[0] += 1
        c[1] += p.numel()

    with torch.no_grad():
        for mname, mod in model.named_modules():
            cls = type(mod).__name__
            for pname, p in mod.named_parameters(recurse=False):
                if id(p) in seen:
                    continue
                seen.add(id(p))
                if pname == "A_log":
                    p.uniform_(1.0, 16.0, generator=gen).log_()
                    count("A_log: log U[1,16]", p)
                elif pname == "dt_bias":
                    p.fill_(1.0)
                    count("dt_bias: 1", p)
                elif cls.endswith("RMSNormGated"):
                    p.fill_(1.0)
                    count("gated RMSNorm weight: 1", p)
                elif cls.endswith("RMSNorm"):
                    p.zero_()
                    count("RMSNorm weight (used as 1+w): 0", p)
                elif p.dim() >= 2:
                    p.normal_(0.0, INIT_STD, generator=gen)
                    count(f"matrices: N(0, {INIT_STD})", p)
                else:
                    p.zero_()
                    count(f"other vectors: 0 ({mname}.{pname})", p)
    return {k: {"tensors": v[0], "elements": v[1]} for k, v in sorted(counts.items())}


def check_finite(torch, model):
    bad = []
    for name, p in model.named_parameters():
        if not bool(torch.isfinite(p).all()):
            bad.append(name)
    for name, b in model.named_buffers():
        if b.is_floating_point() and not bool(torch.isfinite(b).all()):
            bad.append(name)
    if bad:
        raise RuntimeError(f"non-finite parameters or buffers: {bad[:10]} ({len(bad)})")


def logits_check(torch, model, args):
    ids = torch.tensor([prompt(args.seed, 16, 999, args.id_limit)], dtype=torch.long, device=args.device)
    logits = model(input_ids=ids, use_cache=False).logits
    if not bool(torch.isfinite(logits).all()):
        raise RuntimeError("logits of a 16-token prompt are not finite")
    return {"tokens": 16, "finite": True, "std": float(logits.float().std())}


def fast_paths():
    """Which optional kernels transformers could use for the Gated DeltaNet."""
    out = {}
    for name, mod in (("flash_linear_attention", "fla"), ("causal_conv1d", "causal_conv1d"), ("kernels", "kernels")):
        try:
            __import__(mod)
            out[name] = True
        except Exception:
            out[name] = False
    return out


# ---------------------------------------------------------------------------
# timing
# ---------------------------------------------------------------------------


class Timer:
    """Seconds of one call: CUDA events after a synchronize on the GPU (and the
    wall clock); the wall clock alone on the CPU."""

    def __init__(self, torch, device):
        self.torch = torch
        self.cuda = torch.device(device).type == "cuda"

    def __call__(self, fn):
        torch = self.torch
        if not self.cuda:
            t = time.perf_counter()
            r = fn()
            w = time.perf_counter() - t
            return r, w, w
        torch.cuda.synchronize()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        t = time.perf_counter()
        start.record()
        r = fn()
        end.record()
        end.synchronize()
        w = time.perf_counter() - t
        return r, start.elapsed_time(end) / 1e3, w


def prompt(seed, n, i, limit):
    """Prompt i of length n: seeded random ids below limit, none repeated while n <= limit."""
    rng = random.Random(seed * 1_000_003 + n * 1_000 + i)
    if n <= limit:
        return rng.sample(range(limit), n)
    return [rng.randrange(limit) for _ in range(n)]


class Estimate:
    """The slowest timed observation, or the last warm-up one until there is
    a timed one (first calls pay the library's set-up)."""

    def __init__(self):
        self.timed = 0.0
        self.warm = 0.0

    def add(self, x, warm):
        if warm:
            self.warm = x
        else:
            self.timed = max(self.timed, x)

    def value(self):
        return self.timed or self.warm


class Bench:
    def __init__(self, torch, model, res, args, deadline):
        self.torch = torch
        self.model = model
        self.res = res
        self.args = args
        self.deadline = deadline
        self.timer = Timer(torch, args.device)
        self.rate = Estimate()  # seconds per prefill token
        self.step_rate = Estimate()  # seconds per decode step

    def fits(self, est):
        return self.deadline is None or time.time() + est < self.deadline

    def skip(self, what):
        log(f"skipped: {what}")
        self.res.data["skipped"].append(what)

    def forward_prefill(self, ids):
        return self.model(input_ids=ids, use_cache=True, logits_to_keep=1)

    def run_variant(self, name, v):
        torch, args = self.torch, self.args
        lengths = sorted(set(args.lengths) | set(args.decode_contexts))
        for n in lengths:
            timed = n in args.lengths
            decode = n in args.decode_contexts
            entry = None
            if timed:
                entry = {"tokens": n, "warmup_s": [], "runs_s": [], "runs_wall_s": [], "seconds": None, "tok_s": None}
                v["prefill"].append(entry)
            runs = args.warmup + args.repeats if timed else 1
            out, last_s = None, None
            for i in range(runs):
                if not self.fits(n * self.rate.value()):
                    self.skip(f"{name}: prefill {n} run {i} and after: out of time")
                    break
                out = None  # free the previous cache first
                ids = torch.tensor([prompt(args.seed, n, i, args.id_limit)], dtype=torch.long, device=args.device)
                out, sec, wall = self.timer(lambda: self.forward_prefill(ids))
                last_s = sec
                self.rate.add(sec / n, warm=timed and i < args.warmup)
                if entry is not None:
                    if i < args.warmup:
                        entry["warmup_s"].append(round(sec, 6))
                    else:
                        entry["runs_s"].append(round(sec, 6))
                        entry["runs_wall_s"].append(round(wall, 6))
                        entry["seconds"] = summarize(entry["runs_s"])
                        entry["tok_s"] = rate(n, entry["seconds"])
                log(f"{name}: prefill {n}: {sec * 1e3:.1f} ms (wall {wall * 1e3:.1f} ms)")
                self.res.save()
            if entry is not None and 0 < len(entry["runs_s"]) < args.repeats:
                self.skip(f"{name}: prefill {n}: {len(entry['runs_s'])} of {args.repeats} timed runs")
            if not decode:
                out = None
                continue
            if out is None:
                self.skip(f"{name}: decode at {n}: out of time")
                continue
            steps = args.decode_warmup + args.decode_tokens
            if not self.fits(steps * self.step_rate.value()):
                self.skip(f"{name}: decode at {n}: out of time")
                out = None
                continue
            self.decode(name, v, n, out, last_s)
            out = None

    def decode(self, name, v, n, out, prefill_s):
        torch, args = self.torch, self.args
        d = {
            "context": n,
            "prefill_s": round(prefill_s, 6),
            "warmup_steps_s": [],
            "steps_s": [],
            "steps_wall_s": [],
            "step_s": None,
        }
        v["decode"].append(d)
        if not bool(torch.isfinite(out.logits).all()):
            raise RuntimeError(f"prefill {n}: non-finite logits")
        cache = out.past_key_values
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        del out
        seq = [cache_length(cache)]
        for i in range(args.decode_warmup + args.decode_tokens):
            step, sec, wall = self.timer(
                lambda: self.model(input_ids=tok, past_key_values=cache, use_cache=True, logits_to_keep=1)
            )
            cache = step.past_key_values
            tok = step.logits[:, -1].argmax(-1, keepdim=True)
            self.step_rate.add(sec, warm=i < args.decode_warmup)
            if i < args.decode_warmup:
                d["warmup_steps_s"].append(round(sec, 6))
            else:
                d["steps_s"].append(round(sec, 6))
                d["steps_wall_s"].append(round(wall, 6))
        if not bool(torch.isfinite(step.logits).all()):
            raise RuntimeError(f"decode at {n}: non-finite logits")
        seq.append(cache_length(cache))
        d["cache_seq_length_before_after"] = seq
        s = summarize(d["steps_s"])
        d["step_s"] = s
        d["total_s"] = round(sum(d["steps_s"]), 6)
        d["tok_s_median_step"] = round(1 / s["median"], 2)
        d["tok_s_total"] = round(len(d["steps_s"]) / d["total_s"], 2)
        d["tok_s_min_max"] = [round(1 / s["max"], 2), round(1 / s["min"], 2)]
        log(f"{name}: decode at {n}: {len(d['steps_s'])} steps, median {s['median'] * 1e3:.2f} ms, cache {seq}")
        self.res.save()


def cache_length(cache):
    try:
        return int(cache.get_seq_length())
    except Exception as e:  # informative only
        return f"unknown: {type(e).__name__}"


def short_path(a):
    """A path as the records show it: relative to the repository, else its base name."""
    if not os.path.isabs(a):
        return a
    rel = os.path.relpath(a, ROOT)
    return os.path.basename(a) if rel.startswith("..") else rel


def on_term(signum, frame):
    raise SystemExit(128 + signum)


def cmd_run(args):
    signal.signal(signal.SIGTERM, on_term)  # a timeout's TERM still finishes the JSON
    t0 = time.time()
    deadline = t0 + args.time_limit if args.time_limit > 0 else None
    args.lengths = [n for n in parse_ints(args.lengths) if n > 0]
    args.decode_contexts = [n for n in parse_ints(args.decode_contexts) if n > 0]
    attns = [a.strip() for a in args.attn.split(",") if a.strip()]
    if not attns or (not args.lengths and not args.decode_contexts):
        sys.exit("nothing to time: give --lengths or --decode-contexts, and --attn")
    if args.tiny:
        args.id_limit = min(args.id_limit, 1024)
    res = Results(
        args.out,
        {
            "what": "HuggingFace transformers Qwen3_5MoeForCausalLM, random bf16 weights, batch 1: cold prefill and greedy decode with the cache",
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t0)),
            "command": " ".join(short_path(a) for a in sys.argv),
            "versions": {"python": platform.python_version()},
            "device": args.device,
            "method": {
                "timing": "torch.cuda events around each forward after torch.cuda.synchronize (wall clock on the CPU); runs_wall_s/steps_wall_s: the host's clock around the same calls",
                "prompts": "seeded random ids below id_limit, no id repeated within a prompt, a fresh prompt for every run",
                "prefill": "model(input_ids, use_cache=True, logits_to_keep=1) under torch.inference_mode",
                "decode": "model(input_ids=[[argmax]], past_key_values=cache, use_cache=True, logits_to_keep=1); argmax outside the timed region",
                "seed": args.seed,
                "id_limit": args.id_limit,
                "repeats": args.repeats,
                "warmup": args.warmup,
                "decode_tokens": args.decode_tokens,
                "decode_warmup": args.decode_warmup,
                "time_limit_s": args.time_limit,
            },
            "lengths": args.lengths,
            "decode_contexts": args.decode_contexts,
            "model": {},
            "variants": {},
            "skipped": [],
            "complete": False,
            "error": None,
        },
    )
    res.save()
    torch = None
    model = None
    rc = 0
    try:
        import torch
        import transformers

        res.data["versions"].update(
            torch=torch.__version__, transformers=transformers.__version__, cuda=getattr(torch.version, "cuda", None)
        )
        res.data["fast_paths"] = fast_paths()
        if torch.device(args.device).type == "cuda":
            props = torch.cuda.get_device_properties(0)
            res.data["gpu"] = torch.cuda.get_device_name(0)
            res.data["gpu_capability"] = list(torch.cuda.get_device_capability(0))
            res.data["gpu_memory_bytes"] = props.total_memory
            torch.cuda.reset_peak_memory_stats()
        res.save()
        torch.manual_seed(args.seed)
        kwargs = text_config_kwargs(args.config, args.layers, args.tiny)
        t = time.time()
        model = build_model(torch, kwargs, attns[0], args.experts, args.device, torch.bfloat16)
        built = time.time() - t
        t = time.time()
        fill = fill_weights(torch, model, args.seed, args.device)
        check_finite(torch, model)
        if torch.device(args.device).type == "cuda":
            torch.cuda.synchronize()
        filled = time.time() - t
        dtypes = sorted({str(p.dtype) for p in model.parameters()})
        res.data["model"] = {
            "class": type(model).__name__,
            "config": os.path.relpath(args.config, ROOT) + " text_config" + (" (tiny widths)" if args.tiny else ""),
            "layers": model.config.num_hidden_layers,
            "layer_types": {k: model.config.layer_types.count(k) for k in sorted(set(model.config.layer_types))},
            "parameters": sum(p.numel() for p in model.parameters()),
            "parameter_bytes": sum(p.numel() * p.element_size() for p in model.parameters()),
            "dtypes": dtypes,
            "tied_lm_head": model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr(),
            "experts_implementation": getattr(model.config, "_experts_implementation", None),
            "build_s": round(built, 3),
            "fill_s": round(filled, 3),
            "fill": fill,
        }
        log(f"model: {res.data['model']['parameters'] / 1e9:.2f} B parameters {dtypes}, built in {built:.1f} s, filled in {filled:.1f} s, experts {res.data['model']['experts_implementation']}")
        res.save()

        with torch.inference_mode():
            try:
                res.data["model"]["logits_check"] = logits_check(torch, model, args)
            except Exception as e:
                if getattr(model.config, "_experts_implementation", None) in (None, "eager"):
                    raise
                # The library's fused experts fail here: use its eager experts, and say so.
                traceback.print_exc()
                res.data["model"]["experts_fallback"] = f"{type(e).__name__}: {e}"
                log(f"experts {model.config._experts_implementation} failed ({e}); using eager experts")
                res.data["model"]["experts_implementation"] = set_experts(model, "eager")
                res.data["model"]["logits_check"] = logits_check(torch, model, args)
            res.save()

            bench = Bench(torch, model, res, args, deadline)
            for attn in attns:
                v = {"attn_requested": attn, "prefill": [], "decode": [], "error": None}
                res.data["variants"][attn] = v
                try:
                    v["attn"] = set_attn(model, attn)
                    v["experts"] = getattr(model.config, "_experts_implementation", None)
                    try:
                        bench.run_variant(attn, v)
                    except Exception as e:
                        first_call = not any(p["warmup_s"] or p["runs_s"] for p in v["prefill"]) and not v["decode"]
                        if attn != attns[0] or v["experts"] in (None, "eager") or not first_call:
                            raise
                        # The library's fused experts failed on the very first call: fall back to
                        # its eager experts, and say so.
                        v["experts_fallback"] = f"{type(e).__name__}: {e}"
                        log(f"{attn}: experts {v['experts']} failed ({e}); retrying with eager experts")
                        v["experts"] = set_experts(model, "eager")
                        v["prefill"], v["decode"] = [], []
                        bench.run_variant(attn, v)
                except Exception as e:
                    traceback.print_exc()
                    v["error"] = f"{type(e).__name__}: {e}"
                    rc = 1
                res.save()
                if torch.device(args.device).type == "cuda":
                    torch.cuda.empty_cache()
        if torch.device(args.device).type == "cuda":
            res.data["peak_memory_bytes"] = torch.cuda.max_memory_allocated()
        res.data["complete"] = rc == 0 and not res.data["skipped"]
    except BaseException as e:
        traceback.print_exc()
        res.data["error"] = f"{type(e).__name__}: {e}"
        rc = 1
    finally:
        res.save()
        model = None
        gc.collect()
        if torch is not None and torch.cuda.is_available():
            torch.cuda.empty_cache()
    log(f"wrote {short_path(args.out)}")
    return rc


# ---------------------------------------------------------------------------
# combine
# ---------------------------------------------------------------------------


def load_json(path):
    if not path or not os.path.exists(path):
        return None, f"{path}: missing"
    try:
        with open(path) as fh:
            return json.load(fh), None
    except Exception as e:
        return None, f"{path}: {e}"


def read_csv(path):
    """nvidia-smi --format=csv output as a list of {column: value}."""
    if not path or not os.path.exists(path):
        return []
    with open(path) as fh:
        lines = [ln.strip() for ln in fh if ln.strip()]
    if len(lines) < 2:
        return []
    head = [h.strip() for h in lines[0].split(",")]
    rows = []
    for ln in lines[1:]:
        vals = [v.strip() for v in ln.split(",")]
        if len(vals) == len(head) and vals != head:
            rows.append(dict(zip(head, vals)))
    return rows


def load_summary(rows):
    """The highest SM clock, memory clock, power and memory use among the samples."""
    out = {}
    for col in rows[0] if rows else []:
        if col.startswith(("clocks.", "power.draw", "memory.used", "utilization.gpu", "temperature.gpu")):
            nums = []
            for r in rows:
                try:
                    nums.append(float(r[col].split()[0]))
                except (ValueError, IndexError):
                    pass
            if nums:
                unit = " ".join(rows[0][col].split()[1:])
                out["max " + col.split(" [")[0]] = f"{max(nums):g} {unit}".strip()
    if rows:
        out["samples"] = len(rows)
    return out


def by_key(entries, key):
    return {e[key]: e for e in entries or [] if e.get(key) is not None}


def fmt(x, digits=1):
    return "—" if x is None else f"{x:.{digits}f}"


def cmd_combine(args):
    ours, ours_err = load_json(args.ours)
    for extra in args.ours_extra or []:
        # Another run of ours (the long prefills, one timed run each): its
        # prefill lengths join the table.
        more, _ = load_json(extra)
        if more and ours is not None:
            have = {e["tokens"] for e in ours.get("prefill") or []}
            ours.setdefault("prefill", []).extend(e for e in more.get("prefill") or [] if e["tokens"] not in have)
    hf, hf_err = load_json(args.hf)
    gpu = read_csv(args.gpu)
    gpu = gpu[0] if gpu else None
    under_load = load_summary(read_csv(args.smi))
    hf_vars = (hf or {}).get("variants") or {}
    rows_p, rows_d = [], []
    lengths = sorted(set(e["tokens"] for e in (ours or {}).get("prefill", []))
                     | set(e["tokens"] for v in hf_vars.values() for e in v.get("prefill", [])))
    contexts = sorted(set(e["context"] for e in (ours or {}).get("decode", []))
                      | set(e["context"] for v in hf_vars.values() for e in v.get("decode", [])))
    ours_p = by_key((ours or {}).get("prefill"), "tokens")
    ours_d = by_key((ours or {}).get("decode"), "context")
    for n in lengths:
        o = (ours_p.get(n) or {}).get("tok_s")
        row = {"tokens": n, "ours_tok_s": o, "hf": {}}
        for name, v in hf_vars.items():
            h = (by_key(v.get("prefill"), "tokens").get(n) or {}).get("tok_s")
            row["hf"][name] = {"tok_s": h, "ratio_ours_over_hf": round(o["median"] / h["median"], 3) if o and h else None}
        rows_p.append(row)
    for c in contexts:
        od = ours_d.get(c) or {}
        row = {
            "context": c,
            "ours_start": od.get("start"),
            "ours_tok_s_median_step": od.get("tok_s_median_step"),
            "ours_tok_s_total": od.get("tok_s_total"),
            "ours_steps": len(od.get("steps_s") or []),
            "ours_bytes": od.get("bytes"),
            "ours_copy_gb_s": od.get("copy_gb_s"),
            "ours_roofline_tok_s": od.get("roofline_tok_s"),
            "ours_roofline_pct": od.get("roofline_pct"),
            "ours_profile": od.get("profile"),
            "ours_certified": certified_row(od.get("certified")),
            "hf": {},
        }
        for name, v in hf_vars.items():
            hd = by_key(v.get("decode"), "context").get(c) or {}
            h = hd.get("tok_s_median_step")
            o = row["ours_tok_s_median_step"]
            row["hf"][name] = {
                "tok_s_median_step": h,
                "tok_s_total": hd.get("tok_s_total"),
                "steps": len(hd.get("steps_s") or []),
                "ratio_ours_over_hf": round(o / h, 3) if o and h else None,
            }
        rows_d.append(row)
    out = {
        "what": "aima-engine vs HuggingFace transformers, Qwen3.6-35B-A3B shapes (40 layers), synthetic bf16 weights, batch 1",
        "gpu_smi": gpu,
        "gpu_under_load": under_load,
        "commit": args.commit or ((ours or {}).get("build") or {}).get("commit"),
        "ours": {
            "file": os.path.basename(args.ours) if args.ours else None,
            "error": ours_err or (ours or {}).get("error"),
            "complete": (ours or {}).get("complete"),
            "device": (ours or {}).get("device"),
            "plan_hash": (ours or {}).get("plan_hash"),
            "buckets": (ours or {}).get("buckets"),
            "context_tokens": (ours or {}).get("context_tokens"),
            "load_s": (ours or {}).get("load_s"),
            "memory": (ours or {}).get("memory"),
            "skipped": (ours or {}).get("skipped"),
            "copy": (ours or {}).get("copy"),
            "decode_step": ((ours or {}).get("method") or {}).get("decode_step"),
            "lm_head": ((ours or {}).get("method") or {}).get("lm_head"),
            "programmatic": ((ours or {}).get("method") or {}).get("programmatic"),
        },
        "hf": {
            "file": os.path.basename(args.hf) if args.hf else None,
            "error": hf_err or (hf or {}).get("error"),
            "complete": (hf or {}).get("complete"),
            "versions": (hf or {}).get("versions"),
            "gpu": (hf or {}).get("gpu"),
            "fast_paths": (hf or {}).get("fast_paths"),
            "model": {k: v for k, v in ((hf or {}).get("model") or {}).items() if k != "fill"},
            "variants": {n: {k: v.get(k) for k in ("attn", "experts", "experts_fallback", "error")} for n, v in hf_vars.items()},
            "peak_memory_bytes": (hf or {}).get("peak_memory_bytes"),
            "skipped": (hf or {}).get("skipped"),
        },
        "prefill": rows_p,
        "decode": rows_d,
        "notes": [
            "tok/s are medians over the timed runs (prefill) or steps (decode); min/max are in the inputs' files",
            "ratio = ours / HF: above 1 means the engine is faster",
            "ours: wall clock around each synchronous call (prefill; a decode step as ours.decode_step says); HF: CUDA events around the forward",
            "ours_start 'synthetic': the context's KV cache and GDN state were filled on the device instead of prefilled; "
            "the speed of a step at that context, not a generation",
        ],
    }
    names = list(hf_vars)
    md = ["# aima-engine vs HuggingFace transformers: speed, batch 1", ""]
    if gpu:
        md += ["GPU before the run (nvidia-smi): " + "; ".join(f"{k} {v}" for k, v in gpu.items()) + ".", ""]
    if under_load:
        md += ["During the run (sampled every few seconds): " + "; ".join(f"{k} {v}" for k, v in under_load.items()) + ".", ""]
    hv = (hf or {}).get("versions") or {}
    md += [
        f"Ours: plan {out['ours']['plan_hash']}, buckets {out['ours']['buckets']}, context {out['ours']['context_tokens']}, "
        f"device {out['ours']['device']}, load {out['ours']['load_s']} s, commit {out['commit']}.",
        f"Ours, a decode step: {out['ours']['decode_step'] or '—'} (LM head of the timed greedy steps: {out['ours']['lm_head'] or '—'}).",
        f"HF: transformers {hv.get('transformers')}, torch {hv.get('torch')}, experts "
        f"{', '.join(str(v.get('experts')) for v in hf_vars.values()) or '—'}, fast paths {(hf or {}).get('fast_paths')}.",
        "",
        "## Prefill (cold, tok/s, median [min–max])",
        "",
    ]
    md += table_head("tokens", names)
    for r in rows_p:
        o = r["ours_tok_s"]
        cells = [str(r["tokens"]), span(o)]
        for n in names:
            h = r["hf"][n]
            cells += [span(h["tok_s"]), fmt(h["ratio_ours_over_hf"], 2)]
        md.append("| " + " | ".join(cells) + " |")
    md += ["", "## Decode (greedy, tok/s of the median step; total in parentheses)", ""]
    md += table_head("context", names)
    for r in rows_d:
        cells = [context_label(r), f"{fmt(r['ours_tok_s_median_step'], 2)} ({fmt(r['ours_tok_s_total'], 2)})"]
        for n in names:
            h = r["hf"][n]
            cells += [f"{fmt(h['tok_s_median_step'], 2)} ({fmt(h['tok_s_total'], 2)})", fmt(h["ratio_ours_over_hf"], 2)]
        md.append("| " + " | ".join(cells) + " |")
    if any(r.get("ours_start") == "synthetic" for r in rows_d):
        md += ["", "(synthetic): ours started decode from a KV cache and GDN state filled on the device, not from a prefill: "
               "the speed of a step at that context (it reads and writes what it would), not a generation."]
    md += roofline_md(rows_d)
    md += certified_md(rows_d)
    problems = []
    for r in rows_d:
        c = r.get("ours_certified")
        if c and not c["identical"]:
            problems.append(f"ours: the certified int8 LM head's greedy ids differ from the BF16 head's at context {r['context']}, step {c['first_diff']}")
    for who in ("ours", "hf"):
        if out[who]["error"]:
            problems.append(f"{who}: error: {out[who]['error']}")
        for s in out[who]["skipped"] or []:
            problems.append(f"{who}: skipped: {s}")
    if out["hf"]["model"].get("experts_fallback"):
        problems.append(f"hf: fused experts failed, eager experts used: {out['hf']['model']['experts_fallback']}")
    for n, v in out["hf"]["variants"].items():
        if v.get("error"):
            problems.append(f"hf {n}: error: {v['error']}")
        if v.get("experts_fallback"):
            problems.append(f"hf {n}: fused experts failed, eager experts used: {v['experts_fallback']}")
    if problems:
        md += ["", "## Problems", ""] + [f"* {p}" for p in problems]
    out["problems"] = problems
    text = "\n".join(md) + "\n"
    with open(args.json, "w") as fh:
        json.dump(out, fh, indent=1)
        fh.write("\n")
    with open(args.md, "w") as fh:
        fh.write(text)
    print(text)
    return 0 if not problems else 1


def roofline_md(rows_d):
    """Our decode step against its bandwidth floor, and its time by kernel family."""
    rows = [r for r in rows_d if r.get("ours_bytes")]
    if not rows:
        return []
    md = ["", "## Decode roofline (ours: bytes the step must move / the copy bandwidth of the same run)", "",
          "| context | GB a step | copy GB/s | roofline tok/s | ours tok/s | % of roofline |", "|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        gb = r["ours_bytes"]["total"] / 1e9
        md.append(f"| {context_label(r)} | {gb:.3f} | {fmt(r['ours_copy_gb_s'])} | {fmt(r['ours_roofline_tok_s'])} | "
                  f"{fmt(r['ours_tok_s_median_step'], 2)} | {fmt(r['ours_roofline_pct'])} |")
    for r in rows:
        p = r.get("ours_profile")
        if not p:
            continue
        how = "each launch timed inside one graph replay" if p.get("mode") == "graph" else "launch by launch"
        md += ["", f"### Decode at {context_label(r)} by kernel family ({p['steps']} steps, {how}: {p['timing']}; "
               f"{p['step_us']:.1f} µs of launches a step)", "",
               "| family | launches | µs/step | share % | MB | GB/s | % of copy |", "|---|---:|---:|---:|---:|---:|---:|"]
        copy = r.get("ours_copy_gb_s")
        for f in p["families"]:
            pct = fmt(100 * f["gb_s"] / copy) if copy else "—"
            md.append(f"| {f['family']} | {f['launches']} | {f['us_per_step']:.1f} | {100 * f['share']:.1f} | "
                      f"{f['bytes_total'] / 1e6:.3f} | {f['gb_s']:.1f} | {pct} |")
        if p.get("host_behind_steps"):
            md += ["", f"The host fell behind the device in {p['host_behind_steps']} of {p['steps']} profiled steps: "
                   "these times include the host's gaps between launches and overstate the kernels."]
    return md


def certified_row(c):
    """The two LM heads' greedy steps from one snapshot (probe bench --certified-steps)."""
    if not c:
        return None
    b, i = (c.get("bf16_step_s") or {}).get("median"), (c.get("int8_step_s") or {}).get("median")
    return {
        "steps": c.get("steps"),
        "identical": c.get("identical"),
        "first_diff": c.get("first_diff"),
        "bf16_tok_s_median_step": round(1 / b, 2) if b else None,
        "int8_tok_s_median_step": round(1 / i, 2) if i else None,
        "gain_pct": round(100 * (b / i - 1), 2) if b and i else None,
        "saved_us_per_step": c.get("saved_us_per_step"),
        "candidates_mean": c.get("candidates_mean"),
        "candidates_max": c.get("candidates_max"),
        "fallbacks": c.get("fallbacks"),
    }


def certified_md(rows_d):
    """Greedy decode with each LM head from the same state: tok/s and whether every id agreed."""
    rows = [r for r in rows_d if r.get("ours_certified")]
    if not rows:
        return []
    md = ["", "## Greedy decode with each LM head (ours: the same steps from one snapshot, drawn on the device)", "",
          "| context | steps | BF16 head tok/s | certified int8 head tok/s | gain % | µs saved a step | candidates a step (max) | fallbacks | every id agreed |",
          "|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        c = r["ours_certified"]
        md.append(f"| {context_label(r)} | {c['steps']} | {fmt(c['bf16_tok_s_median_step'], 2)} | {fmt(c['int8_tok_s_median_step'], 2)} | "
                  f"{fmt(c['gain_pct'], 2)} | {fmt(c['saved_us_per_step'])} | {fmt(c['candidates_mean'], 2)} ({c['candidates_max']}) | "
                  f"{c['fallbacks']} | {'yes' if c['identical'] else 'NO, first at step %s' % c['first_diff']} |")
    return md


def context_label(r):
    if r.get("ours_start") == "synthetic":
        return f"{r['context']} (synthetic)"
    return str(r["context"])


def table_head(first, names):
    cols = [first, "ours"] + [c for n in names for c in (f"HF {n}", f"ours/HF {n}")]
    return ["| " + " | ".join(cols) + " |", "|" + "---:|" * len(cols)]


def span(s):
    if not s:
        return "—"
    return f"{s['median']:.1f} [{s['min']:.1f}–{s['max']:.1f}]"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="time transformers")
    r.add_argument("--lengths", default="1024,8192", help="prefill lengths")
    r.add_argument("--decode-contexts", default="1024,8192", help="contexts to decode at")
    r.add_argument("--decode-tokens", type=int, default=16)
    r.add_argument("--decode-warmup", type=int, default=2)
    r.add_argument("--repeats", type=int, default=3)
    r.add_argument("--warmup", type=int, default=1)
    r.add_argument("--layers", type=int, default=40)
    r.add_argument("--attn", default="eager,sdpa", help="attention implementations, in order (the first is built)")
    r.add_argument("--experts", default="", help="experts implementation (default: the library's choice)")
    r.add_argument("--seed", type=int, default=1)
    r.add_argument("--id-limit", type=int, default=TOKEN_LIMIT)
    r.add_argument("--config", default=ARCH_CONFIG, help="config.json with a text_config")
    r.add_argument("--device", default="cuda")
    r.add_argument("--tiny", action="store_true", help="tiny widths (4 layers unless --layers): a check of the path")
    r.add_argument("--time-limit", type=float, default=0, help="skip measurements that would end later than this many seconds after the start")
    r.add_argument("--out", required=True)
    c = sub.add_parser("combine", help="ours vs HF, as JSON and Markdown")
    c.add_argument("--ours", required=True)
    c.add_argument("--hf", required=True)
    c.add_argument("--ours-extra", action="append", help="another JSON of ours whose prefill lengths join the table (repeatable)")
    c.add_argument("--gpu", default="", help="nvidia-smi --format=csv of the GPU before the run")
    c.add_argument("--smi", default="", help="nvidia-smi --format=csv -l samples taken during the run")
    c.add_argument("--commit", default="")
    c.add_argument("--json", required=True)
    c.add_argument("--md", required=True)
    argv = sys.argv[1:]
    if not argv or argv[0] not in ("run", "combine", "-h", "--help"):
        argv = ["run"] + argv  # run is the default
    args = ap.parse_args(argv)
    if args.cmd == "run":
        if args.tiny and args.layers == 40:
            args.layers = 4
        if args.repeats < 1 or args.warmup < 0 or args.decode_tokens < 1 or args.decode_warmup < 0:
            sys.exit("--repeats and --decode-tokens must be >= 1, the warm-ups >= 0")
        return cmd_run(args)
    return cmd_combine(args)


if __name__ == "__main__":
    sys.exit(main())
