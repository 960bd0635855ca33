#!/usr/bin/env python3
"""Renders every case of cases.json with every template here, the way
HuggingFace transformers renders chat templates, and writes golden.json.

transformers (utils/chat_template_utils.py, _compile_jinja_template and
render_jinja_template; tokenization_utils_base.py, apply_chat_template):

  * ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
    extensions=[loopcontrols]) (plus its {% generation %} tracker, which no
    template here uses);
  * filters["tojson"] = json.dumps(x, ensure_ascii=False, indent=None,
    separators=None, sort_keys=False) with those keyword arguments;
  * globals raise_exception(message) -> TemplateError, strftime_now;
  * render(messages=..., tools=<list or None>, documents=None,
    add_generation_prompt=..., **{**special_tokens_map, **chat_template_kwargs})
    where special_tokens_map holds only the tokens the tokenizer has.

    python3 chat/testdata/render_golden.py

Needs only jinja2 (3.1). golden.json maps template file -> case name ->
{"output": text} or {"error": message}; the Go tests compare against it.
"""
import json
import os
from datetime import datetime

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

HERE = os.path.dirname(os.path.abspath(__file__))
TEMPLATES = [
    "Qwen3.6-35B-A3B.jinja",
    "Qwen3.5-35B-A3B.jinja",
    "synth_chat_template.jinja",
    "probe_template.jinja",
]


def compile_template(source):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(format):
        return datetime.now().strftime(format)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


def render(template, case):
    special = {k: case[k] for k in ("bos_token", "eos_token") if k in case}
    kwargs = {**special, **case.get("kwargs", {})}
    return template.render(
        messages=case["messages"],
        tools=case.get("tools"),
        documents=None,
        add_generation_prompt=case["add_generation_prompt"],
        **kwargs,
    )


def main():
    with open(os.path.join(HERE, "cases.json"), encoding="utf-8") as f:
        cases = json.load(f)
    golden = {}
    for name in TEMPLATES:
        with open(os.path.join(HERE, name), encoding="utf-8") as f:
            template = compile_template(f.read())
        results = {}
        for case in cases:
            try:
                results[case["name"]] = {"output": render(template, case)}
            except Exception as e:  # the template's own error, as transformers raises it
                results[case["name"]] = {"error": str(e)}
        golden[name] = results
    with open(os.path.join(HERE, "golden.json"), "w", encoding="utf-8") as f:
        json.dump({"jinja2": jinja2.__version__, "templates": golden}, f, indent=1, ensure_ascii=False)
        f.write("\n")


if __name__ == "__main__":
    main()
