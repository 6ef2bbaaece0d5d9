#!/usr/bin/env python3
"""Render extra chat-template goldens with Python jinja2, set up as transformers sets it up.

Run from the repository root with jinja2 3.1.x installed:

    python3 engine/chat/testdata/make_goldens.py > engine/chat/testdata/jinja2_goldens.json

The environment below follows transformers' _compile_jinja_template (sandboxed, trim_blocks,
lstrip_blocks, loop controls, tojson = json.dumps without ASCII escaping, raise_exception).
Each case names a template (a path under ../shared/oracle, or inline source), the request the
Go code renders ("request") and, where the Go side first rewrites the messages the way vLLM
does, the variables the reference renders instead ("reference").
"""

import copy
import json
import os
import sys

import jinja2
import jinja2.ext
import jinja2.sandbox

ORACLE = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "shared", "oracle")
TEMPLATES = {
    "qwen36": "qwen36-template/chat_template.jinja",
    "qwen3": "tiny-qwen36-moe-4bit/chat_template.jinja",
}


def environment():
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    return env


def text_only(messages):
    """vLLM's "string" content format: text parts joined by newlines, null content empty."""
    out = copy.deepcopy(messages)
    for m in out:
        c = m.get("content")
        if c is None:
            m["content"] = ""
        elif isinstance(c, list):
            m["content"] = "\n".join(p["text"] for p in c)
    return out


def object_arguments(messages):
    """vLLM's _postprocess_messages: JSON-string tool-call arguments become objects."""
    out = copy.deepcopy(messages)
    for m in out:
        for call in m.get("tool_calls") or []:
            if isinstance(call["function"].get("arguments"), str):
                call["function"]["arguments"] = json.loads(call["function"]["arguments"])
    return out


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Weather for a city — «forecast» & <now>",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "minimum": 1, "default": 1},
                "ratio": {"type": "number", "default": 1.0, "maximum": 100000.0, "step": 1e-07},
            },
            "required": ["city"],
        },
    },
}
SEARCH_TOOL = {
    "type": "function",
    "function": {"name": "search", "parameters": {"type": "object", "properties": {"query": {"type": "string"}}}},
}
RICH_ARGS = {
    "city": "Paris",
    "days": 3,
    "ratio": 1.0,
    "big": 1e20,
    "tiny": 1e-07,
    "nested": {"b": [1, 2.5, None, True], "a": "é\u2028\"q\"\n"},
    "empty": {},
    "nil": None,
    "text": "line1\nline2",
}

TOOL_HISTORY = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris and news?"},
    {
        "role": "assistant",
        "content": "Let me check.",
        "reasoning_content": "Two tools are needed.",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": RICH_ARGS}},
            {"id": "call_2", "type": "function", "function": {"name": "search", "arguments": {"query": "news"}}},
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21.0}"},
    {"role": "tool", "tool_call_id": "call_2", "content": "Nothing new."},
    {"role": "assistant", "content": "<think>\nSummarise.\n</think>\n\nIt is 21 °C; no news."},
    {"role": "user", "content": "Thanks!"},
]

REASONING_HISTORY = [
    {"role": "user", "content": "Q1"},
    {"role": "assistant", "content": "A1", "reasoning_content": "R1"},
    {"role": "user", "content": "Q2"},
    {"role": "assistant", "content": "<think>\nR2\n</think>\n\nA2"},
    {"role": "user", "content": "Q3"},
]

MULTI_STEP = [
    {"role": "user", "content": "Find it."},
    {"role": "assistant", "content": "", "reasoning_content": "Search first.",
     "tool_calls": [{"type": "function", "function": {"name": "search", "arguments": {"query": "it"}}}]},
    {"role": "tool", "content": "<result>one</result>"},
    {"role": "assistant", "content": "Again.", "reasoning_content": "Refine.",
     "tool_calls": [{"type": "function", "function": {"name": "search", "arguments": {"query": "it, refined"}}}]},
    {"role": "tool", "content": "two"},
]

LIST_CONTENT = [
    {"role": "system", "content": [{"type": "text", "text": "Be "}, {"type": "text", "text": "brief."}]},
    {"role": "user", "content": [{"type": "text", "text": "First part."}, {"type": "text", "text": "Second part."}]},
    {"role": "assistant", "content": [{"type": "text", "text": "Answer."}]},
    {"role": "user", "content": "Plain string."},
]


def string_arguments(messages):
    out = copy.deepcopy(messages)
    for m in out:
        for call in m.get("tool_calls") or []:
            call["function"]["arguments"] = json.dumps(call["function"]["arguments"], ensure_ascii=False)
    return out


TOJSON_VALUE = {
    "b": 1.0,
    "a": [100000.0, 2.5, 1e-07, 1e16, 123456789.0, -0.0, 0.0001, 12345678901234.5],
    "é": "\u2028<>&\"\\\n\t\u0001\u007f😀",
    "e": [],
    "o": {},
    "n": None,
    "t": True,
    "i": -42,
}
TOJSON_TEMPLATE = (
    "{{ x|tojson }}\n"
    "{{ x|tojson(indent=2) }}\n"
    "{{ x|tojson(sort_keys=true) }}\n"
    "{{ x|tojson(separators=(',', ':')) }}\n"
    "{{ x|tojson(ensure_ascii=true) }}\n"
    "{{ x.a|tojson(indent='\\t') }}\n"
    "{{ x|tojson(indent=0) }}\n"
    "{{ '|tojson' }}{# x|tojson #}\n"
)

CASES = [
    ("qwen36_preserve_thinking", "qwen36",
     {"messages": REASONING_HISTORY, "add_generation_prompt": True, "preserve_thinking": True}, None),
    ("qwen36_reasoning_history", "qwen36",
     {"messages": REASONING_HISTORY, "add_generation_prompt": True, "preserve_thinking": False}, None),
    ("qwen36_tools_history_nothink", "qwen36",
     {"messages": TOOL_HISTORY, "tools": [WEATHER_TOOL, SEARCH_TOOL], "add_generation_prompt": True,
      "enable_thinking": False}, None),
    ("qwen36_string_arguments", "qwen36",
     {"messages": string_arguments(TOOL_HISTORY), "tools": [WEATHER_TOOL, SEARCH_TOOL], "add_generation_prompt": True},
     "object_arguments"),
    ("qwen36_multi_step_tools", "qwen36",
     {"messages": MULTI_STEP, "tools": [SEARCH_TOOL], "add_generation_prompt": True}, None),
    ("qwen36_list_content", "qwen36", {"messages": LIST_CONTENT, "add_generation_prompt": True}, None),
    ("qwen36_system_image_raises", "qwen36",
     {"messages": [{"role": "system", "content": [{"type": "image"}]}, {"role": "user", "content": "Hi"}]}, None),
    ("qwen3_tools_history", "qwen3",
     {"messages": TOOL_HISTORY, "tools": [WEATHER_TOOL, SEARCH_TOOL], "add_generation_prompt": True}, None),
    ("qwen3_string_arguments", "qwen3",
     {"messages": string_arguments(TOOL_HISTORY), "tools": [WEATHER_TOOL], "add_generation_prompt": True},
     "object_arguments"),
    ("qwen3_list_content", "qwen3", {"messages": LIST_CONTENT, "add_generation_prompt": True}, "text_only"),
    ("qwen3_null_content_tool_call", "qwen3",
     {"messages": [{"role": "user", "content": "Search."},
                   {"role": "assistant", "content": None,
                    "tool_calls": [{"type": "function", "function": {"name": "search", "arguments": {"query": "q"}}}]},
                   {"role": "tool", "content": "r"}],
      "tools": [SEARCH_TOOL], "add_generation_prompt": True}, "text_only"),
    ("qwen3_reasoning_history", "qwen3",
     {"messages": REASONING_HISTORY + [{"role": "assistant", "content": "A3", "reasoning_content": "R3"}],
      "add_generation_prompt": False}, None),
    ("tojson_options", {"source": TOJSON_TEMPLATE}, {"x": TOJSON_VALUE}, None),
]

REWRITES = {"text_only": text_only, "object_arguments": object_arguments}


def main():
    env = environment()
    out = []
    for name, template, request, rewrite in CASES:
        if isinstance(template, str):
            with open(os.path.join(ORACLE, TEMPLATES[template]), encoding="utf-8") as f:
                source = f.read()
            ref = {"template": template}
        else:
            source = template["source"]
            ref = {"source": source}
        variables = copy.deepcopy(request)
        if rewrite:
            variables["messages"] = REWRITES[rewrite](variables["messages"])
        case = {"name": name, **ref, "request": request}
        if rewrite:
            case["reference"] = variables
        try:
            case["rendered"] = env.from_string(source).render(**variables)
        except jinja2.exceptions.TemplateError as e:
            case["error"] = str(e)
        out.append(case)
    json.dump({"generator": f"jinja2 {jinja2.__version__}, configured as transformers", "cases": out},
              sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
