#!/usr/bin/env bash
# Serve the synthesized tiny model on the CPU backend, answer one chat
# request through the OpenAI API, then stop the server with SIGTERM.
# Thinking is turned off so that the answer shows as content (the tiny
# model's reasoning would otherwise use up the token budget).
set -euo pipefail
bin=${1:-bin}
port=${DEMO_PORT:-18080}
out=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$out"' EXIT

"$bin/aima-engine" serve --demo --port "$port" >"$out/stdout" 2>"$out/stderr" &
pid=$!
for _ in $(seq 1 300); do
  if grep -q '"event":"ready"' "$out/stdout" 2>/dev/null; then break; fi
  if ! kill -0 "$pid" 2>/dev/null; then cat "$out/stderr"; echo "server exited" >&2; exit 1; fi
  sleep 0.1
done
echo "ready: $(cat "$out/stdout")"
echo "POST /v1/chat/completions"
curl -sS "http://127.0.0.1:$port/v1/chat/completions" -H 'Content-Type: application/json' -d '{
  "model": "aima-demo-tiny",
  "messages": [{"role": "user", "content": "Hello! Who are you?"}],
  "max_tokens": 24, "temperature": 0,
  "chat_template_kwargs": {"enable_thinking": false}
}'
echo
kill -TERM "$pid"
wait "$pid"
echo "server stopped cleanly"
