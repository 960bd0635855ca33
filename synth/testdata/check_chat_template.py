#!/usr/bin/env python3
"""Renders synth/chat_template.jinja with Jinja2 the way transformers does
(ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loopcontrols,
tojson = json.dumps(ensure_ascii=False), raise_exception) and compares each
case with the string the Qwen3.6 rendering rules give, written out by hand.

    python3 synth/testdata/check_chat_template.py          # check
    python3 synth/testdata/check_chat_template.py --write  # also rewrite chat_template_cases.json

chat_template_cases.json keeps the same cases (inputs, expected output or
expected error) for renderers in other languages. Go tests do not run this.
"""
import json
import os
import sys

from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATE = os.path.join(HERE, "..", "chat_template.jinja")
CASES = os.path.join(HERE, "chat_template_cases.json")

INSTRUCTIONS = (
    "\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n"
    "- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n"
    "- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after\n"
    "- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls\n"
    "</IMPORTANT>"
)

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
            "required": ["city"],
        },
    },
}
WEATHER_JSON = json.dumps(WEATHER, ensure_ascii=False)
SEARCH = {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}}


def tools_header(tools, system=""):
    s = "<|im_start|>system\n# Tools\n\nYou have access to the following functions:\n\n<tools>"
    for t in tools:
        s += "\n" + json.dumps(t, ensure_ascii=False)
    s += "\n</tools>" + INSTRUCTIONS
    if system:
        s += "\n\n" + system
    return s + "<|im_end|>\n"


CASES_LIST = [
    {
        "name": "system and user, thinking on by default",
        "input": {"messages": [{"role": "system", "content": "You are a helpful assistant."},
                               {"role": "user", "content": "Hello"}],
                  "add_generation_prompt": True},
        "want": "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n",
    },
    {
        "name": "enable_thinking false",
        "input": {"messages": [{"role": "user", "content": "Hello"}],
                  "add_generation_prompt": True, "enable_thinking": False},
        "want": "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
    },
    {
        "name": "no generation prompt, contents trimmed",
        "input": {"messages": [{"role": "system", "content": "  Be brief.\n"},
                               {"role": "user", "content": "\n Hi there  "}]},
        "want": "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n",
    },
    {
        "name": "multi-turn: reasoning before the last query is dropped",
        "input": {"messages": [{"role": "user", "content": "What is 2+2?"},
                               {"role": "assistant", "content": "<think>\nSimple addition.\n</think>\n\n2+2 = 4."},
                               {"role": "user", "content": "And 3+3?"},
                               {"role": "assistant", "content": "6.", "reasoning_content": "\nAdd again.\n"}],
                  "add_generation_prompt": False},
        "want": "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                "<|im_start|>assistant\n2+2 = 4.<|im_end|>\n"
                "<|im_start|>user\nAnd 3+3?<|im_end|>\n"
                "<|im_start|>assistant\n<think>\nAdd again.\n</think>\n\n6.<|im_end|>\n",
    },
    {
        "name": "multi-turn with preserve_thinking",
        "input": {"messages": [{"role": "user", "content": "What is 2+2?"},
                               {"role": "assistant", "content": "<think>\nSimple addition.\n</think>\n\n2+2 = 4."},
                               {"role": "assistant", "content": "Anything else?", "reasoning_content": "Offer help."},
                               {"role": "user", "content": "And 3+3?"}],
                  "add_generation_prompt": True, "preserve_thinking": True},
        "want": "<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                "<|im_start|>assistant\n<think>\nSimple addition.\n</think>\n\n2+2 = 4.<|im_end|>\n"
                "<|im_start|>assistant\n<think>\nOffer help.\n</think>\n\nAnything else?<|im_end|>\n"
                "<|im_start|>user\nAnd 3+3?<|im_end|>\n<|im_start|>assistant\n<think>\n",
    },
    {
        "name": "tools, two calls, grouped tool responses",
        "input": {"messages": [{"role": "system", "content": "You are helpful."},
                               {"role": "user", "content": "Weather in Paris and Rome?"},
                               {"role": "assistant", "content": "Let me check.", "reasoning_content": "Need the tool twice.",
                                "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 2}}},
                                               {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome", "days": 2}}}]},
                               {"role": "tool", "content": "18C cloudy"},
                               {"role": "tool", "content": "21C sunny"}],
                  "tools": [WEATHER], "add_generation_prompt": True},
        "want": tools_header([WEATHER], "You are helpful.")
                + "<|im_start|>user\nWeather in Paris and Rome?<|im_end|>\n"
                "<|im_start|>assistant\n<think>\nNeed the tool twice.\n</think>\n\nLet me check.\n\n"
                "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call>\n"
                "<tool_call>\n<function=get_weather>\n<parameter=city>\nRome\n</parameter>\n<parameter=days>\n2\n</parameter>\n</function>\n</tool_call><|im_end|>\n"
                "<|im_start|>user\n<tool_response>\n18C cloudy\n</tool_response>\n<tool_response>\n21C sunny\n</tool_response><|im_end|>\n"
                "<|im_start|>assistant\n<think>\n",
    },
    {
        "name": "tools without system; call without content; non-string arguments as JSON",
        "input": {"messages": [{"role": "user", "content": "Find cafés"},
                               {"role": "assistant", "content": "",
                                "tool_calls": [{"name": "search", "arguments": {"q": "café", "filter": {"open": True, "tags": ["wifi"]}, "limit": None}}]},
                               {"role": "tool", "content": "[]"},
                               {"role": "user", "content": "<tool_response>\nnone\n</tool_response>"}],
                  "tools": [WEATHER, SEARCH], "add_generation_prompt": True, "enable_thinking": False},
        "want": tools_header([WEATHER, SEARCH])
                + "<|im_start|>user\nFind cafés<|im_end|>\n"
                "<|im_start|>assistant\n<think>\n\n</think>\n\n"
                "<tool_call>\n<function=search>\n<parameter=q>\ncafé\n</parameter>\n"
                "<parameter=filter>\n{\"open\": true, \"tags\": [\"wifi\"]}\n</parameter>\n"
                "<parameter=limit>\nnull\n</parameter>\n</function>\n</tool_call><|im_end|>\n"
                "<|im_start|>user\n<tool_response>\n[]\n</tool_response><|im_end|>\n"
                "<|im_start|>user\n<tool_response>\nnone\n</tool_response><|im_end|>\n"
                "<|im_start|>assistant\n<think>\n\n</think>\n\n",
    },
    {
        "name": "tools with an empty system prompt",
        "input": {"messages": [{"role": "system", "content": "  "}, {"role": "user", "content": "Hi"}],
                  "tools": [SEARCH]},
        "want": tools_header([SEARCH]) + "<|im_start|>user\nHi<|im_end|>\n",
    },
    {
        "name": "list content with an image",
        "input": {"messages": [{"role": "user", "content": [{"type": "image", "image": "cat.png"},
                                                            {"type": "text", "text": "What is this?"}]}],
                  "add_generation_prompt": True},
        "want": "<|im_start|>user\n<|vision_start|><|image_pad|><|vision_end|>What is this?<|im_end|>\n"
                "<|im_start|>assistant\n<think>\n",
    },
    {"name": "no messages", "input": {"messages": []}, "error": "No messages provided."},
    {"name": "system not first",
     "input": {"messages": [{"role": "user", "content": "Hi"}, {"role": "system", "content": "late"}]},
     "error": "System message must be at the beginning."},
    {"name": "unknown role",
     "input": {"messages": [{"role": "user", "content": "Hi"}, {"role": "robot", "content": "beep"}]},
     "error": "Unexpected message role."},
    {"name": "no user query",
     "input": {"messages": [{"role": "user", "content": "<tool_response>\nx\n</tool_response>"}]},
     "error": "No user query found in messages."},
]


class TemplateError(Exception):
    pass


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def render(source, inputs):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env.from_string(source).render(**inputs)


def main():
    with open(TEMPLATE, encoding="utf-8") as f:
        source = f.read()
    failed = 0
    for case in CASES_LIST:
        try:
            got, err = render(source, case["input"]), None
        except TemplateError as e:
            got, err = None, str(e)
        if "error" in case:
            ok = err == case["error"]
            detail = f"want error {case['error']!r}, got error {err!r}, output {got!r}"
        else:
            ok = err is None and got == case["want"]
            detail = f"error {err!r}\n     got: {got!r}\n    want: {case['want']!r}"
        print(("ok   " if ok else "FAIL ") + case["name"])
        if not ok:
            print("     " + detail)
            failed += 1
    if "--write" in sys.argv:
        with open(CASES, "w", encoding="utf-8") as f:
            json.dump(CASES_LIST, f, ensure_ascii=False, indent=2)
            f.write("\n")
    print(f"{len(CASES_LIST) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
