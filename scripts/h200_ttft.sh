#!/usr/bin/env bash
# Time to first token through the server on the full-size Qwen3.6-35B-A3B
# (40 layers, synthetic bf16 weights made on the device), on an sm_90 machine:
#   1. aimac synth --preset full --config-only (config, tokenizer, template:
#      no tensors on disk), aimac plan --target sm_90 (the embedded config: the
#      same model, the loader checks the fingerprint) with the design card's
#      buckets 1024,2048,4096,8192 and a context of 132096 (128K prompts and
#      the steps after them; TTFT_PLAN_FLAGS adds plan flags), aimac build;
#   2. aima-engine serve --bundle ... --synthetic-weights 1, its prefix cache's
#      snapshots in device memory (--prefix-cache-device-mib, TTFT_DEVICE_MIB);
#   3. bench/ttft.py: TTFT at N-1, N, N+1 around every bucket edge (the worst
#      TTFT(N+1)/TTFT(N)), cold prompts of 1 to 290 tokens (TTFT_SMALL: what a
#      short prefill segment costs), the exact-prefix hit at 32K and 128K
#      against its cold request and again after another request
#      (TTFT_EXACT), and a second chat turn; every timed request with the
#      server's own parts of its TTFT (read, prepare, queue, restore,
#      prefill, snapshot, first) and the tier a hit was restored from, read
#      from /metrics around it.
# Build first: CGO_ENABLED=0 go build -o bin/ ./cmd/...
# Run from the repository root: scripts/h200_ttft.sh [RESULTS_DIR]
# Writes ttft.json, ttft.log, ttft_serve.log (a line per request, with its
# TTFT parts) and ttft_metrics.txt (/metrics at the end) into RESULTS_DIR
# (default results/h200). TTFT_BUDGET_S (default 420) bounds the benchmark.
set -u
dir=${1:-results/h200}; mkdir -p "$dir"
work=${TTFT_WORK:-$(mktemp -d)}
start=$(date +%s); elapsed() { echo $(($(date +%s) - start)); }
echo "== [$(elapsed)s] model files and bundle"
bin/aimac synth --preset full --config-only --out "$work/full40" || exit 1
# shellcheck disable=SC2086
bin/aimac plan --target sm_90 --buckets 1024,2048,4096,8192 \
  --context-tokens 132096 ${TTFT_PLAN_FLAGS:-} --out "$work/plan.json" || exit 1
bin/aimac build --plan "$work/plan.json" --target sm_90 --out "$work/bundle" > "$work/build.log" 2>&1 || { tail -20 "$work/build.log"; exit 1; }
port=${TTFT_PORT:-8124}
echo "== [$(elapsed)s] serve"
bin/aima-engine serve --model-dir "$work/full40" --bundle "$work/bundle" --synthetic-weights 1 --port "$port" \
  --model-name full40 --prefix-cache-device-mib "${TTFT_DEVICE_MIB:-16384}" --request-timeout 20m \
  > "$work/serve.out" 2> "$dir/ttft_serve.log" &
srv=$!
for _ in $(seq 1 600); do grep -q '"ready"' "$work/serve.out" 2>/dev/null && break; kill -0 $srv 2>/dev/null || break; sleep 0.5; done
status=0
if grep -q '"ready"' "$work/serve.out"; then
  echo "== [$(elapsed)s] ttft"
  timeout "${TTFT_BUDGET_S:-420}" python3 bench/ttft.py --url "http://127.0.0.1:$port" --model full40 \
    --buckets 1024,2048,4096,8192 --small "${TTFT_SMALL:-1,8,32,75,128,290}" --exact "${TTFT_EXACT:-32768,131072}" \
    --repeats 3 --exact-repeats 3 --vocab 900 --out "$dir/ttft.json" > "$dir/ttft.log" 2>&1 || status=1
  cat "$dir/ttft.log"
  python3 -c 'import sys, urllib.request; sys.stdout.write(urllib.request.urlopen(sys.argv[1] + "/metrics").read().decode())' \
    "http://127.0.0.1:$port" > "$dir/ttft_metrics.txt" 2>&1 || true
else
  echo "serve did not become ready"; tail -20 "$dir/ttft_serve.log"; status=1
fi
kill -TERM $srv 2>/dev/null; wait $srv
echo "== [$(elapsed)s] done, status $status"
exit $status
