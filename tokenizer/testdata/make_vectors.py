#!/usr/bin/env python3
"""Writes the reference vectors the tokenizer tests compare against, with
HuggingFace tokenizers (the Rust library's Python binding) as the oracle.

For every text of corpus.json it records the ids of
Tokenizer.from_file(path).encode(text, add_special_tokens=True) and the
decode of those ids with and without skip_special_tokens.

    pip install tokenizers        # no network needed after that
    python3 tokenizer/testdata/make_vectors.py

writes vectors_qwen3.json (from qwen3/tokenizer.json, see fetch.sh),
vectors_synth.json (from synth/tokenizer.json, the project's synthetic
tokenizer) and vectors_edge.json (from edge/tokenizer.json, see
make_edge_tokenizer.py) beside this script. One pair can be given instead:

    python3 make_vectors.py TOKENIZER_JSON OUT_JSON [CORPUS_JSON]

make_vectors.mjs does the same with the Node binding of the same library;
both write byte-identical files, so either can regenerate them and `cmp`
checks one against the other.
"""

import hashlib
import json
import os
import sys

from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))


def dumps(v):
    # Compact, UTF-8 kept as is: the same bytes JSON.stringify writes.
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def make(tokenizer_path, out_path, corpus_path):
    with open(tokenizer_path, "rb") as f:
        sha = hashlib.sha256(f.read()).hexdigest()
    with open(corpus_path, encoding="utf-8") as f:
        texts = json.load(f)
    tok = Tokenizer.from_file(tokenizer_path)
    lines = []
    for text in texts:
        ids = tok.encode(text, add_special_tokens=True).ids
        lines.append(
            dumps(
                {
                    "text": text,
                    "ids": ids,
                    "decoded": tok.decode(ids, skip_special_tokens=False),
                    "decoded_skip_special": tok.decode(ids, skip_special_tokens=True),
                }
            )
        )
    with open(out_path, "w", encoding="utf-8", newline="\n") as f:
        f.write('{"tokenizer_sha256":' + dumps(sha) + ',"vectors":[\n')
        f.write(",\n".join(lines))
        f.write("\n]}\n")
    print(f"wrote {len(lines)} vectors to {out_path}")


def main(argv):
    corpus = os.path.join(HERE, "corpus.json")
    if len(argv) in (2, 3):
        make(argv[0], argv[1], argv[2] if len(argv) == 3 else corpus)
        return
    if argv:
        sys.exit(__doc__)
    for name in ("qwen3", "synth", "edge"):
        make(
            os.path.join(HERE, name, "tokenizer.json"),
            os.path.join(HERE, f"vectors_{name}.json"),
            corpus,
        )


if __name__ == "__main__":
    main(sys.argv[1:])
