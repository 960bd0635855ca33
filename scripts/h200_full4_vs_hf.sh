#!/usr/bin/env bash
# The CUDA engine against HuggingFace transformers on a real-width checkpoint
# (4 layers: 3 Gated DeltaNet + 1 full attention, all 256 experts, vocab 248320),
# in one run on an sm_90 machine (H100/H200) with nvcc and python3 holding
# torch + transformers 5.17:
#   1. aimac synth --preset full --layers 4 --seed 1 (about 8.2 GB on local disk);
#   2. aimac plan (buckets 64,1024, context 4224 or more) and aimac build --target sm_90;
#   3. aima-engine probe logits with the bundle, for seeded random prompts of
#      1, 63, 64, 65, 1000, 1024, 1025 and 4096 tokens (shortest first);
#   4. meanwhile oracle/compare_full4.py runs transformers in fp32, in float64
#      with nothing rounded to fp32, and in bf16 (for reference) on the GPU and
#      computes per-position KLD and top-1 agreement against each.
# Gates: max KLD <= 0.005 and top-1 agreement >= 0.99 at every length against HF
# fp32; a length that fails them still passes when the engine passes against the
# float64 reference and HF fp32 is at least as far from float64 at the failing
# position (a discrete near-tie that HF fp32 decides the inexact way).
#
# Build first (no Go toolchain is needed where it runs):
#   CGO_ENABLED=0 go build -o bin/ ./cmd/...
# Optionally put a plan made elsewhere at bin/full4_plan.json (aimac plan is
# deterministic and path-independent): the build then starts while synth runs,
# and the plan made here from the new checkpoint must be byte-identical to it.
# Then, from the repository root:
#   scripts/h200_full4_vs_hf.sh [RESULTS_DIR]
# RESULTS_DIR (default results/h200) receives full4_vs_hf.json, full4_vs_hf.log
# and full4_engine.log. Environment: FULL4_WORK (default /tmp/full4work),
# FULL4_BUDGET_S (default 420: the comparison stops waiting after that many
# seconds, and engine runs that would start too late are skipped),
# FULL4_LENGTHS (default 1,63,64,65,1000,1024,1025,4096), FULL4_COMMIT,
# FULL4_KV_DTYPE (default bf16, the GPU plans' KV cache; f32 for the second
# gate run with an f32 cache), FULL4_PLAN_ARGS (more aimac plan flags, e.g.
# "--decode-mma on"), FULL4_DECODE_LAST (default 0: the last N positions of
# every prompt go through the decode step one token at a time, so the gate
# holds the decode kernels too), FULL4_VARIANTS (more plans to score against
# the same HF run: "NAME=plan flags;NAME2=flags", each planned, built and run
# after the main one, e.g. "untiled=--tiling off;serialgdn=--prefill-gdn
# chunked"), FULL4_FP64 and FULL4_BF16 (default 1: run those HF references).
# The context is 4224 tokens, or the longest prompt plus 128.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/results/h200}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
work=${FULL4_WORK:-/tmp/full4work}
budget=${FULL4_BUDGET_S:-420}
lengths=${FULL4_LENGTHS:-1,63,64,65,1000,1024,1025,4096}
kv_dtype=${FULL4_KV_DTYPE:-bf16}
plan_args=${FULL4_PLAN_ARGS:-}
decode_last=${FULL4_DECODE_LAST:-0}
variants=${FULL4_VARIANTS:-}
variant_names=""
if [ -n "$variants" ]; then
  IFS=';' read -ra vlist <<<"$variants"
  for v in "${vlist[@]}"; do
    name=${v%%=*}
    [[ "$name" =~ ^[a-z0-9]+$ && "$v" == *=* ]] || { echo "FULL4_VARIANTS: \"$v\" is not NAME=flags with a lower-case alphanumeric NAME" >&2; exit 1; }
    variant_names=${variant_names:+$variant_names,}$name
  done
fi
context=4224
for t in ${lengths//,/ }; do [ $((t + 128)) -gt $context ] && context=$((t + 128)); done
start=$(date +%s)
deadline=$((start + budget))
ckpt=$work/full4
bundle=$work/bundle
export PATH=$PATH:/usr/local/cuda/bin PYTHONUNBUFFERED=1
exec > >(tee "$dir/full4_vs_hf.log") 2>&1
elapsed() { echo $(( $(date +%s) - start )); }

for b in aimac aima-engine; do
  [ -x "$root/bin/$b" ] || { echo "missing bin/$b: CGO_ENABLED=0 go build -o bin/ ./cmd/..." >&2; exit 1; }
done
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader || true
nvcc --version | tail -n 1 || true
rm -rf "$work" && mkdir -p "$work" || exit 1
cd "$root"

python3 oracle/compare_full4.py prompts --out "$work" --seed 1 --lengths "$lengths" || exit 1

# The build from bin/full4_plan.json overlaps synth.
prebuilt=0
if [ -f bin/full4_plan.json ]; then
  ( bin/aimac build --plan bin/full4_plan.json --target sm_90 --out "$bundle" >"$work/build.log" 2>&1; echo $? >"$work/build.rc" ) &
  prebuilt=1
fi
echo "[$(elapsed)s] synth"
bin/aimac synth --preset full --layers 4 --seed 1 --out "$ckpt" || exit 1
du -sh "$ckpt"
echo "[$(elapsed)s] synth done"

# Engine: plan, build, then one probe per length; ours_<T>.rc announces each result.
(
  set +e
  bin/aimac plan --model-dir "$ckpt" --target sm_90 --buckets 64,1024 --context-tokens "$context" --kv-dtype "$kv_dtype" $plan_args --out "$work/plan.json" || { echo plan-failed; for t in ${lengths//,/ }; do echo "plan failed" >"$work/ours_$t.rc"; done; exit 1; }
  if [ $prebuilt = 1 ]; then
    while [ ! -f "$work/build.rc" ]; do sleep 0.5; done
    if cmp -s "$work/plan.json" bin/full4_plan.json && [ "$(cat "$work/build.rc")" = 0 ]; then
      echo "plan identical to bin/full4_plan.json; its bundle is used"
    else
      echo "bin/full4_plan.json differs or its build failed: building again"; cat "$work/build.log"
      rm -rf "$bundle"; prebuilt=0
    fi
  fi
  if [ $prebuilt = 0 ]; then
    bin/aimac build --plan "$work/plan.json" --target sm_90 --out "$bundle" >"$work/build.log" 2>&1
    rc=$?; echo $rc >"$work/build.rc"
  fi
  cat "$work/build.log"
  if [ "$(cat "$work/build.rc")" != 0 ]; then
    for t in ${lengths//,/ }; do echo "build failed" >"$work/ours_$t.rc"; done; exit 1
  fi
  echo "[$(elapsed)s] bundle ready"
  # probe STEM BUNDLE: every length through BUNDLE into STEM_<T>.npy, STEM_<T>.rc.
  probe() {
    for t in ${lengths//,/ }; do
      # Leave time to compare: skip a length whose run would end after the deadline.
      need=$(( 25 + t / 200 ))
      if [ $(( $(date +%s) + need )) -gt "$deadline" ]; then echo "[$(elapsed)s] $1 T=$t skipped: out of time"; echo "skipped: out of time" >"$work/$1_$t.rc"; continue; fi
      t1=$(date +%s.%N)
      bin/aima-engine probe logits --model-dir "$ckpt" --bundle "$2" --tokens "$(cat "$work/tokens_$t.txt")" --decode-last "$decode_last" --out "$work/$1_$t.npy"
      rc=$?
      python3 -c "import sys; print(round($(date +%s.%N) - $t1, 2))" >"$work/$1_$t.time"
      echo "[$(elapsed)s] $1 T=$t engine exit $rc"
      echo "$rc" >"$work/$1_$t.rc"
    done
  }
  probe ours "$bundle"
  if [ -n "$variants" ]; then
    for v in "${vlist[@]}"; do
      name=${v%%=*}; flags=${v#*=}
      echo "[$(elapsed)s] variant $name: $flags"
      if bin/aimac plan --model-dir "$ckpt" --target sm_90 --buckets 64,1024 --context-tokens "$context" --kv-dtype "$kv_dtype" $plan_args $flags --out "$work/plan_$name.json" &&
        bin/aimac build --plan "$work/plan_$name.json" --target sm_90 --out "$work/bundle_$name" >"$work/build_$name.log" 2>&1; then
        tail -n 1 "$work/build_$name.log"
        probe "ours_$name" "$work/bundle_$name"
      else
        cat "$work/build_$name.log" 2>/dev/null | tail -n 5
        for t in ${lengths//,/ }; do echo "plan or build failed" >"$work/ours_${name}_$t.rc"; done
      fi
    done
  fi
) >"$work/engine.log" 2>&1 &
engine=$!

python3 oracle/compare_full4.py compare --model-dir "$ckpt" --work "$work" --out "$dir/full4_vs_hf.json" \
  --deadline "$deadline" --commit "${FULL4_COMMIT:-}" --fp64 "${FULL4_FP64:-1}" --bf16 "${FULL4_BF16:-1}" \
  --variants "$variant_names" --variant-flags "$variants" \
  --checkpoint-desc "aimac synth --preset full --layers 4 --seed 1 (real widths, 3 GDN + 1 full attention, 256 experts)" \
  --command "scripts/h200_full4_vs_hf.sh (FULL4_LENGTHS=$lengths FULL4_BUDGET_S=$budget FULL4_KV_DTYPE=$kv_dtype FULL4_PLAN_ARGS='$plan_args' FULL4_DECODE_LAST=$decode_last FULL4_VARIANTS='$variants')"
rc=$?
if kill -0 $engine 2>/dev/null; then echo "engine job still running at the end: stopping it"; pkill -P $engine 2>/dev/null; kill $engine 2>/dev/null; fi
wait $engine 2>/dev/null
cp "$work/engine.log" "$dir/full4_engine.log"
echo "----- engine log (tail) -----"; tail -n 40 "$work/engine.log"
echo "[$(elapsed)s] done, compare exit $rc"
exit $rc
