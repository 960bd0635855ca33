#!/usr/bin/env bash
# Speed of the CUDA engine against HuggingFace transformers on the full-size
# Qwen3.6-35B-A3B (40 layers, 256 experts, vocab 248320) with synthetic bf16
# weights, batch 1, in one run on an sm_90 machine (H100/H200, about 75 GB of
# GPU memory free) with nvcc and python3 holding torch + transformers 5.17:
#   1. aimac plan --target sm_90 (the embedded real config, bf16 KV cache: the
#      GPU default; buckets 1024,8192, context 132096: 128K and the steps after
#      it) and aimac build of its bundle;
#   2. aima-engine probe bench --bundle ... --synthetic-weights 1 (weights made
#      on the device): cold prefill of 1024 and 8192 random ids (1 warm-up, 3
#      timed), greedy decode (256 timed steps, drawn on the device, one graph
#      replay a token) at contexts 1024 and 8192 after those prefills and at
#      32768 and 131072 from a synthetic context (--synthetic-context: the KV
#      cache and GDN state filled on the device, the position set; the
#      figures say "synthetic": speed only), then at each context 4 steps
#      with every launch timed inside one graph replay (the per-family table),
#      the bytes the step must move and the device-to-device copy bandwidth
#      of the same run (the roofline), and 256 greedy steps from one snapshot
#      with the BF16 LM head and again with the certified int8 head (identical
#      tokens required; both heads timed);
#   3. after the engine has exited (both need ~70 GB), bench/hf_speed.py run:
#      transformers' Qwen3_5MoeForCausalLM on the same shapes, random bf16
#      weights made on the GPU, eager then sdpa attention, 16 decode steps;
#   4. bench/hf_speed.py combine: ours vs HF and the ratio, as a table; ours
#      against the roofline and by kernel family.
# Each stage has a timeout inside the total budget; a stage that fails or runs
# out of time still leaves what it measured (both benchmarks rewrite their
# JSON after every measurement) and the others still run.
#
# Build first (no Go toolchain is needed where it runs):
#   CGO_ENABLED=0 go build -o bin/ ./cmd/...
# Then, from the repository root:
#   scripts/h200_speed.sh [RESULTS_DIR]
# RESULTS_DIR (default results/h200) receives speed.json and speed.md (the
# comparison), speed_ours.json and speed_hf.json (every figure of each side),
# speed_gpu.csv (nvidia-smi before the run), speed_smi.csv (clocks, power and
# memory sampled every 5 s during it) and the logs speed.log,
# speed_build.log, speed_engine.log and speed_hf.log.
# Environment: SPEED_WORK (plan and bundle; default: a new temporary directory,
# removed at the end), SPEED_BUDGET_S (default 300: the whole run),
# SPEED_HF_S (default 120: kept for the HF stage while the engine runs),
# SPEED_BUCKETS (1024,8192), SPEED_CONTEXT (132096), SPEED_LENGTHS
# (1024,8192: prefill lengths, and HF's decode contexts),
# SPEED_DECODE_CONTEXTS (1024,8192,32768,131072: ours; those that are no
# prefill length start from a synthetic context), SPEED_DECODE_TOKENS (256,
# ours), SPEED_PROFILE_STEPS (4: ours, for the family table),
# SPEED_PROFILE_MODE (graph, or launches: one by one as before),
# SPEED_LONG_PREFILL (32768,131072: ours only, after the engine bench, one
# timed prefill each (the kernels are the 8K run's: no warm-up), in the time
# left before HF's share;
# empty: none), SPEED_HF_DECODE_TOKENS (16), SPEED_REPEATS (3), SPEED_HF_ATTN
# (eager,sdpa), SPEED_PLAN_ARGS (more aimac plan flags, e.g. "--qk-fold=false"),
# SPEED_COMMIT (default: git rev-parse HEAD).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/results/h200}
mkdir -p "$dir" || exit 1
dir=$(cd "$dir" && pwd)
work=${SPEED_WORK:-}
if [ -z "$work" ]; then work=$(mktemp -d -t aima-speed.XXXXXX) || exit 1; made_work=1; else made_work=0; fi
budget=${SPEED_BUDGET_S:-300}
hf_reserve=${SPEED_HF_S:-120}
buckets=${SPEED_BUCKETS:-1024,8192}
context=${SPEED_CONTEXT:-132096}
lengths=${SPEED_LENGTHS:-1024,8192}
plan_args=${SPEED_PLAN_ARGS:-}
decode_contexts=${SPEED_DECODE_CONTEXTS:-1024,8192,32768,131072}
decode_tokens=${SPEED_DECODE_TOKENS:-256}
profile_steps=${SPEED_PROFILE_STEPS:-4}
profile_mode=${SPEED_PROFILE_MODE:-graph}
# Greedy steps decoded with both LM heads from one snapshot (docs/lm-head.md):
# identical tokens required, both timed.
certified_steps=${SPEED_CERTIFIED_STEPS:-256}
hf_decode_tokens=${SPEED_HF_DECODE_TOKENS:-16}
long_prefill=${SPEED_LONG_PREFILL-32768,131072}
repeats=${SPEED_REPEATS:-3}
hf_attn=${SPEED_HF_ATTN:-eager,sdpa}
commit=${SPEED_COMMIT:-$(git -C "$root" rev-parse HEAD 2>/dev/null || true)}
start=$(date +%s)
deadline=$((start + budget))
export PATH=$PATH:/usr/local/cuda/bin PYTHONUNBUFFERED=1
exec > >(tee "$dir/speed.log") 2>&1
elapsed() { echo $(( $(date +%s) - start )); }
left() { echo $(( deadline - $(date +%s) )); }

for b in aimac aima-engine; do
  [ -x "$root/bin/$b" ] || { echo "missing bin/$b: CGO_ENABLED=0 go build -o bin/ ./cmd/..." >&2; exit 1; }
done
cd "$root" || exit 1
rm -f "$dir"/speed.json "$dir"/speed.md "$dir"/speed_ours.json "$dir"/speed_hf.json "$dir"/speed_gpu.csv "$dir"/speed_smi.csv
echo "commit ${commit:-unknown}; budget ${budget}s; buckets $buckets, context $context, lengths $lengths, decode contexts $decode_contexts"
smi=0
if command -v nvidia-smi >/dev/null; then
  smi=1
  nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.limit,persistence_mode,pstate,temperature.gpu \
    --format=csv | tee "$dir/speed_gpu.csv"
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,utilization.gpu,memory.used \
    --format=csv -l 5 >"$dir/speed_smi.csv" 2>/dev/null &
  sampler=$!
fi
cleanup() {
  [ $smi = 1 ] && kill "$sampler" 2>/dev/null
  [ "$made_work" = 1 ] && rm -rf "$work"
}
trap cleanup EXIT
nvcc --version | tail -n 1 || true
mkdir -p "$work" && rm -rf "$work/plan.json" "$work/bundle" || exit 1

# 1. Plan and bundle.
engine_ok=1
echo "[$(elapsed)s] plan"
if ! bin/aimac plan --target sm_90 --buckets "$buckets" --context-tokens "$context" $plan_args --out "$work/plan.json"; then
  echo "plan failed"; engine_ok=0
fi
if [ $engine_ok = 1 ]; then
  echo "[$(elapsed)s] build"
  build_s=$(( $(left) - hf_reserve - 60 ))
  [ $build_s -lt 30 ] && build_s=30
  timeout -k 10 "$build_s" bin/aimac build --plan "$work/plan.json" --target sm_90 --out "$work/bundle" >"$dir/speed_build.log" 2>&1
  rc=$?
  tail -n 5 "$dir/speed_build.log"
  if [ $rc != 0 ]; then echo "build failed (exit $rc; 124: out of time): see speed_build.log"; engine_ok=0; fi
fi

# 2. Our engine: what is left of the budget but the HF stage's share.
if [ $engine_ok = 1 ]; then
  engine_s=$(( $(left) - hf_reserve - 10 ))
  if [ $engine_s -lt 60 ]; then
    echo "[$(elapsed)s] engine skipped: ${engine_s}s left for it"
  else
    echo "[$(elapsed)s] engine bench (timeout ${engine_s}s)"
    timeout -k 20 "$engine_s" bin/aima-engine probe bench --bundle "$work/bundle" --synthetic-weights 1 \
      --prefill "$lengths" --decode-context "$decode_contexts" --synthetic-context --decode-tokens "$decode_tokens" \
      --profile-steps "$profile_steps" --profile-mode "$profile_mode" --certified-steps "$certified_steps" --repeats "$repeats" \
      --id-limit 248077 --commit "$commit" --time-limit "$(( engine_s - 15 ))s" --json "$dir/speed_ours.json" \
      >"$dir/speed_engine.log" 2>&1
    rc=$?
    echo "[$(elapsed)s] engine exit $rc (124: out of time)"
    cat "$dir/speed_engine.log"
  fi
fi

# 2b. Long prompts (ours only): bucket after bucket through the largest bucket.
rm -f "$dir/speed_long.json"
if [ $engine_ok = 1 ] && [ -n "$long_prefill" ]; then
  long_s=$(( $(left) - hf_reserve - 10 ))
  if [ $long_s -lt 40 ]; then
    echo "[$(elapsed)s] long prefills skipped: ${long_s}s left for them"
  else
    echo "[$(elapsed)s] long prefills $long_prefill (timeout ${long_s}s)"
    timeout -k 20 "$long_s" bin/aima-engine probe bench --bundle "$work/bundle" --synthetic-weights 1 \
      --prefill "$long_prefill" --warmup 0 --repeats 1 --decode-context 0 --profile-steps 0 \
      --id-limit 248077 --commit "$commit" --time-limit "$(( long_s - 10 ))s" --json "$dir/speed_long.json" \
      >"$dir/speed_long.log" 2>&1
    echo "[$(elapsed)s] long prefills exit $? (124: out of time)"
    cat "$dir/speed_long.log"
  fi
fi

# 3. HF transformers, alone on the GPU now.
hf_s=$(( $(left) - 10 ))
if [ $hf_s -lt 60 ]; then
  echo "[$(elapsed)s] HF skipped: ${hf_s}s left for it"
else
  echo "[$(elapsed)s] HF bench (timeout ${hf_s}s)"
  timeout -k 20 "$hf_s" python3 bench/hf_speed.py run --lengths "$lengths" --decode-contexts "$lengths" \
    --decode-tokens "$hf_decode_tokens" --repeats "$repeats" --attn "$hf_attn" --layers 40 \
    --time-limit "$(( hf_s - 25 ))" --out "$dir/speed_hf.json" >"$dir/speed_hf.log" 2>&1
  rc=$?
  echo "[$(elapsed)s] HF exit $rc (124: out of time)"
  tail -n 40 "$dir/speed_hf.log"
fi

# 4. Side by side.
if [ $smi = 1 ]; then kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null; fi
extra=(); [ -f "$dir/speed_long.json" ] && extra=(--ours-extra "$dir/speed_long.json")
python3 bench/hf_speed.py combine --ours "$dir/speed_ours.json" "${extra[@]}" --hf "$dir/speed_hf.json" \
  --gpu "$dir/speed_gpu.csv" --smi "$dir/speed_smi.csv" --commit "$commit" --json "$dir/speed.json" --md "$dir/speed.md"
rc=$?
echo "[$(elapsed)s] done: speed.md and speed.json in RESULTS_DIR (combine exit $rc: 0 when both sides ran everything)"
exit $rc
