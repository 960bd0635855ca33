#!/usr/bin/env bash
# Plan variants side by side on the full-size synthetic model (sm_90, H100/H200
# with nvcc, about 75 GB of GPU memory free): for each "NAME=aimac plan flags"
# of VARIANTS, aimac plan (the embedded real config, buckets 1024,8192, context
# 132096) and aimac build, then aima-engine probe bench --synthetic-weights 1:
# prefill of VARIANT_PREFILL (VARIANT_REPEATS timed runs after a warm-up; with
# VARIANT_PROFILE_PREFILL=1 one more timed launch by launch, --profile-prefill,
# its family table appended to variants.md), greedy decode
# (VARIANT_DECODE_TOKENS timed steps) at VARIANT_DECODE_CONTEXTS (those that
# are no prefill length from a synthetic context), the per-family table of 4
# profiled steps, and, where the plan has the certified int8 LM head,
# VARIANT_CERTIFIED_STEPS greedy steps with each head (identical tokens
# required). One variant after another on an otherwise idle GPU, so the
# figures compare; each writes NAME.json, and variants.md is the table,
# with whether each variant's greedy ids equal the first variant's at every
# decode context and the grid-barrier kernels that ran as their fallbacks.
#
# Build first (no Go toolchain is needed where it runs):
#   CGO_ENABLED=0 go build -o bin/ ./cmd/...
# Then, from the repository root:
#   VARIANTS="base=;l2pf=--l2-prefetch;rank=--moe-rank" scripts/h200_variants.sh DIR
# Environment: VARIANTS (required; NAME lower-case alphanumeric), VARIANT_PREFILL
# (8192; empty: none), VARIANT_REPEATS (3), VARIANT_PROFILE_PREFILL (0; 1:
# --profile-prefill), VARIANT_DECODE_CONTEXTS (8192,131072; empty: none),
# VARIANT_DECODE_TOKENS (128), VARIANT_CERTIFIED_STEPS (64), VARIANT_S (90:
# the limit for one variant's plan, build and bench), VARIANT_COMMIT.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:?usage: VARIANTS="NAME=flags;..." scripts/h200_variants.sh DIR}
mkdir -p "$dir" || exit 1
dir=$(cd "$dir" && pwd)
variants=${VARIANTS:?VARIANTS="NAME=aimac plan flags;..." is required}
prefill=${VARIANT_PREFILL-8192}
contexts=${VARIANT_DECODE_CONTEXTS-8192,131072}
tokens=${VARIANT_DECODE_TOKENS:-128}
certified=${VARIANT_CERTIFIED_STEPS:-64}
repeats=${VARIANT_REPEATS:-3}
[[ "$repeats" =~ ^[1-9][0-9]*$ ]] || { echo "VARIANT_REPEATS: \"$repeats\" is not a count ≥ 1" >&2; exit 1; }
profile=()
case ${VARIANT_PROFILE_PREFILL:-0} in
  0) ;;
  1) profile=(--profile-prefill) ;;
  *) echo "VARIANT_PROFILE_PREFILL: \"$VARIANT_PROFILE_PREFILL\" is not 0 or 1" >&2; exit 1 ;;
esac
if [ ${#profile[@]} -gt 0 ] && [ -z "$prefill" ]; then
  echo "VARIANT_PROFILE_PREFILL=1 profiles the VARIANT_PREFILL lengths: give one" >&2; exit 1
fi
limit=${VARIANT_S:-90}
commit=${VARIANT_COMMIT:-$(git -C "$root" rev-parse HEAD 2>/dev/null || true)}
export PATH=$PATH:/usr/local/cuda/bin
for b in aimac aima-engine; do
  [ -x "$root/bin/$b" ] || { echo "missing bin/$b: CGO_ENABLED=0 go build -o bin/ ./cmd/..." >&2; exit 1; }
done
IFS=';' read -ra vlist <<<"$variants"
for v in "${vlist[@]}"; do
  [[ "${v%%=*}" =~ ^[a-z0-9]+$ && "$v" == *=* ]] || { echo "VARIANTS: \"$v\" is not NAME=flags with a lower-case alphanumeric NAME" >&2; exit 1; }
done
cd "$root" || exit 1
work=$(mktemp -d -t aima-variants.XXXXXX) || exit 1
trap 'rm -rf "$work"' EXIT
start=$(date +%s)
names=()
for v in "${vlist[@]}"; do
  name=${v%%=*}; flags=${v#*=}
  names+=("$name")
  echo "[$(( $(date +%s) - start ))s] $name: aimac plan $flags"
  rm -f "$dir/$name.json"
  if ! bin/aimac plan --target sm_90 --buckets 1024,8192 --context-tokens 132096 $flags --out "$work/$name.plan.json" >"$dir/$name.log" 2>&1 ||
    ! timeout -k 5 "$limit" bin/aimac build --plan "$work/$name.plan.json" --target sm_90 --out "$work/$name.bundle" >>"$dir/$name.log" 2>&1; then
    echo "  plan or build failed:"; tail -n 5 "$dir/$name.log"; continue
  fi
  tail -n 1 "$dir/$name.log"
  cert=(); grep -q '"decode_greedy"' "$work/$name.plan.json" && cert=(--certified-steps "$certified")
  timeout -k 10 "$limit" bin/aima-engine probe bench --bundle "$work/$name.bundle" --synthetic-weights 1 \
    --prefill "${prefill:-0}" --decode-context "${contexts:-0}" --synthetic-context --decode-tokens "$tokens" \
    --profile-steps 4 "${cert[@]}" "${profile[@]}" --repeats "$repeats" --id-limit 248077 --commit "$commit" \
    --time-limit "$(( limit - 15 ))s" --json "$dir/$name.json" >>"$dir/$name.log" 2>&1
  echo "  exit $? (124: out of time)"
  grep -E "prefill [0-9]+: .*ms$|decode at [0-9]+: [0-9]+ steps, median|certified|launches a step" "$dir/$name.log" | tail -n 8 | sed 's/^/  /'
  rm -rf "$work/$name.bundle"
done
python3 - "$dir" "$variants" "${names[@]}" <<'EOF'
import json, os, sys
d, spec, names = sys.argv[1], sys.argv[2], sys.argv[3:]
flags = dict(v.split("=", 1) for v in spec.split(";"))
rows = ["| variant | plan flags | prefill tok/s | decode tok/s by context | launches a step | greedy ids as the first variant's | fallbacks |",
        "|---|---|---|---|---|---|---|"]
# The first variant's greedy ids by context: plans of the same model and weights that compute the
# same logits draw the same ids (probe bench's decode[].ids), so a difference is a wrong variant.
first = None
for n in names:
    p = os.path.join(d, n + ".json")
    if not os.path.exists(p):
        rows.append(f"| {n} | `{flags[n]}` | failed | | | | |")
        continue
    j = json.load(open(p))
    ids = {x["context"]: x.get("ids") for x in j.get("decode") or []}
    if first is None:
        first = ids
    same = ", ".join(f"{c}: {'yes' if ids[c] == first.get(c) else 'NO'}" for c in ids if ids[c] is not None)
    pre = ", ".join(f"{x['tokens']}: {x['tok_s']['median']:,.0f}" for x in j.get("prefill") or [] if x.get("tok_s"))
    dec = ", ".join(f"{x['context']}: {x['tok_s_median_step']:.1f}" for x in j.get("decode") or [] if x.get("tok_s_median_step"))
    launches = ", ".join(str(sum(f["launches"] for f in x["profile"]["families"])) for x in j.get("decode") or [] if x.get("profile"))
    fb = ", ".join(j.get("method", {}).get("fallbacks") or []) or "none"
    rows.append(f"| {n} | `{flags[n]}` | {pre} | {dec} | {launches} | {same} | {fb} |")
# Each variant's profiled prefills (--profile-prefill), after the table.
dash = lambda x, f: f % x if x else "-"
for n in names:
    p = os.path.join(d, n + ".json")
    if not os.path.exists(p):
        continue
    for x in json.load(open(p)).get("prefill") or []:
        pr = x.get("profile")
        if not pr:
            continue
        launches = sum(s["launches"] for s in pr["by_step"])
        rows += ["", f"{n}, prefill {x['tokens']}: {launches} launches in {pr['steps']} steps, {pr['step_us'] / 1e3:.1f} ms of launches "
                 f"({pr['timing']}); unprofiled {pr.get('unprofiled_ms', 0):.1f} ms, {pr.get('outside_launches_ms', 0):.1f} ms outside them", "",
                 "| family | launches | ms | share % | TFLOP/s | GB/s |", "|---|---:|---:|---:|---:|---:|"]
        for f in pr["families"]:
            rows.append(f"| {f['family']} | {f['launches']} | {f['us_per_step'] / 1e3:.2f} | {100 * f['share']:.1f} | "
                        f"{dash(f.get('tflop_s', 0), '%.1f')} | {dash(f['gb_s'], '%.1f')} |")
open(os.path.join(d, "variants.md"), "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
EOF
