"""Small templates that exercise one part of the Jinja language each, rendered by
test_jinja_templates.py with jinja2 (as transformers configures it) and with specdec's
interpreter over the variables SNIPPET_VARS; the outputs (or the fact that both raise) must
agree. Grouped by topic; a snippet that specdec refuses on purpose is in REFUSED instead."""

SNIPPET_VARS = {
    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi  there\n"},
                 {"role": "assistant", "content": " Hello! ", "tool_calls": [
                     {"id": "call_123456789", "type": "function",
                      "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": 3}}}]},
                 {"role": "tool", "content": "{\"t\": 21}", "tool_call_id": "call_123456789"},
                 {"role": "user", "content": "Ünïcødé 日本語 🎉 \u2028x"}],
    "xs": [3, 1, 2], "words": ["b", "A", "c", "a"], "d": {"b": 1, "a": [1, 2], "c": {"x": None}},
    "s": "  Hello, World-wide  web (of) things  ", "n": 7, "f": 2.5, "t": True, "nothing": None, "empty": "",
    "tools": [{"type": "function", "function": {"name": "f", "description": "does f",
                                                 "parameters": {"type": "object", "properties": {
                                                     "a": {"type": "string", "enum": ["x", "y"]},
                                                     "b": {"type": "integer"}}, "required": ["a"]}}}],
    "bos_token": "<s>", "eos_token": "</s>", "add_generation_prompt": True,
}

WHITESPACE = [
    "a\n  {% if t %}\n  b\n  {% endif %}\nc",
    "a\n  {%- if t %}\n  b\n  {%- endif %}\nc",
    "a\n  {% if t -%}\n  b\n  {% endif -%}\n  c",
    "a\n  {%+ if t %}x{% endif +%}\ny",
    "  {# comment #}  \nx\n  {# c2 #}\ny",
    "x {#- c -#} y",
    "{{ 1 }}\n{{ 2 }}\n",
    "{{- ' a ' -}}  \n\n  {{- ' b ' }}",
    "{% raw %}{{ x }}{% if %}{% endraw %}",
    "a {%- raw -%}  {{ x }}  {%- endraw -%}  b",
    "line1\r\nline2\rline3\r\n",
    "\t{% if t %}\t\n\tx{% endif %}",
    "{% for m in messages %}\n  {{ m.role }}\n{% endfor %}\n",
    "{% for m in messages -%}\n  {{ m.role }}\n{%- endfor %}",
    "{%- macro f() -%}\n  m\n{%- endmacro -%}\n[{{ f() }}]",
    "a\n\n{% set x = 1 %}\n\nb",
    "{{ 'x' }}{# trailing #}\n",
    "\u00a0{% if t %}x{% endif %}",
    "{%- if t -%}\u2028 x \u2028{%- endif -%}",
]

LITERALS = [
    "{{ 'a\\nb\\tc\\\\d\\'e\\\"f' }}",
    "{{ \"\\x41\\u00e9\\U0001F600\\101\\q\" }}",
    "{{ 'multi\nline' }}",
    "{{ 'cont\\\ninued' }}",
    "{{ 'a' 'b' \"c\" }}",
    "{{ 1_000 }} {{ 0x1F }} {{ 0o17 }} {{ 0b101 }} {{ 1.5e3 }} {{ 2E-3 }} {{ 1_0.5 }}",
    "{{ true }} {{ True }} {{ false }} {{ none }} {{ None }}",
    "{{ [1, 'a', none, true, 1.5, [2], {'k': 'v'}] }}",
    "{{ (1,) }} {{ (1, 2) }} {{ () }} {{ {} }} {{ [] }}",
    "{{ {'a': 1, 'b': (2, 3)} }}",
    "{{ \"it's\" }} {{ ['it\\'s', 'say \"hi\"', 'both \\' \"'] }}",
    "{{ ['\\n\\t\\x01\\x7f\\u00a0\\u00e9\\u2028\\U0001F600'] }}",
    "{{ 1.0 }} {{ 0.1 }} {{ 1e16 }} {{ 1e15 }} {{ 1.5e-7 }} {{ 0.0001 }} {{ 0.00001 }} {{ 123456789.123456789 }}",
    "{{ -0.0 }} {{ 3.0 * 2 }} {{ 1 / 3 }} {{ 2 ** 0.5 }} {{ 10 / 4 }} {{ 1e300 * 1e10 }} {{ -1e300 * 1e10 }}",
    "{{ f }} {{ n }} {{ t }} {{ nothing }} {{ undefined_name }}|",
]

OPERATORS = [
    "{{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 % -3 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 7.5 // 2 }} {{ -7.5 % 2 }}",
    "{{ 1 + 2 * 3 - 4 / 2 }} {{ (1 + 2) * 3 }} {{ 2 ** 3 ** 2 }} {{ -2 ** 2 }} {{ - -3 }} {{ +4 }}",
    "{{ 'a' + 'b' }} {{ 'ab' * 3 }} {{ 3 * 'x' }} {{ [1] + [2, 3] }} {{ [0] * 3 }} {{ (1,) + (2,) }}",
    "{{ 'a' ~ 1 ~ none ~ true ~ 1.5 ~ [1] ~ undefined_name }}",
    "{{ true + 1 }} {{ true * 3 }} {{ 1 + 1.5 }} {{ 10 - 0.5 }}",
    "{{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ 1 == 1.0 }} {{ true == 1 }} {{ '1' == 1 }} {{ none == none }} {{ [1, 2] == [1, 2] }} {{ (1,) == [1] }}",
    "{{ 'a' < 'b' }} {{ 'B' < 'a' }} {{ 'é' > 'z' }} {{ [1, 2] < [1, 3] }} {{ [1] < [1, 0] }} {{ 2 >= 2.0 }} {{ 1 <= 0 }} {{ 1 != 2 }}",
    "{{ 'a' in 'cat' }} {{ '' in 'x' }} {{ 1 in [1, 2] }} {{ 'k' in {'k': 1} }} {{ 3 not in xs }} {{ 'x' in undefined_name }} {{ not 'a' in 'b' }}",
    "{{ 0 or 'x' }} {{ 1 and 'y' }} {{ '' and 'z' }} {{ none or none }} {{ [] or {} }} {{ not [] }} {{ not not 1 }}",
    "{{ 'yes' if t else 'no' }} {{ 'yes' if nothing else 'no' }} {{ 'a' if false }}|{{ 1 if 0 else 2 if 0 else 3 }}",
    "{{ n > 5 and n < 10 or false }} {{ not n > 5 }} {{ n is odd and not t }}",
    "{{ undefined_name == undefined_other }} {{ undefined_name != 1 }} {{ undefined_name is defined }}",
    "{{ d.a[1] }} {{ d['b'] }} {{ d.c.x }} {{ d.nope }}|{{ xs[0] }} {{ xs[-1] }} {{ xs[5] }}|{{ xs.0 }}",
    "{{ s[2:7] }}|{{ s[::-1] }}|{{ s[-6:] }}|{{ s[:3] }}|{{ xs[1:] }}|{{ xs[::2] }}|{{ xs[-2::-1] }}|{{ 'héllo'[1:3] }}|{{ 'abc'[10:] }}",
    "{{ messages[-1].content[-3:] }} {{ messages[0]['role'] }} {{ messages[2].tool_calls[0].function.name }}",
    "{{ 'a'[1, :] }}|{{ [1, 2][1, :] }}|{{ {'a': 1}[1:2] }}|{{ xs[1, 2] }}|{{ d[('a', 1)] }}",
]

FILTERS = [
    "{{ xs|length }} {{ s|length }} {{ d|length }} {{ 'héllo'|length }} {{ undefined_name|length }} {{ xs|count }}",
    "{{ s|trim }}|{{ 'xxaxx'|trim('x') }}|{{ s|upper }}|{{ s|lower }}|{{ s|title }}|{{ s|capitalize }}",
    "{{ \"they're x1y hello-world(x)[y]{z}<w>\"|title }}",
    "{{ s|replace('l', 'L') }}|{{ s|replace('l', 'L', 2) }}|{{ 'abc'|replace('', '-') }}|{{ 'aaa'|replace('a', 'b', 0) }}",
    "{{ xs|join(', ') }}|{{ words|join }}|{{ messages|join('|', attribute='role') }}|{{ [1, none, 'a']|join('-') }}",
    "{{ xs|first }} {{ xs|last }} {{ 'abc'|first }} {{ 'abc'|last }} {{ []|first }}| {{ d|first }} {{ d|last }}",
    "{{ undefined_name|default('dflt') }} {{ nothing|default('dflt') }} {{ ''|default('dflt', true) }} {{ 0|d(5, boolean=true) }} {{ xs|d }}",
    "{{ d|items|list }} {{ undefined_name|items|list }} {% for k, v in d|items %}{{ k }}={{ v }};{% endfor %}",
    "{{ xs|list }} {{ 'abc'|list }} {{ d|list }}",
    "{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|list }}",
    "{{ messages|rejectattr('role', 'in', ['system', 'tool'])|map(attribute='role')|join(',') }}",
    "{{ messages|selectattr('tool_calls', 'defined')|list|length }} {{ messages|selectattr('tool_calls')|list|length }} {{ messages|rejectattr('tool_calls')|list|length }}",
    "{{ xs|select('odd')|list }} {{ xs|reject('odd')|list }} {{ [0, 1, '', 'a', none]|select|list }} {{ xs|select('gt', 1)|list }} {{ xs|select('==', 2)|list }}",
    "{{ xs|map('string')|join('+') }} {{ words|map('upper')|list }} {{ messages|map(attribute='nope', default='?')|list }} {{ [d]|map(attribute='a.1')|list }}",
    "{{ nothing|selectattr('x')|list }} {{ none|map('upper')|list }} {{ ''|select|list }}",
    "{{ words|sort }} {{ words|sort(case_sensitive=true) }} {{ xs|sort(reverse=true) }} {{ messages|sort(attribute='role')|map(attribute='role')|list }}",
    "{{ d|dictsort }} {{ {'b': 2, 'A': 1, 'a': 0}|dictsort }} {{ {'b': 2, 'a': 1}|dictsort(by='value', reverse=true) }}",
    "{{ words|unique|list }} {{ words|unique(case_sensitive=true)|list }} {{ [1, 2, 1, 1.0, true]|unique|list }}",
    "{{ xs|min }} {{ xs|max }} {{ words|min }} {{ words|max }} {{ words|max(case_sensitive=true) }} {{ []|max }}|",
    "{{ xs|sum }} {{ [1.5, 2]|sum }} {{ xs|sum(start=10) }} {{ [{'v': 1}, {'v': 2}]|sum(attribute='v') }}",
    "{{ xs|reverse|list }} {{ 'abc'|reverse }} {{ -3|abs }} {{ -2.5|abs }} {{ '42'|int }} {{ ' -7 '|int }} {{ '4.7'|int }} {{ 'x'|int(3) }} {{ 4.9|int }} {{ '1.5'|float }} {{ 'x'|float }} {{ 3|float }}",
    "{{ 'a\\nb\\n\\nc'|indent }}|{{ 'a\\nb'|indent(2, true) }}|{{ 'a\\n\\nb\\n'|indent('> ', blank=true) }}|{{ ''|indent(first=true) }}",
    "{{ '<a href=\"x\">&\\'</a>'|e }} {{ 'x'|safe }} {{ 42|string }} {{ [1]|string }} {{ none|string }}",
    "{{ messages[2]|tojson }}",
    "{{ d|tojson }} {{ d|tojson(indent=2) }} {{ d|tojson(sort_keys=true) }} {{ d|tojson(separators=(',', ':')) }}",
    "{{ 'é \"q\" \\\\ \\n \\t \\x01 \\x7f \\u2028'|tojson }} {{ 'é🎉'|tojson(ensure_ascii=true) }} {{ [1.5, 1e20, -0.0, true, none]|tojson }}",
    "{{ {1: 'a', true: 'b', none: 'c', 2.5: 'd'}|tojson }} {{ (1, 2)|tojson }} {{ []|tojson(indent=4) }} {{ {'a': {}}|tojson(indent='\\t') }}",
    "{{ tools|tojson(indent=4) }}",
    "{{ xs|tojson(2) }} {{ 5|tojson }} {{ 'x'|tojson }}",
]

TESTS = [
    "{{ n is odd }} {{ n is even }} {{ n is divisibleby 7 }} {{ n is divisibleby(3) }} {{ 4.0 is even }}",
    "{{ xs is sequence }} {{ d is sequence }} {{ s is sequence }} {{ n is sequence }} {{ undefined_name is sequence }}",
    "{{ xs is iterable }} {{ d is iterable }} {{ n is iterable }} {{ undefined_name is iterable }} {{ nothing is iterable }}",
    "{{ d is mapping }} {{ xs is mapping }} {{ s is string }} {{ n is string }} {{ n is number }} {{ f is number }} {{ t is number }}",
    "{{ n is integer }} {{ t is integer }} {{ f is float }} {{ t is boolean }} {{ n is boolean }} {{ t is true }} {{ 1 is true }} {{ false is false }}",
    "{{ nothing is none }} {{ undefined_name is none }} {{ undefined_name is undefined }} {{ n is defined }} {{ nothing is defined }}",
    "{{ 'abc' is lower }} {{ 'aBc' is lower }} {{ 'ABC' is upper }} {{ '123' is upper }}",
    "{{ n is eq 7 }} {{ n is equalto(7) }} {{ n is ne 7 }} {{ n is lt 10 }} {{ n is gt 10 }} {{ n is ge 7 }} {{ n is le 6 }} {{ n is in xs }} {{ 2 is in xs }}",
    "{{ nothing is sameas none }} {{ t is sameas true }} {{ n is not none }} {{ undefined_name is not defined }}",
    "{{ range is callable }} {{ n is callable }} {{ xs.count is callable }}",
]

UNICODE = [
    "{{ 'ünïcødé ǆx ꭜ ⓐⓑ ı ſ µ'|upper }} {{ 'ÜNÏ ǅ Ⓐ ǈ'|lower }} {{ 'élan ǆemo-ⓐbc ǈj'|title }} {{ 'élan ǆemo ªb Ⓐb'.title() }} {{ 'ǆemo'.capitalize() }} {{ 'ÉLAN'|capitalize }}",
    "{{ 'ÉA'.isupper() }} {{ 'éa'.islower() }} {{ 'ǅ'.isupper() }} {{ 'ǅ'.islower() }} {{ 'ⓐ'.islower() }} {{ 'Ⓐ'.isupper() }} {{ 'ª'.islower() }} {{ '日本'.isupper() }} {{ 'é1'.isalpha() }} {{ 'élan'.isalpha() }} {{ 'é1'.isalnum() }}",
    "{{ 'ÉLAN' is upper }} {{ 'élan' is lower }} {{ '日本' is lower }}",
    "{{ ['\u00ad', '\u200b', '\ue000', '\u0378', '\U0001f600', '\u3000', '\u0600', 'é'] }}",
    "{{ '日本語 🎉'|upper }} {{ 'ΑΒΓ'|lower }} {{ 'αβγ'|upper }} {{ 'ПРИВЕТ мир'|title }}",
]

# What specdec refuses at run time (UNSUPPORTED naming it) where Python renders: case mappings of
# several characters or depending on context, printing generators, str % formatting.
RUNTIME_UNSUPPORTED = [
    ("{{ 'straße'|upper }}", "U+00DF"),
    ("{{ 'ΟΔΟΣ'|lower }}", "U+03A3"),
    ("{{ 'ﬁ'.title() }}", "U+FB01"),
    ("{{ xs|select('odd') }}", "printing a generator"),
    ("{{ 'a%sb' % 'x' }}", "formatting"),
    ("{{ '{}'.format(1) }}", "format"),
    ("{{ '²'.isdigit() }}", "isdigit"),
]

GENERATORS = [
    "{{ xs|select('odd') is iterable }} {{ xs|select('odd') is sequence }} {% if []|select %}truthy{% endif %} {% if none|map('upper') %}t2{% endif %}",
    "{% set g = xs|map('string') %}{{ g|list }} {{ g|list }} {{ xs|reverse|list }} {{ (xs|reverse)|first }}",
    "{% set g = xs|select %}{{ g|first }} {{ g|list }} {{ d.items()|length }} {{ range(4)|length }} {{ d.keys() is sequence }}",
    "{{ xs|map('string')|join(',') }} {{ 'b' in d.keys() }} {{ 2 in range(3) }} {{ xs|unique|list|length }} {{ d|items|list|length }}",
    "{{ xs|select('odd')|length }}",
    "{{ xs|select('odd')|tojson }}",
    "{{ xs|reverse|last }}",
    "{{ d.items()|tojson }}",
    "{{ range(3)|tojson }}",
    "{{ xs|select('odd') + [1] }}",
    "{{ xs|select('odd') == xs|select('odd') }} {{ (xs|map('string'))[0] }}|",
]

MARKUP = [
    "{{ '<b>'|safe + '<i>' }} {{ '<i>' + '<b>'|safe }} {{ 'a'|safe ~ '<c>' }} {{ ('<'|safe) * 2 }} {{ '<x>'|e }} {{ '<x>'|e|e }}",
    "{{ '\"q\" & x'|safe + '\"q\" & x' }} {{ \"it's\"|safe + \"it's\" }} {{ '<x>'|safe is escaped }} {{ 'x' is escaped }}",
    "{{ ('<b> '|safe + 'x')|upper }} {{ ' <b> '|safe|trim + '<' }} {{ ('<a>'|safe).upper() + '&' }} {{ '<a>'|safe|replace('a', 'b') + '<' }}",
    "{{ ['a'|safe] }} {{ ('a'|safe)|tojson }} {{ 'a'|safe == 'a' }} {{ 5|safe + '<' }} {{ 'x\ny'|safe|indent(2) + '<' }}",
    "{{ 'x'|safe + 5 }}",
]

METHODS = [
    "{{ s.strip() }}|{{ s.lstrip() }}|{{ s.rstrip() }}|{{ 'xxaxx'.strip('x') }}|{{ '\\u3000\\u00a0x\\u2028'.strip() }}|",
    "{{ s.split() }} {{ s.split(' ') }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ ' a b c '.split(None, 1) }} {{ 'a,b,c'.rsplit(',', 1) }} {{ ' a b c '.rsplit(None, 1) }}",
    "{{ s.startswith('  H') }} {{ s.endswith(('x', 's  ')) }} {{ 'abc'.startswith('') }} {{ s.replace(' ', '') }} {{ 'aaa'.replace('a', 'b', 2) }}",
    "{{ s.upper() }}|{{ s.lower() }}|{{ s.title() }}|{{ \"they're x1y\".title() }}|{{ s.capitalize() }}",
    "{{ s.find('o') }} {{ s.rfind('o') }} {{ s.find('zz') }} {{ 'aaa'.count('a') }} {{ 'héllo wörld'.find('w') }} {{ ', '.join(words) }}",
    "{{ 'a\\nb\\r\\nc\\n'.splitlines() }} {{ 'abc'.removeprefix('a') }} {{ 'abc'.removesuffix('c') }} {{ '12'.isdigit() }} {{ 'ab'.isalpha() }} {{ ' \\t'.isspace() }} {{ 'AB'.isupper() }}",
    "{{ d.items()|list }} {{ d.keys()|list }} {{ d.values()|list }} {{ d.get('b') }} {{ d.get('z') }} {{ d.get('z', 5) }}",
    "{% for k, v in d.items() %}{{ k }}:{{ v }} {% endfor %}{{ messages[0].get('role') }} {{ messages[0].get('tool_calls') }}",
    "{{ xs.index(2) }} {{ xs.count(1) }} {{ d.items is defined }} {{ messages[0].items is defined }}",
    "{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(5, 0, -2)|list }} {{ range(0)|list }}",
    "{% set ns = namespace(a=1, b=[]) %}{% set ns.a = ns.a + 1 %}{% set ns.b = ns.b + [ns.a] %}{{ ns.a }} {{ ns.b }} {{ ns }}",
    "{% set ns = namespace({'x': 1}, y=2) %}{{ ns.x }}{{ ns.y }}{{ ns.z }}|{{ dict(a=1, b=2) }} {{ dict([('a', 1)]) }} {{ dict(d, z=0)|length }}",
    "{{ strftime_now('%Y-%m-%d %H:%M:%S %a %A %b %B %d %e %-d %j %p %I %y %%') }}",
    "{{ strftime_now('%d %B %Y') }} {{ strftime_now('%b %d %Y') }} {{ strftime_now('%-m/%-d') }} {{ strftime_now('%D %F %T %R %u %w') }}",
]

STATEMENTS = [
    "{% set x = 0 %}{% for i in [1, 2] %}{{ x }}{% set x = i %}{{ x }}{% endfor %}|{{ x }}",
    "{% for i in [1, 2] %}{{ y }}{% set y = i %}{% endfor %}|{{ y }}",
    "{% set x = 5 %}{% if t %}{% set x = 6 %}{% endif %}{{ x }}",
    "{% for x in xs if x > 1 %}{{ loop.index }}/{{ loop.length }}/{{ loop.first }}/{{ loop.last }}/{{ loop.revindex }}/{{ loop.revindex0 }};{% else %}E{% endfor %}",
    "{% for x in [] %}x{% else %}empty{% endfor %} {% for x in undefined_name %}x{% else %}undef{% endfor %}",
    "{% for x in xs %}{{ loop.previtem }}-{{ loop.nextitem }}-{{ loop.cycle('a', 'b') }}-{{ loop.changed(x > 1) }};{% endfor %}",
    "{% for a, b in [[1, 2], (3, 4), 'xy'] %}{{ a }}{{ b }};{% endfor %}{% for k, v in d.items() %}{{ k }};{% endfor %}",
    "{% for x in xs %}{% if x == 1 %}{% continue %}{% endif %}{% if x == 2 %}{% break %}{% endif %}{{ x }}{% endfor %}",
    "{% for i in range(3) %}{% for j in range(i) %}{{ i }}{{ j }} {{ loop.index }}/{% endfor %}({{ loop.index }}){% endfor %}",
    "{% for c in 'héllo' %}[{{ c }}]{% endfor %} {% for k in d %}{{ k }}{% endfor %}",
    "{% set a, b = 1, 2 %}{{ a }}{{ b }} {% set c = 1, 2 %}{{ c }} {% set (e, g) = ['x', 'y'] %}{{ e }}{{ g }}",
    "{% set x %}block {{ n }}{% endset %}[{{ x }}] {% set y | upper %}up {{ n }}{% endset %}[{{ y }}]",
    "{% filter upper %}hello {{ s|trim }}{% endfilter %} {% filter trim|upper %}  x  {% endfilter %}",
    "{% macro m(a, b=2, c='z') %}{{ a }}{{ b }}{{ c }}{% endmacro %}{{ m(1) }} {{ m(1, 3) }} {{ m(1, c='q') }} {{ m(a=5, b=6) }}",
    "{% macro m(a) %}{{ a }}{{ varargs }}{{ kwargs }}{% endmacro %}{{ m(1) }} {{ m(1, 2, 3, x=4) }}",
    "{% macro outer(x) %}[{{ caller(x * 2) }}]{% endmacro %}{% call(v) outer(4) %}got {{ v }}{% endcall %}{% call outer(1) %}plain{% endcall %}",
    "{% macro f(n) %}{% if n > 0 %}{{ n }}{{ f(n - 1) }}{% endif %}{% endmacro %}{{ f(4) }}",
    "{% macro m() %}{{ z }}{% endmacro %}{% set z = 3 %}{{ m() }}{% set z = 4 %}{{ m() }}",
    "{% for i in [1, 2] %}{% macro m() %}{{ i }}{% endmacro %}{{ m() }}{% endfor %}",
    "{% macro tool(t) %}{{ t.function.name }}({{ t.function.parameters.properties|list|join(', ') }}){% endmacro %}{% for t in tools %}{{ tool(t) }}{% endfor %}",
    "{% set r = m if m is defined else 'none' %}{{ r }} {% if messages %}has{% endif %} {% if not undefined_name %}undef-falsy{% endif %}",
    "{% if n > 10 %}a{% elif n > 5 %}b{% elif n > 1 %}c{% else %}d{% endif %}",
    "{% print 'p' ~ n %} {% generation %}gen {{ n }}{% endgeneration %}",
    "{%- set loop_messages = messages[1:] if messages[0].role == 'system' else messages -%}{{ loop_messages|length }}",
]

ERRORS = [
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}",
    "before {{ raise_exception('custom: ' ~ n) }} after",
    "{{ undefined_name.attr }}",
    "{{ undefined_name['k'] }}",
    "{{ d.nope.deeper }}",
    "{{ 1 + 'a' }}",
    "{{ undefined_name + 1 }}",
    "{{ 1 / 0 }}",
    "{{ 5 % 0 }}",
    "{{ xs.append(4) }}",
    "{{ d.update({'z': 1}) }}",
    "{{ n() }}",
    "{{ undefined_name() }}",
    "{{ 'a' < 1 }}",
    "{{ 1 in 'abc' }}",
    "{% for a, b in [[1, 2, 3]] %}{% endfor %}",
    "{{ n|tojson }}{{ undefined_name|tojson }}",
    "{{ {'a': 1}|dictsort(by='x') }}",
    "{{ range(1000000) }}",
    "{{ ''.split('') }}",
    "{% set ns = 1 %}{% set ns.x = 2 %}",
    "{% macro m(a) %}{% endmacro %}{{ m(1, 2) }}",
    "{% macro m(a) %}{% endmacro %}{{ m(b=1) }}",
    "{{ {[1]: 2} }}",
    "{{ 'x'|int(base=16) if false else xs|first(1) }}",
]

# Constructs specdec refuses at load (the message must name them), whatever jinja2 does.
REFUSED = [
    ("{% include 'other.jinja' %}", "include"),
    ("{% extends 'base.jinja' %}", "extends"),
    ("{% import 'm.jinja' as m %}", "import"),
    ("{% from 'm.jinja' import f %}", "from"),
    ("{% block b %}x{% endblock %}", "block"),
    ("{% with a = 1 %}{{ a }}{% endwith %}", "with"),
    ("{% for x in xs recursive %}{{ loop(x) }}{% endfor %}", "recursive"),
    ("{{ xs|random }}", "random"),
    ("{{ 1.5|round }}", "round"),
    ("{{ xs|groupby('a') }}", "groupby"),
    ("{{ f(*xs) }}", "*args"),
    ("{{ cycler(1, 2) }}", "cycler"),
    ("{% if t %}unterminated", "unexpected end of template"),
    ("{{ 'unterminated }}", "unterminated string"),
    ("{% endfor %}", "endfor"),
    ("{{ '\\N{BULLET}' }}", "\\N"),
    ("{{ '\\x00' }}", "NUL"),
    ("{% break %}", "outside of a loop"),
    ("{{ 99999999999999999999 }}", "integer literal"),
]

SNIPPETS = [("whitespace", WHITESPACE), ("literals", LITERALS), ("operators", OPERATORS), ("filters", FILTERS),
            ("tests", TESTS), ("unicode", UNICODE), ("generators", GENERATORS), ("markup", MARKUP), ("methods", METHODS), ("statements", STATEMENTS), ("errors", ERRORS)]
