#!/usr/bin/env python3
"""Time to first token against a running aima-engine server (any target).

Measures, through the OpenAI API with streaming and random token-id prompts:
  * TTFT around every bucket edge (N-1, N, N+1) and the worst ratio
    TTFT(N+1)/TTFT(N);
  * exact-prefix TTFT: the same prompt again (a prefix-cache hit) against its
    cold TTFT (its first request, which also fills the cache), at the given
    long lengths;
  * a two-turn chat: the second turn's TTFT against the same conversation sent
    cold.
Only the standard library; prints a table and writes JSON, rewritten after
every measurement so that an interrupted run keeps what it measured.

  python3 bench/ttft.py --url http://127.0.0.1:8000 --model NAME \
      --buckets 1024,2048,4096,8192 --exact 32768,131072 --out ttft.json
"""
import argparse
import json
import random
import statistics
import time
import urllib.request


def stream_ttft(url, body):
    """POST a streaming request; return seconds to the first content chunk."""
    body = dict(body, stream=True)
    req = urllib.request.Request(url, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    first = None
    with urllib.request.urlopen(req, timeout=3600) as resp:
        for line in resp:
            line = line.strip()
            if not line.startswith(b"data: "):
                continue
            data = line[6:]
            if data == b"[DONE]":
                break
            chunk = json.loads(data)
            if "error" in chunk:
                raise RuntimeError(chunk["error"])
            if first is None and chunk.get("choices"):
                c = chunk["choices"][0]
                if c.get("text") or (c.get("delta") or {}).get("content") or \
                        (c.get("delta") or {}).get("reasoning_content") or c.get("finish_reason"):
                    first = time.perf_counter() - start
    return first


def completion(args, tokens, cache=True):
    return stream_ttft(args.url + "/v1/completions", {
        "model": args.model, "prompt": tokens, "max_tokens": 1, "temperature": 0,
        "cache_prompt": cache})


def median_ttft(args, tokens, cache):
    return statistics.median(completion(args, tokens, cache) for _ in range(args.repeats))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", required=True)
    ap.add_argument("--buckets", default="1024,2048,4096,8192")
    ap.add_argument("--exact", default="", help="prompt lengths for the exact-prefix speed-up")
    ap.add_argument("--vocab", type=int, default=1000, help="draw prompt ids below this")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--exact-repeats", type=int, default=3, help="timed hits per exact-prefix length")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="ttft.json")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    ids = lambda n: [rng.randrange(args.vocab) for _ in range(n)]
    result = {"url": args.url, "model": args.model, "edges": [], "exact": [], "chat": {}}

    def save():
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)

    # Warm up once.
    completion(args, ids(8), cache=False)

    worst = 0.0
    print(f"{'tokens':>8} {'TTFT ms':>10}")
    for b in [int(x) for x in args.buckets.split(",") if x]:
        row = {}
        for n in (b - 1, b, b + 1):
            t = median_ttft(args, ids(n), cache=False)
            row[n] = t
            print(f"{n:>8} {t * 1e3:>10.2f}")
        ratio = row[b + 1] / row[b]
        worst = max(worst, ratio)
        result["edges"].append({"bucket": b, "ttft_s": row, "ratio_n_plus_1": ratio})
        result["worst_edge_ratio"] = worst
        save()
    print(f"worst TTFT(N+1)/TTFT(N): {worst:.3f} (target ≤ 1.10)")

    for n in [int(x) for x in args.exact.split(",") if x]:
        p = ids(n)
        cold = completion(args, p, cache=True)  # a miss: prefilled, then cached
        hits = [completion(args, p, cache=True) for _ in range(args.exact_repeats)]
        hit = statistics.median(hits)
        result["exact"].append({"tokens": n, "cold_s": cold, "hit_s": hit, "hits_s": hits, "speedup": cold / hit})
        print(f"exact prefix {n}: cold {cold * 1e3:.1f} ms, hit {hit * 1e3:.2f} ms, {cold / hit:.0f}x")
        save()

    words = "the quick brown fox jumps over the lazy dog".split()
    text = lambda k: " ".join(rng.choice(words) for _ in range(k))
    turn1 = [{"role": "user", "content": text(200)}]
    chat_url = args.url + "/v1/chat/completions"
    base = {"model": args.model, "max_tokens": 16, "temperature": 0}
    stream_ttft(chat_url, dict(base, messages=turn1))
    turn2 = turn1 + [{"role": "assistant", "content": text(12)}, {"role": "user", "content": text(50)}]
    second = stream_ttft(chat_url, dict(base, messages=turn2))
    cold = stream_ttft(chat_url, dict(base, messages=turn2, cache_prompt=False))
    result["chat"] = {"second_turn_s": second, "cold_s": cold, "speedup": cold / second}
    print(f"second chat turn: {second * 1e3:.1f} ms vs cold {cold * 1e3:.1f} ms ({cold / second:.1f}x)")
    save()


if __name__ == "__main__":
    main()
