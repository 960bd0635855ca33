#!/usr/bin/env python3
"""Build the tiny qwen3_5_moe reference fixture with HuggingFace transformers.

The fixture is what the Go CPU backend is proven against: a small random
Qwen3_5MoeForCausalLM (every architectural feature of Qwen3.6-35B-A3B, at toy
sizes), saved in the released checkpoint's on-disk layout (nested config.json,
`model.language_model.*` names, BF16 safetensors in two shards with an index,
decoy MTP / vision tensors), plus HF's fp32 teacher-forced logits for prompts
that cross the Gated-DeltaNet chunk size, and a 24-token greedy continuation.

Usage:  python3 oracle/hf_fixture.py --out DIR [--seed 0] [--device cpu]

See oracle/README.md for what the Go test checks.
"""

import argparse
import copy
import glob
import importlib.util
import json
import math
import os
import platform
import re
import sys
import time
import traceback

# No network: everything is built locally. Set before transformers is imported.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
# Deterministic cuBLAS if --device cuda is chosen (must precede CUDA init).
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")


def die(msg):
    print(f"\nFATAL: {msg}", file=sys.stderr, flush=True)
    sys.exit(1)


def warn(msg):
    print(f"WARNING: {msg}", flush=True)


try:
    import numpy as np
    import torch
    import transformers
    import safetensors
    from safetensors.torch import load_file, save_file
except ImportError as exc:  # pragma: no cover - environment problem
    die(f"missing Python package: {exc}. Needs numpy, torch, transformers>=5, safetensors.")

try:
    from transformers import GenerationConfig
    from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as hf_modeling
    from transformers.models.qwen3_5_moe.configuration_qwen3_5_moe import (
        Qwen3_5MoeConfig,
        Qwen3_5MoeTextConfig,
    )

    Qwen3_5MoeForCausalLM = hf_modeling.Qwen3_5MoeForCausalLM
    Qwen3_5MoeForConditionalGeneration = hf_modeling.Qwen3_5MoeForConditionalGeneration
except (ImportError, AttributeError) as exc:
    die(
        f"transformers {getattr(transformers, '__version__', '?')} has no usable qwen3_5_moe model ({exc}); "
        "this script was written against transformers 5.17.0."
    )

# ---------------------------------------------------------------------------
# Fixture definition
# ---------------------------------------------------------------------------

HIDDEN = 64
VOCAB = 512
NUM_LAYERS = 8
LAYER_TYPES = (["linear_attention"] * 3 + ["full_attention"]) * 2
N_HEADS, N_KV_HEADS, HEAD_DIM = 4, 2, 32
PARTIAL_ROTARY = 0.25
ROTARY_DIM = int(HEAD_DIM * PARTIAL_ROTARY)  # 8
MROPE_SECTION = [2, 1, 1]  # frequency slots per T/H/W row; sums to ROTARY_DIM/2
LIN_K_HEADS, LIN_V_HEADS, LIN_K_DIM, LIN_V_DIM, CONV_K = 2, 4, 16, 16, 4
N_EXPERTS, TOP_K, MOE_I, SHARED_I = 16, 4, 32, 32

PROMPT_LENGTHS = (1, 7, 63, 64, 65, 128, 129, 150)  # crosses the GDN chunk size 64
GREEDY_PROMPT_LEN, GREEDY_NEW_TOKENS = 7, 24

# Weight scales (see init_weights): chosen so each feature visibly moves the logits.
NORM_STD = 0.3  # zero-centred (1+w) norms: a missing "1+" is then visible
ROUTER_STD = 3.0  # router logit std per token: routing varies across tokens and layers
BETA_STD = 2.0  # in_proj_b: beta = sigmoid(b) spans (0, 1)
DECAY_STD = 2.0  # in_proj_a: softplus(a + dt_bias) spans short and long memories
SHARED_GATE_STD = 2.0
TARGET_MEDIAN_MAX_PROB = 0.7  # lm_head calibration: sharp but not saturated

# Real-checkpoint extras a loader must skip; shapes match the tiny vision_config below.
DECOYS = {
    "mtp.fc.weight": (HIDDEN, 2 * HIDDEN),
    "model.visual.patch_embed.proj.weight": (16, 3, 2, 2, 2),
}

THRESHOLD_MAX_KLD = 1e-4  # what the Go test enforces (documented in oracle/README.md)

# Discrete decisions (router top-k, argmax) must not sit near a tie, or an equally
# correct fp32 implementation with another summation order could flip them: HF's
# chunked fp32 Gated DeltaNet alone is off by ~1e-4 relative in the hidden states.
# Prompts are therefore redrawn (seeded) until every decision clears these margins
# and two independent implementations (token-by-token GDN in fp32, and everything
# in fp64) agree with HF on every decision and within AGREE_KLD_MAX.
ROUTER_GAP_MIN = 5e-4  # logit gap between the k-th and (k+1)-th expert, every layer and token
MARGIN_MIN = 1e-2  # logit gap between the best and second-best token, every position
AGREE_KLD_MAX = 1e-5  # a tenth of the gate
MAX_TRIES = 400


def text_config_dict():
    """text_config exactly as written to config.json (the released model's keys, toy sizes)."""
    assert sum(MROPE_SECTION) == ROTARY_DIM // 2, "mrope_section must cover rotary_dim/2 frequency slots"
    return {
        "attention_bias": False,
        "attention_dropout": 0.0,
        "attn_output_gate": True,
        # No BOS/EOS: greedy decoding must never stop early.
        "bos_token_id": None,
        "dtype": "bfloat16",
        "eos_token_id": None,
        "full_attention_interval": 4,
        "head_dim": HEAD_DIM,
        "hidden_act": "silu",
        "hidden_size": HIDDEN,
        "initializer_range": 0.02,
        "layer_types": list(LAYER_TYPES),
        "linear_conv_kernel_dim": CONV_K,
        "linear_key_head_dim": LIN_K_DIM,
        "linear_num_key_heads": LIN_K_HEADS,
        "linear_num_value_heads": LIN_V_HEADS,
        "linear_value_head_dim": LIN_V_DIM,
        "mamba_ssm_dtype": "float32",
        "max_position_embeddings": 4096,
        "mlp_only_layers": [],
        "model_type": "qwen3_5_moe_text",
        "moe_intermediate_size": MOE_I,
        "mtp_num_hidden_layers": 1,
        "mtp_use_dedicated_embeddings": False,
        "num_attention_heads": N_HEADS,
        "num_experts": N_EXPERTS,
        "num_experts_per_tok": TOP_K,
        "num_hidden_layers": NUM_LAYERS,
        "num_key_value_heads": N_KV_HEADS,
        "output_router_logits": False,
        "partial_rotary_factor": PARTIAL_ROTARY,
        "rms_norm_eps": 1e-06,
        "rope_parameters": {
            "mrope_interleaved": True,
            "mrope_section": list(MROPE_SECTION),
            "partial_rotary_factor": PARTIAL_ROTARY,
            "rope_theta": 10000000,
            "rope_type": "default",
        },
        "router_aux_loss_coef": 0.001,
        "shared_expert_intermediate_size": SHARED_I,
        "use_cache": True,
        "vocab_size": VOCAB,
    }


def full_config_dict():
    """Top-level config.json, nested as Qwen ships Qwen3_5MoeForConditionalGeneration."""
    return {
        "architectures": ["Qwen3_5MoeForConditionalGeneration"],
        "image_token_id": 508,
        "model_type": "qwen3_5_moe",
        "text_config": text_config_dict(),
        "tie_word_embeddings": False,
        "video_token_id": 509,
        "vision_config": {
            "deepstack_visual_indexes": [],
            "depth": 1,
            "hidden_act": "gelu_pytorch_tanh",
            "hidden_size": DECOYS["model.visual.patch_embed.proj.weight"][0],
            "in_channels": 3,
            "initializer_range": 0.02,
            "intermediate_size": 32,
            "model_type": "qwen3_5_moe_vision",
            "num_heads": 2,
            "num_position_embeddings": 16,
            "out_hidden_size": HIDDEN,
            "patch_size": 2,
            "spatial_merge_size": 2,
            "temporal_patch_size": 2,
        },
        "vision_end_token_id": 511,
        "vision_start_token_id": 510,
    }


def hf_text_config(tc):
    """A Qwen3_5MoeTextConfig built from a text_config dict, eager attention and experts."""
    kwargs = {k: v for k, v in tc.items() if k not in ("dtype", "model_type")}
    try:
        return Qwen3_5MoeTextConfig(**kwargs, attn_implementation="eager", experts_implementation="eager")
    except Exception as exc:
        die(f"Qwen3_5MoeTextConfig rejected the fixture's text_config: {exc!r}")


def new_model(cfg, device):
    model = Qwen3_5MoeForCausalLM(cfg).to(device=device, dtype=torch.float32).eval()
    attn = getattr(model.config, "_attn_implementation", None)
    if attn != "eager":
        if hasattr(model, "set_attn_implementation"):
            model.set_attn_implementation("eager")
        attn = getattr(model.config, "_attn_implementation", None)
        if attn != "eager":
            warn(f"attention implementation is {attn!r}, not 'eager' (same math, other rounding)")
    experts = getattr(model.config, "_experts_implementation", "eager")
    if experts not in (None, "eager"):
        if hasattr(model, "set_experts_implementation"):
            model.set_experts_implementation("eager")
        experts = getattr(model.config, "_experts_implementation", "eager")
        if experts not in (None, "eager"):
            warn(f"experts implementation is {experts!r}, not 'eager' (same math, other rounding)")
    return model


# ---------------------------------------------------------------------------
# Names: ForCausalLM state dict <-> released checkpoint
# ---------------------------------------------------------------------------


def to_checkpoint_name(name):
    if name == "lm_head.weight":
        return name
    if name.startswith("model."):
        return "model.language_model." + name[len("model.") :]
    die(f"unexpected state-dict name {name!r}")


def from_checkpoint_name(name):
    """Inverse of to_checkpoint_name; None for tensors a text loader must ignore."""
    if name == "lm_head.weight":
        return name
    if name.startswith("model.language_model."):
        return "model." + name[len("model.language_model.") :]
    if name.startswith("mtp.") or name.startswith("model.visual."):
        return None
    die(f"checkpoint holds an unexpected tensor {name!r}")


# ---------------------------------------------------------------------------
# Weights
# ---------------------------------------------------------------------------

ZERO_CENTRED_NORMS = ("input_layernorm.weight", "post_attention_layernorm.weight", "q_norm.weight", "k_norm.weight")


def is_zero_centred_norm(name):
    return name == "model.norm.weight" or name.endswith(ZERO_CENTRED_NORMS)


def expected_shape(name):
    """The shape every parameter must have (guards against API drift in transformers)."""
    conv_dim = 2 * LIN_K_HEADS * LIN_K_DIM + LIN_V_HEADS * LIN_V_DIM
    table = {
        "self_attn.q_proj.weight": (2 * N_HEADS * HEAD_DIM, HIDDEN),
        "self_attn.k_proj.weight": (N_KV_HEADS * HEAD_DIM, HIDDEN),
        "self_attn.v_proj.weight": (N_KV_HEADS * HEAD_DIM, HIDDEN),
        "self_attn.o_proj.weight": (HIDDEN, N_HEADS * HEAD_DIM),
        "self_attn.q_norm.weight": (HEAD_DIM,),
        "self_attn.k_norm.weight": (HEAD_DIM,),
        "linear_attn.in_proj_qkv.weight": (conv_dim, HIDDEN),
        "linear_attn.in_proj_z.weight": (LIN_V_HEADS * LIN_V_DIM, HIDDEN),
        "linear_attn.in_proj_a.weight": (LIN_V_HEADS, HIDDEN),
        "linear_attn.in_proj_b.weight": (LIN_V_HEADS, HIDDEN),
        "linear_attn.conv1d.weight": (conv_dim, 1, CONV_K),
        "linear_attn.dt_bias": (LIN_V_HEADS,),
        "linear_attn.A_log": (LIN_V_HEADS,),
        "linear_attn.norm.weight": (LIN_V_DIM,),
        "linear_attn.out_proj.weight": (HIDDEN, LIN_V_HEADS * LIN_V_DIM),
        "mlp.gate.weight": (N_EXPERTS, HIDDEN),
        "mlp.experts.gate_up_proj": (N_EXPERTS, 2 * MOE_I, HIDDEN),
        "mlp.experts.down_proj": (N_EXPERTS, HIDDEN, MOE_I),
        "mlp.shared_expert.gate_proj.weight": (SHARED_I, HIDDEN),
        "mlp.shared_expert.up_proj.weight": (SHARED_I, HIDDEN),
        "mlp.shared_expert.down_proj.weight": (HIDDEN, SHARED_I),
        "mlp.shared_expert_gate.weight": (1, HIDDEN),
        "input_layernorm.weight": (HIDDEN,),
        "post_attention_layernorm.weight": (HIDDEN,),
    }
    if name in ("model.embed_tokens.weight", "lm_head.weight"):
        return (VOCAB, HIDDEN)
    if name == "model.norm.weight":
        return (HIDDEN,)
    for suffix, shape in table.items():
        if name.endswith("." + suffix):
            return shape
    return None


def init_weights(model, seed):
    """Overwrite every parameter with values that expose a wrong implementation.

    Fails on any parameter it has no rule for, so a transformers change cannot
    slip an untested tensor into the fixture.
    """
    gen = torch.Generator().manual_seed(seed)

    def normal(shape, std, mean=0.0):
        return torch.randn(shape, generator=gen, dtype=torch.float64) * std + mean

    def uniform(shape, lo, hi):
        return torch.rand(shape, generator=gen, dtype=torch.float64) * (hi - lo) + lo

    seen = 0
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            shape = tuple(p.shape)
            want = expected_shape(name)
            if want is None:
                die(f"no weight rule for parameter {name} {shape}: transformers' Qwen3_5Moe changed?")
            if shape != want:
                die(f"parameter {name} has shape {shape}, expected {want}")
            if name == "model.embed_tokens.weight":
                v = normal(shape, 1.0)
            elif name == "lm_head.weight":
                v = normal(shape, 1.0 / math.sqrt(HIDDEN))  # rescaled by calibrate_lm_head
            elif name.endswith("linear_attn.norm.weight"):
                v = normal(shape, NORM_STD, 1.0)  # plain-w gated norm: centred on 1
            elif is_zero_centred_norm(name):
                v = normal(shape, NORM_STD)  # (1+w) norms: centred on 0
            elif name.endswith("linear_attn.A_log"):
                v = torch.log(uniform(shape, 1.0, 16.0))
            elif name.endswith("linear_attn.dt_bias"):
                v = normal(shape, 1.0)
            elif name.endswith("linear_attn.conv1d.weight"):
                v = normal(shape, 0.5)
            elif name.endswith("linear_attn.in_proj_a.weight"):
                v = normal(shape, DECAY_STD / math.sqrt(HIDDEN))
            elif name.endswith("linear_attn.in_proj_b.weight"):
                v = normal(shape, BETA_STD / math.sqrt(HIDDEN))
            elif name.endswith("mlp.gate.weight"):
                v = normal(shape, ROUTER_STD / math.sqrt(HIDDEN))
            elif name.endswith("mlp.shared_expert_gate.weight"):
                v = normal(shape, SHARED_GATE_STD / math.sqrt(HIDDEN))
            elif name.endswith("mlp.experts.gate_up_proj") or name.endswith("mlp.experts.down_proj"):
                v = normal(shape, 1.0 / math.sqrt(shape[2]))  # [E, out, in]
            else:
                v = normal(shape, 1.0 / math.sqrt(shape[-1]))  # nn.Linear [out, in]
            p.copy_(v.to(p.dtype))
            seen += 1
    return seen


def round_to_bf16(model):
    """The checkpoint is BF16: HF must run (in fp32) on exactly those values."""
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).to(torch.float32))


def calibrate_lm_head(model, device, seed):
    """Scale lm_head so the median per-position max probability is about TARGET_MEDIAN_MAX_PROB."""
    gen = torch.Generator().manual_seed(seed + 7919)
    ids = torch.randperm(VOCAB, generator=gen)[:128].view(1, -1).to(device)
    with torch.no_grad():
        h = model.model(input_ids=ids, use_cache=False).last_hidden_state[0].double().cpu()
        base = h @ model.lm_head.weight.double().cpu().T
    best = None
    for scale in np.geomspace(0.25, 64.0, 600):
        lp = log_softmax(base.numpy() * scale)
        med = float(np.median(np.exp(lp.max(-1))))
        if best is None or abs(med - TARGET_MEDIAN_MAX_PROB) < abs(best[1] - TARGET_MEDIAN_MAX_PROB):
            best = (float(scale), med)
    with torch.no_grad():
        model.lm_head.weight.mul_(best[0])
        model.lm_head.weight.copy_(model.lm_head.weight.to(torch.bfloat16).to(torch.float32))
    return best


# ---------------------------------------------------------------------------
# Numerics helpers
# ---------------------------------------------------------------------------


def log_softmax(x):
    x = np.asarray(x, dtype=np.float64)
    z = x - x.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


def kld_rows(p_logits, q_logits):
    """Per-position KL(p || q), full vocabulary, float64."""
    lp, lq = log_softmax(p_logits), log_softmax(q_logits)
    return (np.exp(lp) * (lp - lq)).sum(axis=-1)


def top2_margin(logits):
    s = np.sort(np.asarray(logits, dtype=np.float64), axis=-1)
    return s[..., -1] - s[..., -2]


def forward_logits(model, tokens, device):
    ids = torch.tensor([tokens], dtype=torch.long, device=device)
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=False)
    return out.logits[0].to(torch.float32).cpu().numpy()


# ---------------------------------------------------------------------------
# Statistics hooks (router gaps, GDN decay/beta), for the printed summary
# ---------------------------------------------------------------------------


class Probe:
    """Collects router and Gated-DeltaNet gate statistics during forward passes."""

    def __init__(self, model):
        self.handles = []
        self.router_gap = []  # per token per layer: logit gap between k-th and (k+1)-th expert
        self.router_sets = {}  # layer -> set of top-k expert tuples
        self.topk = []  # every routing decision in call order (layer-major), for comparisons
        self.decay = []
        self.beta = []
        for i, layer in enumerate(model.model.layers):
            gate = layer.mlp.gate
            self.handles.append(gate.register_forward_hook(self._router_hook(i, gate)))
            la = getattr(layer, "linear_attn", None)
            if la is not None:
                self.handles.append(la.in_proj_a.register_forward_hook(self._decay_hook(la)))
                self.handles.append(la.in_proj_b.register_forward_hook(self._beta_hook()))

    def _router_hook(self, idx, gate):
        def hook(module, inputs, output):
            x = inputs[0].reshape(-1, gate.weight.shape[1]).double()
            logits = x @ gate.weight.double().T
            s, order = torch.sort(logits, dim=-1, descending=True)
            self.router_gap.extend((s[:, TOP_K - 1] - s[:, TOP_K]).tolist())
            sets = self.router_sets.setdefault(idx, set())
            for row in order[:, :TOP_K].tolist():
                sets.add(tuple(sorted(row)))
                self.topk.append(tuple(sorted(row)))

        return hook

    def _decay_hook(self, la):
        def hook(module, inputs, output):
            a = output.double()
            g = -la.A_log.double().exp() * torch.nn.functional.softplus(a + la.dt_bias.double())
            self.decay.extend(g.exp().flatten().tolist())

        return hook

    def _beta_hook(self):
        def hook(module, inputs, output):
            self.beta.extend(torch.sigmoid(output.double()).flatten().tolist())

        return hook

    def close(self):
        for h in self.handles:
            h.remove()


def probed(model, tokens, device):
    """Teacher-forced logits (float64 numpy) and the routing probe of one pass."""
    probe = Probe(model)
    try:
        ids = torch.tensor([tokens], dtype=torch.long, device=device)
        with torch.no_grad():
            logits = model(input_ids=ids, use_cache=False).logits[0].cpu().double().numpy()
    finally:
        probe.close()
    return logits, probe


def recurrent_gdn(dtype):
    """A drop-in for HF's chunked GDN prefill: the token-by-token recurrence (SPEC §3) in `dtype`.

    It is the independent implementation the prompt selection measures HF's
    numerical noise against; it only serves cache-less forwards.
    """

    def gdn(query, key, value, g, beta, chunk_size=64, initial_state=None, output_final_state=False,
            use_qk_l2norm_in_kernel=False, **kwargs):
        q, k, v, gg, b = (x.to(dtype) for x in (query, key, value, g, beta))
        nv, dk = v.shape[2], k.shape[3]
        if k.shape[2] != nv:  # value head j reads key head j // (Hv/Hk)
            q = q.repeat_interleave(nv // q.shape[2], dim=2)
            k = k.repeat_interleave(nv // k.shape[2], dim=2)
        if use_qk_l2norm_in_kernel:
            q = q * torch.rsqrt((q * q).sum(-1, keepdim=True) + 1e-6)
            k = k * torch.rsqrt((k * k).sum(-1, keepdim=True) + 1e-6)
        q = q * dk**-0.5
        state = torch.zeros(v.shape[0], nv, dk, v.shape[3], dtype=dtype, device=v.device)
        if initial_state is not None:
            state = initial_state.to(dtype).clone()
        out = torch.empty_like(v)
        for t in range(v.shape[1]):
            state = state * gg[:, t].exp()[..., None, None]
            kt = k[:, t]
            u = (v[:, t] - torch.einsum("bhk,bhkv->bhv", kt, state)) * b[:, t][..., None]
            state = state + kt[..., :, None] * u[..., None, :]
            out[:, t] = torch.einsum("bhk,bhkv->bhv", q[:, t], state)
        return out.to(query.dtype), (state.to(torch.float32) if output_final_state else None)

    return gdn


class patched_gdn:
    """Context manager routing HF's chunked GDN prefill through another implementation."""

    def __init__(self, fn):
        self.fn = fn

    def __enter__(self):
        self.orig = hf_modeling.torch_chunk_gated_delta_rule
        hf_modeling.torch_chunk_gated_delta_rule = self.fn

    def __exit__(self, *exc):
        hf_modeling.torch_chunk_gated_delta_rule = self.orig


def choose_prompts(model, model64, device, seed):
    """Seeded random prompts (distinct ids, uniform over the vocab) on which valid implementations agree.

    The greedy prompt is judged together with its continuation, since those
    decisions are what the Go greedy test must reproduce.
    """
    gen = torch.Generator().manual_seed(seed + 1)
    prompts, report = {}, {}
    for t in PROMPT_LENGTHS:
        best = None
        for attempt in range(1, MAX_TRIES + 1):
            toks = torch.randperm(VOCAB, generator=gen)[:t].tolist()
            seq, rows = toks, slice(None)
            if t == GREEDY_PROMPT_LEN:
                cont, _ = greedy_no_cache(model, toks, device)
                seq, rows = toks + cont, slice(0, t + GREEDY_NEW_TOKENS - 1)
            la, pa = probed(model, seq, device)
            gap, margin = min(pa.router_gap), float(top2_margin(la[rows]).min())
            r = {"tries": attempt, "min_router_gap": gap, "min_top1_margin": margin}
            score = min(gap / ROUTER_GAP_MIN, margin / MARGIN_MIN)
            if score >= 1.0:
                agree = True
                for name, m, dtype in (("fp32_recurrent", model, torch.float32), ("fp64_recurrent", model64, torch.float64)):
                    with patched_gdn(recurrent_gdn(dtype)):
                        lo, po = probed(m, seq, device)
                    r[name] = {
                        "max_kld": float(np.abs(kld_rows(la[rows], lo[rows])).max()),
                        "max_abs_logit_diff": float(np.abs(la[rows] - lo[rows]).max()),
                        "same_decisions": po.topk == pa.topk
                        and bool((lo[rows].argmax(-1) == la[rows].argmax(-1)).all()),
                    }
                    agree = agree and r[name]["same_decisions"] and r[name]["max_kld"] <= AGREE_KLD_MAX
                if agree:
                    best = (2.0, toks, r)
                    break
                score = 1.0  # clears the margins but not the agreement test
            if best is None or score > best[0]:
                best = (score, toks, r)
        score, toks, r = best
        if score < 2.0:
            warn(f"T={t}: no prompt in {MAX_TRIES} draws passed the robustness tests ({r}); the fixture may be fragile")
        r["tries"] = attempt
        prompts[t], report[str(t)] = toks, r
    return prompts, report


# ---------------------------------------------------------------------------
# Checkpoint I/O
# ---------------------------------------------------------------------------


def clean_out_dir(out):
    os.makedirs(out, exist_ok=True)
    patterns = ("model-*.safetensors", "model.safetensors*", "logits_*.npy", "config.json", "reference.json")
    for pat in patterns:
        for path in glob.glob(os.path.join(out, pat)):
            os.remove(path)


def save_checkpoint(model, out, seed):
    tensors = {}
    for name, t in model.state_dict().items():
        tensors[to_checkpoint_name(name)] = t.detach().to("cpu", torch.bfloat16).contiguous()
    gen = torch.Generator().manual_seed(seed + 104729)
    for name, shape in DECOYS.items():
        tensors[name] = (torch.randn(shape, generator=gen) * 0.02).to(torch.bfloat16).contiguous()

    names = sorted(tensors)
    nbytes = {n: tensors[n].numel() * tensors[n].element_size() for n in names}
    total = sum(nbytes.values())
    shard_files = ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    weight_map, acc = {}, 0
    for n in names:
        weight_map[n] = shard_files[0] if acc < total / 2 else shard_files[1]
        acc += nbytes[n]
    for f in shard_files:
        part = {n: tensors[n] for n in names if weight_map[n] == f}
        if not part:
            die(f"shard {f} would be empty")
        save_file(part, os.path.join(out, f), metadata={"format": "pt"})
        os.chmod(os.path.join(out, f), 0o644)
    index = {"metadata": {"total_size": total}, "weight_map": {n: weight_map[n] for n in names}}
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as fh:
        json.dump(index, fh, indent=2)
        fh.write("\n")
    with open(os.path.join(out, "config.json"), "w") as fh:
        json.dump(full_config_dict(), fh, indent=2, sort_keys=True)
        fh.write("\n")
    return {"files": shard_files, "tensors": len(names), "total_size": total, "decoys": sorted(DECOYS)}


def reload_and_verify(model, out, device, probe_tokens):
    """Read the files back as a loader would, map names back, and demand bit-identity."""
    with open(os.path.join(out, "config.json")) as fh:
        cfg_json = json.load(fh)
    with open(os.path.join(out, "model.safetensors.index.json")) as fh:
        index = json.load(fh)
    loaded = {}
    for f in sorted(set(index["weight_map"].values())):
        part = load_file(os.path.join(out, f))
        for k, v in part.items():
            if index["weight_map"].get(k) != f:
                die(f"{k} is in {f} but the index says {index['weight_map'].get(k)}")
            loaded[k] = v
    if set(loaded) != set(index["weight_map"]):
        die("index weight_map and shard contents differ")
    total = sum(v.numel() * v.element_size() for v in loaded.values())
    if total != index["metadata"]["total_size"]:
        die(f"index total_size {index['metadata']['total_size']} != {total}")
    back = {}
    for k, v in loaded.items():
        if v.dtype != torch.bfloat16:
            die(f"{k} is stored as {v.dtype}, want bfloat16")
        name = from_checkpoint_name(k)
        if name is not None:
            back[name] = v.to(torch.float32)
    fresh = new_model(hf_text_config(cfg_json["text_config"]), device)
    result = fresh.load_state_dict({k: v.to(device) for k, v in back.items()}, strict=True)
    if getattr(result, "missing_keys", []) or getattr(result, "unexpected_keys", []):
        die(f"strict reload reported {result}")
    ref_sd, new_sd = model.state_dict(), fresh.state_dict()
    if set(ref_sd) != set(new_sd):
        die("reloaded model has different parameter names")
    for k in ref_sd:
        if not torch.equal(ref_sd[k], new_sd[k]):
            die(f"reloaded {k} differs from the model that was saved")
    a = forward_logits(model, probe_tokens, device)
    b = forward_logits(fresh, probe_tokens, device)
    if not np.array_equal(a, b):
        die(f"reloaded model's logits differ (max abs {np.abs(a - b).max():.3g})")
    return len(loaded)


def hf_load_check(out, device, prompts, ref_logits):
    """Load the files with HF's own loader (the real checkpoint's class) and compare logits."""
    kwargs = dict(dtype=torch.float32, attn_implementation="eager", local_files_only=True, output_loading_info=True)
    try:
        m, info = Qwen3_5MoeForConditionalGeneration.from_pretrained(out, experts_implementation="eager", **kwargs)
    except TypeError:
        m, info = Qwen3_5MoeForConditionalGeneration.from_pretrained(out, **kwargs)
    m = m.to(device).eval()
    bad_missing = [k for k in info.get("missing_keys", []) if not k.startswith("model.visual.")]
    mismatched = list(info.get("mismatched_keys", []))
    unexpected = [k for k in info.get("unexpected_keys", []) if not k.startswith("mtp.")]
    if bad_missing or mismatched or unexpected:
        die(
            "Qwen3_5MoeForConditionalGeneration.from_pretrained did not load the text model cleanly: "
            f"missing={bad_missing} mismatched={mismatched} unexpected={unexpected}"
        )
    worst = 0.0
    for toks in prompts:
        got = forward_logits(m, toks, device)
        want = ref_logits[len(toks)]
        d = float(np.abs(got.astype(np.float64) - want).max())
        worst = max(worst, d)
        if d > 1e-4 or not np.array_equal(got.argmax(-1), want.argmax(-1)):
            die(f"HF from_pretrained logits differ from the fixture at T={len(toks)} (max abs {d:.3g})")
    return {"status": "ok", "class": "Qwen3_5MoeForConditionalGeneration", "max_abs_logit_diff": worst}


def hf_causal_lm_load_check(out, device, toks, want):
    """Informational: text-only loading (ForCausalLM strips model.language_model via HF's conversion map)."""
    try:
        m = Qwen3_5MoeForCausalLM.from_pretrained(
            out, dtype=torch.float32, attn_implementation="eager", local_files_only=True
        )
        m = m.to(device).eval()
        got = forward_logits(m, toks, device)
        return {"status": "ok", "max_abs_logit_diff": float(np.abs(got.astype(np.float64) - want).max())}
    except Exception as exc:  # informational only
        return {"status": f"failed: {type(exc).__name__}: {exc}"[:300]}


# ---------------------------------------------------------------------------
# Greedy decoding
# ---------------------------------------------------------------------------


def greedy_cached(model, prompt, device):
    gc = copy.deepcopy(model.generation_config)
    gc.do_sample = False
    gc.num_beams = 1
    gc.max_new_tokens = GREEDY_NEW_TOKENS
    gc.min_new_tokens = None
    gc.eos_token_id = None  # no stop token: exactly GREEDY_NEW_TOKENS tokens
    gc.bos_token_id = None
    gc.pad_token_id = None
    gc.use_cache = True
    gc.temperature = None
    gc.top_p = None
    gc.top_k = None
    gc.return_dict_in_generate = True
    gc.output_logits = True
    ids = torch.tensor([prompt], dtype=torch.long, device=device)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=gc)
    seq = out.sequences[0].tolist()
    if seq[: len(prompt)] != list(prompt):
        die("generate() did not echo the prompt")
    new = seq[len(prompt) :]
    if len(new) != GREEDY_NEW_TOKENS:
        die(f"generate() produced {len(new)} tokens, want {GREEDY_NEW_TOKENS}")
    step_logits = None
    if getattr(out, "logits", None) is not None:
        step_logits = np.stack([l[0].to(torch.float32).cpu().numpy() for l in out.logits])
    return new, step_logits


def greedy_no_cache(model, prompt, device):
    seq, rows = list(prompt), []
    for _ in range(GREEDY_NEW_TOKENS):
        last = forward_logits(model, seq, device)[-1]
        rows.append(last)
        seq.append(int(np.argmax(last)))
    return seq[len(prompt) :], np.stack(rows)


# ---------------------------------------------------------------------------
# Sensitivity: simulated implementation bugs must move the logits far past the gate
# ---------------------------------------------------------------------------


def clone_model(model, cfg, device):
    m = new_model(cfg, device)
    m.load_state_dict(model.state_dict(), strict=True)
    return m


def _linear_layers(m):
    return [l.linear_attn for l in m.model.layers if getattr(l, "linear_attn", None) is not None]


def _attn_layers(m):
    return [l.self_attn for l in m.model.layers if getattr(l, "self_attn", None) is not None]


def bug_norm_plain_w(m):
    """Zero-centred norms applied as x̂·w instead of x̂·(1+w)."""
    for n, p in m.named_parameters():
        if is_zero_centred_norm(n):
            p.data -= 1.0


def bug_gated_norm_1p(m):
    """Gated norm (linear_attn.norm) applied as x̂·(1+w)."""
    for la in _linear_layers(m):
        la.norm.weight.data += 1.0


def bug_gate_up_swapped(m):
    """Expert gate_up_proj read as [up | gate]."""
    for l in m.model.layers:
        w = l.mlp.experts.gate_up_proj
        i = w.shape[1] // 2
        w.data = torch.cat([w.data[:, i:], w.data[:, :i]], dim=1).contiguous()


def bug_q_gate_flat(m):
    """q_proj output split as [all queries | all gates] instead of per-head [q_h, g_h]."""
    for at in _attn_layers(m):
        w = at.q_proj.weight
        w.data = w.data.view(2, N_HEADS, HEAD_DIM, HIDDEN).transpose(0, 1).reshape(w.shape).contiguous()


def _permute_heads(t, dim, perm, block):
    shape = list(t.shape)
    n = len(perm)
    v = t.reshape(shape[:dim] + [n, block] + shape[dim + 1 :])
    v = v.index_select(dim, torch.tensor(perm, device=t.device))
    return v.reshape(shape).contiguous()


def bug_gva_tiled(m):
    """GDN value head j paired with key head j % num_k_heads (llama.cpp tiling without its reorder)."""
    r = LIN_V_HEADS // LIN_K_HEADS
    perm = [(p % r) * LIN_K_HEADS + p // r for p in range(LIN_V_HEADS)]
    kd = 2 * LIN_K_HEADS * LIN_K_DIM
    for la in _linear_layers(m):
        w = la.in_proj_qkv.weight.data
        w[kd:] = _permute_heads(w[kd:], 0, perm, LIN_V_DIM)
        c = la.conv1d.weight.data
        c[kd:] = _permute_heads(c[kd:], 0, perm, LIN_V_DIM)
        la.in_proj_z.weight.data = _permute_heads(la.in_proj_z.weight.data, 0, perm, LIN_V_DIM)
        la.out_proj.weight.data = _permute_heads(la.out_proj.weight.data, 1, perm, LIN_V_DIM)
        for t in (la.in_proj_a.weight, la.in_proj_b.weight, la.A_log, la.dt_bias):
            t.data = _permute_heads(t.data, 0, perm, 1)


def bug_gqa_tiled(m):
    """Attention query head h paired with kv head h % num_kv_heads instead of h // group."""
    g = N_HEADS // N_KV_HEADS
    perm = [(p % g) * N_KV_HEADS + p // g for p in range(N_HEADS)]
    for at in _attn_layers(m):
        at.q_proj.weight.data = _permute_heads(at.q_proj.weight.data, 0, perm, 2 * HEAD_DIM)
        at.o_proj.weight.data = _permute_heads(at.o_proj.weight.data, 1, perm, HEAD_DIM)


def bug_rope_gptj_pairs(m):
    """RoPE rotating adjacent pairs (2i, 2i+1) instead of NeoX pairs (i, i + rotary_dim/2)."""
    half = ROTARY_DIM // 2
    perm = list(range(HEAD_DIM))
    for i in range(half):
        perm[i], perm[i + half] = 2 * i, 2 * i + 1
    idx = torch.tensor(perm)
    for at in _attn_layers(m):
        q = at.q_proj.weight.data.view(N_HEADS, 2, HEAD_DIM, HIDDEN)
        q[:, 0] = q[:, 0].index_select(1, idx.to(q.device))
        k = at.k_proj.weight.data.view(N_KV_HEADS, HEAD_DIM, HIDDEN)
        k.copy_(k.index_select(1, idx.to(k.device)))
        for nw in (at.q_norm.weight, at.k_norm.weight):
            nw.data = nw.data.index_select(0, idx.to(nw.device)).contiguous()


def bug_conv_reversed(m):
    """Causal conv kernel taps applied in reverse time order."""
    for la in _linear_layers(m):
        la.conv1d.weight.data = la.conv1d.weight.data.flip(-1).contiguous()


def bug_no_dt_bias(m):
    for la in _linear_layers(m):
        la.dt_bias.data.zero_()


def bug_a_log_as_a(m):
    """Decay rate -A_log·softplus(..) instead of -exp(A_log)·softplus(..)."""
    for la in _linear_layers(m):
        la.A_log.data = torch.log(la.A_log.data.clamp_min(1e-6))


def bug_lm_head_tied(m):
    m.lm_head.weight.data = m.model.embed_tokens.weight.data.clone()


def bug_no_attn_gate(m):
    """Attention output not multiplied by sigmoid(gate)."""

    def hook(module, inputs, output):
        o = output.clone()
        o.view(*o.shape[:-1], N_HEADS, 2 * HEAD_DIM)[..., HEAD_DIM:] = 60.0
        return o

    for at in _attn_layers(m):
        at.q_proj.register_forward_hook(hook)


def bug_no_shared_expert_gate(m):
    """Shared expert added without its sigmoid gate."""
    for l in m.model.layers:
        l.mlp.shared_expert_gate.register_forward_hook(lambda mod, i, o: torch.full_like(o, 60.0))


def bug_topk_not_renormalised(m):
    """Routed weights are the top-k softmax probabilities without renormalisation."""
    for l in m.model.layers:
        gate = l.mlp.gate
        orig = gate.forward

        def forward(hidden_states, *a, _orig=orig, **k):
            out = _orig(hidden_states, *a, **k)
            if not (isinstance(out, tuple) and len(out) == 3):
                raise RuntimeError("router output is not (logits, weights, indices)")
            logits, weights, idx = out
            probs = torch.softmax(logits.float(), dim=-1)
            return logits, probs.gather(-1, idx).to(weights.dtype), idx

        gate.forward = forward


def bug_chunk_state_reset(m):
    """GDN prefill restarting from a zero state at every 64-token chunk (state not carried)."""
    orig = hf_modeling.torch_chunk_gated_delta_rule

    def chunked(query, key, value, g, beta, chunk_size=64, initial_state=None, output_final_state=False, **kw):
        outs, state = [], None
        for s in range(0, query.shape[1], chunk_size):
            e = s + chunk_size
            o, state = orig(
                query[:, s:e], key[:, s:e], value[:, s:e], g=g[:, s:e], beta=beta[:, s:e],
                chunk_size=chunk_size, initial_state=None if s else initial_state,
                output_final_state=output_final_state, **kw,
            )
            outs.append(o)
        return torch.cat(outs, dim=1), state

    hf_modeling.torch_chunk_gated_delta_rule = chunked

    def undo():
        hf_modeling.torch_chunk_gated_delta_rule = orig

    return undo


BUGS = [
    ("GDN state reset every 64 tokens", bug_chunk_state_reset),
    ("norm (1+w) applied as w", bug_norm_plain_w),
    ("gated norm applied as (1+w)", bug_gated_norm_1p),
    ("expert gate/up halves swapped", bug_gate_up_swapped),
    ("q_proj split flat, not per head", bug_q_gate_flat),
    ("GDN key head j%Hk (tiled)", bug_gva_tiled),
    ("GQA kv head h%Hkv (tiled)", bug_gqa_tiled),
    ("RoPE adjacent pairs (GPT-J)", bug_rope_gptj_pairs),
    ("conv taps reversed", bug_conv_reversed),
    ("dt_bias ignored", bug_no_dt_bias),
    ("A_log used as A", bug_a_log_as_a),
    ("lm_head tied to embeddings", bug_lm_head_tied),
    ("attention output gate missing", bug_no_attn_gate),
    ("shared-expert gate missing", bug_no_shared_expert_gate),
    ("top-k weights not renormalised", bug_topk_not_renormalised),
]


def sensitivity(model, cfg, device, prompts, ref_logits):
    rows = {}
    for label, fn in BUGS:
        undo = None
        try:
            m = clone_model(model, cfg, device)
            with torch.no_grad():
                undo = fn(m)
            klds, agree, n = [], 0, 0
            for toks in prompts:
                got = forward_logits(m, toks, device)
                want = ref_logits[len(toks)]
                klds.append(float(kld_rows(want, got).max()))
                agree += int((got.argmax(-1) == want.argmax(-1)).sum())
                n += len(toks)
            rows[label] = {"max_kld": max(klds), "top1_agreement": agree / n}
        except Exception as exc:  # informational: a patch that no longer applies is reported, not fatal
            rows[label] = {"error": f"{type(exc).__name__}: {exc}"[:200]}
        finally:
            if undo is not None:
                undo()
    return rows


# ---------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------


def quantiles(xs, qs=(0.0, 0.1, 0.5, 0.9, 1.0)):
    if not xs:
        return "n/a"
    a = np.asarray(xs, dtype=np.float64)
    return " ".join(f"{q:.0%}={np.quantile(a, q):.3g}" for q in qs)


def build_model(seed, device):
    """The fixture model: HF config from text_config_dict, exposing weights, all bf16-exact."""
    cfg = hf_text_config(text_config_dict())
    model = new_model(cfg, device)
    if model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr():
        die("lm_head is tied to embed_tokens although tie_word_embeddings is false")
    rot = model.model.rotary_emb.inv_freq.numel() * 2
    if rot != ROTARY_DIM:
        die(f"HF rotary dim is {rot}, expected {ROTARY_DIM}")
    if list(model.config.layer_types) != list(LAYER_TYPES):
        die(f"HF layer_types {model.config.layer_types} != {LAYER_TYPES}")
    n_params = init_weights(model, seed)
    round_to_bf16(model)
    # lm_head last: its scale is calibrated on the final hidden states of the rounded model.
    lm_scale, cal_median = calibrate_lm_head(model, device, seed)
    for p in model.parameters():
        if not torch.equal(p, p.to(torch.bfloat16).to(torch.float32)):
            die("a parameter is not exactly representable in bf16")
    return cfg, model, n_params, lm_scale, cal_median


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="fixture directory (created; our files in it are replaced)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", help="torch device; cpu (default) is the reference")
    ap.add_argument("--skip-hf-load-check", action="store_true", help="skip loading the files with from_pretrained")
    ap.add_argument("--skip-sensitivity", action="store_true", help="skip the simulated-bug table")
    args = ap.parse_args()
    t0 = time.time()

    versions = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "numpy": np.__version__,
        "safetensors": getattr(safetensors, "__version__", "?"),
    }
    print("versions: " + " ".join(f"{k}={v}" for k, v in versions.items()), flush=True)
    if int(transformers.__version__.split(".")[0]) < 5:
        die(f"transformers {transformers.__version__} is too old; qwen3_5_moe needs transformers 5")
    fast_pkgs = [p for p in ("fla", "causal_conv1d") if importlib.util.find_spec(p) is not None]
    if fast_pkgs:
        warn(f"{fast_pkgs} installed: transformers may route GDN kernels to them instead of its torch reference")

    device = torch.device(args.device)
    if device.type == "cuda":
        if not torch.cuda.is_available():
            die("--device cuda but CUDA is not available")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.manual_seed(args.seed)
    device_desc = torch.cuda.get_device_name(device) if device.type == "cuda" else f"cpu ({platform.machine()})"
    print(f"device: {device_desc}", flush=True)

    # 1-2. Model with exposing, bf16-rounded weights.
    cfg, model, n_params, lm_scale, cal_median = build_model(args.seed, device)
    n_values = sum(p.numel() for p in model.parameters())
    print(
        f"model: {n_params} tensors, {n_values} parameters; lm_head scale {lm_scale:.3g} "
        f"(calibration median max-prob {cal_median:.3f})",
        flush=True,
    )

    # 3. Checkpoint in the released layout, then verify by reloading.
    out = os.path.abspath(args.out)
    clean_out_dir(out)
    ckpt = save_checkpoint(model, out, args.seed)
    model64 = clone_model(model, cfg, device).to(torch.float64)
    prompts, robustness = choose_prompts(model, model64, device, args.seed)
    del model64
    print("prompts: " + ", ".join(f"T={t} after {r['tries']} draw(s)" for t, r in robustness.items()), flush=True)
    n_loaded = reload_and_verify(model, out, device, prompts[65])
    print(f"checkpoint: {ckpt['tensors']} tensors ({n_loaded} reloaded), {ckpt['total_size']} bytes, bit-identical", flush=True)

    # 4. Teacher-forced logits, fp32 reference and bf16 for information.
    probe = Probe(model)
    ref = {}
    for t, toks in prompts.items():
        ref[t] = forward_logits(model, toks, device)
        if ref[t].shape != (t, VOCAB) or not np.isfinite(ref[t]).all():
            die(f"bad logits for T={t}: shape {ref[t].shape}")
        np.save(os.path.join(out, f"logits_{t}.npy"), np.ascontiguousarray(ref[t], dtype="<f4"))
    probe.close()

    model_bf16 = clone_model(model, cfg, device).to(torch.bfloat16)
    # Module.to() also rounds the RoPE frequency buffers; HF's own bf16 loading keeps them fp32.
    fp32_modules = dict(model.named_modules())
    for mname, mod in model_bf16.named_modules():
        for buf in ("inv_freq", "original_inv_freq"):
            if isinstance(getattr(mod, buf, None), torch.Tensor):
                setattr(mod, buf, getattr(fp32_modules[mname], buf).clone())
    bf16_stats = {}
    for t, toks in prompts.items():
        got = forward_logits(model_bf16, toks, device)
        bf16_stats[str(t)] = {
            "max_kld": float(kld_rows(ref[t], got).max()),
            "top1_agreement": float((got.argmax(-1) == ref[t].argmax(-1)).mean()),
        }
    del model_bf16


    hf_load = {"status": "skipped"}
    causal_load = {"status": "skipped"}
    if not args.skip_hf_load_check:
        hf_load = hf_load_check(out, device, list(prompts.values()), ref)
        causal_load = hf_causal_lm_load_check(out, device, prompts[65], ref[65])

    # 5. Greedy continuation: cached generate() vs a full forward per step.
    gprompt = prompts[GREEDY_PROMPT_LEN]
    cached, cached_logits = greedy_cached(model, gprompt, device)
    uncached, uncached_logits = greedy_no_cache(model, gprompt, device)
    if cached != uncached:
        die(f"greedy continuation differs: generate() {cached} vs no-cache {uncached}")
    decode_diff = None
    if cached_logits is not None and cached_logits.shape == uncached_logits.shape:
        decode_diff = float(np.abs(cached_logits.astype(np.float64) - uncached_logits).max())
    greedy_margin = float(top2_margin(uncached_logits).min())

    sens = {}
    if not args.skip_sensitivity:
        sens = sensitivity(model, cfg, device, [prompts[7], prompts[65], prompts[150]], ref)

    # 6. reference.json and the summary.
    per_prompt = {}
    for t in PROMPT_LENGTHS:
        lp = log_softmax(ref[t])
        pmax = np.exp(lp.max(-1))
        per_prompt[str(t)] = {
            "median_max_prob": float(np.median(pmax)),
            "frac_max_prob_gt_0.5": float((pmax > 0.5).mean()),
            "frac_max_prob_gt_0.999": float((pmax > 0.999).mean()),
            "min_top1_logit_margin": float(top2_margin(ref[t]).min()),
        }
    reference = {
        "generator": "oracle/hf_fixture.py",
        "seed": args.seed,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": device_desc,
        "vocab_size": VOCAB,
        "config": "config.json",
        "checkpoint": ckpt,
        "prompts": [{"tokens": prompts[t], "logits": f"logits_{t}.npy"} for t in PROMPT_LENGTHS],
        "greedy": {"prompt": gprompt, "tokens": cached},
        "gates": {"max_kld": THRESHOLD_MAX_KLD, "top1": "identical at every position", "greedy": "identical"},
        "hf_bf16_vs_fp32": bf16_stats,
        "stats": {
            "lm_head_scale": lm_scale,
            "prompt_selection": {
                "router_gap_min": ROUTER_GAP_MIN,
                "margin_min": MARGIN_MIN,
                "agree_kld_max": AGREE_KLD_MAX,
                "per_prompt": robustness,
            },
            "per_prompt": per_prompt,
            "greedy_min_top1_logit_margin": greedy_margin,
            "cached_vs_uncached_decode_max_abs_logit_diff": decode_diff,
            "router_min_topk_logit_gap": float(min(probe.router_gap)),
            "router_distinct_topk_sets_per_layer": {str(k): len(v) for k, v in sorted(probe.router_sets.items())},
            "gdn_decay_quantiles": quantiles(probe.decay),
            "gdn_beta_quantiles": quantiles(probe.beta),
        },
        "hf_from_pretrained": {"conditional_generation": hf_load, "causal_lm": causal_load},
        "sensitivity": sens,
    }
    text = json.dumps(reference, indent=1)
    # One line per token list: readable, and diffs stay small.
    text = re.sub(r"\[\s*(-?\d[\d\s,-]*?)\s*\]", lambda m: "[" + ", ".join(m.group(1).split()).replace(",,", ",") + "]", text)
    with open(os.path.join(out, "reference.json"), "w") as fh:
        fh.write(text + "\n")

    print()
    print("   T  draws  med.maxP  P>0.5  P>.999  min top1 gap  min router gap  fp32-rec KLD  fp64-rec KLD  bf16 KLD  bf16 top1")
    for t in PROMPT_LENGTHS:
        s, b, r = per_prompt[str(t)], bf16_stats[str(t)], robustness[str(t)]
        k32 = r.get("fp32_recurrent", {}).get("max_kld", float("nan"))
        k64 = r.get("fp64_recurrent", {}).get("max_kld", float("nan"))
        print(
            f"{t:4d}  {r['tries']:5d}  {s['median_max_prob']:8.3f}  {s['frac_max_prob_gt_0.5']:5.2f}"
            f"  {s['frac_max_prob_gt_0.999']:6.2f}  {s['min_top1_logit_margin']:12.4g}  {r['min_router_gap']:14.4g}"
            f"  {k32:12.3g}  {k64:12.3g}  {b['max_kld']:8.3g}  {b['top1_agreement']:9.3f}"
        )
    st = reference["stats"]
    print(f"router: min k-th/(k+1)-th logit gap {st['router_min_topk_logit_gap']:.3g}; "
          f"distinct top-{TOP_K} sets per layer {st['router_distinct_topk_sets_per_layer']}")
    print(f"GDN decay exp(g): {st['gdn_decay_quantiles']}")
    print(f"GDN beta:         {st['gdn_beta_quantiles']}")
    print(f"greedy: prompt {gprompt} -> {cached}")
    print(f"greedy: cached == no-cache; min top1 margin {greedy_margin:.4g}; "
          f"cached-vs-full step logits max abs diff {decode_diff}")
    print(f"HF from_pretrained: ConditionalGeneration {hf_load}; CausalLM {causal_load}")
    if sens:
        print("\nsimulated bug                       max KLD   top1 agree")
        for label, r in sens.items():
            if "error" in r:
                print(f"{label:34s}  n/a ({r['error']})")
            else:
                print(f"{label:34s}  {r['max_kld']:8.3g}  {r['top1_agreement']:9.3f}")
        weak = [k for k, r in sens.items() if "max_kld" in r and r["max_kld"] < 100 * THRESHOLD_MAX_KLD]
        if weak:
            warn(f"these simulated bugs stay within 100x the KLD gate: {weak}")
    size = sum(os.path.getsize(p) for p in glob.glob(os.path.join(out, "*")))
    print(f"\nwrote {out} ({size / 1e6:.2f} MB) in {time.time() - t0:.1f}s")


if __name__ == "__main__":
    try:
        main()
    except SystemExit:
        raise
    except Exception:
        traceback.print_exc()
        die("unexpected error (traceback above)")
