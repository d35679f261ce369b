#!/usr/bin/env python3
"""Expected output of small Jinja templates, one per engine feature, rendered by jinja2 in the
environment transformers builds for chat templates (its _compile_jinja_template: sandboxed,
trim_blocks, lstrip_blocks, loopcontrols, tojson override, raise_exception, strftime_now).

Writes tests/chat_template/engine_goldens.json: [{"name", "template", "vars", "expected"} or
{..., "error": "..."} when jinja2 raises; lathe must then raise lathe::Error].

Usage: /opt/jinja-venv/bin/python tools/chat_template_goldens/make_engine_goldens.py
"""
import json
import pathlib

import jinja2
from transformers.utils.chat_template_utils import _compile_jinja_template

ROOT = pathlib.Path(__file__).resolve().parents[2]

V = {
    "s": "Hello, World",
    "u": "héllo wörld ñ 日本",
    "n": None,
    "t": True,
    "i": 7,
    "f": 2.5,
    "xs": [3, 1, 2],
    "words": ["b", "A", "a", "c"],
    "d": {"b": 1, "a": [1, 2], "c": {"x": None}},
    "msgs": [
        {"role": "system", "content": "sys"},
        {"role": "user", "content": "hi", "n": 2},
        {"role": "assistant", "content": "yo", "tool_calls": [{"function": {"name": "f", "arguments": {"k": "v"}}}]},
    ],
    "schema": {"type": "object", "properties": {"q": {"type": "string", "description": "ünï \"quoted\"\n"}},
               "required": ["q"], "items": [1, 2.0, 1e-7, 1e16, -0.0, True, None]},
}

CASES = [
    # ---- text and whitespace control ----
    ("text", "plain text\n", {}),
    ("trailing_newline_dropped", "a\n\n", {}),
    ("crlf_normalised", "a\r\nb\rc", {}),
    ("trim_blocks", "{% if true %}\nyes\n{% endif %}\nafter", {}),
    ("lstrip_blocks", "line\n    {% if true %}\n    body\n    {% endif %}\nend", {}),
    ("lstrip_not_after_text", "x  {% if true %}y{% endif %}", {}),
    ("lstrip_after_expr", "{{ 1 }}  {% if true %}y{% endif %}", {}),
    ("dash_strip", "a  \n  {{- 'b' -}}  \n  c", {}),
    ("dash_block", "a\n  {%- if true -%}\n  b  \n{%- endif -%}\n  c", {}),
    ("plus_disables_lstrip", "x\n    {%+ if true %}y{% endif %}", {}),
    ("plus_disables_trim", "{% if true +%}\ny{% endif %}", {}),
    ("comment", "a{# hidden #}b\n{# line #}\nc", {}),
    ("comment_dash", "a  {#- c -#}  b", {}),
    ("raw", "{% raw %}{{ not evaluated }}{% endraw %}", {}),
    ("raw_dash", "a {%- raw -%} x {%- endraw -%} b", {}),
    ("var_no_trim", "{{ 'a' }}\nb", {}),
    # ---- literals and printing ----
    ("print_types", "{{ n }}|{{ t }}|{{ i }}|{{ f }}|{{ xs }}|{{ d }}|{{ undefined_thing }}", V),
    ("print_tuple", "{{ (1, 'a') }}|{{ (1,) }}|{{ () }}", {}),
    ("float_repr", "{{ 1.0 }} {{ 0.1 + 0.2 }} {{ 1e-5 }} {{ 1e16 }} {{ 123456789.125 }} {{ 10 / 4 }} {{ 2 ** -1 }}", {}),
    ("string_escapes", "{{ 'a\\tb\\n' }}|{{ \"q'uote\" }}|{{ 'x\\'y' }}|{{ '\\u00e9\\x41' }}", {}),
    ("repr_strings", "{{ ['it\\'s', 'say \"hi\"', 'both \\' \"', 'nl\\n'] }}", {}),
    ("dict_literal", "{{ {'a': 1, 'b': [true, none]} }}", {}),
    ("adjacent_strings", "{{ 'a' 'b' }}", {}),
    # ---- operators ----
    ("arith", "{{ 7 + 3 }} {{ 7 - 10 }} {{ 7 * 3 }} {{ 7 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 7.5 // 2 }}", {}),
    ("precedence", "{{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ -2 ** 2 }} {{ 2 * 3 ~ 4 }} {{ not true or true }}", {}),
    ("concat", "{{ 'a' ~ 1 ~ none ~ undefined_x ~ [1] }}", {}),
    ("string_mul", "{{ 'ab' * 3 }}{{ [1] * 2 }}", {}),
    ("compare", "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 'a' < 'b' }} {{ [1, 2] < [1, 3] }} {{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' != 'b' }}", {}),
    ("in_operator", "{{ 'ell' in s }} {{ 2 in xs }} {{ 'a' in d }} {{ 'z' not in d }} {{ 9 not in xs }}", V),
    ("and_or_values", "{{ 0 or 'x' }}|{{ 'a' and 'b' }}|{{ none or [] }}|{{ '' and 1 }}", {}),
    ("ternary", "{{ 'yes' if t else 'no' }}|{{ 'yes' if n else 'no' }}|{{ 'only' if false }}|", V),
    ("unary_filter_precedence", "{{ -3|abs }} {{ -(3|abs) }}", {}),
    ("string_plus_int_error", "{{ 'a' + 1 }}", {}),
    ("list_plus", "{{ [1] + [2, 3] }}", {}),
    ("div_zero", "{{ 1 / 0 }}", {}),
    # ---- subscripts and slicing ----
    ("slices", "{{ s[1:4] }}|{{ s[-5:] }}|{{ s[::-1] }}|{{ s[::2] }}|{{ xs[1:] }}|{{ xs[::-1] }}|{{ xs[-1] }}|{{ s[100:] }}|{{ xs[5:1:-1] }}", V),
    ("unicode_slices", "{{ u[0:2] }}|{{ u[-2:] }}|{{ u|length }}|{{ u[::-1] }}|{{ u[1] }}", V),
    ("attr_vs_item", "{{ msgs[0].role }}|{{ msgs[1]['content'] }}|{{ d.a[1] }}|{{ d['c'].x }}|{{ msgs.0.role }}", V),
    ("missing_attr_undefined", "[{{ d.zzz }}][{{ d['zzz'] }}][{{ xs[10] }}][{{ n.foo }}]", V),
    ("attr_of_undefined_error", "{{ nothing.foo }}", {}),
    ("dict_items_method_wins", "{{ schema.items is callable }}|{{ schema['items'] }}", V),
    # ---- control flow ----
    ("if_elif_else", "{% for x in [1, 2, 3] %}{% if x == 1 %}one{% elif x == 2 %}two{% else %}other{% endif %},{% endfor %}", {}),
    ("for_loop_vars", "{% for x in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}", V),
    ("for_prev_next", "{% for x in xs %}[{{ loop.previtem }}|{{ loop.nextitem }}]{% endfor %}", V),
    ("for_else", "{% for x in [] %}x{% else %}empty{% endfor %}", {}),
    ("for_filter", "{% for x in range(10) if x is odd %}{{ x }}{{ loop.length }} {% endfor %}", {}),
    ("for_dict", "{% for k in d %}{{ k }}{% endfor %}|{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", V),
    ("for_string", "{% for c in 'abc' %}{{ c }}-{% endfor %}", {}),
    ("for_undefined", "{% for x in nothing %}x{% else %}none{% endfor %}", {}),
    ("for_none_error", "{% for x in n %}x{% endfor %}", V),
    ("for_scope", "{% set x = 1 %}{% for i in range(3) %}{% set x = x + 1 %}{{ x }}{% endfor %}{{ x }}", {}),
    ("if_scope_leaks", "{% if true %}{% set y = 5 %}{% endif %}{{ y }}", {}),
    ("nested_loops", "{% for a in [1, 2] %}{% for b in 'xy' %}{{ loop.index }}{{ a }}{{ b }} {% endfor %}{{ loop.index }}|{% endfor %}", {}),
    ("loop_cycle", "{% for x in range(5) %}{{ loop.cycle('a', 'b') }}{% endfor %}", {}),
    ("break_continue", "{% for x in range(10) %}{% if x == 2 %}{% continue %}{% endif %}{% if x == 5 %}{% break %}{% endif %}{{ x }}{% endfor %}", {}),
    ("range_forms", "{{ range(3)|list }}{{ range(1, 4)|list }}{{ range(10, 0, -3)|list }}", {}),
    ("reverse_iteration", "{% for m in msgs[::-1] %}{{ m.role }} {% endfor %}", V),
    # ---- set / namespace / macros ----
    ("set_tuple", "{% set a, b = 1, 2 %}{{ a }}{{ b }}", {}),
    ("set_block", "{% set x %}inner {{ 1 + 1 }}{% endset %}[{{ x }}]", {}),
    ("set_block_filter", "{% set x | upper %}shout{% endset %}{{ x }}", {}),
    ("namespace", "{% set ns = namespace(count=0, found=false) %}{% for m in msgs %}{% set ns.count = ns.count + 1 %}{% if m.role == 'user' %}{% set ns.found = true %}{% endif %}{% endfor %}{{ ns.count }} {{ ns.found }}", V),
    ("namespace_missing_attr", "{% set ns = namespace(a=1) %}[{{ ns.b }}]", {}),
    ("macro", "{% macro greet(name, punct='!') %}Hello {{ name }}{{ punct }}{% endmacro %}{{ greet('Bob') }} {{ greet('Al', punct='?') }} {{ greet() }}", {}),
    ("macro_recursive", "{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}", {}),
    ("macro_varargs_kwargs", "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1, 2, 3, x=4) }}", {}),
    ("call_block", "{% macro wrap(tag) %}<{{ tag }}>{{ caller() }}</{{ tag }}>{% endmacro %}{% call wrap('b') %}bold {{ 1 }}{% endcall %}", {}),
    ("call_block_args", "{% macro each(items) %}{% for i in items %}{{ caller(i) }}{% endfor %}{% endmacro %}{% call(x) each([1, 2]) %}<{{ x }}>{% endcall %}", {}),
    ("filter_block", "{% filter upper %}abc {{ 'd' }}{% endfilter %}", {}),
    ("with_block", "{% with a = 1, b = 2 %}{{ a + b }}{% endwith %}[{{ a }}]", {}),
    ("generation_block", "{% for m in msgs %}{% if m.role == 'assistant' %}{% generation %}{{ m.content }}{% endgeneration %}{% endif %}{% endfor %}", V),
    ("dict_global", "{{ dict(a=1, b='x') }}", {}),
    # ---- filters ----
    ("tojson", "{{ schema|tojson }}", V),
    ("tojson_indent", "{{ schema|tojson(indent=2) }}", V),
    ("tojson_sort_keys", "{{ d|tojson(sort_keys=true) }}", V),
    ("tojson_separators", "{{ d|tojson(separators=(',', ':')) }}", V),
    ("tojson_ensure_ascii", "{{ u|tojson(ensure_ascii=true) }}|{{ '😀'|tojson(ensure_ascii=true) }}", V),
    ("tojson_scalars", "{{ none|tojson }} {{ true|tojson }} {{ 1.5|tojson }} {{ 'a\"b\\\\c\\u0001'|tojson }} {{ [1, [2, {}], []]|tojson(indent=1) }}", {}),
    ("tojson_msgs", "{{ msgs|tojson }}", V),
    ("trim", "[{{ '  a b \\n'|trim }}][{{ 'xxaxx'|trim('x') }}]", {}),
    ("length_count", "{{ xs|length }} {{ s|count }} {{ d|length }} {{ nothing|length }}", V),
    ("items_filter", "{% for k, v in d|items %}{{ k }}:{{ v }} {% endfor %}", V),
    ("selectattr", "{{ msgs|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }} {{ msgs|selectattr('tool_calls')|list|length }} {{ msgs|selectattr('role', '==', 'system')|list|length }}", V),
    ("rejectattr", "{{ msgs|rejectattr('role', 'in', ['system', 'user'])|map(attribute='role')|join(',') }}", V),
    ("select_reject", "{{ range(6)|select('odd')|list }} {{ range(6)|reject('even')|list }} {{ [0, 1, '', 'a']|select|list }}", {}),
    ("map", "{{ words|map('upper')|join }} {{ msgs|map(attribute='n', default=0)|list }} {{ ['1', '2']|map('int')|sum }}", V),
    ("join", "{{ xs|join(', ') }} {{ msgs|join('|', attribute='role') }} {{ [1, none, 'a']|join }}", V),
    ("default", "{{ nothing|default('dflt') }} {{ n|default('x') }} {{ ''|default('empty', true) }} {{ 0|d('zero', boolean=true) }}", V),
    ("case_filters", "{{ s|upper }} {{ s|lower }} {{ 'hello wORLD-foo bar(baz'|title }} {{ 'hELLO world'|capitalize }}", V),
    ("unicode_case", "{{ u|upper }} {{ 'ÉCOLE'|lower }}", V),
    ("replace_filter", "{{ s|replace('l', 'L') }} {{ s|replace('l', '', 1) }}", V),
    ("first_last", "{{ xs|first }} {{ xs|last }} {{ 'abc'|first }} [{{ []|first }}]", V),
    ("list_string", "{{ 'ab'|list }} {{ d|list }} {{ 12|string ~ 'x' }} {{ none|string }}", V),
    ("int_float", "{{ '42'|int + 1 }} {{ '3.7'|int }} {{ 'x'|int }} {{ 'x'|int(5) }} {{ 3.9|int }} {{ '2.5'|float }} {{ 2|float }} {{ true|int }}", {}),
    ("abs_round", "{{ -5|abs }} {{ -2.5|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.675|round(2) }} {{ 3.14159|round(2, 'floor') }} {{ 2.1|round(0, 'ceil') }} {{ 5|round }}", {}),
    ("unique_sort_reverse", "{{ words|unique|list }} {{ words|sort }} {{ words|sort(case_sensitive=true) }} {{ xs|sort(reverse=true) }} {{ xs|reverse|list }} {{ 'abc'|reverse }} {{ msgs|sort(attribute='role')|map(attribute='role')|join(',') }}", V),
    ("indent", "{{ 'a\\nb\\n\\nc'|indent(2) }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb'|indent(3, blank=true) }}|{{ 'x\\ny'|indent('> ') }}", {}),
    ("wordcount", "{{ 'hello big  world'|wordcount }}", {}),
    ("safe_escape", "{{ '<a href=\"x\">&</a>'|e }} {{ '<b>'|safe }} {{ \"'\"|escape }}", {}),
    ("format_filter", "{{ '%s is %d years, %.2f%%'|format('Al', 30, 99.5) }} {{ '%5s|%-4d|'|format('ab', 7) }}", {}),
    ("percent_operator", "{{ 'x=%s y=%s' % (1, 'b') }} {{ '%d%%' % 50 }}", {}),
    ("batch", "{{ range(5)|batch(2)|list }} {{ range(5)|batch(2, 'x')|list }}", {}),
    ("min_max_sum", "{{ xs|min }} {{ xs|max }} {{ xs|sum }} {{ words|max }} {{ [{'n': 1}, {'n': 2.5}]|sum(attribute='n') }} {{ [{'n': 1}, {'n': 3}]|max(attribute='n') }}", V),
    ("dictsort", "{{ d|dictsort }} {{ {'b': 2, 'A': 3, 'a': 1}|dictsort(true) }}", V),
    ("center_truncate", "[{{ 'ab'|center(7) }}] {{ 'The quick brown fox jumps'|truncate(12) }} {{ 'abcdefghijklmnopqrst'|truncate(10, true) }}", {}),
    ("attr_filter", "{{ d|attr('a') }}|{{ 'x'|attr('upper') is callable }}", V),
    # ---- tests ----
    ("tests_types", "{{ n is none }} {{ t is boolean }} {{ t is true }} {{ false is false }} {{ i is integer }} {{ f is float }} {{ i is number }} {{ t is number }} {{ s is string }} {{ d is mapping }} {{ xs is sequence }} {{ s is iterable }} {{ i is iterable }} {{ d is iterable }}", V),
    ("tests_defined", "{{ s is defined }} {{ nothing is defined }} {{ nothing is undefined }} {{ d.zz is defined }} {{ msgs[0].role is defined }}", V),
    ("tests_numbers", "{{ 3 is odd }} {{ 4 is even }} {{ 9 is divisibleby 3 }} {{ 9 is divisibleby(4) }}", {}),
    ("tests_compare", "{{ 1 is eq 1 }} {{ 'a' is equalto 'a' }} {{ 2 is gt 1 }} {{ 2 is lt 1 }} {{ 2 is ge 2 }} {{ 1 is ne 2 }} {{ 1 is in [1, 2] }}", {}),
    ("tests_case", "{{ 'abc' is lower }} {{ 'ABC' is upper }} {{ 'aBc' is lower }}", {}),
    ("test_not", "{{ n is not none }} {{ s is not string }} {{ not s is string }}", V),
    ("tests_callable", "{{ range is callable }} {{ s.upper is callable }} {{ 'upper' is filter }} {{ 'odd' is test }}", V),
    # ---- string methods ----
    ("str_strip", "[{{ '  a  '.strip() }}][{{ 'xyax'.strip('xy') }}][{{ '\\n\\na\\n'.lstrip('\\n') }}][{{ 'a  '.rstrip() }}][{{ '  a'.lstrip() }}]", {}),
    ("str_split", "{{ 'a,b,,c'.split(',') }} {{ ' a  b c '.split() }} {{ 'a,b,c'.split(',', 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ 'x</think>y</think>z'.split('</think>')[-1] }}", {}),
    ("str_starts_ends", "{{ s.startswith('Hell') }} {{ s.endswith('ld') }} {{ s.startswith(('x', 'H')) }} {{ s.endswith('x') }}", V),
    ("str_methods_case", "{{ s.upper() }} {{ s.lower() }} {{ 'hello world'.title() }} {{ 'hELLO'.capitalize() }} {{ \"they're bill's\".title() }}", V),
    ("str_find_count_replace", "{{ s.find('o') }} {{ s.rfind('o') }} {{ s.find('zz') }} {{ s.count('l') }} {{ s.replace('o', '0') }} {{ s.replace('l', 'L', 2) }} {{ u.find('ñ') }}", V),
    ("str_format_join", "{{ '{} and {}'.format('a', 'b') }} {{ '{0}{1}{0}'.format('x', 'y') }} {{ '{name}!'.format(name='hi') }} {{ '-'.join(['a', 'b']) }}", {}),
    ("str_misc", "{{ '123'.isdigit() }} {{ 'ab'.isalpha() }} {{ '  '.isspace() }} {{ 'a\\nb\\r\\nc'.splitlines() }} {{ 'prefix_x'.removeprefix('prefix_') }}", {}),
    ("dict_methods", "{{ d.keys()|list }} {{ d.values()|list }} {{ d.items()|list }} {{ d.get('b') }} {{ d.get('zz') }} {{ d.get('zz', 'dflt') }}", V),
    ("list_methods", "{{ xs.index(1) }} {{ xs.count(3) }}", V),
    ("list_append_blocked", "{% set l = [1] %}{{ l.append(2) }}", {}),
    ("dict_update_blocked", "{{ d.update({'x': 1}) }}", V),
    # ---- globals and errors ----
    ("raise_exception", "{% if true %}{{ raise_exception('Bad role: ' ~ 'x') }}{% endif %}", {}),
    ("strftime_defined", "{{ strftime_now is defined }}", {}),
    ("undefined_call", "{{ no_such_macro() }}", {}),
    ("unknown_filter", "{{ 1|no_such_filter }}", {}),
    ("unknown_test", "{{ 1 is no_such_test }}", {}),
    ("syntax_unclosed_if", "{% if true %}x", {}),
    ("syntax_bad_expr", "{{ 1 + }}", {}),
    ("syntax_unclosed_var", "{{ x ", {}),
    ("syntax_unknown_tag", "{% frobnicate %}", {}),
    ("undefined_plus", "{{ nothing + 1 }}", {}),
    ("undefined_compare", "{{ nothing < 1 }}", {}),
    ("undefined_eq", "{{ nothing == 1 }} {{ nothing != none }}", {}),
    ("none_plus_error", "{{ n + 'x' }}", V),
    ("int_overflow_is_not_tested", "{{ 2 ** 62 }}", {}),
]


def main():
    out = []
    for name, template, variables in CASES:
        case = {"name": name, "template": template, "vars": variables}
        try:
            case["expected"] = _compile_jinja_template(template).render(**variables)
        except Exception as e:
            case["error"] = f"{type(e).__name__}: {e}"
        out.append(case)
    path = ROOT / "tests" / "chat_template" / "engine_goldens.json"
    doc = {"generator": "tools/chat_template_goldens/make_engine_goldens.py", "jinja2": jinja2.__version__,
           "cases": out}
    path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(out)} cases, {sum('error' in c for c in out)} raise")


if __name__ == "__main__":
    main()
