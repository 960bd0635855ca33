#!/usr/bin/env bash
# The correctness proof of the sm_90 path in one run on an sm_90 machine
# (H100/H200) with the NVIDIA driver, nvcc and python3 holding torch +
# transformers 5.17:
#   1. every kernel family against its Go reference (codegen/testdata/gpucheck.py
#      on the cases in bin/gpucases: random inputs, edge sizes, outputs poisoned);
#   2. the runtime/cuda tests: the tiny HuggingFace fixture on the GPU against
#      transformers' fp32 logits and the CPU engine (f32 and bf16 KV cache), the
#      greedy continuation equal to the CPU engine's, decode replayed from a
#      captured graph equal bit for bit to launch by launch, and the parallel
#      pinned upload;
#   3. the 4-layer full-width checkpoint against transformers
#      (scripts/h200_full4_vs_hf.sh), with an f32 and a bf16 KV cache, the
#      last 64 positions of every prompt through the decode step, the bf16
#      run at 1 to 8193 tokens;
#   4. aima-engine probe and serve from the sm_90 bundle made in step 3: a
#      greedy probe, chat completions streamed and not (identical), and TTFT
#      around the bucket edges with bench/ttft.py.
#
# Build first, where Go is (no Go toolchain is needed where it runs):
#   CGO_ENABLED=0 go build -o bin/ ./cmd/...
#   CGO_ENABLED=0 go test -c -o bin/runtime_cuda.test ./runtime/cuda
#   CGO_ENABLED=0 go test -c -o bin/codegen.test ./codegen
# and step 1 writes the cases where it runs (random inputs, the Go references'
# outputs, speed cases with hundreds of MB of weights) with that binary:
#   bin/codegen.test -test.run WriteGPUCases -gpucases DIR   (from codegen/)
# Cases written beforehand also work: go test ./codegen -run WriteGPUCases
# -gpucases $PWD/bin/gpucases, or as bin/gpucases.txz (tar cJf bin/gpucases.txz -C bin gpucases).
# PROOF_STEPS (default 1,2,3,4) runs a subset, e.g. when the cases and the
# binaries do not fit one upload. PROOF_CASES (default WriteGPUCases, a
# -test.run pattern of the case writers) and GPUCHECK_ONLY (a regular expression
# on the case names) split step 1 over several runs.
# Then, from the repository root: scripts/h200_proof.sh [RESULTS_DIR]
# RESULTS_DIR (default results/h200) receives gpucheck_sm90.json,
# tiny_fixture_cuda.json, full4_vs_hf.json, bundle_serve.json, ttft_full4.json
# and their logs.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$root/results/h200}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
export PATH=$PATH:/usr/local/cuda/bin PYTHONUNBUFFERED=1
start=$(date +%s)
elapsed() { echo $(( $(date +%s) - start )); }
status=0
cd "$root"
steps=${PROOF_STEPS:-1,2,3,4}
want() { case ",$steps," in *",$1,"*) return 0;; esac; return 1; }
cases=bin/gpucases
if want 1 && [ ! -d "$cases" ] && [ -f bin/gpucases.txz ]; then
  cases=$(mktemp -d)/gpucases; tar xJf bin/gpucases.txz -C "$(dirname "$cases")" || exit 1
elif want 1 && [ ! -d "$cases" ] && [ -x bin/codegen.test ]; then
  cases=$(mktemp -d)/gpucases
  (cd codegen && ../bin/codegen.test -test.run "${PROOF_CASES:-WriteGPUCases}" -gpucases "$cases") >"$dir/gpucases_write.log" 2>&1 || { tail "$dir/gpucases_write.log"; exit 1; }
fi
need=()
want 1 && need+=("$cases")
want 2 && need+=(bin/runtime_cuda.test)
{ want 3 || want 4; } && need+=(bin/aimac bin/aima-engine)
for f in "${need[@]}"; do
  [ -e "$f" ] || { echo "missing $f (see the build steps at the top of $0)" >&2; exit 1; }
done
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv,noheader || true

if want 1; then
echo "== [$(elapsed)s] 1. kernels against their Go references"
OUT=$dir python3 codegen/testdata/gpucheck.py "$cases" 2>&1 | tee "$dir/gpucheck_sm90.log" | tail -n 60
grep -q '^ALL OK' "$dir/gpucheck_sm90.log" || status=1
fi

if want 2; then
echo "== [$(elapsed)s] 2. runtime/cuda tests"
(cd runtime/cuda && AIMA_GPU_RESULTS=$dir/tiny_fixture_cuda.json ../../bin/runtime_cuda.test -test.v -test.count=1 -test.timeout=6m) \
  >"$dir/tiny_fixture_cuda.log" 2>&1
rc=$?
grep -E '^(=== RUN|--- |ok|FAIL|PASS)|greedy|max KLD' "$dir/tiny_fixture_cuda.log" | tail -n 40
grep -q -- '--- SKIP' "$dir/tiny_fixture_cuda.log" && { echo "a GPU test skipped: no usable CUDA driver"; rc=1; }
[ $rc = 0 ] || status=1
fi

if want 3; then
echo "== [$(elapsed)s] 3. full-width 4-layer checkpoint against transformers"
# The f32 cache first (its own results dir), then the GPU plans' bf16 cache,
# whose bundle step 4 serves; both with the last 64 positions of every
# prompt through the decode step, the bf16 run at the prefill issue's
# lengths too.
mkdir -p "$dir/f32"
FULL4_WORK=/tmp/full4f32 FULL4_KV_DTYPE=f32 FULL4_DECODE_LAST=${FULL4_DECODE_LAST:-64} FULL4_BUDGET_S=${FULL4_F32_BUDGET_S:-150} \
  scripts/h200_full4_vs_hf.sh "$dir/f32" >"$dir/f32_full4_run.log" 2>&1 || status=1
tail -n 16 "$dir/f32_full4_run.log"
for f in full4_vs_hf.json full4_vs_hf.log full4_engine.log; do [ -f "$dir/f32/$f" ] && mv "$dir/f32/$f" "$dir/f32_$f"; done
rmdir "$dir/f32" 2>/dev/null; rm -rf /tmp/full4f32
FULL4_WORK=/tmp/full4work FULL4_DECODE_LAST=${FULL4_DECODE_LAST:-64} FULL4_BUDGET_S=${FULL4_BUDGET_S:-300} \
  FULL4_LENGTHS=${FULL4_LENGTHS:-1,63,64,65,1000,1023,1024,1025,4096,8191,8192,8193} \
  scripts/h200_full4_vs_hf.sh "$dir" >"$dir/full4_run.log" 2>&1 || status=1
tail -n 30 "$dir/full4_run.log"
fi

if want 4; then
echo "== [$(elapsed)s] 4. probe and serve from the bundle"
work=/tmp/full4work
if [ -d "$work/bundle" ] && [ -d "$work/full4" ]; then
  bin/aima-engine probe generate --model-dir "$work/full4" --bundle "$work/bundle" --tokens 1,2,3,4,5,6,7,8 --max-tokens 8 \
    >"$dir/bundle_probe.log" 2>&1 || status=1
  tail -n 5 "$dir/bundle_probe.log"
  port=8123
  bin/aima-engine serve --model-dir "$work/full4" --bundle "$work/bundle" --port $port --model-name full4 \
    >"$work/serve.out" 2>"$work/serve.err" &
  srv=$!
  for _ in $(seq 1 120); do grep -q '"ready"' "$work/serve.out" 2>/dev/null && break; kill -0 $srv 2>/dev/null || break; sleep 0.5; done
  python3 - "$port" "$dir/bundle_serve.json" <<'PY' || status=1
import json, sys, time, urllib.request
port, out = sys.argv[1], sys.argv[2]
base = f"http://127.0.0.1:{port}"
def post(path, body):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return r.status, r.read()
body = {"model": "full4", "messages": [{"role": "user", "content": "Say something."}], "max_tokens": 16, "temperature": 0}
t = time.time(); code, raw = post("/v1/chat/completions", body); plain = json.loads(raw); t_plain = time.time() - t
code2, raw2 = post("/v1/chat/completions", dict(body, stream=True))
text = ""
for line in raw2.decode().splitlines():
    if line.startswith("data: ") and line != "data: [DONE]":
        for ch in json.loads(line[6:]).get("choices", []):
            text += (ch.get("delta", {}).get("content") or "") + (ch.get("delta", {}).get("reasoning_content") or "")
msg = plain["choices"][0]["message"]
full = (msg.get("reasoning_content") or "") + (msg.get("content") or "")
res = {"status": [code, code2], "usage": plain.get("usage"), "finish_reason": plain["choices"][0]["finish_reason"],
       "seconds_non_streamed": round(t_plain, 3), "streamed_equals_non_streamed": text == full, "text": full}
with urllib.request.urlopen(base + "/metrics", timeout=30) as r:
    res["metrics_lines"] = len(r.read().decode().splitlines())
json.dump(res, open(out, "w"), indent=1)
print(json.dumps(res)[:600])
sys.exit(0 if code == 200 and code2 == 200 and text == full else 1)
PY
  timeout 240 python3 bench/ttft.py --url "http://127.0.0.1:$port" --model full4 --buckets 64,1024 --exact 4000 \
    --vocab 900 --repeats 3 --out "$dir/ttft_full4.json" >"$dir/ttft_full4.log" 2>&1 || status=1
  tail -n 20 "$dir/ttft_full4.log"
  kill -TERM $srv; wait $srv; echo "serve exit $?"
  cp "$work/serve.err" "$dir/bundle_serve.log"
else
  echo "no bundle from step 3"; status=1
fi
fi
echo "== [$(elapsed)s] done, status $status"
exit $status
