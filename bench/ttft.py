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
Every timed request also reports the server's own account of its TTFT,
read from /metrics before and after it (the benchmark's requests run one at
a time): the parts read, prepare, queue, restore, prefill, snapshot and
first (aima_ttft_part_seconds), the tier a prefix-cache hit was restored
from and the bytes it copied or adopted (aima_prefix_cache_restores_total,
aima_prefix_cache_restored_bytes_total). Cold prompts of a few tokens to a
few hundred (--small) show what a short prefill segment costs, which is
what a second chat turn's new tokens cost.
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


def stream_ttft(url, body, usage=None, text=None):
    """POST a streaming request; return seconds to the first content chunk.
    With usage (a dict) the final usage chunk is asked for and copied in;
    with text (a list) the streamed text is appended to it."""
    body = dict(body, stream=True)
    if usage is not None:
        body["stream_options"] = {"include_usage": True}
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
            if usage is not None and chunk.get("usage"):
                usage.update(chunk["usage"])
            if text is not None and chunk.get("choices"):
                c = chunk["choices"][0]
                text.append(c.get("text") or (c.get("delta") or {}).get("content") or "")
            if first is None and chunk.get("choices"):
                c = chunk["choices"][0]
                if c.get("text") or (c.get("delta") or {}).get("content") or \
                        (c.get("delta") or {}).get("reasoning_content") or c.get("finish_reason"):
                    first = time.perf_counter() - start
    return first


def scrape(url):
    """The server's /metrics as {series: value}; {} when it has none."""
    try:
        with urllib.request.urlopen(url + "/metrics", timeout=30) as resp:
            text = resp.read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            series, _, value = line.rpartition(" ")
            try:
                out[series] = float(value)
            except ValueError:
                pass
    return out


PARTS = ("read", "prepare", "queue", "restore", "prefill", "snapshot", "first")


def account(before, after):
    """The server's account of the one request between two scrapes: its TTFT
    parts in ms, the tier of a prefix-cache restore and the bytes it moved."""
    d = lambda k: after.get(k, 0.0) - before.get(k, 0.0)
    out = {"parts_ms": {p: round(d(f'aima_ttft_part_seconds_sum{{part="{p}"}}') * 1e3, 3) for p in PARTS}}
    out["server_ttft_ms"] = round(d("aima_ttft_seconds_sum") * 1e3, 3)
    tiers = [t for t in ("device", "host") if d(f'aima_prefix_cache_restores_total{{tier="{t}"}}') > 0]
    if tiers:
        out["restored_from"] = tiers[0]
        out["restored_bytes"] = {h: int(d(f'aima_prefix_cache_restored_bytes_total{{how="{h}"}}'))
                                 for h in ("copied_device", "copied_host", "adopted")}
    return out


def timed(args, fn):
    """Run fn() (one request), returning its client TTFT and server account."""
    before = scrape(args.url)
    t = fn()
    return t, account(before, scrape(args.url))


def show(label, t, acc):
    parts = " ".join(f"{p} {acc['parts_ms'].get(p, 0):.2f}" for p in PARTS)
    tier = ""
    if "restored_from" in acc:
        b = acc["restored_bytes"]
        tier = (f" | {acc['restored_from']}: copied {(b['copied_device'] + b['copied_host']) / 1e6:.1f} MB,"
                f" adopted {b['adopted'] / 1e6:.1f} MB")
    print(f"{label}: {t * 1e3:.2f} ms (server {acc['server_ttft_ms']:.2f}: {parts}){tier}")


def completion(args, tokens, cache=True, text=None):
    return stream_ttft(args.url + "/v1/completions", {
        "model": args.model, "prompt": tokens, "max_tokens": 1, "temperature": 0,
        "cache_prompt": cache}, text=text)


def median_ttft(args, tokens, cache):
    return statistics.median(completion(args, tokens, cache) for _ in range(args.repeats))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--model", required=True)
    ap.add_argument("--buckets", default="1024,2048,4096,8192")
    ap.add_argument("--exact", default="", help="prompt lengths for the exact-prefix speed-up")
    ap.add_argument("--small", default="1,8,32,75,128,290",
                    help="cold prompt lengths of a short prefill (a chat turn's new tokens)")
    ap.add_argument("--vocab", type=int, default=1000, help="draw prompt ids below this")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--exact-repeats", type=int, default=3, help="timed hits per exact-prefix length")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="ttft.json")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    ids = lambda n: [rng.randrange(args.vocab) for _ in range(n)]
    result = {"url": args.url, "model": args.model, "edges": [], "small": [], "exact": [], "chat": {}}

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

    for n in [int(x) for x in args.small.split(",") if x]:
        runs = [timed(args, lambda: completion(args, ids(n), cache=False)) for _ in range(args.repeats)]
        t, acc = sorted(runs, key=lambda r: r[0])[len(runs) // 2]
        result["small"].append({"tokens": n, "ttft_s": t, "server": acc})
        show(f"cold {n} tokens", t, acc)
        save()

    for n in [int(x) for x in args.exact.split(",") if x]:
        p = ids(n)
        cold_text, hit_texts = [], []
        cold, cold_acc = timed(args, lambda: completion(args, p, cache=True, text=cold_text))  # a miss: prefilled, then cached
        show(f"exact prefix {n}, cold", cold, cold_acc)
        hits, accs = [], []
        for i in range(args.exact_repeats):
            got = []
            t, acc = timed(args, lambda: completion(args, p, cache=True, text=got))
            hits.append(t)
            accs.append(acc)
            hit_texts.append("".join(got))
            show(f"exact prefix {n}, hit {i + 1}", t, acc)
        hit = statistics.median(hits)
        row = {"tokens": n, "cold_s": cold, "hit_s": hit, "hits_s": hits, "speedup": cold / hit,
               "cold_server": cold_acc, "hits_server": accs}
        # Another request in between rewrites the engine's KV cache: the hit
        # then copies the snapshot's rows instead of adopting them.
        completion(args, ids(8), cache=False)
        got = []
        after, after_acc = timed(args, lambda: completion(args, p, cache=True, text=got))
        show(f"exact prefix {n}, hit after another request", after, after_acc)
        hit_texts.append("".join(got))
        # Greedy: every hit's token is the cold request's.
        row.update(hit_after_other_s=after, hit_after_other_server=after_acc,
                   same_token=all(h == "".join(cold_text) for h in hit_texts))
        if not row["same_token"]:
            print(f"exact prefix {n}: a hit's token differs from the cold one: {cold_text} vs {hit_texts}")
        result["exact"].append(row)
        print(f"exact prefix {n}: cold {cold * 1e3:.1f} ms, hit {hit * 1e3:.2f} ms, {cold / hit:.0f}x;"
              f" after another request {after * 1e3:.2f} ms")
        save()

    words = "the quick brown fox jumps over the lazy dog".split()
    text = lambda k: " ".join(rng.choice(words) for _ in range(k))
    chat_url = args.url + "/v1/chat/completions"

    def conversation(max_tokens):
        """A first turn, then the second turn cached and cold: the TTFT of
        the first visible text (16 tokens) or of the first token drawn (1:
        the first chunk is the finish), with the server's accounts."""
        turn1 = [{"role": "user", "content": text(200)}]
        base = {"model": args.model, "max_tokens": max_tokens, "temperature": 0}
        u1 = {}
        first, first_acc = timed(args, lambda: stream_ttft(chat_url, dict(base, messages=turn1), usage=u1))
        show(f"first chat turn (max_tokens {max_tokens})", first, first_acc)
        turn2 = turn1 + [{"role": "assistant", "content": text(12)}, {"role": "user", "content": text(50)}]
        u2, u3 = {}, {}
        second, second_acc = timed(args, lambda: stream_ttft(chat_url, dict(base, messages=turn2), usage=u2))
        show(f"second chat turn (max_tokens {max_tokens})", second, second_acc)
        cold, cold_acc = timed(args, lambda: stream_ttft(chat_url, dict(base, messages=turn2, cache_prompt=False), usage=u3))
        show(f"second chat turn, cold (max_tokens {max_tokens})", cold, cold_acc)
        cached = (u2.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        print(f"second chat turn (max_tokens {max_tokens}): {second * 1e3:.1f} ms vs cold {cold * 1e3:.1f} ms"
              f" ({cold / second:.1f}x), {cached} of {u2.get('prompt_tokens')} prompt tokens cached")
        return {"second_turn_s": second, "cold_s": cold, "speedup": cold / second,
                "first_turn_s": first, "first_turn_prompt_tokens": u1.get("prompt_tokens"),
                "prompt_tokens": u2.get("prompt_tokens"), "cached_tokens": cached,
                "first_turn_server": first_acc, "second_turn_server": second_acc, "cold_server": cold_acc}

    result["chat"] = conversation(16)
    save()
    result["chat_first_token"] = conversation(1)
    save()


if __name__ == "__main__":
    main()
