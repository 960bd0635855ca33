#!/usr/bin/env bash
# What binds a kernel inside a real prefill: Nsight Compute's full set of
# metrics (one kernel launch, --clock-control none) for the first launch of
# each family of NCU_FAMILIES, in a prefill of NCU_PREFILL tokens of the
# full-size model with synthetic weights (sm_90). The engine runs as it does in
# probe bench, so the launch sees the operands, caches and clocks of the step;
# one profiled process per family (ncu replays the launch for its passes).
# Writes, in RESULTS_DIR: FAMILY.txt (ncu's details page), FAMILY_raw.csv
# (every metric), FAMILY_sass.csv (the SASS with each instruction's counters)
# and ncu_kernels.md: per family the time, the SM clock, the tensor pipe's,
# L2's and L1/shared memory's share of their peaks, the eligible warps a
# scheduler and the largest stall reasons, then the 25 instructions with the
# most warp-stall samples.
#
# Build first: CGO_ENABLED=0 go build -o bin/ ./cmd/...
# Run from the repository root: scripts/h200_ncu_kernels.sh RESULTS_DIR
# Environment: NCU_FAMILIES ("gemm moe_gate_up_group moe_down_group
# attention_prefill_wg": plan kernel families), NCU_PREFILL (8192),
# NCU_PLAN_ARGS (extra aimac plan flags), NCU_SKIP (0: how many launches of the
# family to pass over before the profiled one), NCU_S (110: the limit for each
# profiled process).
#
# A profiler wrapped around a Python process that loads torch (the kernel
# cases' codegen/testdata/gpucheck.py) spends minutes before the first kernel:
# profile the engine, as here.
set -uo pipefail
out=${1:?usage: scripts/h200_ncu_kernels.sh RESULTS_DIR}
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
families=${NCU_FAMILIES:-gemm moe_gate_up_group moe_down_group attention_prefill_wg}
prefill=${NCU_PREFILL:-8192}
skip=${NCU_SKIP:-0}
limit=${NCU_S:-110}
[[ "$prefill" =~ ^[1-9][0-9]*$ ]] || { echo "NCU_PREFILL: \"$prefill\" is not a token count" >&2; exit 1; }
[[ "$skip" =~ ^[0-9]+$ ]] || { echo "NCU_SKIP: \"$skip\" is not a count" >&2; exit 1; }
for f in $families; do
  [[ "$f" =~ ^[a-z0-9_]+$ ]] || { echo "NCU_FAMILIES: \"$f\" is not a kernel family name" >&2; exit 1; }
done
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
export PATH=$PATH:/usr/local/cuda/bin
for b in aimac aima-engine; do
  [ -x "bin/$b" ] || { echo "missing bin/$b: CGO_ENABLED=0 go build -o bin/ ./cmd/..." >&2; exit 1; }
done
work=$(mktemp -d -t aima-ncu.XXXXXX) || exit 1
trap 'rm -rf "$work"' EXIT
ctx=$(( prefill + 1024 ))
# shellcheck disable=SC2086
if ! bin/aimac plan --target sm_90 --buckets 1024,8192 --context-tokens "$ctx" ${NCU_PLAN_ARGS:-} --out "$work/plan.json" > "$out/build.log" 2>&1 ||
  ! timeout 300 bin/aimac build --plan "$work/plan.json" --target sm_90 --out "$work/bundle" >> "$out/build.log" 2>&1; then
  echo "plan or build failed:"; tail -n 5 "$out/build.log"; exit 1
fi
for f in $families; do
  # A plan kernel is its family's name and 8 hex digits of its hash.
  timeout -k 10 "$limit" ncu --clock-control none --set full -k "regex:^${f}_[0-9a-f]{8}$" -s "$skip" -c 1 -o "$work/$f" \
    bin/aima-engine probe bench --bundle "$work/bundle" --synthetic-weights 1 --prefill "$prefill" --warmup 0 --repeats 1 \
    --decode-context 0 --profile-steps 0 --id-limit 248077 > "$out/$f.log" 2>&1
  echo "$f: ncu exit $?"
  if [ -f "$work/$f.ncu-rep" ]; then
    ncu --import "$work/$f.ncu-rep" --page details > "$out/$f.txt" 2>&1
    ncu --import "$work/$f.ncu-rep" --page raw --csv --print-units base > "$out/${f}_raw.csv" 2>&1
    # The SASS with each instruction's warp-stall samples (the full set's source counters).
    ncu --import "$work/$f.ncu-rep" --page source --csv --print-source sass > "$out/${f}_sass.csv" 2>&1
  fi
done
python3 - "$out" "$prefill" "${NCU_PLAN_ARGS:-}" $families > "$out/ncu_kernels.md" <<'EOF'
import csv, os, sys
out, prefill, args, fams = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
print(f"# Nsight Compute inside a {prefill}-token prefill (full-size synthetic model, plan flags `{args}`)\n")
print("| family | kernel | grid | ms | SM GHz | tensor pipe % | L2 % | L1/shared % | eligible warps a scheduler | largest stalls (cycles per issued instruction) |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
for f in fams:
    p = os.path.join(out, f + "_raw.csv")
    rows = list(csv.reader(open(p))) if os.path.exists(p) else []
    if len(rows) < 3:
        print(f"| {f} | not profiled | | | | | | | | |")
        continue
    d = dict(zip(rows[0], rows[2]))
    num = lambda m: float(d[m].replace(",", "")) if d.get(m, "") not in ("", "n/a") else float("nan")
    pre, post = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
    stalls = sorted(((m[len(pre):-len(post)], num(m)) for m in d if m.startswith(pre) and m.endswith(post)
                     and m != pre + "selected" + post), key=lambda s: -s[1])
    print(f"| {f} | {d.get('Kernel Name', '?')} | {d.get('launch__grid_size', '?')} | {num('gpu__time_duration.sum') / 1e6:.3f} | "
          f"{num('sm__cycles_elapsed.avg.per_second') / 1e9:.2f} | {num('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed'):.1f} | "
          f"{num('lts__throughput.avg.pct_of_peak_sustained_elapsed'):.1f} | {num('l1tex__throughput.avg.pct_of_peak_sustained_active'):.1f} | "
          f"{num('smsp__warps_eligible.avg.per_cycle_active'):.2f} | " + ", ".join(f"{n} {v:.2f}" for n, v in stalls[:5]) + " |")
EOF
# Per family, the SASS instructions with the most warp-stall samples (where the warps wait).
python3 - "$out" $families >> "$out/ncu_kernels.md" <<'SASS'
import csv, os, sys
out, fams = sys.argv[1], sys.argv[2:]
for f in fams:
    p = os.path.join(out, f + "_sass.csv")
    if not os.path.exists(p):
        continue
    rows = list(csv.reader(l for l in open(p, errors="replace") if l.startswith('"')))
    # The header is the row naming the address and source columns (a kernel-name row precedes it).
    at = next((i for i, r in enumerate(rows) if "Address" in r and "Source" in r), None)
    if at is None:
        continue
    head, rows = rows[at], rows[at:]
    col = lambda *names: next((i for i, h in enumerate(head) if all(n in h for n in names)), None)
    src, samp, addr = col("Source"), col("Warp Stall Sampling (All"), col("Address")
    if src is None or samp is None:
        continue
    def val(r):
        try:
            return float(r[samp].replace(",", "") or 0)
        except ValueError:
            return 0.0
    body = [r for r in rows[1:] if len(r) > max(src, samp)]
    total = sum(val(r) for r in body) or 1.0
    print(f"\n## {f}: the SASS instructions with the most stall samples ({int(total)} samples)\n")
    print("| address | instruction | % of samples |\n|---|---|---:|")
    for r in sorted(body, key=val, reverse=True)[:25]:
        at = r[addr] if addr is not None and addr < len(r) else ""
        print(f"| {at} | `{r[src].strip()}` | {100 * val(r) / total:.1f} |")
    # By opcode: warp instructions executed and stall samples (the instruction mix a tile issues).
    ex = col("Instructions Executed")
    if ex is None:
        continue
    num = lambda r, i: float(r[i].replace(",", "") or 0) if i < len(r) and r[i].replace(",", "").replace(".", "").isdigit() else 0.0
    by = {}
    for r in body:
        op = r[src].strip()
        if op.startswith("@"):
            op = op.split(None, 1)[-1]
        op = op.split(" ")[0].split(".")[0]
        e, w = by.get(op, (0.0, 0.0))
        by[op] = (e + num(r, ex), w + val(r))
    executed = sum(e for e, _ in by.values()) or 1.0
    print(f"\n{f} by opcode ({int(executed):,} warp instructions executed):\n")
    print("| opcode | % of instructions | % of stall samples |\n|---|---:|---:|")
    for op, (e, w) in sorted(by.items(), key=lambda kv: -kv[1][0])[:14]:
        print(f"| {op} | {100 * e / executed:.1f} | {100 * w / total:.1f} |")
SASS
cat "$out/ncu_kernels.md"
