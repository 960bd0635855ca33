#!/usr/bin/env bash
# Where a prefill's time goes, by kernel family, on the full-size model with
# synthetic bf16 weights (sm_90, Nsight Compute): for each plan variant
# (PROFILE_VARIANTS, each a set of extra `aimac plan` flags; default: the
# default plan and `--tiling on`), one bundle with buckets PROFILE_BUCKETS
# (1024,8192), then `probe bench --prefill L --repeats 1` under
# `ncu --clock-control none` for each length L of PROFILE_LENGTHS, timing every
# prefill kernel (gpu__time_duration). The second prefill of each run (the timed
# one: the first warms up) is summed per family into profile.md:
# launches, ms, share of the prefill.
#
# Build first: CGO_ENABLED=0 go build -o bin/ ./cmd/...
# Run from the repository root: scripts/h200_prefill_profile.sh [RESULTS_DIR]
set -u
out=${1:-results/h200}; mkdir -p "$out"
export PATH=$PATH:/usr/local/cuda/bin
work=${PROFILE_WORK:-$(mktemp -d)}
buckets=${PROFILE_BUCKETS:-1024,8192}
lengths=${PROFILE_LENGTHS:-1024 8192}
IFS=';' read -r -a variants <<< "${PROFILE_VARIANTS:-default;--tiling on}"
md=$out/prefill_profile.md
echo "# Prefill by kernel family (H200, Nsight Compute, full-size synthetic model)" > "$md"
for v in "${variants[@]}"; do
  name=$(echo "$v" | tr -c 'a-z0-9\n' '_'); flags=$v; [ "$v" = default ] && flags=""
  d=$work/$name; mkdir -p "$d"
  # shellcheck disable=SC2086
  bin/aimac plan --target sm_90 --buckets "$buckets" --context-tokens 9216 $flags --out "$d/plan.json" > "$d/plan.log" 2>&1 &&
    bin/aimac build --plan "$d/plan.json" --target sm_90 --out "$d/bundle" > "$d/build.log" 2>&1 || { echo "$v: plan/build failed"; tail -5 "$d"/*.log; continue; }
  for L in $lengths; do
    re=$(python3 -c "
import json; p=json.load(open('$d/plan.json'))
k=sorted(set(l['kernel'] for ph in p['phases'] if ph['name'].startswith('prefill') for l in ph['launches']))
print('regex:^(' + '|'.join(k) + ')$')")
    timeout 260 ncu --clock-control none --csv --page raw --metrics gpu__time_duration.sum -k "$re" \
      bin/aima-engine probe bench --bundle "$d/bundle" --synthetic-weights 1 --prefill "$L" --repeats 1 \
      --decode-context 0 --profile-steps 0 --copy-bytes 1048576 > "$d/ncu_$L.csv" 2> "$d/ncu_$L.err"
    python3 - "$d/ncu_$L.csv" "$v" "$L" >> "$md" <<'PY'
import csv, sys, re, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 5]
if len(rows) < 3:
    print(f"\n{sys.argv[2]} at {sys.argv[3]}: no kernels profiled"); sys.exit()
h = rows[0]; ki = h.index('Kernel Name'); ti = h.index('gpu__time_duration.sum')
data = rows[2:]
half = data[len(data)//2:]          # the timed prefill (the first is the warm-up)
fam = collections.defaultdict(lambda: [0, 0.0])
for r in half:
    f = re.sub(r'_[0-9a-f]{8}$', '', r[ki].split('(')[0])
    fam[f][0] += 1; fam[f][1] += float(r[ti].replace(',', ''))
tot = sum(v[1] for v in fam.values())
unit = 'ns' if tot > 1e6 else 'us'
scale = 1e6 if unit == 'ns' else 1e3
print(f"\n## {sys.argv[2]}, {sys.argv[3]} tokens: {len(half)} launches, {tot/scale:.1f} ms of kernels ({int(sys.argv[3])/(tot/scale/1e3):.0f} tok/s of kernel time)\n")
print("| family | launches | ms | share % |\n|---|---:|---:|---:|")
for f, (n, t) in sorted(fam.items(), key=lambda x: -x[1][1]):
    print(f"| {f} | {n} | {t/scale:.2f} | {100*t/tot:.1f} |")
PY
    tail -2 "$d/ncu_$L.err"
  done
done
cat "$md"
