#!/usr/bin/env python3
"""Writes corpus.json: the texts the tokenizer tests encode with this
package and with HuggingFace tokenizers (make_vectors.py / .mjs).

The corpus is committed; this script documents how it was built and
regenerates it byte for byte (standard library only):

    python3 tokenizer/testdata/make_corpus.py

It covers many scripts (Latin in NFC and NFD, Cyrillic, Greek, Arabic,
Hebrew, Devanagari and other Indic scripts, Thai, CJK, kana, Hangul in both
forms), emoji sequences, combining marks, whitespace runs, CR/LF mixes,
digits, contractions in any case, code, the added tokens inside text, odd
code points, a few texts over 10,000 characters, and seeded random mixes of
the characters the pre-tokenizer pattern treats specially.
"""

import json
import os
import random
import unicodedata

NFD = lambda s: unicodedata.normalize("NFD", s)

BASIC = [
    "",
    "a",
    " ",
    "  ",
    "\n",
    "Hello",
    " Hello",
    "Hello, world!",
    "hello world",
    "Hello World HELLO world hello",
    "The quick brown fox jumps over the lazy dog.",
    "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
]

LATIN = [
    "café résumé naïve façade coöperate Ångström",
    NFD("café résumé naïve façade coöperate Ångström"),
    "Tiếng Việt có dấu: Xin chào thế giới, người ơi!",
    NFD("Tiếng Việt có dấu: Xin chào thế giới, người ơi!"),
    "Straße, ÄÖÜ äöü, ẞ groß, Maß und Fuß.",
    "Zażółć gęślą jaźń. Příliš žluťoučký kůň úpěl ďábelské ódy.",
    NFD("Zażółć gęślą jaźń. Příliš žluťoučký kůň úpěl ďábelské ódy."),
    "İstanbul'da ılık bir gün; IİıI.",
    "Ça va? Où est l'hôtel? À bientôt, Noël!",
    "Dansk: Æble, øl og å. Íslenska: Þetta er þorn og eð (ð).",
    "e\u0301 e\u0301\u0302 a\u0308\u0301 o\u0328\u0304",
]

SCRIPTS = [
    "Привет, мир! Съешь же ещё этих мягких французских булок, да выпей чаю.",
    "ПРИВЕТ мир, Ёжик в тумане; ё й",
    NFD("Ёжик и йогурт"),
    "Καλημέρα κόσμε· ΑΒΓΔ αβγδ ά έ ή ί ό ύ ώ ΐ ΰ",
    NFD("Καλημέρα κόσμε· ά έ ή ί ό ύ ώ ΐ ΰ"),
    "مرحبا بالعالم! هذا نص عربي.",
    "العَرَبِيَّة لُغَةٌ جَمِيلَةٌ",
    "الأرقام: ٠١٢٣٤٥٦٧٨٩ و 0123",
    "שָׁלוֹם עוֹלָם! עברית בלי ניקוד.",
    "नमस्ते दुनिया! हिन्दी में लिखा गया पाठ।",
    "क़ ख़ ग़ ज़ ड़ ढ़ फ़ य़",
    "\u0915\u093c\u0916\u093c",
    "வணக்கம் உலகம்",
    "আমার সোনার বাংলা, আমি তোমায় ভালোবাসি।",
    "ਸਤਿ ਸ੍ਰੀ ਅਕਾਲ",
    "สวัสดีครับ ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "你好，世界！我爱自然语言处理。",
    "繁體中文測試：臺灣、香港。",
    "こんにちは、世界。カタカナとひらがなと漢字。ｱｲｳｴｵ半角カナ。",
    "ガギグゲゴ " + NFD("ガギグゲゴ パピプペポ"),
    "안녕하세요 세계! 한국어 텍스트입니다.",
    NFD("안녕하세요 세계! 한국어 텍스트입니다."),
    "ሰላም ዓለም",
    "გამარჯობა მსოფლიო",
    "Բարեւ աշխարհ",
    "ᠮᠣᠩᠭᠣᠯ",
    "Mixed: hello世界мир مرحبا שלום नमस्ते",
]

EMOJI = [
    "😀 😃 😄 😁",
    "👍🏽 👍🏿 👋🏻",
    "👨‍👩‍👧‍👦 family, 👩🏾‍💻 coder, 🏳️‍🌈 flag",
    "🇺🇸🇯🇵🇩🇪🇫🇷 flags",
    "I ❤️ NY; ❤ ✔️ ☺️",
    "1️⃣ 2️⃣ #️⃣ *️⃣",
    "🫠🫡🥲 new-ish emoji",
    "emoji at end 🎉",
    "🎉start",
    "a👍b",
]

MARKS = [
    "Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇",
    "\u0301abc",
    " \u0301",
    "1\u0301 2\u0302",
    "!\u0301 ?\u0308",
    "x\u0301\u0301\u0301\u0301",
    "\u0301\u0302\u0303",
    "a \u20dd b \u20e3",
    "ñ vs n\u0303",
    "\u0344 \u0958 \u2126 \u212b \u212a",
]

WHITESPACE = [
    "a  b",
    "a   b",
    "a    b",
    "a\tb",
    "a\t\tb",
    " \t \t",
    "trailing   ",
    "   leading",
    "\n\n\n",
    "a\n\nb",
    "a \n b",
    "a\r\nb\r\n",
    "lone\rcr\rhere",
    "\r\r\n\n",
    "x \r\n\t y",
    "\u00a0nbsp\u00a0\u00a0x",
    "\u3000ideographic\u3000space\u3000",
    "\u2028line sep\u2029para sep",
    "\x0b\x0c vertical tab and form feed",
    "\u0085next line",
    "\x1c\x1d\x1e\x1f info separators",
    " \n",
    "  \n  x",
    "\t\n",
    "end with spaces and newline  \n",
    "    indented code\n        more\n",
    "\t\tif x {\n\t\t\treturn\n\t\t}\n",
    "word \n\n\n   \t next",
    "\u2003em\u2002en\u2009thin\u200ahair\u202fnarrow",
    " ",
    "                                ",
]

DIGITS = [
    "1234567890",
    "3.14159265358979323846",
    "1,000,000 and 1.000.000,50",
    "2024-01-15T12:34:56Z",
    "0x1F3A 0b1010 0o777 1e-10",
    "½ ¼ ² ³ Ⅻ ①②③ ⁴",
    "١٢٣ ४५६ ๑๒๓ １２３",
    "123456789012345678901234567890123456789012345678901234567890",
    "v1.2.3-rc.4+build.5",
    "$19.99 €5 £3 ¥100",
]

CONTRACTIONS = [
    "I'LL",
    "we'Ve",
    "DON'T",
    "it's It'S IT'S",
    "we're WE'RE We'Re",
    "you'd YOU'D",
    "I'm I'M",
    "they'll THEY'LL they'LL",
    "'s",
    "'",
    "''",
    "'''s",
    "x's'",
    "rock'n'roll",
    "O'Neil",
    "y'all",
    "'sa 'ta 'rea 'vea 'ma 'lla 'da",
    "'Ll 'lL 'RE 'rE",
    "Chriſt'ſ 'ſa",
    "'\u212a Kelvin",
    "’s curly apostrophe",
    "l'été d'accord",
    "he said 'hello' and 'goodbye'",
    "' s",
    "'1",
]

CODE = [
    'package main\n\nimport "fmt"\n\nfunc main() {\n\tfmt.Println("Hello, 世界")\n\tfor i := 0; i < 10; i++ {\n\t\tif i%2 == 0 {\n\t\t\tcontinue\n\t\t}\n\t}\n}\n',
    "def fib(n: int) -> int:\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a\n\nprint(f'{fib(10)=}')\n",
    '{"name": "test", "values": [1, 2.5, -3e10, null, true], "nested": {"a": "b\\n", "emoji": "\\ud83d\\ude00"}}',
    '<!DOCTYPE html>\n<html lang="en">\n<head><meta charset="utf-8"><title>Test &amp; &lt;page&gt; &#169; &#x1F600; &nbsp;</title></head>\n<body><p class="x">Hello&nbsp;world</p><br/></body>\n</html>\n',
    "#!/bin/bash\nset -euo pipefail\nfor f in *.txt; do echo \"$f\" | sed 's/a/b/g' >> out.log 2>&1; done\n",
    "SELECT id, name FROM users WHERE age >= 18 AND name LIKE '%son' ORDER BY id DESC;",
    "^(?:[a-z0-9!#$%&'*+/=?^_`{|}~-]+)@(?:[a-z0-9-]+\\.)+[a-z]{2,}$",
    "int main(void) {\r\n\tprintf(\"%d\\n\", 42);\r\n\treturn 0;\r\n}\r\n",
    "| col1 | col2 |\n|------|------|\n| a    | b    |\n",
    "$$\\int_0^\\infty e^{-x^2}\\,dx = \\frac{\\sqrt{\\pi}}{2}$$",
    "https://example.com/path/to/page?q=1&r=two#frag user@example.com",
    "test_case_name CamelCaseWord snake_case e-mail C++ C# F# x86_64",
    "a+=b; c-=d; e*=f; g/=h; i%=j; k<<=1; l>>=2; m&&n || !o",
    "//////////////////// ==================== -------------------- ....................",
    "{{{{ }}}} (((( )))) [[[[ ]]]] <<<< >>>>",
]

ADDED = [
    "<|im_start|>user\nhi<|im_end|>",
    "<think>\nLet me think about this…\n</think>\n\nThe answer is 42.",
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
    "<tool_response>\n{\"temp\": 21}\n</tool_response>",
    "<|im_sta",
    "<|im_end",
    "<|im_start",
    "im_start|>",
    "<|endoftext|><|endoftext|>",
    "<<|im_start|>>",
    "< |im_start| >",
    "<|IM_START|>",
    "<think>e\u0301</think>",
    "e<think>\u0301",
    "text<|im_end|>more",
    " <|im_end|> ",
    "<|vision_start|><|image_pad|><|vision_end|>",
    "<|fim_prefix|>def f():<|fim_suffix|>\n    return 1<|fim_middle|>",
    "<|audio_start|><tts_pad><|audio_end|>",
    "<|box_start|>(1,2),(3,4)<|box_end|><|quad_start|><|quad_end|>",
    "<|object_ref_start|>cat<|object_ref_end|>",
    "<|repo_name|>aimac<|file_sep|>main.go",
    "<|im_start|><|im_start|><|im_end|><|im_end|>",
    "<thinking></thinking> <think/> </think",
    "<|im_start|>assistant\n<think>\n\n</think>\n\n<tool_call>\n{}\n</tool_call><|im_end|>\n",
    # For edge/tokenizer.json's added tokens and options.
    "x  <m>  y<m>z",
    "a<w> <w> b<w>",
    "<w>,<w>",
    "café! cafe\u0301! e\u0301!",
    "★★ Ġy ab abc hello world hello",
    "<S2> <s>",
    "hello",
    "ÃÃé",
]

ODD = [
    "\ufffd",
    "bad \ufffd\ufffd bytes",
    "\u0000",
    "a\u0000b",
    "\u200b zero\u200bwidth",
    "\u200d\u200c joiners",
    "\ufeffBOM at start",
    "soft\u00adhyphen",
    "\U0010ffff max",
    "\ue000\uf8ff private use",
    "\U000f0000 plane 15",
    "\U0001d400\U0001d401 math bold",
    "ﬁ ﬂ ligatures",
    "Ǆǅǆ ǈ",
    "\u0007\u0008\u001b[31mred\u001b[0m",
    "\u007f delete",
    "\u00a9\u00ae\u2122",
    "\u2018quotes\u2019 \u201cdouble\u201d \u00abguillemets\u00bb",
    "\u2026 \u2014 \u2013 \u2022",
    "\u00e9\u0301",
]


def long_texts(base):
    """Three texts over 10,000 characters, built by concatenation."""
    joined = "\n".join(base)
    a = ""
    while len(a) < 12000:
        a += joined + "\n\n"
    paragraph = (
        "The tokenizer splits text into pieces, then merges bytes. "
        "Der Tokenizer teilt Text in Stücke. Токенизатор делит текст. "
        "分词器把文本切成片段。トークナイザーはテキストを分割します。 "
        "토크나이저는 텍스트를 나눕니다. 😀👍🏽\n"
    )
    code = CODE[0] + CODE[1]
    b = ""
    i = 0
    while len(b) < 15000:
        b += paragraph if i % 2 == 0 else code
        i += 1
    c = (
        "a" * 3000
        + " " * 2000
        + "x"
        + "1234567890" * 200
        + "\n" * 500
        + "ab" * 1000
        + "\t" * 300
        + "!"
        + "é" * 500
        + "中" * 500
    )
    return [a, b, c]


# POOL is what the random texts are drawn from: characters and strings the
# split pattern, NFC and the added-token matcher treat specially.
POOL = (
    list("abcxyzABCXYZ")
    + list("0123456789")
    + [" ", " ", " ", "  ", "\t", "\n", "\r", "\r\n", "'", "'", "\""]
    + list(".,;:!?-_()[]{}<>|/\\@#$%^&*+=~`")
    + ["s", "t", "re", "ve", "m", "ll", "d", "S", "T", "RE", "VE", "LL", "D"]
    + ["é", "e\u0301", "\u0301", "\u0308", "\u0327", "ſ", "\u212a", "ß", "ñ"]
    + ["\u00a0", "\u3000", "\u2028", "\u0085", "\x0b", "\x0c"]
    + ["中", "文", "日", "ア", "ひ", "한", "\u1100\u1161", "ا", "ب", "\u064e", "ש", "\u05b8"]
    + ["क", "\u093c", "\u094d", "ि", "ก", "\u0e31", "\u0e48"]
    + ["😀", "👍", "\U0001f3fd", "\u200d", "\ufe0f", "🇺", "🇸"]
    + ["²", "½", "Ⅻ", "٣", "१", "\ufffd", "\u200b", "\u00ad"]
    + ["<|im_start|>", "<|im_end|>", "<think>", "</think>", "<|endoftext|>", "<tool_call>", "<|im_", "|>"]
)


def random_texts(n, seed):
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        k = rng.randint(1, 40)
        out.append("".join(rng.choice(POOL) for _ in range(k)))
    return out


def main():
    base = BASIC + LATIN + SCRIPTS + EMOJI + MARKS + WHITESPACE + DIGITS + CONTRACTIONS + CODE + ADDED + ODD
    corpus = base + long_texts(base) + random_texts(400, 20240601)
    for s in corpus:
        s.encode("utf-8")  # every text must be valid UTF-8 (no surrogates)
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus.json")
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        f.write("[\n")
        f.write(",\n".join(json.dumps(s, ensure_ascii=False) for s in corpus))
        f.write("\n]\n")
    print(f"wrote {len(corpus)} texts to {path}")


if __name__ == "__main__":
    main()
