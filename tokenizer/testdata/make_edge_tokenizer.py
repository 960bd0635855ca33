#!/usr/bin/env python3
"""Writes edge/tokenizer.json: a small byte-level BPE tokenizer that uses
the tokenizer.json features the Qwen files leave at their defaults, so the
reference vectors cover them too (standard library only):

    python3 tokenizer/testdata/make_edge_tokenizer.py

* normalizer Sequence[NFC]; a split pattern other than Qwen's (GPT-2's, so
  the generic regex path runs); merges in the legacy "a b" string layout
  with a "#version" line and a repeated pair (its last rank counts);
* ignore_merges, and an unk token with fuse_unk for the byte 0xC3, whose
  symbol is left out of the vocabulary;
* vocabulary entries that are not byte-level strings ("hello world", "★a");
* added tokens with lstrip+rstrip, single_word, normalized=true (matched in
  the NFC text, so "e\u0301!" finds "\u00e9!"), non-ASCII content that the ByteLevel
  decoder maps ("Ġy" decodes to " y") or keeps ("★"), and one whose content
  is already a vocabulary entry ("ab", which keeps its vocabulary id).
"""

import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def byte_symbols():
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return out


def main():
    syms = byte_symbols()
    vocab = {}
    for s in sorted(syms.values()):
        if s != syms[0xC3]:
            vocab[s] = len(vocab)
    for s in ["<unk>", "ab", "bc", "abc", "cd", "th", "the", "Ġthe", "Ġa", "in", "ing",
              "Ġx", "hello", "hello world", "★a", "ĠĠ", "ĠĠĠĠ"]:
        vocab[s] = len(vocab)
    merges = ["#version: 0.2", "a b", "b c", "c d", "ab c", "t h", "th e", "Ġ the",
              "Ġ a", "i n", "in g", "Ġ x", "Ġ Ġ", "ĠĠ ĠĠ", "a b"]

    def added(content, special, **flags):
        d = {"id": None, "content": content, "single_word": False, "lstrip": False,
             "rstrip": False, "normalized": False, "special": special}
        d.update(flags)
        return d

    tokens = [
        added("<s>", True),
        added("★", False),
        added("Ġy", False),
        added("<m>", False, lstrip=True, rstrip=True),
        added("<w>", False, single_word=True),
        added("\u00e9!", False, normalized=True),
        added("<S2>", True, normalized=True),
        added("ab", False),
    ]
    next_id = len(vocab)
    for t in tokens:
        if t["content"] in vocab:
            t["id"] = vocab[t["content"]]
        else:
            t["id"] = next_id
            next_id += 1
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": tokens,
        "normalizer": {"type": "Sequence", "normalizers": [{"type": "NFC"}]},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"},
                    "behavior": "Isolated",
                    "invert": False,
                },
                byte_level,
            ],
        },
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": "<unk>",
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": False,
            "ignore_merges": True,
            "vocab": vocab,
            "merges": merges,
        },
    }
    path = os.path.join(HERE, "edge", "tokenizer.json")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
