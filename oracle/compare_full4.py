#!/usr/bin/env python3
"""Compare the CUDA engine's teacher-forced logits with HuggingFace transformers
on a full-width checkpoint (made by `aimac synth --preset full --layers N`).

Two steps, driven by scripts/h200_full4_vs_hf.sh:

  compare_full4.py prompts --out DIR [--seed 1] [--lengths 1,63,...]
      writes DIR/prompts.json and DIR/tokens_<T>.txt (comma-separated ids):
      seeded random token ids, uniform over ids < 248077 (the ordinary vocabulary,
      no special tokens), drawn without replacement so no id repeats in a prompt.

  compare_full4.py compare --model-dir CKPT --work DIR --out JSON [--deadline EPOCH]
      loads CKPT into transformers' Qwen3_5MoeForCausalLM on the GPU (names
      model.language_model.* -> model.*, fp32 weights upcast from the stored bf16,
      eager attention and experts, no TF32), keeps its fp32 logits for every
      prompt on the GPU, then runs the same model in bf16 (for reference), then
      waits for the engine's logits DIR/ours_<T>.npy (announced by DIR/ours_<T>.rc
      holding the engine's exit status) and computes per position, over the full
      vocabulary, KL(HF fp32 || engine) in float64, in row chunks on the GPU.
      Writes JSON after every step, so a run cut short still leaves its results.
      --variants V1,V2 also scores DIR/ours_V1_<T>.npy ... (the same prompts through
      plans made with other flags: per_length[T].variants[V]), so one HF run
      serves several engine configurations; --fp64 0 and --bf16 0 skip those
      references.

Gates: max per-position KLD <= 0.005 and top-1 agreement >= 0.99 at every length.
"""

import argparse
import json
import os
import platform
import sys
import time
import traceback

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

LENGTHS = (1, 63, 64, 65, 1000, 1024, 1025, 4096)
TOKEN_LIMIT = 248077  # ids below this are ordinary tokens
GATE_MAX_KLD = 0.005
GATE_TOP1 = 0.99
CHUNK_ROWS = 256


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def parse_lengths(s):
    return [int(x) for x in s.split(",") if x.strip()]


# ---------------------------------------------------------------------------
# prompts
# ---------------------------------------------------------------------------


def cmd_prompts(args):
    import random

    os.makedirs(args.out, exist_ok=True)
    prompts = {}
    for t in parse_lengths(args.lengths):
        # One generator per length: a prompt does not depend on which others are drawn.
        rng = random.Random(args.seed * 1_000_003 + t)
        toks = rng.sample(range(TOKEN_LIMIT), t)
        prompts[str(t)] = toks
        with open(os.path.join(args.out, f"tokens_{t}.txt"), "w") as fh:
            fh.write(",".join(str(x) for x in toks))
    with open(os.path.join(args.out, "prompts.json"), "w") as fh:
        json.dump({"seed": args.seed, "token_limit": TOKEN_LIMIT, "prompts": prompts}, fh)
    log(f"prompts: lengths {list(prompts)} written to {args.out}")


# ---------------------------------------------------------------------------
# compare
# ---------------------------------------------------------------------------


class Results:
    def __init__(self, path, base):
        self.path = path
        self.data = base

    def save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w") as fh:
            json.dump(self.data, fh, indent=1)
            fh.write("\n")
        os.replace(tmp, self.path)


def load_hf(torch, model_dir, device):
    from safetensors import safe_open
    from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as hf_modeling
    from transformers.models.qwen3_5_moe.configuration_qwen3_5_moe import Qwen3_5MoeTextConfig

    with open(os.path.join(model_dir, "config.json")) as fh:
        cfg_json = json.load(fh)
    tc = cfg_json["text_config"]
    kwargs = {k: v for k, v in tc.items() if k not in ("dtype", "model_type")}
    kwargs["tie_word_embeddings"] = bool(cfg_json.get("tie_word_embeddings", False))
    cfg = Qwen3_5MoeTextConfig(**kwargs, attn_implementation="eager", experts_implementation="eager")
    torch.set_default_dtype(torch.float32)
    with torch.device(device):
        model = hf_modeling.Qwen3_5MoeForCausalLM(cfg)
    model = model.to(device=device, dtype=torch.float32).eval()
    if getattr(model.config, "_attn_implementation", None) != "eager" and hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation("eager")
    if getattr(model.config, "_experts_implementation", "eager") not in (None, "eager") and hasattr(
        model, "set_experts_implementation"
    ):
        model.set_experts_implementation("eager")
    impl = {
        "attn": getattr(model.config, "_attn_implementation", None),
        "experts": getattr(model.config, "_experts_implementation", None),
    }

    params = dict(model.named_parameters())
    with open(os.path.join(model_dir, "model.safetensors.index.json")) as fh:
        index = json.load(fh)
    loaded, skipped = set(), []
    dev = str(device)
    with torch.no_grad():
        for shard in sorted(set(index["weight_map"].values())):
            with safe_open(os.path.join(model_dir, shard), framework="pt", device=dev) as f:
                for k in f.keys():
                    if k == "lm_head.weight":
                        name = k
                    elif k.startswith("model.language_model."):
                        name = "model." + k[len("model.language_model.") :]
                    else:
                        skipped.append(k)  # mtp.*, model.visual.*: not the text model
                        continue
                    if name not in params:
                        raise RuntimeError(f"checkpoint tensor {k} has no HF parameter {name}")
                    t = f.get_tensor(k)
                    if t.dtype != torch.bfloat16:
                        raise RuntimeError(f"{k} is stored as {t.dtype}, want bfloat16")
                    p = params[name]
                    if tuple(t.shape) != tuple(p.shape):
                        raise RuntimeError(f"{k}: checkpoint shape {tuple(t.shape)}, HF {tuple(p.shape)}")
                    p.copy_(t)
                    loaded.add(name)
                    del t
    missing = sorted(set(params) - loaded)
    if missing:
        raise RuntimeError(f"HF parameters not in the checkpoint: {missing[:10]} ({len(missing)})")
    if model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr():
        raise RuntimeError("lm_head is tied to embed_tokens, but the checkpoint has its own lm_head")
    n = sum(p.numel() for p in model.parameters())
    return model, {"parameters": n, "tensors_loaded": len(loaded), "skipped": len(skipped), "impl": impl}


def forward(torch, model, toks, device):
    ids = torch.tensor([toks], dtype=torch.long, device=device)
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=False)
    return out.logits[0].float()


def row_stats(torch, ref, get_rows, t, device):
    """Per-position KL(ref || other) in float64 and top-1 agreement, over row chunks."""
    klds, agree, nonfinite = [], 0, 0
    for s in range(0, t, CHUNK_ROWS):
        e = min(t, s + CHUNK_ROWS)
        q = get_rows(s, e).to(device=device, dtype=torch.float64)
        nonfinite += int((~torch.isfinite(q)).sum())
        p = ref[s:e].to(torch.float64)
        lp = torch.log_softmax(p, dim=-1)
        lq = torch.log_softmax(q, dim=-1)
        klds.append((lp.exp() * (lp - lq)).sum(-1))
        agree += int((p.argmax(-1) == q.argmax(-1)).sum())
        del p, q, lp, lq
    k = torch.cat(klds)
    row_stats.last = k
    return {
        "max_kld": float(k.max()),
        "mean_kld": float(k.mean()),
        "argmax_kld_position": int(k.argmax()),
        "top1_agreement": agree / t,
        "nonfinite": nonfinite,
    }


def diagnose(torch, np, k, t, gaps, margin, bf16_k, get_rows, ref):
    """Where the KLD is large: positions, HF's decision margins there, router near-ties."""
    d = {
        "positions_kld_gt_1e-3": int((k > 1e-3).sum()),
        "positions_kld_gt_1e-4": int((k > 1e-4).sum()),
        "positions_kld_gt_1e-5": int((k > 1e-5).sum()),
        "median_kld": float(k.median()),
    }
    if gaps is not None:
        mg = gaps.min(0).values
        d["router_gap_min_over_layers_quantiles"] = {
            q: float(torch.quantile(mg.double(), float(q))) for q in ("0.001", "0.01", "0.1", "0.5")
        }
    worst = []
    for pos in k.topk(min(5, t)).indices.tolist():
        w = {"position": pos, "kld": float(k[pos])}
        if bf16_k is not None:
            w["hf_bf16_kld"] = float(bf16_k[pos])
        row = get_rows(pos, pos + 1)[0].to(ref.device)
        w["hf_top1"], w["ours_top1"] = int(ref[pos].argmax()), int(row.argmax())
        w["hf_max_prob"] = float(torch.softmax(ref[pos].double(), -1).max())
        if margin is not None:
            w["hf_top2_logit_margin"] = float(margin[pos])
        if gaps is not None:
            g = gaps[:, pos]
            w["router_kth_gap_per_layer"] = [round(float(x), 6) for x in g]
            # Positions at or before pos whose routing is nearest a tie (state carries forward).
            upto = gaps[:, : pos + 1].min(0).values
            w["min_router_gap_at_or_before"] = float(upto.min())
            w["position_of_that_gap"] = int(upto.argmin())
        worst.append(w)
    d["worst_positions"] = worst
    return d


def exact64(torch, model):
    """Makes the float64 model round nothing to fp32: transformers' norms compute
    in fp32 and its delta-rule fallback casts to fp32 whatever the model dtype,
    so here the norms run in the input dtype and the delta rule is the exact
    recurrence (SPEC §3) in float64. Returns the call counter and an undo."""
    import types
    from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as hf_modeling

    calls = {"delta_rule": 0, "norms_patched": 0}

    def rms(self, x):
        eps = getattr(self, "eps", getattr(self, "variance_epsilon", 1e-6))
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * (1.0 + self.weight.to(x.dtype))

    def gated(self, x, gate=None):
        n = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.variance_epsilon)
        return self.weight.to(x.dtype) * n * torch.nn.functional.silu(gate.to(x.dtype))

    def delta(query, key, value, g, beta, chunk_size=64, initial_state=None, output_final_state=False,
              use_qk_l2norm_in_kernel=False, **kwargs):
        calls["delta_rule"] += 1
        dtype = query.dtype
        batch, steps, _, dk = key.shape
        hv, dv = value.shape[-2:]
        if key.shape[2] != hv:
            query, key = (x.repeat_interleave(hv // x.shape[2], dim=2) for x in (query, key))
        q, k, v, b, gg = [x.transpose(1, 2).to(torch.float64) for x in (query, key, value, beta, g)]
        if use_qk_l2norm_in_kernel:
            q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6)
            k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
        q = q / (dk ** 0.5)
        state = (torch.zeros(batch, hv, dk, dv, dtype=torch.float64, device=q.device)
                 if initial_state is None else initial_state.to(torch.float64))
        out = torch.empty(batch, hv, steps, dv, dtype=torch.float64, device=q.device)
        for t in range(steps):
            state = state * gg[:, :, t].exp()[..., None, None]
            kv = (state * k[:, :, t].unsqueeze(-1)).sum(-2)
            d = (v[:, :, t] - kv) * b[:, :, t].unsqueeze(-1)
            state = state + k[:, :, t].unsqueeze(-1) * d.unsqueeze(-2)
            out[:, :, t] = (state * q[:, :, t].unsqueeze(-1)).sum(-2)
        return out.transpose(1, 2).to(dtype), (state if output_final_state else None)

    patched = []
    for m in model.modules():
        name = type(m).__name__
        if name.endswith("RMSNormGated"):
            m.forward = types.MethodType(gated, m)
            patched.append(m)
        elif name.endswith("RMSNorm"):
            m.forward = types.MethodType(rms, m)
            patched.append(m)
        for attr in ("chunk_gated_delta_rule", "torch_chunk_gated_delta_rule"):
            if callable(getattr(m, attr, None)) and not isinstance(getattr(m, attr), torch.nn.Module):
                setattr(m, attr, delta)
    calls["norms_patched"] = len(patched)
    saved = hf_modeling.torch_chunk_gated_delta_rule
    hf_modeling.torch_chunk_gated_delta_rule = delta

    def undo():
        hf_modeling.torch_chunk_gated_delta_rule = saved
        for m in patched:
            del m.forward
        for m in model.modules():
            for attr in ("chunk_gated_delta_rule", "torch_chunk_gated_delta_rule"):
                if getattr(m, attr, None) is delta:
                    delattr(m, attr)

    return calls, undo


def cmd_compare(args):
    import numpy as np
    import torch
    import transformers

    t0 = time.time()
    deadline = args.deadline or (t0 + 1e9)
    device = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    with open(os.path.join(args.work, "prompts.json")) as fh:
        pj = json.load(fh)
    prompts = {int(k): v for k, v in pj["prompts"].items()}
    lengths = sorted(prompts)

    res = Results(
        args.out,
        {
            "what": "aima-engine probe logits (CUDA, sm_90 bundle) vs HuggingFace Qwen3_5MoeForCausalLM, teacher-forced, full vocabulary",
            "command": args.command,
            "commit": args.commit,
            "checkpoint": args.checkpoint_desc,
            "gpu": torch.cuda.get_device_name(0),
            "versions": {
                "python": platform.python_version(),
                "torch": torch.__version__,
                "transformers": transformers.__version__,
            },
            "prompt_seed": pj["seed"],
            "prompt_token_limit": pj["token_limit"],
            "gates": {"max_kld": GATE_MAX_KLD, "top1": GATE_TOP1},
            "kld": "per position KL(HF fp32 || other) over the full vocabulary, float64",
            "lengths_requested": lengths,
            "hf": {},
            "per_length": {str(t): {"tokens": t} for t in lengths},
            "timings_s": {},
            "status": "running",
        },
    )
    per = res.data["per_length"]
    res.save()

    # 1. HF fp32 reference logits, kept on the GPU.
    ref, rgap, margin, bf16_k, ref64, hf32_k64 = {}, {}, {}, {}, {}, {}
    try:
        tl = time.time()
        model, info = load_hf(torch, args.model_dir, device)
        res.data["hf"]["fp32"] = info
        res.data["timings_s"]["hf_load"] = round(time.time() - tl, 1)
        log(f"HF fp32 loaded: {info} in {time.time() - tl:.1f}s")
        # Router diagnostics: per layer and position, the gap between the k-th and
        # (k+1)-th router logits (a near tie lets an fp32-equivalent computation route
        # differently), and HF's top-2 logit margin.
        topk = model.config.num_experts_per_tok
        cur_gaps = []

        def router_hook(mod, inputs):
            try:
                h = inputs[0].reshape(-1, inputs[0].shape[-1]).float()
                lg = h @ mod.weight.float().t()
                v = lg.topk(topk + 1, dim=-1).values
                cur_gaps.append((v[:, topk - 1] - v[:, topk]).detach())
            except Exception as exc:  # diagnostics only
                log(f"router hook: {exc!r}")

        handles = [l.mlp.gate.register_forward_pre_hook(router_hook) for l in model.model.layers if hasattr(getattr(l, "mlp", None), "gate")]
        for t in lengths:
            if time.time() > deadline - 30:
                per[str(t)]["hf_fp32"] = "skipped: out of time"
                continue
            tf = time.time()
            cur_gaps.clear()
            ref[t] = forward(torch, model, prompts[t], device)
            if len(cur_gaps) == len(handles):
                rgap[t] = torch.stack(cur_gaps)  # [layers, T]
                sv = ref[t].topk(2, dim=-1).values
                margin[t] = sv[:, 0] - sv[:, 1]
            if tuple(ref[t].shape) != (t, model.config.vocab_size) or not bool(torch.isfinite(ref[t]).all()):
                raise RuntimeError(f"bad HF logits at T={t}: {tuple(ref[t].shape)}")
            pmax = torch.softmax(ref[t].double(), -1).max(-1).values
            per[str(t)]["hf_fp32_forward_s"] = round(time.time() - tf, 2)
            per[str(t)]["hf_fp32_median_max_prob"] = float(pmax.median())
            log(f"HF fp32 T={t}: {time.time() - tf:.2f}s, median max prob {float(pmax.median()):.3f}")
        for h in handles:
            h.remove()
        res.save()

        # HF's bf16 path keeps RoPE frequencies in fp32: remember them before any cast.
        inv = {}
        for mname, mod in model.named_modules():
            for buf in ("inv_freq", "original_inv_freq"):
                if isinstance(getattr(mod, buf, None), torch.Tensor):
                    inv[(mname, buf)] = getattr(mod, buf).clone()

        # 1b. The same weights in float64 with nothing rounded to fp32 (exact64): a
        # reference to tell which side a discrete decision such as a router near-tie
        # went against.
        if args.fp64:
            model = model.to(torch.float64)
            calls, undo = exact64(torch, model)
            for t in lengths:
                if t not in ref or time.time() > deadline - 60:
                    continue
                tf = time.time()
                ref64[t] = forward(torch, model, prompts[t], device)
                st = row_stats(torch, ref64[t], lambda s, e: ref[t][s:e], t, device)
                per[str(t)]["hf_fp32_vs_fp64"] = st
                hf32_k64[t] = row_stats.last
                log(f"HF fp64 T={t}: {time.time() - tf:.2f}s; HF fp32 vs fp64 max KLD {st['max_kld']:.3g}; {calls}")
            res.data["hf"]["fp64"] = {"exact64": dict(calls)}
            undo()
            res.save()

        # 2. The same weights in bf16.
        if not args.bf16:
            lengths_bf16 = []
        else:
            lengths_bf16 = lengths
        model = model.to(torch.bfloat16)
        mods = dict(model.named_modules())
        for (mname, buf), v in inv.items():
            setattr(mods[mname], buf, v)
        for t in lengths_bf16:
            if t not in ref or time.time() > deadline - 30:
                continue
            got = forward(torch, model, prompts[t], device)
            st = row_stats(torch, ref[t], lambda s, e: got[s:e], t, device)
            per[str(t)]["hf_bf16"] = st
            bf16_k[t] = row_stats.last
            del got
            log(f"HF bf16 T={t}: max KLD {st['max_kld']:.3g} top1 {st['top1_agreement']:.4f}")
        del model
        torch.cuda.empty_cache()
        res.save()
    except Exception as exc:
        traceback.print_exc()
        res.data["hf"]["error"] = f"{type(exc).__name__}: {exc}"[:2000]
        res.data["status"] = "failed: HF"
        res.save()
        return 1

    # 3. The engine's logits, as the shell script produces them: ours_<T> for
    # the plan under test, ours_<V>_<T> for each of --variants (the same
    # prompts through plans made with other flags, scored the same way).
    def score(t, stem):
        """The stats of <stem>_<t>.npy against HF fp32 (and fp64): (ours, ours_vs_fp64)."""
        rc_path = os.path.join(args.work, f"{stem}_{t}.rc")
        npy = os.path.join(args.work, f"{stem}_{t}.npy")
        while not os.path.exists(rc_path) and time.time() < deadline:
            time.sleep(0.5)
        if not os.path.exists(rc_path):
            log(f"{stem} T={t}: no engine logits before the deadline")
            return "not run: out of time", None
        rc_text = open(rc_path).read().strip()
        if rc_text != "0":
            log(f"{stem} T={t}: engine {rc_text}")
            return f"engine failed: {rc_text}", None
        if t not in ref:
            return "engine ran, but no HF reference (out of time)", None
        try:
            arr = np.load(npy, mmap_mode="r")
            if arr.shape != tuple(ref[t].shape) or arr.dtype != np.float32:
                raise RuntimeError(f"engine logits {arr.shape} {arr.dtype}, want {tuple(ref[t].shape)} float32")
            rows = lambda s_, e_: torch.from_numpy(np.ascontiguousarray(arr[s_:e_]))
            st = row_stats(torch, ref[t], rows, t, device)
            st["pass"] = bool(st["max_kld"] <= GATE_MAX_KLD and st["top1_agreement"] >= GATE_TOP1 and st["nonfinite"] == 0)
            kl = row_stats.last
            st64 = None
            if t in ref64:
                st64 = row_stats(torch, ref64[t], rows, t, device)
                st64["pass"] = bool(st64["max_kld"] <= GATE_MAX_KLD and st64["top1_agreement"] >= GATE_TOP1)
                k64 = row_stats.last
                # Where ours is furthest from HF fp32: how far each is from fp64 there.
                pos = st["argmax_kld_position"]
                st64["at_worst_fp32_position"] = {"position": pos, "ours_vs_fp64": float(k64[pos]),
                                                  "hf_fp32_vs_fp64": float(hf32_k64[t][pos])}
            try:
                st["diagnostics"] = diagnose(torch, np, kl, t, rgap.get(t), margin.get(t), bf16_k.get(t), rows, ref[t])
            except Exception as exc:
                st["diagnostics"] = f"failed: {type(exc).__name__}: {exc}"[:500]
            tm = os.path.join(args.work, f"{stem}_{t}.time")
            if os.path.exists(tm):
                st["engine_wall_s"] = float(open(tm).read().strip())
            del arr
            os.remove(npy)
            log(f"{stem} T={t}: max KLD {st['max_kld']:.3g} mean {st['mean_kld']:.3g} top1 {st['top1_agreement']:.4f} {'PASS' if st['pass'] else 'FAIL'}")
            return st, st64
        except Exception as exc:
            traceback.print_exc()
            return f"compare failed: {type(exc).__name__}: {exc}"[:1000], None

    # The verdict of one length: the gate against HF fp32; where it fails, the
    # failure is transformers' own when the engine passes against the float64
    # reference and, at the failing position, HF fp32 is at least as far from
    # float64 as the engine is from HF fp32.
    def verdict(o, o64):
        if o["pass"]:
            return "pass"
        if isinstance(o64, dict) and o64["pass"] and o64["at_worst_fp32_position"]["hf_fp32_vs_fp64"] >= o["max_kld"] * 0.5:
            return "pass: HF fp32 is the one off the float64 reference at the failing position"
        return "fail"

    variants = [v for v in args.variants.split(",") if v]
    if variants:
        res.data["variants"] = {v: args.variant_flags.get(v, "") for v in variants}
    for stem in ["ours"] + [f"ours_{v}" for v in variants]:
        for t in lengths:
            o, o64 = score(t, stem)
            entry = per[str(t)]
            if stem != "ours":
                entry = entry.setdefault("variants", {}).setdefault(stem[len("ours_"):], {})
            entry["ours"] = o
            if o64 is not None:
                entry["ours_vs_fp64"] = o64
            if isinstance(o, dict):
                entry["verdict"] = verdict(o, o64)
            res.save()
    for v in variants:
        print(f"variant {v} (plan flags: {args.variant_flags.get(v, '')}):")
        for t in lengths:
            e = per[str(t)].get("variants", {}).get(v, {})
            o = e.get("ours")
            if isinstance(o, dict):
                o64 = e.get("ours_vs_fp64")
                x64 = f"{o64['max_kld']:12.3g}" if isinstance(o64, dict) else f"{'-':>12}"
                print(f"  T={t:5d} max KLD {o['max_kld']:10.3g} mean {o['mean_kld']:10.3g} top1 {o['top1_agreement']:.4f} vs fp64 {x64}  {e['verdict']}")
            else:
                print(f"  T={t:5d} {o}")
    ran = [t for t in lengths if isinstance(per[str(t)].get("ours"), dict)]
    res.data["lengths_compared"] = ran
    res.data["lengths_not_compared"] = [t for t in lengths if t not in ran]
    res.data["all_pass"] = bool(ran) and all(per[str(t)]["ours"]["pass"] for t in ran)
    with64 = [t for t in ran if isinstance(per[str(t)].get("ours_vs_fp64"), dict)]
    res.data["all_pass_vs_fp64"] = bool(with64) and len(with64) == len(ran) and all(per[str(t)]["ours_vs_fp64"]["pass"] for t in with64)
    res.data["status"] = "done"
    res.data["timings_s"]["compare_total"] = round(time.time() - t0, 1)
    res.save()

    print()
    print(f"{'T':>5} {'ours max KLD':>13} {'ours mean KLD':>14} {'ours top1':>10} {'bf16 max KLD':>13} {'bf16 mean KLD':>14} {'bf16 top1':>10}  gate  {'ours vs fp64':>12} {'fp32 vs fp64':>12}")
    for t in lengths:
        e = per[str(t)]
        o, b = e.get("ours"), e.get("hf_bf16")
        bs = (f"{b['max_kld']:13.3g} {b['mean_kld']:14.3g} {b['top1_agreement']:10.4f}" if isinstance(b, dict) else f"{'-':>13} {'-':>14} {'-':>10}")
        o64, h64 = e.get("ours_vs_fp64"), e.get("hf_fp32_vs_fp64")
        x64 = (f"{o64['max_kld']:12.3g} " if isinstance(o64, dict) else f"{'-':>12} ") + (f"{h64['max_kld']:12.3g}" if isinstance(h64, dict) else f"{'-':>12}")
        if isinstance(o, dict):
            print(f"{t:5d} {o['max_kld']:13.3g} {o['mean_kld']:14.3g} {o['top1_agreement']:10.4f} {bs}  {'PASS' if o['pass'] else 'FAIL'}  {x64}")
        else:
            print(f"{t:5d} {str(o)[:40]:>38} {bs}  -")
    res.data["verdict_pass"] = bool(ran) and all(per[str(t)]["verdict"] != "fail" for t in ran)
    res.save()
    for t in ran:
        if per[str(t)]["verdict"] not in ("pass", "fail"):
            print(f"T={t}: {per[str(t)]['verdict']}")
    print(f"all compared lengths pass against HF fp32: {res.data['all_pass']}; against float64: {res.data.get('all_pass_vs_fp64')}; "
          f"verdict: {'PASS' if res.data['verdict_pass'] else 'FAIL'}; compared {ran}; not compared {res.data['lengths_not_compared']}")
    return 0 if res.data["verdict_pass"] else 2


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prompts")
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--lengths", default=",".join(str(t) for t in LENGTHS))
    c = sub.add_parser("compare")
    c.add_argument("--model-dir", required=True)
    c.add_argument("--work", required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--deadline", type=float, default=0, help="unix time by which to stop waiting")
    c.add_argument("--command", default="")
    c.add_argument("--commit", default="")
    c.add_argument("--checkpoint-desc", default="")
    c.add_argument("--fp64", type=int, default=1, help="also run HF in float64 and compare both sides to it (1) or not (0)")
    c.add_argument("--bf16", type=int, default=1, help="also run HF in bf16 and report its distance (1) or not (0)")
    c.add_argument("--variants", default="", help="comma-separated names V of more engine runs to score (ours_V_<T>.npy)")
    c.add_argument("--variant-flags", default="", help="V=flags;... : each variant's plan flags, for the report")
    args = ap.parse_args()
    if args.cmd == "compare":
        args.variant_flags = dict(kv.split("=", 1) for kv in args.variant_flags.split(";") if "=" in kv)
    if args.cmd == "prompts":
        cmd_prompts(args)
        return 0
    return cmd_compare(args)


if __name__ == "__main__":
    sys.exit(main())
