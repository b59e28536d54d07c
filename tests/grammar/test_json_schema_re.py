#!/usr/bin/env python3
"""test_json_schema_re.py — the regexes of core/sd_json_schema.h (through schema_probe) under
Python's re.fullmatch, the reference of the regex engine (core/sd_regex.h).

For each schema (pydantic-like models with $defs, lists, enums, optional and nullable fields,
numbers and integer ranges, formats, anyOf/oneOf, recursion, any values; choice lists; number
ranges, checked exactly on ~9k decimal texts per run against Python's Fraction):
  valid:    hand-written texts and >= 25 instances generated from the schema (fixed seed),
            serialised in the documented form (compact, at most one space after ':' and ','; the
            spaces drawn at random per position) must match, and jsonschema must call them valid;
  invalid:  hand-written texts and mutations (types swapped, keys dropped / added / reordered,
            enum values changed, array lengths changed, strings broken with raw control characters,
            bad escapes, quotes, truncation, trailing commas, extra whitespace): every text that
            does not parse or that jsonschema (Draft 2020-12, formats checked) calls invalid must
            not match; valid ones outside the documented form (indented text, hand-written extra
            keys or other key orders) must not match either; other valid mutations are not judged.
Zero mismatches required. Two planted mutants of the regexes must each give mismatches, so the
checks can fail."""
import argparse
import datetime
import json
import random
import re
import subprocess
import sys
import uuid
from fractions import Fraction

import jsonschema

SEED = 20260115
N_GEN = 25
N_MUT = 40


class Probe:
    def __init__(self, path):
        self.p = subprocess.Popen([path], stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def _ask(self, line):
        self.p.stdin.write(line.encode() + b"\n")
        self.p.stdin.flush()
        parts = self.p.stdout.readline().decode().split()
        dec = lambda h: "" if h == "-" else bytes.fromhex(h).decode("utf-8")
        if parts[0] == "ok":
            return 0, dec(parts[1])
        return int(parts[1]), dec(parts[2])

    def schema(self, s):
        text = s if isinstance(s, str) else json.dumps(s, ensure_ascii=False)
        b = text.encode()
        return self._ask("J " + (b.hex() or "-"))

    def choice(self, items):
        return self._ask("C " + " ".join(x.encode().hex() or "-" for x in items))

    def close(self):
        self.p.stdin.close()
        self.p.wait()


# ---- serialisation in the documented form --------------------------------------------------------

def ser(v, rng):
    """Compact JSON, raw UTF-8, an optional space after each ':' and ',' (drawn per position)."""
    sp = lambda: " " if rng.random() < 0.5 else ""
    if isinstance(v, dict):
        return "{" + ("," + sp()).join(json.dumps(k, ensure_ascii=False) + ":" + sp() + ser(x, rng)
                                       for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ("," + sp()).join(ser(x, rng) for x in v) + "]"
    return json.dumps(v, ensure_ascii=False)


# ---- format checks (RFC 3339 time / date-time done here: jsonschema needs an extra package) ------

def _rfc3339_time(t):
    m = re.fullmatch(r"(\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-](\d\d):(\d\d))", t, re.ASCII)
    if not m:
        return False
    h, mi, s = int(m.group(1)), int(m.group(2)), int(m.group(3))
    if h > 23 or mi > 59 or s > 59:
        return False
    return m.group(5) == "Z" or (int(m.group(6)) <= 23 and int(m.group(7)) <= 59)


def _rfc3339_datetime(t):
    if len(t) < 11 or t[10] != "T":
        return False
    try:
        datetime.date.fromisoformat(t[:10])
    except ValueError:
        return False
    return re.fullmatch(r"\d{4}-\d\d-\d\d", t[:10], re.ASCII) is not None and _rfc3339_time(t[11:])


FORMATS = jsonschema.FormatChecker(["date", "uuid", "email"])
FORMATS.checks("time")(lambda t: not isinstance(t, str) or _rfc3339_time(t))
FORMATS.checks("date-time")(lambda t: not isinstance(t, str) or _rfc3339_datetime(t))


def validator(schema):
    return jsonschema.Draft202012Validator(schema, format_checker=FORMATS)


# ---- instance generation ---------------------------------------------------------------------------

CHARS = list("abcxyz019 _-.*+?()[]{}|^$/") + ['"', "\\", "\n", "\t", "\x01", "\x7f", "é", "ü", "日", "本", "😀"]
PATTERN_GEN = {  # samples for the patterns used below
    "^[0-9]{5}$": lambda r: "".join(r.choice("0123456789") for _ in range(5)),
    "^(?:[A-Z]{2}|[0-9]{3})-[a-z]+$": lambda r: (
        "".join(r.choice("ABCXYZ") for _ in range(2)) if r.random() < 0.5 else
        "".join(r.choice("0123456789") for _ in range(3))) + "-" + "".join(
        r.choice("abcxyz") for _ in range(r.randint(1, 6))),
    "[a-f0-9]{2,4}(\\.[a-f0-9]+)*": lambda r: "".join(r.choice("abf09") for _ in range(r.randint(2, 4))) + "".join(
        "." + "".join(r.choice("a0f") for _ in range(r.randint(1, 3))) for _ in range(r.randint(0, 2))),
}


def gen_string(s, r):
    fmt = s.get("format")
    if fmt == "date":
        return gen_date(r)
    if fmt == "time":
        return gen_time(r)
    if fmt == "date-time":
        return gen_date(r) + "T" + gen_time(r)
    if fmt == "uuid":
        u = str(uuid.UUID(int=r.getrandbits(128)))
        return u.upper() if r.random() < 0.3 else u
    if fmt == "email":
        atom = lambda: "".join(r.choice("abcXYZ09!#$%&'*+/=?^_`{|}~-") for _ in range(r.randint(1, 6)))
        label = lambda: "".join(r.choice("abcxyz09") for _ in range(r.randint(1, 5)))
        return ".".join(atom() for _ in range(r.randint(1, 2))) + "@" + ".".join(label() for _ in range(r.randint(2, 3)))
    if "pattern" in s:
        return PATTERN_GEN[s["pattern"]](r)
    lo = s.get("minLength", 0)
    hi = s.get("maxLength", lo + 8)
    return "".join(r.choice(CHARS) for _ in range(r.randint(lo, hi)))


def gen_date(r):
    d = datetime.date.fromordinal(r.randint(1, datetime.date(9999, 12, 31).toordinal()))
    if r.random() < 0.15:  # a leap day
        y = r.choice([4, 400, 1600, 1996, 2000, 2024, 2400, 9996])
        d = datetime.date(y, 2, 29)
    return d.isoformat()


def gen_time(r):
    t = "%02d:%02d:%02d" % (r.randint(0, 23), r.randint(0, 59), r.randint(0, 59))
    if r.random() < 0.3:
        t += "." + str(r.randint(0, 999999))
    if r.random() < 0.4:
        return t + "Z"
    return t + "%s%02d:%02d" % (r.choice("+-"), r.randint(0, 23), r.randint(0, 59))


def gen_int(s, r):
    lo = s.get("minimum", -10**12)
    hi = s.get("maximum", 10**12)
    if "exclusiveMinimum" in s:
        lo = max(lo, int(s["exclusiveMinimum"]) + 1)
    if "exclusiveMaximum" in s:
        hi = min(hi, -(-s["exclusiveMaximum"] // 1) - 1)
    lo, hi = int(-(-lo // 1)), int(hi // 1)
    return r.choice([lo, hi, r.randint(lo, hi), r.randint(lo, min(hi, lo + 20))])


def gen_number(r):
    return r.choice([0, -1, 17, 0.5, -2.25, 1e-07, 3.14159, 1e+300, -123456789, r.uniform(-1e6, 1e6)])


def gen_any(r, d):
    kinds = ["s", "n", "b", "null"] + (["o", "a"] if d > 0 else [])
    k = r.choice(kinds)
    if k == "s":
        return gen_string({}, r)
    if k == "n":
        return gen_number(r)
    if k == "b":
        return r.random() < 0.5
    if k == "null":
        return None
    if k == "o":
        return {gen_string({"maxLength": 4}, r): gen_any(r, d - 1) for _ in range(r.randint(0, 3))}
    return [gen_any(r, d - 1) for _ in range(r.randint(0, 3))]


def resolve(root, ref):
    if ref == "#":
        return root
    _, kw, name = ref.split("/", 2)
    return root[kw][name.replace("~1", "/").replace("~0", "~")]


def gen(s, root, r, depth=0):
    if s is True or s == {} or (isinstance(s, dict) and not (set(s) - {"title", "description", "default"})):
        return gen_any(r, 3)
    if "$ref" in s:
        return gen(resolve(root, s["$ref"]), root, r, depth + 1)
    for kw in ("anyOf", "oneOf"):
        if kw in s:
            opts = s[kw]
            if depth >= 2:  # prefer branches that end the recursion
                opts = [o for o in opts if "$ref" not in json.dumps(o)] or opts
            return gen(r.choice(opts), root, r, depth + 1)
    if "allOf" in s:
        return gen(s["allOf"][0], root, r, depth + 1)
    if "const" in s:
        return s["const"]
    if "enum" in s:
        vals = [v for v in s["enum"] if "type" not in s or validator({"type": s["type"]}).is_valid(v)]
        return r.choice(vals)
    t = s.get("type")
    if isinstance(t, list):
        t = r.choice(t)
    if t is None:
        t = "object" if "properties" in s else "array" if "items" in s else "string"
    return GEN_TYPE[t](s, root, r, depth)


def gen_object(s, root, r, depth):
    if "properties" not in s:
        ap = s.get("additionalProperties", True)
        if ap is False:
            return {}
        if ap is True:
            return {gen_string({"maxLength": 5}, r): gen_any(r, 2) for _ in range(r.randint(0, 3))}
        return {gen_string({"maxLength": 5}, r): gen(ap, root, r, depth + 1) for _ in range(r.randint(0, 4))}
    out = {}
    req = set(s.get("required", []))
    for k, ps in s["properties"].items():
        p_opt = 0.5 if depth < 2 else 0.0
        if k in req or r.random() < p_opt:
            out[k] = gen(ps, root, r, depth + 1)
    return out


def gen_array(s, root, r, depth):
    pre = s.get("prefixItems", [])
    lo = s.get("minItems", 0)
    hi = s.get("maxItems", max(lo, len(pre)) + 3)
    if depth >= 2:
        hi = max(lo, len(pre))
    n = r.randint(max(lo, len(pre)), hi)
    out = [gen(p, root, r, depth + 1) for p in pre]
    if "items" in s and s["items"] is not False:
        out += [gen(s["items"], root, r, depth + 1) for _ in range(n - len(pre))]
    elif not pre:  # no items: any values, containers nested <= 2 (the array is the third)
        out += [gen_any(r, 2) for _ in range(n)]
    return out


GEN_TYPE = {
    "object": gen_object,
    "array": gen_array,
    "string": lambda s, root, r, d: gen_string(s, r),
    "integer": lambda s, root, r, d: gen_int(s, r),
    "number": lambda s, root, r, d: gen_number(r),
    "boolean": lambda s, root, r, d: r.random() < 0.5,
    "null": lambda s, root, r, d: None,
}


# ---- mutations ------------------------------------------------------------------------------------

def paths(v, pre=()):
    yield pre
    if isinstance(v, dict):
        for k, x in v.items():
            yield from paths(x, pre + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from paths(x, pre + (i,))


def get_at(v, path):
    for k in path:
        v = v[k]
    return v


def set_at(v, path, x):
    if not path:
        return x
    get_at(v, path[:-1])[path[-1]] = x
    return v


OTHER = [0, 1.5, "s", True, None, [], {}, [1], {"k": 1}, -7, "2024-01-01"]


def mutate_value(v, r):
    """A changed copy of v (kind, value)."""
    v = json.loads(json.dumps(v))
    ps = list(paths(v))
    p = r.choice(ps)
    x = get_at(v, p)
    k = r.randrange(6)
    if k == 0:
        return "type", set_at(v, p, r.choice([o for o in OTHER if type(o) is not type(x)]))
    if k == 1 and isinstance(x, dict) and x:
        del x[r.choice(list(x))]
        return "drop-key", v
    if k == 2 and isinstance(x, dict):
        x["zz_extra"] = r.choice(OTHER)
        return "extra-key", v
    if k == 3 and isinstance(x, dict) and len(x) > 1:
        return "reorder", set_at(v, p, dict(reversed(list(x.items()))))
    if k == 4 and isinstance(x, str):
        return "string", set_at(v, p, x + r.choice(["x", "!", "0", " "]))
    if k == 5 and isinstance(x, list):
        if x and r.random() < 0.5:
            x.pop()
        else:
            x.append(r.choice(OTHER))
        return "length", v
    return "type", set_at(v, p, r.choice([o for o in OTHER if o != x]))


def mutate_text(t, r):
    """A broken or re-spaced copy of text t (kind, text)."""
    k = r.randrange(7)
    q = [i for i, ch in enumerate(t) if ch == '"']
    if k == 0 and q:  # a raw control character inside a string
        i = r.choice(q)
        return "ctrl", t[:i + 1] + r.choice("\x00\x01\n\t\x1f") + t[i + 1:]
    if k == 1 and q:  # a bad escape
        i = r.choice(q)
        return "escape", t[:i + 1] + r.choice(["\\x41", "\\u12", "\\a", "\\'", "\\U0041"]) + t[i + 1:]
    if k == 2 and q:  # a quote removed or added
        i = r.choice(q)
        return "quote", t[:i] + t[i + 1:] if r.random() < 0.5 else t[:i] + '"' + t[i:]
    if k == 3 and len(t) > 1:
        return "truncate", t[:r.randrange(1, len(t))]
    if k == 4 and t[-1:] in "]}" and len(t) > 2 and t[-2] not in "[{":
        return "trailing-comma", t[:-1] + "," + t[-1]
    if k == 5:
        return "space", r.choice([" ", "\n", "  "]) + t if r.random() < 0.3 else t + r.choice([" ", "\n"])
    return "garbage", t + r.choice(["x", "0", "}", "]", ",1", "null"])


# ---- the schemas ----------------------------------------------------------------------------------

ADDRESS = {"type": "object", "title": "Address", "additionalProperties": False,
           "properties": {"street": {"type": "string", "maxLength": 20},
                          "city": {"type": "string", "minLength": 1, "maxLength": 12},
                          "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
           "required": ["street", "city", "zip"]}
PERSON = {"$defs": {"Address": ADDRESS}, "title": "Person", "type": "object", "additionalProperties": False,
          "properties": {"name": {"type": "string", "maxLength": 10, "title": "Name"},
                         "age": {"type": "integer", "minimum": 0, "maximum": 150},
                         "email": {"type": "string", "format": "email"},
                         "tags": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 4},
                         "address": {"$ref": "#/$defs/Address"},
                         "nickname": {"anyOf": [{"type": "string", "maxLength": 8}, {"type": "null"}], "default": None}},
          "required": ["name", "age", "address"]}
ORDER = {"$defs": {"Status": {"enum": ["new", "paid", "shipped"], "title": "Status", "type": "string"},
                   "Item": {"type": "object", "additionalProperties": False,
                            "properties": {"sku": {"type": "string", "pattern": "^(?:[A-Z]{2}|[0-9]{3})-[a-z]+$"},
                                           "qty": {"type": "integer", "minimum": 1, "maximum": 99},
                                           "price": {"type": "number"}},
                            "required": ["sku", "qty", "price"]}},
         "type": "object", "additionalProperties": False,
         "properties": {"id": {"type": "string", "format": "uuid"},
                        "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}, "minItems": 1, "maxItems": 3},
                        "created": {"type": "string", "format": "date-time"},
                        "status": {"$ref": "#/$defs/Status"},
                        "note": {"anyOf": [{"type": "string", "maxLength": 5}, {"type": "null"}]}},
         "required": ["id", "items", "created", "status"]}
PETS = {"$defs": {"Cat": {"type": "object", "additionalProperties": False,
                          "properties": {"pet_type": {"const": "cat"}, "meows": {"type": "integer"}},
                          "required": ["pet_type", "meows"]},
                  "Dog": {"type": "object", "additionalProperties": False,
                          "properties": {"pet_type": {"const": "dog"}, "barks": {"type": "number"}},
                          "required": ["pet_type", "barks"]}},
        "type": "object", "additionalProperties": False,
        "properties": {"pet": {"oneOf": [{"$ref": "#/$defs/Cat"}, {"$ref": "#/$defs/Dog"}],
                               "discriminator": {"propertyName": "pet_type"}}},
        "required": ["pet"]}
TREE = {"$ref": "#/$defs/Node",
        "$defs": {"Node": {"type": "object", "additionalProperties": False,
                           "properties": {"value": {"type": "integer"},
                                          "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}}},
                           "required": ["value", "children"]}}}
LINKED = {"type": "object", "additionalProperties": False,
          "properties": {"v": {"type": "boolean"}, "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
          "required": ["v", "next"]}
ENUM_META = ["a.b", "c|d", "(x)", "[y]", "z*", "ü", '"q"', "back\\slash", "{1}", "^$", "tab\there", ""]

# (name, schema, valid texts, invalid texts, valid-but-outside-the-form texts)
SCHEMAS = [
    ("person", PERSON,
     ['{"name":"Ann","age":30,"address":{"street":"Main 1","city":"Oslo","zip":"01234"}}',
      '{"name": "Bo", "age": 0, "email": "b.o@x.io", "tags": ["a", "b"], "address": {"street": "", "city": "Rome", '
      '"zip": "99999"}, "nickname": null}'],
     ['{"name":"Ann","age":30}', '{"name":"Ann","age":-1,"address":{"street":"s","city":"c","zip":"01234"}}',
      '{"name":"Ann","age":30,"address":{"street":"s","city":"c","zip":"0123"}}',
      '{"name":"Ann","age":"30","address":{"street":"s","city":"c","zip":"01234"}}'],
     ['{"age":30,"name":"Ann","address":{"street":"s","city":"c","zip":"01234"}}']),
    ("order", ORDER,
     ['{"id":"123e4567-e89b-12d3-a456-426614174000","items":[{"sku":"AB-x","qty":1,"price":9.5}],'
      '"created":"2024-02-29T23:59:59.5+01:00","status":"paid"}'],
     ['{"id":"123e4567-e89b-12d3-a456-426614174000","items":[],"created":"2024-02-29T23:59:59Z","status":"paid"}',
      '{"id":"123e4567-e89b-12d3-a456-426614174000","items":[{"sku":"AB-x","qty":1,"price":1}],'
      '"created":"2023-02-29T23:59:59Z","status":"paid"}',
      '{"id":"123e4567-e89b-12d3-a456-426614174000","items":[{"sku":"AB-x","qty":1,"price":1}],'
      '"created":"2024-02-28T24:00:00Z","status":"paid"}'],
     []),
    ("pets", PETS, ['{"pet":{"pet_type":"cat","meows":3}}', '{"pet": {"pet_type": "dog", "barks": 0.5}}'],
     ['{"pet":{"pet_type":"cat","barks":3}}', '{"pet":{"pet_type":"bird","meows":3}}'], []),
    ("tree", TREE, ['{"value":1,"children":[{"value":2,"children":[]}]}', '{"value":-5,"children":[]}'],
     ['{"value":1}', '{"value":1,"children":[{"value":"2","children":[]}]}'],
     ['{"value":1,"children":[{"value":2,"children":[{"value":3,"children":[{"value":4,"children":[]}]}]}]}']),
    ("linked", LINKED, ['{"v":true,"next":{"v":false,"next":null}}', '{"v":true,"next":null}'],
     ['{"v":true}', '{"v":1,"next":null}'], []),
    ("enum-meta", {"enum": ENUM_META}, [json.dumps(x, ensure_ascii=False) for x in ENUM_META],
     ['"ab"', '"c"', '"x"', '"z"', '"zz*"'], ['"\\u00fc"']),
    ("enum-mixed", {"enum": ["red", 1, None, True, 0.5, -3, 1e-07, [1, "a"], {"k": [None]}]},
     ['"red"', "1", "null", "true", "0.5", "-3", "1e-07", '[1,"a"]', '[1, "a"]', '{"k":[null]}'],
     ['"blue"', "2", "false", '[1,"b"]', '{"k":[]}'], ["1.0", "5e-1"]),
    ("enum-typed", {"type": "string", "enum": ["a", 1, "b", None]}, ['"a"', '"b"'], ["1", "null", '"c"'], []),
    ("const-object", {"const": {"a": [1, 2], "b": "x"}}, ['{"a":[1,2],"b":"x"}', '{"a": [1, 2], "b": "x"}'],
     ['{"a":[1,2]}', '{"a":[2,1],"b":"x"}'], ['{"b":"x","a":[1,2]}']),
    ("all-optional", {"type": "object", "additionalProperties": False,
                      "properties": {k: {"type": "integer"} for k in "abcde"}},
     ["{}", '{"a":1}', '{"e":5}', '{"b":2,"d":4}', '{"a":1,"b":2,"c":3,"d":4,"e":5}'],
     ['{"a":1,}', '{,"a":1}', '{"f":1}'], ['{"b":2,"a":1}']),
    ("mixed-required", {"type": "object", "additionalProperties": False,
                        "properties": {"a": {"type": "integer"}, "b": {"type": "string", "maxLength": 3},
                                       "c": {"type": "boolean"}, "d": {"type": "null"}},
                        "required": ["b", "d"]},
     ['{"b":"x","d":null}', '{"a":1,"b":"","c":true,"d":null}', '{"a":1,"b":"","d":null}'],
     ['{"a":1,"d":null}', '{"b":"x"}', '{"b":"xxxx","d":null}'], []),
    ("nullable-list", {"type": ["string", "null"], "maxLength": 4}, ['"abcd"', "null", '""', '"\\n\\u0041"'],
     ['"abcde"', "1", "nul"], []),
    ("numbers", {"type": "object", "additionalProperties": False,
                 "properties": {"x": {"type": "number"}, "y": {"type": "number"}}, "required": ["x", "y"]},
     ['{"x":0,"y":-0.5}', '{"x":1e10,"y":1E-3}', '{"x":-12.75e+2,"y":3}'],
     ['{"x":01,"y":1}', '{"x":1.,"y":1}', '{"x":.5,"y":1}', '{"x":1e,"y":1}', '{"x":NaN,"y":1}',
      '{"x":Infinity,"y":1}', '{"x":+1,"y":1}'], []),
    ("int-ranges", {"type": "object", "additionalProperties": False,
                    "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 255},
                                   "b": {"type": "integer", "minimum": -50, "maximum": 50},
                                   "c": {"type": "integer", "exclusiveMinimum": 0},
                                   "d": {"type": "integer", "maximum": -1000},
                                   "e": {"type": "integer", "minimum": 123456789, "exclusiveMaximum": 123457000.5},
                                   "f": {"type": "integer", "exclusiveMinimum": -7.5, "exclusiveMaximum": 7}},
                    "required": list("abcdef")},
     ['{"a":0,"b":-50,"c":1,"d":-1000,"e":123456789,"f":-7}', '{"a":255,"b":50,"c":99999999999,"d":-99999,'
      '"e":123457000,"f":6}'],
     ['{"a":256,"b":0,"c":1,"d":-1000,"e":123456789,"f":0}', '{"a":0,"b":-51,"c":1,"d":-1000,"e":123456789,"f":0}',
      '{"a":0,"b":0,"c":0,"d":-1000,"e":123456789,"f":0}', '{"a":0,"b":0,"c":1,"d":-999,"e":123456789,"f":0}',
      '{"a":0,"b":0,"c":1,"d":-1000,"e":123457001,"f":0}', '{"a":0,"b":0,"c":1,"d":-1000,"e":123456789,"f":7}',
      '{"a":0,"b":0,"c":1,"d":-1000,"e":123456789,"f":-8}', '{"a":00,"b":0,"c":1,"d":-1000,"e":123456789,"f":0}'],
     ['{"a":1.0,"b":0,"c":1,"d":-1000,"e":123456789,"f":0}', '{"a":-0,"b":0,"c":1,"d":-1000,"e":123456789,"f":0}']),
    ("dates", {"type": "object", "additionalProperties": False,
               "properties": {"d": {"type": "string", "format": "date"}, "t": {"type": "string", "format": "time"},
                              "dt": {"type": "string", "format": "date-time"}}, "required": ["d", "t", "dt"]},
     ['{"d":"2000-02-29","t":"00:00:00Z","dt":"0001-01-01T23:59:59.123456-23:59"}'],
     ['{"d":"1900-02-29","t":"00:00:00Z","dt":"2001-01-01T00:00:00Z"}',
      '{"d":"2001-04-31","t":"00:00:00Z","dt":"2001-01-01T00:00:00Z"}',
      '{"d":"2001-01-01","t":"24:00:00Z","dt":"2001-01-01T00:00:00Z"}',
      '{"d":"2001-01-01","t":"00:60:00Z","dt":"2001-01-01T00:00:00Z"}',
      '{"d":"2001-1-01","t":"00:00:00Z","dt":"2001-01-01T00:00:00Z"}',
      '{"d":"2001-01-01","t":"00:00:00+24:00","dt":"2001-01-01T00:00:00Z"}',
      '{"d":"2001-01-01","t":"00:00:00","dt":"2001-01-01T00:00:00Z"}'], []),
    ("array-bounds", {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4},
     ["[1,2]", "[1, 2, 3]", "[0,0,0,0]"], ["[]", "[1]", "[1,2,3,4,5]", "[1,2,]", '[1,"2"]'], ["[1 ,2]", "[ 1,2]"]),
    ("tuple", {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string", "maxLength": 2},
                                                {"type": "boolean"}], "minItems": 3, "maxItems": 3},
     ['[1,"ab",true]', '[-1, "", false]'], ['[1,"ab"]', '["ab",1,true]', '[1,"ab",true,1]'], []),
    ("tuple-extra", {"type": "array", "prefixItems": [{"const": "head"}], "items": {"type": "null"}, "maxItems": 3},
     ['["head"]', '["head",null]', '["head",null,null]'], ['["head",null,null,null]', '["head",1]', '["hea"]'], ['[]']),
    ("list-of-lists", {"type": "array", "items": {"type": "array", "items": {"type": "integer"}, "maxItems": 2}},
     ["[]", "[[]]", "[[1,2],[3]]"], ["[[1,2,3]]", "[1]", "[[[1]]]"], []),
    ("any", {}, ["1", '"x"', '{"a":[1,{"b":null}]}', "[]", "true", '{"a": {"b": {"c": 1}}}'],
     ["", "01", "[1,]", "{'a':1}"], ['{"a":{"b":{"c":{"d":1}}}}']),
    ("any-true", True, ["null", "[1,[2,[3]]]"], ["nul", "tru"], ["[[[[1]]]]"]),
    ("object-any", {"type": "object"}, ["{}", '{"a":1,"b":[true]}', '{"a":{"b":[1]}}'],
     ["[]", '{"a":}', '{"a" 1}', "1"], ['{"a":{"b":{"c":[1]}}}']),
    ("dict-int", {"type": "object", "additionalProperties": {"type": "integer"}},
     ["{}", '{"x":1}', '{"x":1,"é\\n":-2}'], ['{"x":"1"}', '{"x":1.5}'], []),
    ("string-lengths", {"type": "string", "minLength": 2, "maxLength": 5},
     ['"ab"', '"日本語"', '"😀😀"', '"a\\"b"', '"\\u0041\\u00e9c"', '"\\\\\\/"'],
     ['"a"', '"abcdef"', '"a\x01b"', '"a\\xb"', '"a"b"', '"\\u12g4"'], []),
    ("string-pattern", {"type": "string", "pattern": "[a-f0-9]{2,4}(\\.[a-f0-9]+)*"},
     ['"ab"', '"0f0f.a.b"'], ['"a"', '"g1"', '""'], ['"abcde"', '"ab."', '"xxab"']),
    ("uuids", {"type": "array", "items": {"type": "string", "format": "uuid"}, "maxItems": 2},
     ['["00000000-0000-0000-0000-000000000000"]', '["ABCDEF01-2345-6789-abcd-ef0123456789"]'],
     ['["00000000-0000-0000-0000-00000000000"]', '["0000000-00000-0000-0000-000000000000"]',
      '["g0000000-0000-0000-0000-000000000000"]', '["{00000000-0000-0000-0000-000000000000}"]'], []),
    ("email", {"type": "string", "format": "email"}, ['"a@b.co"', '"x.y+z@mail.example.org"'],
     ['"ab.co"', '""'], ['"a@localhost"', '"a b@c.d"', '"@b.co"', '"a@"']),
    ("meta-keys", {"type": "object", "additionalProperties": False,
                   "properties": {"a.b": {"type": "integer"}, "ü": {"type": "boolean"}, 'x"y': {"type": "null"},
                                  "$ref": {"type": "string", "maxLength": 1}, "(?:)": {"type": "integer"}},
                   "required": ["a.b", 'x"y']},
     ['{"a.b":1,"x\\"y":null}', '{"a.b":1,"ü":true,"x\\"y":null,"$ref":"r","(?:)":0}'],
     ['{"aXb":1,"x\\"y":null}', '{"a.b":1,"x"y":null}', '{"a.b":1}'], ['{"a.b":1,"\\u00fc":true,"x\\"y":null}']),
    ("allof-one", {"type": "object", "additionalProperties": False,
                   "properties": {"addr": {"allOf": [{"$ref": "#/definitions/A"}], "description": "d"}},
                   "required": ["addr"], "definitions": {"A": {"type": "integer", "maximum": 9, "minimum": 0}}},
     ['{"addr":5}', '{"addr":0}'], ['{"addr":10}', '{"addr":-1}', "{}"], []),
    ("bool-null", {"type": "array", "items": {"type": ["boolean", "null"]}}, ["[true,false,null]", "[]"],
     ['["true"]', "[0]", "[True]"], []),
]

CHOICES = [
    ["yes", "no"],
    [".*", "a|b", "(", ")", "[x]", "{1}", "^$", "\\", "+?", "ü", "日本", "😀", "", " ", "\n", "a\x01"],
    ["Paris", "paris", "Par", "Parisian"],
]



# ---- the checks -----------------------------------------------------------------------------------

def _no_constant(name):
    raise ValueError("not JSON: " + name)


def parses(t):
    """Strict JSON (Python's json also takes NaN and Infinity)."""
    try:
        return True, json.loads(t, parse_constant=_no_constant)
    except ValueError:
        return False, None


def is_valid(val, t):
    ok, v = parses(t)
    return ok and val.is_valid(v)


def check_schema(probe, name, schema, valid, invalid, outside, mutant, stats, out):
    st, rx = probe.schema(schema)
    if st:
        out.append("%s: refused (%d %s)" % (name, st, rx))
        return
    rx = mutant(rx)
    cre = re.compile(rx, re.DOTALL)
    val = validator(schema)
    r = random.Random("%d:%s" % (SEED, name))
    bad = lambda what, t: out.append("%s: %s %r" % (name, what, t[:200]))
    gen_texts = [ser(gen(schema, schema, r), r) for _ in range(N_GEN)]
    for t in valid + gen_texts:
        if not is_valid(val, t):
            bad("test error: listed/generated as valid but jsonschema disagrees:", t)
        elif not cre.fullmatch(t):
            bad("valid text does not match:", t)
        stats["valid"] += 1
    for t in invalid:
        if is_valid(val, t):
            bad("test error: listed as invalid but jsonschema disagrees:", t)
        elif cre.fullmatch(t):
            bad("invalid text matches:", t)
        stats["invalid"] += 1
    for t in outside:
        if not is_valid(val, t):
            bad("test error: listed as outside the form but invalid:", t)
        elif cre.fullmatch(t):
            bad("text outside the documented form matches:", t)
        stats["outside"] += 1
    for i in range(N_MUT):
        base = parses(gen_texts[i % N_GEN])[1]
        kind, t = mutate_text(gen_texts[i % N_GEN], r) if i % 2 else (lambda kv: (kv[0], ser(kv[1], r)))(mutate_value(base, r))
        judge(val, cre, t, kind, stats, lambda what: bad("mutation %s: %s" % (kind, what), t))
        indented = json.dumps(base, ensure_ascii=False, indent=1)
        if "\n" in indented:
            judge(val, cre, indented, "indent", stats, lambda what: bad("indented: " + what, indented), outside=True)
        spaced = json.dumps(base, ensure_ascii=False, separators=(",  ", ":  "))
        if spaced != json.dumps(base, ensure_ascii=False, separators=(",", ":")):
            judge(val, cre, spaced, "two spaces", stats, lambda what: bad("two spaces: " + what, spaced), outside=True)


def judge(val, cre, t, kind, stats, bad, outside=False):
    ok = is_valid(val, t)
    m = cre.fullmatch(t) is not None
    if not ok:
        stats["mutant-invalid"] += 1
        if m:
            bad("invalid text matches")
    elif outside:
        stats["outside"] += 1
        if m:
            bad("text outside the documented form matches")
    else:
        stats["mutant-valid-unjudged"] += 1
        stats["mutant-valid-matched"] += m


def check_choices(probe, items, mutant, stats, out):
    st, rx = probe.choice(items)
    if st:
        out.append("choice %r: refused (%d %s)" % (items, st, rx))
        return
    cre = re.compile(mutant(rx), re.DOTALL)
    for x in items:
        stats["valid"] += 1
        if not cre.fullmatch(x):
            out.append("choice %r does not match its regex %r" % (x, rx))
    others = {a + b for a in items for b in items if a and b} | {x[:-1] for x in items if x} | {x + "x" for x in items}
    for x in sorted(others - set(items)):
        stats["invalid"] += 1
        if cre.fullmatch(x):
            out.append("non-choice %r matches %r" % (x, rx))


# number ranges: every bound kind, signs, zero, fractions, ties of minimum / exclusiveMinimum
NUMBER_RANGES = [
    {"minimum": 0}, {"minimum": 0.5}, {"exclusiveMinimum": 0}, {"maximum": 0}, {"exclusiveMaximum": 0},
    {"minimum": -1.25, "maximum": 3.5}, {"exclusiveMinimum": -1.25, "exclusiveMaximum": 3.5},
    {"minimum": 0.1, "maximum": 0.1}, {"minimum": 0.105, "maximum": 0.12}, {"minimum": -0.001, "exclusiveMaximum": 0},
    {"minimum": 10, "maximum": 100.25}, {"exclusiveMinimum": 9.99, "maximum": 10}, {"maximum": -2.5},
    {"exclusiveMinimum": -3, "exclusiveMaximum": -2}, {"minimum": 1e-05, "maximum": 2e-05}, {"minimum": 0, "maximum": 0},
    {"minimum": 0.09, "exclusiveMinimum": 0.09}, {"minimum": 123456.789, "maximum": 123457},
    {"exclusiveMinimum": 0.5, "minimum": 0.2}, {"minimum": -1e15, "maximum": 1e15}, {"exclusiveMaximum": 0.3},
]


def number_in(t, b):
    v = Fraction(t)
    tests = {"minimum": v.__ge__, "exclusiveMinimum": v.__gt__, "maximum": v.__le__, "exclusiveMaximum": v.__lt__}
    return all(tests[k](Fraction(repr(x))) for k, x in b.items())


def number_texts(b, r):
    """Texts in the documented form -?(0|[1-9][0-9]*)(.[0-9]+)? around the bounds: the bounds'
    own digits mutated, extended and cut, and random small decimals; negative zeros left out."""
    base = {"0", "1", "-1", "0.5"}
    for x in b.values():
        t = repr(x)
        base |= {t, t.lstrip("-"), "-" + t.lstrip("-")}
    out = set()
    for t in sorted(base):
        out |= {t + "0", t + "1", t + "9", t + "00001", t + ".0", t + ".5"}
        for _ in range(60):
            u, i = list(t), r.randrange(len(t) + 1)
            op = r.randrange(3)
            if op == 0 and i < len(u) and u[i].isdigit():
                u[i] = r.choice("0123456789")
            elif op == 1:
                u.insert(i, r.choice("0123456789"))
            elif i < len(u) and u[i].isdigit():
                del u[i]
            out.add("".join(u))
    for _ in range(300):
        fr = "".join(r.choice("0123456789") for _ in range(r.randint(0, 5)))
        out.add(r.choice(["", "-"]) + str(r.choice([0, r.randint(0, 200)])) + ("." + fr if fr else ""))
    form = [t for t in out if re.fullmatch(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?", t)]
    return sorted(t for t in form if not (t.startswith("-") and Fraction(t) == 0))  # "-0": outside the form


def check_number_ranges(probe, mutant, stats, out):
    """Each range's regex must match exactly the texts of the documented form whose value is in the
    range (exact decimal comparison); exponents and "-0" are outside the form and must not match."""
    r = random.Random(SEED)
    for b in NUMBER_RANGES:
        st, rx = probe.schema(dict(type="number", **b))
        if st:
            out.append("number range %r refused (%d %s)" % (b, st, rx))
            continue
        cre = re.compile(mutant(rx))
        for t in number_texts(b, r):
            want = number_in(t, b)
            stats["valid" if want else "invalid"] += 1
            if (cre.fullmatch(t) is not None) != want:
                out.append("number range %r: %r %s" % (b, t, "does not match" if want else "matches"))
        for t in ("1e5", "1E-2", "-0", "-0.0", "+1", "01", "1."):
            stats["outside"] += 1
            if cre.fullmatch(t):
                out.append("number range %r: %r outside the form matches" % (b, t))


def run(probe, mutant=lambda rx: rx):
    stats = {k: 0 for k in ("valid", "invalid", "outside", "mutant-invalid", "mutant-valid-unjudged",
                            "mutant-valid-matched")}
    out = []
    for name, schema, valid, invalid, outside in SCHEMAS:
        check_schema(probe, name, schema, valid, invalid, outside, mutant, stats, out)
    for items in CHOICES:
        check_choices(probe, items, mutant, stats, out)
    check_number_ranges(probe, mutant, stats, out)
    return stats, out


# planted faults the checks must see: control characters allowed raw in strings; the optional
# space rule widened to any number of spaces; digits after an inclusive bound's last digit allowed
MUTANTS = {
    "raw-control-chars": lambda rx: rx.replace("\\x00-\\x1f", "\\x00"),
    "spaces": lambda rx: rx.replace("[ ]?", "[ ]*"),
    "number-bound-tail": lambda rx: rx.replace("(?:0+)?", "(?:[0-9]+)?"),
}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--probe", required=True)
    args = ap.parse_args()
    probe = Probe(args.probe)
    stats, out = run(probe)
    print("schemas %d, choice lists %d" % (len(SCHEMAS), len(CHOICES)))
    print("texts: " + ", ".join("%s %d" % kv for kv in stats.items()))
    for line in out[:40]:
        print("MISMATCH " + line)
    print("mismatches: %d" % len(out))
    fail = len(out) > 0 or len(SCHEMAS) < 25
    for name, m in MUTANTS.items():
        _, mo = run(probe, m)
        print("planted mutant %s: %d mismatches (must be > 0)" % (name, len(mo)))
        fail |= len(mo) == 0
    probe.close()
    return 1 if fail else 0


if __name__ == "__main__":
    sys.exit(main())
