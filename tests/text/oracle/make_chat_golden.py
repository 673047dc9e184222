#!/usr/bin/env python3
"""Golden renderings of chat templates, made with Python jinja2 configured as transformers does.

transformers (src/transformers/utils/chat_template_utils.py, _compile_jinja_template / render_jinja_template):
ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols]), its own tojson
filter (json.dumps, ensure_ascii=False), globals raise_exception and strftime_now, and
render(messages=..., tools=..., documents=..., add_generation_prompt=..., **special_tokens, **kwargs).

Usage: make_chat_golden.py HF_TOKENIZERS_DIR OUT_DIR
Writes OUT_DIR/chat_<name>.jsonl, one case a line:
  {"case": str, "messages": [...], "options": {...}, "output": str} or {..., "error": str, "error_type": str}
For the synthetic file each line also carries "template". options: add_generation_prompt, bos_token,
eos_token (only when given explicitly), tools, documents, and "extra" (more template variables).
"""
import json
import os
import sys
from datetime import datetime

import jinja2
from jinja2 import nodes
from jinja2.ext import Extension, loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


class AssistantTracker(Extension):
    """transformers' {% generation %}...{% endgeneration %} tag, without the token-mask tracking: the body
    renders through a CallBlock (its own scope), as in transformers when no tracking is active."""

    tags = {"generation"}

    def parse(self, parser):
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
        return nodes.CallBlock(self.call_method("_generation_support"), [], [], body).set_lineno(lineno)

    def _generation_support(self, caller):
        return caller()


def compile_template(source):
    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[AssistantTracker, loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(source)


def token_content(tok):
    if isinstance(tok, dict):
        return tok.get("content")
    return tok


def load_config(path):
    with open(path, encoding="utf-8") as f:
        cfg = json.load(f)
    tokens = {}
    for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
        v = token_content(cfg.get(key))
        if v is not None:
            tokens[key] = v
    return cfg.get("chat_template"), tokens


def pick_template(chat_template, tools):
    """Like transformers: a list of named templates picks 'tool_use' when tools are given, else 'default'."""
    if isinstance(chat_template, list):
        named = {t["name"]: t["template"] for t in chat_template}
        if tools is not None and "tool_use" in named:
            return named["tool_use"]
        return named["default"]
    return chat_template


def render_case(source, messages, options, config_tokens):
    kwargs = dict(config_tokens)
    for key in ("bos_token", "eos_token"):
        if key in options:
            kwargs[key] = options[key]
    kwargs.update(options.get("extra", {}))
    try:
        out = compile_template(source).render(
            messages=messages,
            tools=options.get("tools"),
            documents=options.get("documents"),
            add_generation_prompt=options.get("add_generation_prompt", False),
            **kwargs,
        )
        return {"output": out}
    except jinja2.exceptions.TemplateError as e:
        return {"error": str(e), "error_type": type(e).__name__}
    except Exception as e:  # TypeError etc. raised inside the template
        return {"error": str(e), "error_type": type(e).__name__}


WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Zürich"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
            },
            "required": ["city"],
        },
        "return": {"type": "number"},
    },
}
TIME_TOOL = {
    "type": "function",
    "function": {"name": "now", "description": "Current time", "parameters": {"type": "object", "properties": {}}},
}

SYS = {"role": "system", "content": "You are a terse assistant."}
U1 = {"role": "user", "content": "Hello!"}
A1 = {"role": "assistant", "content": "Hi. How can I help?"}
U2 = {"role": "user", "content": "What is 2+2?"}
A2 = {"role": "assistant", "content": "  4  \n"}
UNI = {"role": "user", "content": "Grüße, 世界! 😀 \"quoted\" 'single' \\ back\ttab"}
EMPTY_USER = {"role": "user", "content": ""}
MULTILINE = {"role": "user", "content": "line one\nline two\n\n  indented\n"}


def tool_call_msgs():
    call = {
        "role": "assistant",
        "tool_calls": [
            {
                "id": "abc123XYZ",
                "type": "function",
                "function": {"name": "get_weather", "arguments": {"city": "Zürich", "unit": "celsius"}},
            }
        ],
    }
    call_with_content = dict(call, content="Let me check.")
    result = {"role": "tool", "tool_call_id": "abc123XYZ", "name": "get_weather", "content": "{\"temp\": 21.5}"}
    result2 = {"role": "tool", "tool_call_id": "abc123XYZ", "name": "get_weather", "content": "sunny"}
    two_calls = {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {"id": "abc123XYZ", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}},
            {"id": "def456UVW", "type": "function", "function": {"name": "now", "arguments": {}}},
        ],
    }
    return call, call_with_content, result, result2, two_calls


def hf_cases(name):
    """(case name, messages, options) for one real template."""
    cases = [
        ("empty", [], {}),
        ("empty_gen", [], {"add_generation_prompt": True}),
        ("single_user", [U1], {}),
        ("single_user_gen", [U1], {"add_generation_prompt": True}),
        ("system_user", [SYS, U1], {}),
        ("system_user_gen", [SYS, U1], {"add_generation_prompt": True}),
        ("multi_turn", [U1, A1, U2], {"add_generation_prompt": True}),
        ("multi_turn_system", [SYS, U1, A1, U2, A2], {}),
        ("multi_turn_system_gen", [SYS, U1, A1, U2, A2, U2], {"add_generation_prompt": True}),
        ("unicode", [SYS, UNI], {"add_generation_prompt": True}),
        ("empty_content", [EMPTY_USER, {"role": "assistant", "content": ""}], {}),
        ("multiline", [MULTILINE, A2], {"add_generation_prompt": False}),
        ("explicit_tokens", [U1, A1], {"bos_token": "<BOS>", "eos_token": "<EOS>"}),
        ("two_users", [U1, U2], {}),
        ("assistant_first", [A1, U1], {}),
        ("system_only", [SYS], {"add_generation_prompt": True}),
        ("unknown_role", [{"role": "narrator", "content": "Once upon a time"}], {}),
        ("extra_var", [U1], {"extra": {"date_string": "26 Jul 2024"}}),
    ]
    call, call_with_content, result, result2, two_calls = tool_call_msgs()
    if name in ("qwen2.5", "mistral-v0.3"):
        tools = [WEATHER_TOOL, TIME_TOOL]
        cases += [
            ("tools_only", [U1], {"tools": tools, "add_generation_prompt": True}),
            ("tools_system", [SYS, U1], {"tools": tools}),
            ("tool_call", [U1, call, result], {"tools": tools, "add_generation_prompt": True}),
            ("tool_call_content", [SYS, U1, call_with_content, result, A1, U2], {"tools": tools}),
            ("tool_call_two", [U1, two_calls, result, result2], {"tools": tools}),
            ("tool_call_no_tools", [U1, call, result, A1], {}),
            ("bad_tool_call_id", [U1, dict(call, tool_calls=[dict(call["tool_calls"][0], id="short")])], {}),
            ("bad_tool_result_id", [U1, call, dict(result, tool_call_id="x")], {}),
            ("tool_result_dict", [U1, call, dict(result, content={"content": "nested"})], {}),
            ("tool_result_map", [U1, call, dict(result, content={"temp": 21.5, "ok": True, "none": None})], {}),
            ("tool_string_args", [U1, {"role": "assistant", "tool_calls": [{"id": "abc123XYZ", "type": "function", "function": {"name": "now", "arguments": "{}"}}]}], {}),
        ]
    if name in ("qwen2.5", "smollm2", "tinyllama"):
        cases += [("list_content_user", [{"role": "user", "content": ["a", "b"]}], {})]
    return cases


RECURSIVE_TREE = [{"n": 1, "c": [{"n": 2, "c": []}, {"n": 3}]}, {"n": 4, "c": [{"n": 5, "c": [{"n": 6}]}]}]


def synthetic_cases():
    """(case name, template, messages, options): one Jinja feature each."""
    m = [U1, A1]
    t = [
        ("text_only", "plain text\n", [], {}),
        ("trailing_two_newlines", "a\n\n", [], {}),
        ("trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter", [], {}),
        ("lstrip_blocks", "x\n    {% if true %}\n    body\n    {% endif %}\ny", [], {}),
        ("lstrip_not_vars", "x\n    {{ 'v' }}\n", [], {}),
        ("ws_minus", "a   {%- if true -%}   b   {%- endif -%}   c", [], {}),
        ("ws_var_minus", "a \n {{- 'b' -}} \n c", [], {}),
        ("ws_plus", "x\n    {%+ if true %}y{% endif %}", [], {}),
        ("comment", "a {# hidden #} b\n  {# line comment #}\nc", [], {}),
        ("comment_minus", "a   {#- hidden -#}   b", [], {}),
        ("raw", "{% raw %}{{ not evaluated }}{% endraw %}", [], {}),
        ("print_values", "{{ true }} {{ false }} {{ none }} {{ 1 }} {{ 1.5 }} {{ 1.0 }} {{ 1e20 }} {{ 0.00001 }} {{ 3.14159 }} {{ -0.0 }}", [], {}),
        ("print_containers", "{{ [1, 'a', none, true, 2.5] }} {{ {'k': 'v', 'n': [1]} }} {{ messages }}", m, {}),
        ("print_str_quotes", "{{ [\"it's\", 'say \"hi\"', 'both \\' \"', 'nl\\n'] }}", [], {}),
        ("print_undefined", "[{{ nothing }}] [{{ messages[0].nothing }}]", m, {}),
        ("arith", "{{ 7 + 3 }} {{ 7 - 10 }} {{ 7 * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 1.5 + 2 }} {{ 4 / 2 }}", [], {}),
        ("string_ops", "{{ 'a' + 'b' }} {{ 'a' ~ 1 ~ none ~ true }} {{ 'ab' * 3 }} {{ 'x' in 'xyz' }} {{ 'q' not in 'xyz' }}", [], {}),
        ("compare", "{{ 1 < 2 }} {{ 2 <= 1 }} {{ 'a' < 'b' }} {{ 1 == 1.0 }} {{ 'a' != 'a' }} {{ [1,2] == [1,2] }} {{ 3 > 2 > 1 }}", [], {}),
        ("logic", "{{ true and false }} {{ true or false }} {{ not true }} {{ 0 or 'x' }} {{ '' and 'y' }} {{ none or [] }}", [], {}),
        ("truthiness", "{% for v in [0, 1, '', 'a', [], [0], {}, {'a':1}, none, 0.0] %}{{ 'T' if v else 'F' }}{% endfor %}", [], {}),
        ("cond_expr", "{{ 'y' if true else 'n' }} {{ 'y' if false else 'n' }} [{{ 'y' if false }}]", [], {}),
        ("if_elif_else", "{% for i in [1, 2, 3] %}{% if i == 1 %}one{% elif i == 2 %}two{% else %}many{% endif %},{% endfor %}", [], {}),
        ("for_loop_vars", "{% for x in ['a', 'b', 'c'] %}{{ loop.index }}{{ loop.index0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }}{{ loop.revindex }}{{ loop.revindex0 }}|{% endfor %}", [], {}),
        ("for_prev_next", "{% for x in [1, 2, 3] %}({{ loop.previtem }},{{ loop.nextitem }}){% endfor %}", [], {}),
        ("for_else", "{% for x in [] %}x{% else %}empty{% endfor %}", [], {}),
        ("for_if", "{% for x in range(10) if x is odd %}{{ x }}{{ loop.index }}{% if not loop.last %},{% endif %}{% endfor %}", [], {}),
        ("for_break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", [], {}),
        ("for_unpack", "{% for k, v in {'a': 1, 'b': 2}.items() %}{{ k }}={{ v }};{% endfor %}", [], {}),
        ("for_dict", "{% for k in {'a': 1, 'b': 2} %}{{ k }}{% endfor %}", [], {}),
        ("for_string", "{% for c in 'héllo' %}[{{ c }}]{% endfor %}", [], {}),
        ("for_scope", "{% set x = 1 %}{% for i in [1, 2] %}{% set x = x + 10 %}{{ x }}{% endfor %}{{ x }}", [], {}),
        ("for_cycle", "{% for i in range(5) %}{{ loop.cycle('odd', 'even') }}{% endfor %}", [], {}),
        ("nested_loops", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ a }}{{ b }}{{ loop.index }}{% endfor %}{{ loop.index }};{% endfor %}", [], {}),
        ("namespace", "{% set ns = namespace(count=0, found=false) %}{% for m in messages %}{% set ns.count = ns.count + 1 %}{% if m.role == 'assistant' %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }}", m, {}),
        ("set_block", "{% set greeting %}Hello {{ messages[0].role }}!{% endset %}[{{ greeting }}]", m, {}),
        ("set_if_leaks", "{% if true %}{% set y = 5 %}{% endif %}{{ y }}", [], {}),
        ("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}", [], {}),
        ("macro", "{% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', '?') }} {{ greet(name='Cy', punct='.') }}", [], {}),
        ("macro_call", "{% macro box() %}[{{ caller() }}]{% endmacro %}{% call box() %}inside{% endcall %}", [], {}),
        ("filters_string", "{{ '  pad  '|trim }}|{{ 'abc'|upper }}|{{ 'ABC'|lower }}|{{ 'hello world'|title }}|{{ 'hELLO'|capitalize }}|{{ 'aXbX'|replace('X', '-') }}|{{ 123|string }}|{{ '42'|int + 1 }}|{{ '2.5'|float }}|{{ 'x'|length }}", [], {}),
        ("filters_list", "{{ [3, 1, 2]|first }} {{ [3, 1, 2]|last }} {{ [1, 2, 3]|join(', ') }} {{ ['a', 'b']|join }} {{ [1, 2]|length }} {{ 'abc'|list }} {{ {'a': 1}|items|list }}", [], {}),
        ("filter_default", "{{ nothing|default('dflt') }} {{ ''|default('dflt') }} {{ ''|default('dflt', true) }} {{ 'val'|d('x') }} {{ none|default('n') }}", [], {}),
        ("filter_map", "{{ messages|map(attribute='role')|join(',') }} {{ ['a', 'b']|map('upper')|list }}", m, {}),
        ("filter_select", "{{ messages|selectattr('role', 'equalto', 'user')|list|length }} {{ messages|rejectattr('role', '==', 'user')|map(attribute='content')|first }} {{ [1, 2, 3, 4]|select('even')|list }} {{ [{'a': 1}, {'b': 2}]|selectattr('a', 'defined')|list }} {{ [0, 1, '', 'x']|select|list }}", m, {}),
        ("filter_tojson", "{{ messages|tojson }}\n{{ {'k': [1, 2.5, none, true, 'ü\"\\n']}|tojson }}\n{{ messages[0]|tojson(indent=2) }}\n{{ [1, [], {}]|tojson(indent=4) }}\n{{ 'ü'|tojson(ensure_ascii=true) }}\n{{ {'a': 1}|tojson(separators=(',', ':')) }}", m, {}),
        ("filter_indent", "{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(4, true) }}|{{ 'a\\nb'|indent(first=true) }}", [], {}),
        ("filter_safe_escape", "{{ '<a href=\"x\">&\\'</a>'|safe }} {{ '<b>&'|escape }} {{ '<i>'|e }}", [], {}),
        ("filter_misc", "{{ [3, 1, 2]|sort|list }} {{ [1, 2, 2, 1]|unique|list }} {{ [1, 2, 3]|reverse|list }} {{ -3|abs }} {{ [1, 2, 3]|sum }} {{ 'abc'|reverse }} {{ 2.567|round(2) }} {{ [3, 5]|max }} {{ [3, 5]|min }}", [], {}),
        ("filter_block", "{% filter upper %}shout {{ 'this' }}{% endfilter %}", [], {}),
        ("tests", "{{ x is defined }} {{ y is undefined }} {{ none is none }} {{ 'a' is string }} {{ {} is mapping }} {{ [] is iterable }} {{ 'a' is iterable }} {{ [] is sequence }} {{ 1 is number }} {{ 1.5 is number }} {{ true is number }} {{ true is boolean }} {{ 1 is boolean }} {{ 3 is odd }} {{ 4 is even }} {{ 2 is in [1, 2] }} {{ 'a' is equalto 'a' }} {{ 1 is not none }} {{ 5 is divisibleby 5 }} {{ 1 is integer }} {{ 1.0 is float }}", [], {"extra": {"x": 1}}),
        ("methods_str", "{{ '  x  '.strip() }}|{{ '  x  '.lstrip() }}|{{ '  x  '.rstrip() }}|{{ 'xxhixx'.strip('x') }}|{{ 'hello'.startswith('he') }}|{{ 'hello'.endswith('lo') }}|{{ 'a,b,c'.split(',') }}|{{ ' a  b '.split() }}|{{ 'a,b,c'.split(',', 1) }}|{{ 'Ab'.upper() }}|{{ 'Ab'.lower() }}|{{ 'ab cd'.title() }}|{{ 'aaa'.replace('a', 'b', 2) }}|{{ 'hello'.startswith(('x', 'h')) }}|{{ 'abc'.find('c') }}|{{ 'a{}b'.format(1) }}", [], {}),
        ("methods_dict", "{% set d = {'a': 1, 'b': none} %}{{ d.items()|list }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.get('a') }} {{ d.get('z') }} {{ d.get('z', 'dflt') }} {{ d['a'] }} {{ d.a }} {{ 'a' in d }}", [], {}),
        ("slicing", "{{ 'hello'[::-1] }} {{ 'hello'[1:] }} {{ 'hello'[:-1] }} {{ [1, 2, 3, 4][1:3] }} {{ [1, 2, 3, 4][::2] }} {{ messages[-1].role }} {{ 'héllo'[1] }} {{ [1, 2, 3][-2:] }} {{ 'abc'[5:] }}", m, {}),
        ("string_percent", "{{ 'a %s b %d' % ('x', 3) }} {{ '%s!' % 'hi' }}", [], {}),
        ("string_escapes", "{{ 'tab\\there' }} {{ \"dq\\\"s\" }} {{ 'u\\u00e9' }} {{ 'a' 'b' }}", [], {}),
        ("list_concat", "{{ [1] + [2, 3] }} {{ ([1, 2] + ['x'])|length }}", [], {}),
        ("raise", "{% if messages|length == 0 %}{{ raise_exception('No messages given!') }}{% endif %}ok", [], {}),
        ("raise_not", "{% if messages|length == 0 %}{{ raise_exception('No messages given!') }}{% endif %}ok", m, {}),
        ("strftime", "{{ strftime_now('%Y')|length }} {{ strftime_now('%d %b %Y')|length > 5 }}", [], {}),
        ("undefined_attr_error", "{{ nothing.attr }}", [], {}),
        ("undefined_add_error", "{{ nothing + 'x' }}", [], {}),
        ("str_plus_int_error", "{{ 'a' + 1 }}", [], {}),
        ("undefined_ops", "{{ nothing|length }} {{ nothing is defined }} [{{ nothing|trim }}] {% for x in nothing %}x{% endfor %} {{ nothing == none }} {{ not nothing }}", [], {}),
        ("global_vars", "{{ bos_token }}|{{ eos_token }}|{{ add_generation_prompt }}|{{ tools }}|{{ documents }}|{{ date_string }}", m, {"bos_token": "<s>", "eos_token": "</s>", "extra": {"date_string": "1 Jan"}}),
        ("tools_var", "{% for t in tools %}{{ t.function.name }}{{ t['function']['parameters']|tojson }}\n{% endfor %}", [], {"tools": [WEATHER_TOOL, TIME_TOOL]}),
        ("documents_var", "{% for d in documents %}{{ loop.index }}:{{ d.title }}={{ d.text }};{% endfor %}", [], {"documents": [{"title": "A", "text": "alpha"}, {"title": "B", "text": "beta"}]}),
        ("list_content", "{% for m in messages %}{% if m.content is string %}{{ m.content }}{% else %}{% for c in m.content %}{% if c.type == 'text' %}{{ c.text }}{% else %}<{{ c.type }}>{% endif %}{% endfor %}{% endif %}\n{% endfor %}", [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "what is this?"}]}, A1], {}),
        ("numbers_json", "{{ messages[0].n }} {{ messages[0].f }} {{ messages[0].n * 2 }} {{ messages[0].f|tojson }} {{ messages[0].big }}", [{"n": 3, "f": 2.0, "big": 12345678901234}], {}),
        ("in_list_dict", "{{ 1 in [1, 2] }} {{ 'role' in messages[0] }} {{ 'zz' in messages[0] }}", m, {}),
        ("range", "{{ range(3)|list }} {{ range(1, 4)|list }} {{ range(0, 10, 3)|list }}", [], {}),
        ("dict_literal_attr", "{% set d = {'x': {'y': 'deep'}} %}{{ d.x.y }} {{ d['x']['y'] }}", [], {}),
        ("whitespace_complex", "{%- for m in messages %}\n    {{- m.role }}:\n    {%- if m.content %}\n        {{ m.content }}\n    {% endif %}\n{% endfor -%}\nend\n", m, {}),
        ("loop_in_macro", "{% macro list_roles(ms) %}{% for m in ms %}{{ m.role }}{% if not loop.last %},{% endif %}{% endfor %}{% endmacro %}<{{ list_roles(messages) }}>", m, {}),
        ("is_not_defined", "{{ m is not defined }} {{ not m is defined }}", [], {}),
        ("neg_index_str", "{{ messages[0].content[-1] }} {{ messages[0].content[0:2]|upper }}", m, {}),
        ("count_filter", "{{ messages|count }} {{ 'abc'|count }}", m, {}),
        ("tuple_print", "{{ (1, 'a') }} {{ () }} {{ (1,) }}", [], {}),
        ("items_order", "{% for k, v in messages[0].items() %}{{ k }};{% endfor %}", [{"z": 1, "a": 2, "m": 3}], {}),
        ("floats_repr", "{{ 0.1 + 0.2 }} {{ 1 / 3 }} {{ 2.5e-10 }} {{ 1e100 }} {{ 123456789.0 }} {{ 1e16 }} {{ 1e15 }} {{ 12345678901234567890.0 }} {{ 0.0001 }} {{ -1.5e-7 }} {{ [0.5, 1e22] }} {{ {'f': 2.0}|tojson }}", [], {}),
        ("title_filter_vs_method", "{{ \"they're bill's friends-of a1b (x)\"|title }}|{{ \"they're bill's friends-of a1b (x)\".title() }}", [], {}),
        ("unicode_case", "{{ 'ÉCOLE été Straße'|lower }}|{{ 'école été'|upper }}|{{ 'émile'|capitalize }}|{{ 'ΑΒΓ абв'|upper }}|{{ 'ΑΒΓ АБВ'|lower }}", [], {}),
        ("unicode_strip", "[{{ '\u00a0 x \u3000'|trim }}] [{{ '\u2003y\n'.strip() }}] {{ 'a\u00a0b c'.split() }}", [], {}),
        ("repr_unicode", "{{ ['é', '\u00a0', '\x01', 'tab\t', '😀'] }}", [], {}),
        ("tojson_escapes", "{{ ['\x01\x7f', 'é😀', '</script>', '\\\\'] | tojson }} {{ ['é😀'] | tojson(ensure_ascii=true) }}", [], {}),
        ("tojson_nested_indent", "{{ {'a': [1, {'b': []}], 'c': {}}|tojson(indent=2) }}", [], {}),
        ("tojson_sort", "{{ {'b': 1, 'a': {'d': 1, 'c': 2}}|tojson(sort_keys=true) }}", [], {}),
        ("percent_format", "{{ '%d items' % 3 }}|{{ '%.2f' % 1.5 }}|{{ '%5s|%-5s|' % ('ab', 'cd') }}|{{ '%05d' % 42 }}|{{ '%x' % 255 }}|{{ '%r' % 'q' }}|{{ '100%%' % () }}", [], {}),
        ("format_filter", "{{ '%s-%s'|format('a', 1) }}", [], {}),
        ("precedence", "{{ not 1 == 2 }} {{ -2 ** 2 }} {{ 2 + 3 * 4 }} {{ (2 + 3) * 4 }} {{ 1 if false else 2 if true else 3 }} {{ 10 - 2 - 3 }} {{ 2 ** 3 ** 2 }} {{ 'a' ~ 'b' == 'ab' }}", [], {}),
        ("in_operators", "{{ 'a' in ['a'] and 'b' not in ['a'] }} {{ 'ell' in 'hello' }} {{ 1 in {'1': 2} }}", [], {}),
        ("loop_nested_access", "{% for m in messages %}{% for k in m %}{{ loop.index }}{{ k }}{% endfor %}|{{ loop.index }}{% endfor %}", [U1, A1], {}),
        ("loop_else_filtered", "{% for m in messages if m.role == 'tool' %}{{ m }}{% else %}no tools{% endfor %}", [U1, A1], {}),
        ("loop_previtem_undefined", "{% for x in [1] %}[{{ loop.previtem }}][{{ loop.nextitem }}]{{ loop.previtem is defined }}{% endfor %}", [], {}),
        ("break_in_nested", "{% for a in [1, 2, 3] %}{% for b in [1, 2, 3] %}{% if b > a %}{% break %}{% endif %}{{ a }}{{ b }} {% endfor %}{% endfor %}", [], {}),
        ("continue_loop_last", "{% for x in range(4) %}{% if x is even %}{% continue %}{% endif %}{{ x }}{{ loop.last }} {% endfor %}", [], {}),
        ("set_in_loop_namespace_list", "{% set ns = namespace(items=[]) %}{% for m in messages %}{% set ns.items = ns.items + [m.role] %}{% endfor %}{{ ns.items }}", [U1, A1], {}),
        ("macro_default_expr", "{% macro m(a, b=a ~ '!') %}{{ a }}{{ b }}{% endmacro %}{{ m('x') }} {{ m('x', 'y') }} [{{ m() }}]", [], {}),
        ("macro_sees_globals", "{% macro show() %}{{ bos_token }}{{ messages|length }}{% endmacro %}{{ show() }}", [U1], {"bos_token": "<s>"}),
        ("macro_caller_args", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ 1 + 1 }}{% endcall %}", [], {}),
        ("whitespace_lstrip_tabs", "a\n\t \t{% if true %}\n\tb\n\t{% endif %}\nc", [], {}),
        ("whitespace_lstrip_start", "   {% if true %}x{% endif %}", [], {}),
        ("whitespace_comment_line", "a\n  {# c #}\nb\n{#- d -#}\n  c", [], {}),
        ("whitespace_raw_minus", "a  {%- raw -%}  {{ x }}  {%- endraw -%}  b", [], {}),
        ("whitespace_crlf", "a\r\n{% if true %}\r\nb\r\n{% endif %}\r\nc\r\n", [], {}),
        ("whitespace_var_no_trim", "{{ 'a' }}\n{{ 'b' }}\n", [], {}),
        ("whitespace_block_inline", "x {% if true %} y {% endif %} z\n", [], {}),
        ("whitespace_plus_end", "{% if true +%}\nkeep{% endif %}", [], {}),
        ("dict_items_print", "{{ {'a': 1}.items()|list }} {{ messages[0].keys()|list }}", [U1], {}),
        ("string_multiply_join", "{{ '=' * 5 }} {{ ['a'] * 2 }} {{ 3 * 'ab' }}", [], {}),
        ("int_filter_cases", "{{ '12abc'|int }} {{ '3.9'|int }} {{ 3.9|int }} {{ 'x'|int(7) }} {{ true|int }} {{ ' 5 '|int }} {{ '1_000'|int }}", [], {}),
        ("float_filter_cases", "{{ '1e3'|float }} {{ 'x'|float }} {{ 2|float }} {{ '-0.5'|float }}", [], {}),
        ("first_last_empty", "[{{ []|first }}] [{{ ''|last }}] {{ 'abc'|first }}", [], {}),
        ("join_attribute", "{{ messages|join(', ', attribute='role') }}", [U1, A1], {}),
        ("sort_filters", "{{ ['b', 'A', 'c']|sort }} {{ ['b', 'A', 'c']|sort(case_sensitive=true) }} {{ messages|sort(attribute='role')|map(attribute='role')|list }} {{ [3, 1]|sort(reverse=true) }}", [U1, A1], {}),
        ("map_default", "{{ messages|map(attribute='name', default='anon')|list }}", [U1, dict(A1, name='bot')], {}),
        ("selectattr_tests", "{{ messages|selectattr('tool_calls', 'defined')|list|length }} {{ messages|selectattr('content', 'string')|list|length }} {{ messages|rejectattr('role', 'in', ['user'])|map(attribute='role')|list }}", [U1, dict(A1, tool_calls=[])], {}),
        ("default_chain", "{{ messages[0].name|default(messages[0].role)|upper }}", [U1], {}),
        ("string_index_methods", "{{ 'hello'.find('z') }} {{ 'a-b-c'.count('-') }} {{ 'abc'.index('c') }} {{ '123'.isdigit() }} {{ 'ab1'.isalpha() }}", [], {}),
        ("split_edge", "{{ ''.split() }} {{ ''.split(',') }} {{ 'a,,b'.split(',') }} {{ '  a b  c '.split(None, 1) }}", [], {}),
        ("slice_negative_step", "{{ [1, 2, 3, 4, 5][::-2] }} {{ 'abcdef'[4:1:-1] }} {{ [1, 2, 3][-100:100] }} {{ 'abc'[-1:] }}", [], {}),
        ("compare_mixed_eq", "{{ 1 == '1' }} {{ none == false }} {{ [] == [] }} {{ {} == {} }} {{ 0 == false }} {{ 1.0 == true }}", [], {}),
        ("compare_type_error", "{{ 1 < 'a' }}", [], {}),
        ("none_attr", "{{ none.x is defined }}", [], {}),
        ("none_iter_error", "{% for x in none %}{% endfor %}", [], {}),
        ("undefined_getitem_error", "{{ nothing['x'] }}", [], {}),
        ("undefined_call_error", "{{ nothing() }}", [], {}),
        ("dict_missing_key_error", "{{ messages[0]['missing']['deeper'] }}", [U1], {}),
        ("list_index_error", "{{ messages[5].role }}", [U1], {}),
        ("number_formats", "{{ 1_000 }} {{ 0.5e1 }} {{ 7 // 2.0 }} {{ -7 % 2.5 }} {{ 2 ** -1 }} {{ 10 / 4 }}", [], {}),
        ("division_by_zero", "{{ 1 / 0 }}", [], {}),
        ("bool_arith", "{{ true + true }} {{ true * 3 }}", [], {}),
        ("cond_undefined_print", "[{{ 'a' if false }}]{{ ('a' if false) is defined }}", [], {}),
        ("namespace_print", "{% set ns = namespace(a=1) %}{{ ns.a }} {{ ns.b is defined }}", [], {}),
        ("set_multiple_targets_loop", "{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }};{% endfor %}{% for (x, y) in [('p', 'q')] %}{{ x }}{{ y }}{% endfor %}", [], {}),
        ("tests_more", "{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ none is boolean }} {{ 5 is gt 3 }} {{ 5 is le 3 }} {{ x is sameas none }} {{ 3 is ne 3 }} {{ 1 is true }} {{ false is false }}", [], {"extra": {"x": None}}),
        ("adjacent_strings", "{{ 'a' \"b\" 'c' }}", [], {}),
        ("dotted_index", "{{ messages.0.role }}", [U1], {}),
        ("list_literal_trailing_comma", "{{ [1, 2,] }} {{ {'a': 1,} }}", [], {}),
        ("unicode_len_reverse", "{{ 'héllo😀'|length }} {{ 'héllo😀'|reverse }} {{ 'héllo😀'[1:3] }}", [], {}),
        ("escape_filter_values", "{{ 5|escape }} {{ none|e }}", [], {}),
        ("indent_blank", "{{ 'a\n\nb'|indent(2, blank=true) }}|{{ 'x\ny'|indent('> ') }}", [], {}),
        ("generation_block", "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% else %}{{ m.content }}{% endif %}\n{% endfor %}", [U1, A1], {}),
        ("scope_set_block", "{% set x %}{% set y = 1 %}{% endset %}[{{ y }}]", [], {}),
        ("scope_filter_block", "{% filter upper %}{% set z = 2 %}{% endfilter %}[{{ z }}]", [], {}),
        ("scope_macro_in_loop", "{% for i in [1] %}{% macro m() %}M{{ i }}{% endmacro %}{{ m() }}{% endfor %}[{{ m is defined }}]", [], {}),
        ("scope_loop_var_restored", "{% set i = 'outer' %}{% for i in [1, 2] %}{{ i }}{% endfor %}{{ i }}", [], {}),
        ("scope_if_in_loop", "{% for i in [1, 2] %}{% if i == 1 %}{% set x = 'a' %}{% endif %}[{{ x }}]{% endfor %}", [], {}),
        ("scope_macro_late_binding", "{% set a = 1 %}{% macro f() %}{{ a }}{% endmacro %}{% set a = 2 %}{{ f() }}", [], {}),
        ("scope_caller_set", "{% macro w() %}{{ caller() }}{% endmacro %}{% call w() %}{% set q = 1 %}in{% endcall %}[{{ q }}]", [], {}),
        ("namespace_tests", "{{ namespace(a=1) }} {{ namespace() is mapping }} {{ {} is mapping }}", [], {}),
        ("final_sigma", "{{ 'Σ ΟΔΟΣ ΣΑ'|lower }}", [], {}),
        ("concat_types", "{{ 'x' ~ {'a': 'b'} }} {{ 1 ~ 2.0 }} {{ none|string }} {{ [1, 'a']|string }}", [], {}),
        ("tuple_tojson", "{{ (1, 2)|tojson }} {{ {'t': (1,)}|tojson }}", [], {}),
        ("percent_list_arg", "{{ '%s' % [1, 2] }}", [], {}),
        ("compare_none_error", "{{ 'a' < none }}", [], {}),
        ("loop_print_empty", "[{{ loop }}]", [], {}),
        ("with_block", "{% set a = 5 %}{% with a = 1, b = a %}[{{ a }}{{ b }}]{% endwith %}{{ a }}{% with %}{% set x = 1 %}{% endwith %}[{{ x }}]", [], {}),
        ("methods_str_more", "{{ 'a b\\nc\\n'.splitlines() }} {{ 'a,b,c'.rsplit(',', 1) }} {{ ' a b  c '.rsplit(None, 1) }} {{ 'a,b'.rsplit(',') }} {{ 'prefix_x'.removeprefix('prefix_') }} {{ 'x.json'.removesuffix('.json') }} {{ 'abc'.startswith('b', 1) }} {{ 'abc'.endswith('b', 0, 2) }}", [], {}),
        ("tests_aliases", "{{ 5 is greaterthan 3 }} {{ 5 is lessthan 3 }} {{ 'A' is lower }}", [], {}),
        ("split_empty_separator", "{{ 'a,b'.split('') }}", [], {}),
        ("attr_vs_item", "{{ messages[0]['items'] }} {{ messages[0].get('items') }}", [{"items": "field"}], {}),
        # Recursive loops: loop(children) renders the loop body one level down; depth/depth0, else, if-filter.
        ("recursive_loop", "{% for x in tree recursive %}[{{ x.n }}:{{ loop.depth }}{{ loop.depth0 }}{{ loop.index }}/{{ loop.length }}{% if x.c %}{{ loop(x.c) }}{% endif %}]{% endfor %}", [], {"extra": {"tree": RECURSIVE_TREE}}),
        ("recursive_loop_else", "{% for x in tree recursive %}<{{ x.n }}{{ loop(x.c) }}>{% else %}(leaf){% endfor %}", [], {"extra": {"tree": RECURSIVE_TREE}}),
        ("recursive_loop_if", "{% for x in tree if x.n != 3 recursive %}{{ x.n }}{{ loop.length }}{% if x.c %}({{ loop(x.c) }}){% endif %};{% endfor %}", [], {"extra": {"tree": RECURSIVE_TREE}}),
        ("recursive_loop_scope", "{% set y = 'outer' %}{% for x in [1, 2] recursive %}{% set y = x %}{{ y }}{% if loop.depth < 3 %}({{ loop([x * 10]) }}){% endif %}{{ loop.previtem }}{% endfor %}{{ y }}", [], {}),
        ("recursive_loop_break", "{% for x in [1, 5, 2] recursive %}{% if x > 4 %}{% break %}{% endif %}{{ x }}{{ loop(x.c) }}{% endfor %}", [], {}),
        ("recursive_loop_messages", "{% for m in messages recursive %}{{ '  ' * loop.depth0 }}{{ m.role }}{% if m.content is not string %}\n{{ loop(m.content) }}{% else %}: {{ m.content }}\n{% endif %}{% endfor %}", [{"role": "user", "content": [{"role": "text", "content": "hi"}, {"role": "image", "content": [{"role": "url", "content": "x"}]}]}, A1], {}),
        ("loop_call_not_recursive", "{% for x in [1] %}{{ loop([2]) }}{% endfor %}", [], {}),
        ("recursive_loop_not_iterable", "{% for x in [[]] recursive %}{{ loop(1) }}{% endfor %}", [], {}),
        # Rarer filters and tests.
        ("filter_batch", "{{ [1, 2, 3, 4, 5]|batch(2)|list }} {{ [1, 2, 3, 4, 5]|batch(2, 'x')|list }} {{ 'abcde'|batch(3)|list }} {{ []|batch(2)|list }} {{ [1, 2, 3]|batch(2, none)|list }}", [], {}),
        ("filter_slice", "{{ [1, 2, 3, 4, 5, 6, 7]|slice(3)|list }} {{ [1, 2, 3, 4, 5, 6, 7]|slice(3, 0)|list }} {{ [1, 2]|slice(4)|list }}", [], {}),
        ("filter_groupby", "{% for g in messages|groupby('role') %}{{ g.grouper }}:{{ g.list|map(attribute='content')|join(',') }};{% endfor %} {% for role, ms in messages|groupby('role') %}{{ role }}={{ ms|length }} {% endfor %}{{ messages|groupby('role')|map(attribute='grouper')|list }}", [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}], {}),
        ("filter_groupby_case", "{{ messages|groupby('r') }} {{ messages|groupby('r', case_sensitive=true)|list }} {{ messages|groupby('x', default='z')|list }}", [{"r": "b", "x": "k"}, {"r": "A"}, {"r": "a", "x": "k"}], {}),
        ("filter_groupby_path", "{{ messages|groupby('r.s')|list }} {{ [[1, 2], [1, 3], [0, 4]]|groupby(0)|list }}", [{"r": {"s": 1}}, {"r": {"s": 0}}], {}),
        ("filter_groupby_missing", "{{ messages|groupby('r')|list }}", [{"r": "b"}, {"n": 2}], {}),
        ("filter_center", "[{{ 'x'|center }}]{{ 'abc'|center(8) }}|{{ 'abcd'|center(7) }}|{{ 'héllo'|center(9) }}|{{ 5|center(5) }}|{{ 'long'|center(2) }}|", [], {}),
        ("filter_wordcount", "{{ ''|wordcount }} {{ 'a-b c.d e_f \"g\" 12 ünï'|wordcount }} {{ 'one  two\nthree'|wordcount }}", [], {}),
        ("filter_truncate", "{{ 'hello world foo bar'|truncate(11) }}|{{ 'hello world foo bar'|truncate(11, true) }}|{{ 'hello world'|truncate(11) }}|{{ 'hello world!'|truncate(11) }}|{{ 'hello world foo'|truncate(9, false, '!') }}|{{ 'hello world foo'|truncate(9, leeway=0) }}|{{ 'héllo wörld x'|truncate(9) }}|{{ ('x' * 300)|truncate|length }}", [], {}),
        ("filter_truncate_short_error", "{{ 'hello world'|truncate(2) }}", [], {}),
        ("percent_wide", "{{ ('%600s|' % 'x')|length }} {{ ('%-700d|' % 5)|length }} {{ ('%.550f' % 0.5)|length }}", [], {}),
        ("filter_variants", "{{ 'a\n\nb'|indent(2, blank=true) }}|{{ 'a\nb'|indent('> ', true) }}|{{ messages|sum(attribute='n') }}|{{ messages|sum(attribute='n', start=10) }}|{{ (messages|min(attribute='n')).n }}|{{ (messages|max(attribute='n')).n }}|{{ messages|unique(attribute='k')|map(attribute='n')|list }}|{{ {'b': 1, 'a': 2, 'C': 0}|dictsort }}|{{ {'b': 1, 'a': 2}|dictsort(by='value', reverse=true) }}|{{ messages|selectattr('n', 'gt', 1)|map(attribute='n')|list }}|{{ messages|rejectattr('k', 'in', ['x'])|list|length }}|{{ messages|map(attribute='z', default='-')|join }}|{{ ['B', 'a', 'C']|sort|join }}|{{ ['B', 'a', 'C']|sort(case_sensitive=true)|join }}|{{ messages|sort(attribute='n', reverse=true)|map(attribute='n')|join }}|{{ '%s=%d'|format('x', 3) }}|{{ {'a': 1}|items|list }}|{{ ['A', 'a', 'b']|unique|list }}", [{"n": 2, "k": "x"}, {"n": 1, "k": "X"}, {"n": 3, "k": "y"}], {}),
        ("tests_filter_test", "{{ 'upper' is filter }} {{ 'groupby' is filter }} {{ 'nope' is filter }} {{ 1 is filter }} {{ 'odd' is test }} {{ 'nope' is test }}", [], {}),
    ]
    return t


def main():
    hf_dir, out_dir = sys.argv[1], sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    for name in ("qwen2.5", "mistral-v0.3", "tinyllama", "smollm2"):
        chat_template, tokens = load_config(os.path.join(hf_dir, name, "tokenizer_config.json"))
        with open(os.path.join(out_dir, f"chat_{name}.jsonl"), "w", encoding="utf-8") as out:
            for case, messages, options in hf_cases(name):
                source = pick_template(chat_template, options.get("tools"))
                row = {"case": case, "messages": messages, "options": options}
                row.update(render_case(source, messages, options, tokens))
                out.write(json.dumps(row, ensure_ascii=False) + "\n")
    with open(os.path.join(out_dir, "chat_synthetic.jsonl"), "w", encoding="utf-8") as out:
        for case, source, messages, options in synthetic_cases():
            row = {"case": case, "template": source, "messages": messages, "options": options}
            row.update(render_case(source, messages, options, {}))
            out.write(json.dumps(row, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
