/* sd_server_tools_xml.c — tool-call parsers for formats that are not a JSON object per call
 * (sd_server_tools.h): glm45 and qwen3_coder (arguments as tagged key / value text, converted by
 * the request's declared parameter types) and deepseek_v3 (special-token tags around JSON), and
 * the Python value conversions vLLM's parsers rely on (json.loads, ast.literal_eval, int(),
 * float(), json.dumps), checked against vLLM's code re-run in Python (tests/server/test_server_parse.c).
 *
 * glm45 (vLLM's vllm/tool_parsers/glm4_moe_tool_parser.py, GLM-4.5 / 4.6):
 *   <tool_call>NAME\n<arg_key>K</arg_key>\s*<arg_value>V</arg_value>...</tool_call>
 * Only closed blocks count; the name is the text before the block's first "\n", stripped (a block
 * without one is skipped); a value whose key the request's tool declares {"type": "string"} stays
 * the text as written, any other is stripped and read as json.loads, else ast.literal_eval, else
 * kept as the stripped text; the arguments are json.dumps(dict, ensure_ascii=False) (a repeated key:
 * the last value at the first key's place). Where vLLM's code raises (a tool schema whose
 * "properties" or property is not an object; a value json.dumps cannot write left in the
 * arguments: a set, bytes, a complex number) the whole output is content. Content is the text before the first <tool_call>,
 * null when only whitespace. */
#define _GNU_SOURCE /* memmem */
#include "sd_server_tools.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <cjson/cJSON.h>

/* ------------------------------------------------------------------------- */
/* Python text rules                                                          */
/* ------------------------------------------------------------------------- */
/* Bytes of the whitespace character (str.isspace) at s[0..n), 0 when there is none. */
static size_t sd_py_space(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    if (n == 0) return 0;
    if ((u[0] >= 0x09 && u[0] <= 0x0d) || (u[0] >= 0x1c && u[0] <= 0x20)) return 1;
    if (n >= 2 && u[0] == 0xc2 && (u[1] == 0x85 || u[1] == 0xa0)) return 2;
    if (n < 3) return 0;
    if (u[0] == 0xe1 && u[1] == 0x9a && u[2] == 0x80) return 3;                                  /* U+1680 */
    if (u[0] == 0xe2 && u[1] == 0x80 && (u[2] <= 0x8a || u[2] == 0xa8 || u[2] == 0xa9 || u[2] == 0xaf) &&
        u[2] >= 0x80)
        return 3;                                                                                 /* U+2000.. */
    if (u[0] == 0xe2 && u[1] == 0x81 && u[2] == 0x9f) return 3;                                  /* U+205F */
    if (u[0] == 0xe3 && u[1] == 0x80 && u[2] == 0x80) return 3;                                  /* U+3000 */
    return 0;
}

/* The last whitespace character ending at s[n) (its bytes), 0 when none. */
static size_t sd_py_space_back(const char *s, size_t n) {
    for (size_t k = 1; k <= 3 && k <= n; k++)
        if (sd_py_space(s + n - k, k) == k) return k;
    return 0;
}

/* str.strip(): s[*a..*b) without leading / trailing whitespace. */
static void sd_py_strip(const char *s, size_t *a, size_t *b) {
    for (size_t k; *a < *b && (k = sd_py_space(s + *a, *b - *a));) *a += k;
    for (size_t k; *b > *a && (k = sd_py_space_back(s + *a, *b - *a));) *b -= k;
}

static int sd_py_blank(const char *s, size_t n) {
    size_t a = 0, b = n;
    sd_py_strip(s, &a, &b);
    return a == b;
}

/* repr(float) as json.dumps writes it (NaN / Infinity / -Infinity for the specials). */
static void sd_py_float(sd_buf *b, double x) {
    if (isnan(x)) { sd_buf_puts(b, "NaN"); return; }
    if (isinf(x)) { sd_buf_puts(b, x > 0 ? "Infinity" : "-Infinity"); return; }
    if (x == 0) { sd_buf_puts(b, signbit(x) ? "-0.0" : "0.0"); return; }
    char e[40];
    for (int p = 1; p <= 17; p++) { /* the shortest digits that read back */
        snprintf(e, sizeof e, "%.*e", p - 1, x);
        if (strtod(e, NULL) == x) break;
    }
    char dig[24];
    int nd = 0;
    const char *q = e;
    if (*q == '-') sd_buf_puts(b, "-"), q++;
    for (; *q && *q != 'e'; q++)
        if (*q != '.') dig[nd++] = *q;
    while (nd > 1 && dig[nd - 1] == '0') nd--;
    const int decpt = atoi(q + 1) + 1; /* x = 0.DIGITS * 10^decpt */
    if (decpt <= -4 || decpt > 16) {   /* Python's repr switches to the exponent form here */
        sd_buf_append(b, dig, 1);
        if (nd > 1) sd_buf_puts(b, "."), sd_buf_append(b, dig + 1, (size_t)nd - 1);
        sd_buf_printf(b, "e%c%02d", decpt - 1 < 0 ? '-' : '+', abs(decpt - 1));
    } else if (decpt <= 0) {
        sd_buf_puts(b, "0.");
        for (int i = 0; i < -decpt; i++) sd_buf_puts(b, "0");
        sd_buf_append(b, dig, (size_t)nd);
    } else if (decpt >= nd) {
        sd_buf_append(b, dig, (size_t)nd);
        for (int i = nd; i < decpt; i++) sd_buf_puts(b, "0");
        sd_buf_puts(b, ".0");
    } else {
        sd_buf_append(b, dig, (size_t)decpt);
        sd_buf_puts(b, ".");
        sd_buf_append(b, dig + decpt, (size_t)(nd - decpt));
    }
}

/* UTF-8 of code point c (< 0x110000, no surrogate). */
static void sd_utf8(sd_buf *b, uint32_t c) {
    unsigned char u[4];
    size_t k;
    if (c < 0x80) u[0] = (unsigned char)c, k = 1;
    else if (c < 0x800) u[0] = (unsigned char)(0xc0 | c >> 6), u[1] = (unsigned char)(0x80 | (c & 63)), k = 2;
    else if (c < 0x10000)
        u[0] = (unsigned char)(0xe0 | c >> 12), u[1] = (unsigned char)(0x80 | (c >> 6 & 63)),
        u[2] = (unsigned char)(0x80 | (c & 63)), k = 3;
    else
        u[0] = (unsigned char)(0xf0 | c >> 18), u[1] = (unsigned char)(0x80 | (c >> 12 & 63)),
        u[2] = (unsigned char)(0x80 | (c >> 6 & 63)), u[3] = (unsigned char)(0x80 | (c & 63)), k = 4;
    sd_buf_append(b, u, k);
}

/* ------------------------------------------------------------------------- */
/* json.loads / ast.literal_eval, written back as json.dumps(ensure_ascii=False) */
/* ------------------------------------------------------------------------- */
/* json.loads and a subset of ast.literal_eval (strings with the common prefixes and escapes,
 * adjacent strings joined, ints in every base with "_", floats, True / False / None, lists, tuples,
 * dicts, a sign on a number): outside it the text counts as not a literal. */
/* Not a value here; a value; Python raises past the fallbacks; a value json.dumps will raise on (a
 * set, bytes, a complex number, an int over 4300 digits: an error only if it stays in the
 * arguments, a repeated key can replace it). */
enum { PV_FAIL = 0, PV_OK = 1, PV_EXC = -1, PV_UNSER = -2, PV_TERR = -3 }; /* TERR: a TypeError evaluating it
                                                                            (an unhashable key / set element) */
#define PV_MAX_DIGITS 4300                    /* Python's int <-> str conversion limit */
#define PV_JSON_DEPTH 900                     /* json.loads hits the recursion limit (RecursionError) */
#define PV_LIT_DEPTH 200                      /* the tokenizer's "too many nested parentheses" */

typedef struct sd_pv {
    const char *s;
    size_t n, i;
    int lit;   /* 0: json.loads, 1: ast.literal_eval */
    int depth;
    int value_error_caught; /* json.loads: the caller catches ValueError (an int of too many digits) */
    int type_error_caught;  /* literal_eval: the caller catches TypeError (an unhashable key) */
} sd_pv;

static int sd_pv_value(sd_pv *p, sd_buf *out);

static int sd_pv_idchar(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || (unsigned char)c >= 0x80; }

static void sd_pv_ws(sd_pv *p) {
    while (p->i < p->n) {
        const char c = p->s[p->i];
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || (p->lit && c == '\f')) p->i++;
        else if (p->lit && c == '\\' && p->i + 1 < p->n && p->s[p->i + 1] == '\n') p->i += 2; /* a continued line */
        else if (p->lit && c == '#') /* a comment, to the end of the line */
            while (p->i < p->n && p->s[p->i] != '\n') p->i++;
        else break;
    }
}

static int sd_pv_word(sd_pv *p, const char *w) {
    const size_t m = strlen(w);
    if (p->n - p->i < m || memcmp(p->s + p->i, w, m)) return 0;
    if (p->lit && p->i + m < p->n && sd_pv_idchar(p->s[p->i + m])) return 0;
    p->i += m;
    return 1;
}

static int sd_pv_hex(const char *s, int k, uint32_t *v) {
    *v = 0;
    for (int j = 0; j < k; j++) {
        const char c = s[j];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return 0;
        *v = *v * 16 + (uint32_t)d;
    }
    return 1;
}

/* A JSON string (Python's strict scanner) decoded into dec. */
static int sd_pv_json_str(sd_pv *p, sd_buf *dec) {
    p->i++;
    while (p->i < p->n) {
        const unsigned char c = (unsigned char)p->s[p->i++];
        if (c == '"') return PV_OK;
        if (c < 0x20) return PV_FAIL; /* "Invalid control character" */
        if (c != '\\') { sd_buf_append(dec, &c, 1); continue; }
        if (p->i >= p->n) return PV_FAIL;
        const char e = p->s[p->i++];
        const char *m = strchr("\"\\/bfnrt", e);
        if (e && m) { static const char to[] = "\"\\/\b\f\n\r\t"; sd_buf_append(dec, &to[m - "\"\\/bfnrt"], 1); continue; }
        uint32_t u, lo;
        if (e != 'u' || p->n - p->i < 4 || !sd_pv_hex(p->s + p->i, 4, &u)) return PV_FAIL;
        p->i += 4;
        if (u >= 0xd800 && u < 0xdc00 && p->n - p->i >= 6 && p->s[p->i] == '\\' && p->s[p->i + 1] == 'u' &&
            sd_pv_hex(p->s + p->i + 2, 4, &lo) && lo >= 0xdc00 && lo < 0xe000) {
            p->i += 6;
            u = 0x10000 + ((u - 0xd800) << 10) + (lo - 0xdc00);
        } else if (u >= 0xd800 && u < 0xe000) return PV_FAIL; /* a lone surrogate: not representable here */
        sd_utf8(dec, u);
    }
    return PV_FAIL;
}

/* Python string literals (one or several adjacent), decoded into dec. */
static int sd_pv_py_str(sd_pv *p, sd_buf *dec) {
    int any = 0, any_bytes = 0;
    for (;;) {
        size_t i = p->i;
        int raw = 0, bytes = 0;
        for (; i < p->n && strchr("rRuUbBfF", p->s[i]) && p->s[i]; i++) {
            const char c = p->s[i];
            raw |= c == 'r' || c == 'R';
            bytes |= c == 'b' || c == 'B';
            if (c == 'f' || c == 'F' || i - p->i >= 2) return PV_FAIL; /* f-strings are not literals */
        }
        if (i >= p->n || (p->s[i] != '\'' && p->s[i] != '"')) return !any ? PV_FAIL : any_bytes ? PV_UNSER : PV_OK;
        if (any && bytes != any_bytes) return PV_FAIL; /* bytes and str joined: a syntax error */
        any_bytes = bytes;
        const char q = p->s[i];
        const int triple = p->n - i >= 3 && p->s[i + 1] == q && p->s[i + 2] == q;
        i += triple ? 3 : 1;
        for (;;) {
            if (i >= p->n) return PV_FAIL;
            const char c = p->s[i];
            if (c == q && (!triple || (p->n - i >= 3 && p->s[i + 1] == q && p->s[i + 2] == q))) {
                i += triple ? 3 : 1;
                break;
            }
            if ((c == '\n' || c == '\r') && !triple) return PV_FAIL;
            if (c != '\\') { sd_buf_append(dec, &c, 1), i++; continue; }
            if (i + 1 >= p->n) return PV_FAIL;
            const char e = p->s[i + 1];
            if (raw) { sd_buf_append(dec, p->s + i, 2), i += 2; continue; } /* r'\'' keeps both */
            i += 2;
            const char *m = e ? strchr("\\'\"abfnrtv", e) : NULL;
            uint32_t u;
            if (e == '\n') continue;
            if (m) { static const char to[] = "\\'\"\a\b\f\n\r\t\v"; sd_buf_append(dec, &to[m - "\\'\"abfnrtv"], 1); continue; }
            if (e >= '0' && e <= '7') {
                u = (uint32_t)(e - '0');
                for (int k = 0; k < 2 && i < p->n && p->s[i] >= '0' && p->s[i] <= '7'; k++) u = u * 8 + (uint32_t)(p->s[i++] - '0');
                sd_utf8(dec, u);
                continue;
            }
            const int k = e == 'x' ? 2 : e == 'u' ? 4 : e == 'U' ? 8 : 0;
            if (e == 'N') return PV_FAIL; /* \N{name}: outside the subset */
            if (!k) { sd_buf_append(dec, p->s + i - 2, 2); continue; } /* unknown escapes stay as written */
            if (p->n - i < (size_t)k || !sd_pv_hex(p->s + i, k, &u) || u > 0x10ffff || (u >= 0xd800 && u < 0xe000))
                return PV_FAIL;
            i += (size_t)k;
            sd_utf8(dec, u);
        }
        p->i = i;
        any = 1;
        sd_pv_ws(p);
    }
}

/* Digits of base b (with single "_" between them in literals) from p->i: appended to dig (the
 * values 0..b-1 as chars), their count, or -1 on a misplaced "_". */
static long sd_pv_digits(sd_pv *p, int base, sd_buf *dig) {
    long k = 0;
    while (p->i < p->n) {
        char c = p->s[p->i];
        if (c == '_' && p->lit && k > 0 && p->i + 1 < p->n) {
            const char d = p->s[p->i + 1];
            const int ok = base == 16 ? ((d >= '0' && d <= '9') || (d >= 'a' && d <= 'f') || (d >= 'A' && d <= 'F'))
                                      : (d >= '0' && d < '0' + (base < 10 ? base : 10));
            if (!ok) return -1;
            p->i++;
            c = d;
        }
        int v = c >= '0' && c <= '9' ? c - '0' : base == 16 && c >= 'a' && c <= 'f' ? c - 'a' + 10
                : base == 16 && c >= 'A' && c <= 'F'                              ? c - 'A' + 10
                                                                                   : 99;
        if (v >= base) break;
        const char ch = (char)v;
        sd_buf_append(dig, &ch, 1);
        p->i++;
        k++;
    }
    return k;
}

/* A number token (no sign): int written as Python's str(int), float as repr. */
/* Digits dig[0..nd) of an integer in base 16, 8 or 2 written in decimal to out (a leading "-" when neg
 * and not 0): converted to decimal limbs (10^9 each, least significant first). */
static int sd_pv_based_int(const char *dig, long nd, int base, int neg, sd_buf *out) {
    const int bits = base == 16 ? 4 : base == 8 ? 3 : 1;
    if ((long)bits * nd > 14400) return PV_UNSER; /* over 4300 digits: json.dumps raises */
    uint32_t limb[1700];
    int nl = 1;
    limb[0] = 0;
    for (long k = 0; k < nd; k++) {
        uint64_t carry = (uint64_t)dig[k];
        for (int l = 0; l < nl; l++) {
            const uint64_t v = (uint64_t)limb[l] * (uint64_t)base + carry;
            limb[l] = (uint32_t)(v % 1000000000u);
            carry = v / 1000000000u;
        }
        if (carry) limb[nl++] = (uint32_t)carry;
    }
    sd_buf txt = {0};
    sd_buf_printf(&txt, "%u", limb[nl - 1]);
    for (int l = nl - 2; l >= 0; l--) sd_buf_printf(&txt, "%09u", limb[l]);
    int rc = PV_FAIL;
    if (!txt.oom && txt.p && txt.len > PV_MAX_DIGITS) rc = PV_UNSER;
    else if (!txt.oom && txt.p) {
        if (neg && strcmp(txt.p, "0")) sd_buf_puts(out, "-");
        sd_buf_puts(out, txt.p);
        rc = PV_OK;
    }
    sd_buf_free(&txt);
    return rc;
}

static int sd_pv_number(sd_pv *p, int neg, sd_buf *out) {
    sd_buf dig = {0}, txt = {0};
    int rc = PV_FAIL;
    const size_t start = p->i;
    int base = 10;
    if (p->lit && p->n - p->i >= 2 && p->s[p->i] == '0' && strchr("xXoObB", p->s[p->i + 1]) && p->s[p->i + 1]) {
        const char c = p->s[p->i + 1];
        base = c == 'x' || c == 'X' ? 16 : c == 'o' || c == 'O' ? 8 : 2;
        p->i += 2;
        if (p->i < p->n && p->s[p->i] == '_') p->i++; /* 0x_1f */
    }
    long nd = sd_pv_digits(p, base, &dig);
    int is_float = 0;
    if (base == 10 && p->i < p->n && p->s[p->i] == '.') {
        if (!p->lit && nd == 0) goto done;
        p->i++;
        sd_buf frac = {0};
        long nf = sd_pv_digits(p, 10, &frac);
        sd_buf_free(&frac);
        if (nf < 0 || (!p->lit && nf == 0) || (nd == 0 && nf == 0)) goto done;
        is_float = 1;
    } else if (nd <= 0) goto done;
    if (base == 10 && p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-')) p->i++;
        sd_buf ex = {0};
        long ne = sd_pv_digits(p, 10, &ex);
        sd_buf_free(&ex);
        if (ne <= 0) goto done;
        is_float = 1;
    }
    if (p->lit && p->i < p->n && (p->s[p->i] == 'j' || p->s[p->i] == 'J')) { /* complex */
        p->i++;
        rc = p->i < p->n && sd_pv_idchar(p->s[p->i]) ? PV_FAIL : PV_UNSER;
        goto done;
    }
    if (p->lit && p->i < p->n && sd_pv_idchar(p->s[p->i])) goto done; /* "1abc": a syntax error */
    if (!p->lit && nd > 1 && dig.p[0] == 0) goto done; /* JSON: no leading zeros */
    if (is_float) {
        for (size_t k = start; k < p->i; k++)
            if (p->s[k] != '_') sd_buf_append(&txt, p->s + k, 1);
        if (txt.oom || !txt.p) goto done;
        const double x = strtod(txt.p, NULL);
        sd_py_float(out, neg ? -x : x);
        rc = PV_OK;
        goto done;
    }
    if (base == 10) {
        long z = 0;
        while (z + 1 < nd && dig.p[z] == 0) z++;
        if (z > 0 && dig.p[z] != 0) goto done; /* "007": Python 3 refuses leading zeros ("000" is 0) */
        if (nd > PV_MAX_DIGITS) { rc = p->lit || p->value_error_caught ? PV_FAIL : PV_EXC; goto done; } /* a ValueError */
        if (neg && !(nd - z == 1 && dig.p[z] == 0)) sd_buf_puts(out, "-");
        for (long k = z; k < nd; k++) sd_buf_printf(out, "%c", '0' + dig.p[k]);
        rc = PV_OK;
        goto done;
    }
    rc = sd_pv_based_int(dig.p, nd, base, neg, out);
done:
    sd_buf_free(&dig);
    sd_buf_free(&txt);
    return rc;
}

/* One member of a dict being built: its json.dumps key and value. */
typedef struct sd_pv_member { char *k, *v; size_t kl, vl; int bad; /* json.dumps raises on v */ } sd_pv_member;

static void sd_pv_members_free(sd_pv_member *m, int n) {
    for (int i = 0; i < n; i++) free(m[i].k), free(m[i].v);
    free(m);
}

/* Add key / value (taken) to the members: a repeated key keeps its place and takes the new value. */
static int sd_pv_member_put(sd_pv_member **m, int *n, int *cap, sd_buf *k, sd_buf *v, int bad) {
    for (int i = 0; i < *n; i++)
        if ((*m)[i].kl == k->len && !memcmp((*m)[i].k, k->p, k->len)) {
            free((*m)[i].v);
            (*m)[i].v = v->p, (*m)[i].vl = v->len, (*m)[i].bad = bad;
            sd_buf_free(k);
            memset(v, 0, sizeof *v);
            return 1;
        }
    if (*n == *cap) {
        const int nc = *cap ? *cap * 2 : 8;
        sd_pv_member *g = realloc(*m, (size_t)nc * sizeof *g);
        if (!g) return 0;
        *m = g, *cap = nc;
    }
    (*m)[*n].k = k->p, (*m)[*n].kl = k->len, (*m)[*n].v = v->p, (*m)[*n].vl = v->len, (*m)[*n].bad = bad;
    (*n)++;
    memset(k, 0, sizeof *k);
    memset(v, 0, sizeof *v);
    return 1;
}

/* The members as json.dumps writes a dict: PV_OK, or PV_UNSER when a value it raises on is left. */
static int sd_pv_members_dump(sd_buf *out, const sd_pv_member *m, int n) {
    for (int i = 0; i < n; i++)
        if (m[i].bad) return PV_UNSER;
    sd_buf_puts(out, "{");
    for (int i = 0; i < n; i++) {
        if (i) sd_buf_puts(out, ", ");
        sd_buf_append(out, m[i].k, m[i].kl);
        sd_buf_puts(out, ": ");
        sd_buf_append(out, m[i].v ? m[i].v : "", m[i].vl);
    }
    sd_buf_puts(out, "}");
    return PV_OK;
}

/* One dict member "k: v" (lit: a set element when is_set, no colon) added to m, or a list / tuple
 * element to items (*unser set when json.dumps would raise on it). */
static int sd_pv_element(sd_pv *p, int dict_like, int *is_set, int first, sd_pv_member **m, int *nm, int *cap,
                         sd_buf *items, int *unser, int *terr) {
    sd_buf k = {0}, v = {0};
    sd_pv_ws(p);
    const int unhashable = p->lit && p->i < p->n && (p->s[p->i] == '[' || p->s[p->i] == '{'); /* a list, dict or set */
    const int krc = sd_pv_value(p, &k);
    int rc = krc == PV_UNSER || krc == PV_TERR ? PV_OK : krc;
    *terr |= krc == PV_TERR;
    if (rc == PV_OK && dict_like) {
        sd_pv_ws(p);
        const int colon = p->i < p->n && p->s[p->i] == ':';
        if (p->lit && ((first && !colon) || *is_set)) { /* a set (json.dumps raises once it is read) */
            *is_set = 1;
            *terr |= unhashable; /* TypeError building it */
        } else if (!colon) rc = PV_FAIL;
        else {
            p->i++;
            const int vrc = sd_pv_value(p, &v);
            int bad = vrc == PV_UNSER;
            rc = bad || vrc == PV_TERR ? PV_OK : vrc;
            *terr |= vrc == PV_TERR || unhashable; /* unhashable: TypeError building the dict */
            if (rc == PV_OK && !p->lit && k.p[0] != '"') rc = PV_FAIL; /* JSON keys are strings */
            else if (rc == PV_OK && unhashable) bad = 1;
            else if (rc == PV_OK && (krc == PV_UNSER || k.p[0] == '[')) bad = 1; /* a tuple / bytes key: json.dumps raises */
            else if (rc == PV_OK && k.p[0] != '"') { /* json.dumps writes int / float / bool / None keys as strings */
                sd_buf q = {0};
                sd_tools_pystr(&q, k.p, k.len);
                sd_buf_free(&k);
                k = q;
            }
            if (rc == PV_OK && (k.oom || v.oom || !sd_pv_member_put(m, nm, cap, &k, &v, bad))) rc = PV_EXC;
        }
    } else if (rc == PV_OK) {
        *unser |= krc == PV_UNSER;
        if (!first) sd_buf_puts(items, ", ");
        sd_buf_append(items, k.p, k.len);
    }
    sd_buf_free(&k);
    sd_buf_free(&v);
    return rc;
}

/* [...], (...) (lit) or {...}: elements separated by ","; a literal allows a trailing one; a
 * parenthesised single element without a comma is that element. */
static int sd_pv_container(sd_pv *p, char close, sd_buf *out) {
    if (++p->depth > (p->lit ? PV_LIT_DEPTH : PV_JSON_DEPTH)) return p->lit ? PV_FAIL : PV_EXC;
    p->i++;
    const int dict_like = close == '}';
    sd_pv_member *m = NULL;
    int nm = 0, cap = 0, rc = PV_OK, n_el = 0, comma = 0, is_set = 0, unser = 0, terr = 0;
    sd_buf items = {0};
    for (;;) {
        sd_pv_ws(p);
        if (p->i < p->n && p->s[p->i] == close && (n_el == 0 || p->lit)) { p->i++; break; } /* empty, or a trailing "," */
        rc = sd_pv_element(p, dict_like, &is_set, n_el == 0, &m, &nm, &cap, &items, &unser, &terr);
        if (rc != PV_OK) break;
        n_el++;
        sd_pv_ws(p);
        comma = p->i < p->n && p->s[p->i] == ',';
        if (comma) { p->i++; continue; }
        if (p->i < p->n && p->s[p->i] == close) { p->i++; break; }
        rc = PV_FAIL;
        break;
    }
    if (rc == PV_OK && items.oom) rc = PV_EXC;
    if (rc == PV_OK && terr) rc = PV_TERR;
    if (rc == PV_OK && (is_set || unser)) rc = PV_UNSER; /* a set, or an element json.dumps raises on */
    if (rc == PV_OK) {
        if (dict_like) rc = sd_pv_members_dump(out, m, nm);
        else if (close == ')' && n_el == 1 && !comma) sd_buf_append(out, items.p, items.len);
        else {
            sd_buf_puts(out, "[");
            sd_buf_append(out, items.p ? items.p : "", items.len);
            sd_buf_puts(out, "]");
        }
    }
    sd_pv_members_free(m, nm);
    sd_buf_free(&items);
    p->depth--;
    return rc;
}

static int sd_pv_value(sd_pv *p, sd_buf *out) {
    sd_pv_ws(p);
    if (p->i >= p->n) return PV_FAIL;
    const char c = p->s[p->i];
    if (c == '[') return sd_pv_container(p, ']', out);
    if (c == '{') return sd_pv_container(p, '}', out);
    if (c == '(' && p->lit) return sd_pv_container(p, ')', out);
    if (c == '"' || (p->lit && (c == '\'' || strchr("rRuUbBfF", c)))) {
        sd_buf dec = {0};
        int rc = p->lit ? sd_pv_py_str(p, &dec) : sd_pv_json_str(p, &dec);
        if (rc == PV_OK) sd_tools_pystr(out, dec.p ? dec.p : "", dec.len);
        if (dec.oom) rc = PV_EXC;
        sd_buf_free(&dec);
        if (rc != PV_FAIL || !p->lit || c == '"' || c == '\'') return rc;
    }
    if (!p->lit) {
        if (sd_pv_word(p, "true")) return sd_buf_puts(out, "true"), PV_OK;
        if (sd_pv_word(p, "false")) return sd_buf_puts(out, "false"), PV_OK;
        if (sd_pv_word(p, "null")) return sd_buf_puts(out, "null"), PV_OK;
        if (sd_pv_word(p, "NaN")) return sd_buf_puts(out, "NaN"), PV_OK;
        if (sd_pv_word(p, "Infinity")) return sd_buf_puts(out, "Infinity"), PV_OK;
        if (sd_pv_word(p, "-Infinity")) return sd_buf_puts(out, "-Infinity"), PV_OK;
    } else {
        if (sd_pv_word(p, "True")) return sd_buf_puts(out, "true"), PV_OK;
        if (sd_pv_word(p, "False")) return sd_buf_puts(out, "false"), PV_OK;
        if (sd_pv_word(p, "None")) return sd_buf_puts(out, "null"), PV_OK;
        if (sd_pv_word(p, "set")) { /* set(): literal_eval's one call, a set json.dumps raises on */
            sd_pv_ws(p);
            if (p->i >= p->n || p->s[p->i] != '(') return PV_FAIL;
            p->i++;
            sd_pv_ws(p);
            if (p->i >= p->n || p->s[p->i] != ')') return PV_FAIL;
            p->i++;
            return PV_UNSER;
        }
    }
    int neg = 0;
    if (c == '-' || (p->lit && c == '+')) {
        neg = c == '-';
        p->i++;
        if (p->lit) sd_pv_ws(p);
    }
    if (p->i < p->n && ((p->s[p->i] >= '0' && p->s[p->i] <= '9') || (p->lit && p->s[p->i] == '.')))
        return sd_pv_number(p, neg, out);
    return PV_FAIL;
}

/* s[0..n) read as json.loads (lit 0; 2: ValueError caught) or ast.literal_eval (lit 1; 3: TypeError
 * caught): the whole text one value. */
static int sd_pv_parse(const char *s, size_t n, int lit, sd_buf *out) {
    sd_pv p = {s, n, 0, lit == 1 || lit == 3, 0, lit == 2, lit == 3};
    size_t mark = out->len;
    int rc = sd_pv_value(&p, out);
    if (rc == PV_OK || rc == PV_UNSER || rc == PV_TERR) {
        sd_pv_ws(&p);
        if (p.i != n) rc = PV_FAIL;
    }
    if (rc == PV_TERR) rc = p.type_error_caught ? PV_FAIL : PV_EXC;
    if (rc == PV_OK && out->oom) rc = PV_EXC;
    if (rc != PV_OK && out->p) out->len = mark, out->p[mark] = '\0';
    return rc;
}

/* vLLM's _deserialize of a stripped value: json.loads, ast.literal_eval, else the text. */
static int sd_py_deserialize(const char *s, size_t n, sd_buf *out) {
    int rc = sd_pv_parse(s, n, 0, out);
    if (rc == PV_FAIL) rc = sd_pv_parse(s, n, 1, out);
    if (rc == PV_FAIL) sd_tools_pystr(out, s, n), rc = PV_OK;
    return rc;
}

/* ------------------------------------------------------------------------- */
/* the request's declared parameter types                                     */
/* ------------------------------------------------------------------------- */
static int sd_name_is(const char *have, const char *s, size_t n) { return strlen(have) == n && !memcmp(have, s, n); }

/* The tool named fn[0..fl) of the request's (normalised) tools: its "parameters", NULL when there is no
 * such tool or it has none (vLLM: parameters None). */
static const cJSON *sd_tool_params(const cJSON *tools, const char *fn, size_t fl) {
    for (const cJSON *t = cJSON_IsArray(tools) ? tools->child : NULL; t; t = t->next) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(t, "function");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(f, "name");
        if (cJSON_IsString(nm) && sd_name_is(nm->valuestring, fn, fl)) {
            const cJSON *par = cJSON_GetObjectItemCaseSensitive(f, "parameters");
            return cJSON_IsObject(par) ? par : NULL;
        }
    }
    return NULL;
}

/* vLLM's glm45 _is_string_type: parameters.get("properties", {}).get(key, {}).get("type") == "string".
 * 1 / 0, or PV_EXC where Python raises (a properties or property schema that is not an object). */
static int sd_glm_is_string(const cJSON *params, const char *k, size_t kl) {
    if (!params) return 0;
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(params, "properties");
    if (!props) return 0;
    if (!cJSON_IsObject(props)) return PV_EXC;
    for (const cJSON *x = props->child; x; x = x->next)
        if (sd_name_is(x->string, k, kl)) {
            if (!cJSON_IsObject(x)) return PV_EXC;
            const cJSON *ty = cJSON_GetObjectItemCaseSensitive(x, "type");
            return cJSON_IsString(ty) && !strcmp(ty->valuestring, "string");
        }
    return 0;
}

/* ------------------------------------------------------------------------- */
/* glm45                                                                      */
/* ------------------------------------------------------------------------- */
static const char GLM_OPEN[] = "<tool_call>", GLM_CLOSE[] = "</tool_call>";
#define GLM_LEN(tag) (sizeof tag - 1)
enum { GLM_SKIP = 0, GLM_CALL = 1, GLM_EXC = -1 };

/* The next <arg_key>K</arg_key>\s*<arg_value>V</arg_value> in a[*pos..n) as the regex finds it: from
 * the first <arg_key>, the key extended lazily to the first </arg_key> followed by \s*<arg_value>; with
 * no </arg_value> after that one, no later start can match either. 1 and the spans, or 0. */
static int sd_glm_pair(const char *a, size_t n, size_t *pos, size_t *k0, size_t *k1, size_t *v0, size_t *v1) {
    static const char ko[] = "<arg_key>", kc[] = "</arg_key>", vo[] = "<arg_value>", vc[] = "</arg_value>";
    const char *s = *pos < n ? sd_tools_find(a + *pos, n - *pos, ko) : NULL;
    if (!s) return 0;
    const size_t ks = (size_t)(s - a) + GLM_LEN(ko);
    for (const char *e = a + ks; (e = sd_tools_find(e, n - (size_t)(e - a), kc)); e++) {
        size_t j = (size_t)(e - a) + GLM_LEN(kc);
        for (size_t w; j < n && (w = sd_py_space(a + j, n - j));) j += w;
        if (n - j < GLM_LEN(vo) || memcmp(a + j, vo, GLM_LEN(vo))) continue;
        const char *ve = sd_tools_find(a + j + GLM_LEN(vo), n - j - GLM_LEN(vo), vc);
        if (!ve) return 0;
        *k0 = ks, *k1 = (size_t)(e - a), *v0 = j + GLM_LEN(vo), *v1 = (size_t)(ve - a);
        *pos = *v1 + GLM_LEN(vc);
        return 1;
    }
    return 0;
}

/* One closed block's inner text b[0..n) into c: GLM_CALL, GLM_SKIP (no "\n": vLLM skips it) or GLM_EXC. */
static int sd_glm_block(const sd_tool_out *o, const char *b, size_t n, sd_tool_call *c) {
    const char *nl = memchr(b, '\n', n);
    if (!nl) return GLM_SKIP;
    size_t f0 = 0, f1 = (size_t)(nl - b);
    sd_py_strip(b, &f0, &f1);
    const char *a = nl + 1;
    const size_t an = n - (size_t)(a - b);
    const cJSON *params = sd_tool_params(o->tools, b + f0, f1 - f0);
    sd_pv_member *m = NULL;
    int nm = 0, cap = 0, rc = GLM_CALL;
    size_t pos = 0, k0, k1, v0, v1;
    while (rc == GLM_CALL && sd_glm_pair(a, an, &pos, &k0, &k1, &v0, &v1)) {
        sd_py_strip(a, &k0, &k1);
        sd_buf k = {0}, v = {0};
        sd_tools_pystr(&k, a + k0, k1 - k0);
        const int str = sd_glm_is_string(params, a + k0, k1 - k0);
        int bad = PV_OK;
        if (str == PV_EXC) rc = GLM_EXC;
        else if (str) sd_tools_pystr(&v, a + v0, v1 - v0); /* as written, not stripped */
        else {
            sd_py_strip(a, &v0, &v1);
            bad = sd_py_deserialize(a + v0, v1 - v0, &v);
            if (bad == PV_EXC) rc = GLM_EXC;
        }
        if (rc == GLM_CALL && (k.oom || v.oom || !sd_pv_member_put(&m, &nm, &cap, &k, &v, bad == PV_UNSER))) rc = GLM_EXC;
        sd_buf_free(&k);
        sd_buf_free(&v);
    }
    sd_buf args = {0};
    if (rc == GLM_CALL && sd_pv_members_dump(&args, m, nm) != PV_OK) rc = GLM_EXC; /* json.dumps raises */
    sd_pv_members_free(m, nm);
    char *name = rc == GLM_CALL ? malloc(f1 - f0 + 1) : NULL;
    if (rc != GLM_CALL || !name || args.oom) {
        free(name);
        sd_buf_free(&args);
        return GLM_EXC;
    }
    memcpy(name, b + f0, f1 - f0);
    name[f1 - f0] = '\0';
    sd_tools_new_id(c->id, sizeof c->id, 0);
    c->name = name;
    c->args = args.p;
    return GLM_CALL;
}

int sd_tools_glm45_final(const sd_tool_out *o, const char *t, size_t n, sd_tool_result *r) {
    const char *first = sd_tools_find(t, n, GLM_OPEN);
    int nc = 0;
    for (const char *p = first, *s, *c; p && (s = sd_tools_find(p, n - (size_t)(p - t), GLM_OPEN)); p = c + GLM_LEN(GLM_CLOSE)) {
        s += GLM_LEN(GLM_OPEN);
        if (!(c = sd_tools_find(s, n - (size_t)(s - t), GLM_CLOSE))) break;
        sd_tool_call call;
        memset(&call, 0, sizeof call);
        const int rc = sd_glm_block(o, s, (size_t)(c - s), &call);
        if (rc == GLM_CALL && nc < SD_TOOLS_MAX_CALLS) r->calls[nc++] = call;
        else if (rc != GLM_SKIP) {
            sd_tools_calls_free(&call, rc == GLM_CALL);
            sd_tools_calls_free(r->calls, nc);
            return 0;
        }
    }
    r->n_calls = nc;
    if (!nc) return 0;
    r->content = t;
    r->content_len = (size_t)(first - t);
    if (sd_py_blank(t, r->content_len)) r->content = NULL, r->content_len = 0;
    return 1;
}

void sd_tools_glm45_feed(sd_tool_out *o, const char *t, size_t n, int final, sd_buf *out) {
    if (!o->in_block) { /* content, but a whitespace-only start is held (null content beside calls) */
        const char *s = sd_tools_find(t + o->elem, n - o->elem, GLM_OPEN);
        const size_t end = s ? (size_t)(s - t) : final ? n : n - sd_tools_partial(t, o->elem, n, GLM_OPEN);
        if (!o->plain && !sd_py_blank(t + o->elem, end - o->elem)) o->plain = 1; /* plain: text went out */
        if (o->plain || (final && !s)) {
            sd_tools_delta_content(out, t + o->pos, end - o->pos);
            o->pos = end;
        }
        o->elem = end;
        if (!s) return;
        o->in_block = 1;
        o->held = o->pos;
    }
    while (!o->esc) { /* esc: a block made vLLM raise before any call: the rest is content */
        const char *s = sd_tools_find(t + o->elem, n - o->elem, GLM_OPEN);
        if (!s) { /* text between blocks: held with the rest */
            o->elem = n - sd_tools_partial(t, o->elem, n, GLM_OPEN);
            break;
        }
        o->elem = (size_t)(s - t);
        const size_t from = o->scan > o->elem + GLM_LEN(GLM_OPEN) ? o->scan : o->elem + GLM_LEN(GLM_OPEN);
        const char *c = sd_tools_find(t + from, n - from, GLM_CLOSE);
        if (!c) { /* the block is read whole: the next search starts where this one could not match */
            o->scan = n - sd_tools_partial(t, from, n, GLM_CLOSE);
            break;
        }
        sd_tool_call call;
        memset(&call, 0, sizeof call);
        const int rc = sd_glm_block(o, s + GLM_LEN(GLM_OPEN), (size_t)(c - s) - GLM_LEN(GLM_OPEN), &call);
        if (rc == GLM_CALL && o->n_calls < SD_TOOLS_MAX_CALLS) sd_tools_delta_calls(o, &call, 1, out);
        else if (rc == GLM_CALL) sd_tools_calls_free(&call, 1);
        else if (rc == GLM_EXC && o->n_calls == 0) o->esc = 1;
        o->elem = (size_t)(c - t) + GLM_LEN(GLM_CLOSE);
        o->scan = 0;
    }
    if (final) {
        if (o->n_calls == 0) sd_tools_delta_content(out, t + o->held, n - o->held);
        o->pos = n;
    }
}

/* ------------------------------------------------------------------------- */
/* qwen3_coder                                                                */
/* ------------------------------------------------------------------------- */
/* vLLM's qwen3coder_tool_parser (Qwen3-Coder):
 *   <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n...</function>\n</tool_call>
 * Blocks are <tool_call>...</tool_call>, a last unclosed one running to the end (before a final
 * "\n"); with no <tool_call> at all the whole text is one block. In a block each
 * <function=...</function> (a last unclosed one: to the block's end) is a call: NAME up to its
 * first ">"; each <parameter=... runs to </parameter>, the next <parameter=, </function> or the
 * end, its name up to its first ">", its value after it less one leading and one trailing "\n".
 * Values by the declared type of the parameter (the tool's "properties", or its whole
 * "parameters" without them): "null" (any case) is null; undeclared or string-like types keep
 * the text; int* / uint* / long* / short* / unsigned* Python's int(); num* / float* float()
 * (integral values written as ints); boolean / bool / binary: "true" (any case) or false;
 * object / array / arr / dict* / list* json.loads, else ast.literal_eval; any other type
 * ast.literal_eval; what does not convert stays text. Content: the text before the first
 * <tool_call> (else the first <function=), null when empty. A function or parameter without ">"
 * (vLLM raises) makes the whole output content. */
static const char QC_FUNC[] = "<function=", QC_FUNC_END[] = "</function>", QC_PAR[] = "<parameter=",
                  QC_PAR_END[] = "</parameter>";

static int sd_at(const char *s, size_t i, size_t n, const char *tag) {
    const size_t m = strlen(tag);
    return n - i >= m && !memcmp(s + i, tag, m);
}

/* Python's int(text) in base 10: an optional sign, digits with single "_" between them, whitespace
 * around. Written in decimal; 0 when Python raises ValueError. */
static int sd_py_int(const char *s, size_t n, sd_buf *out) {
    size_t a = 0, b = n;
    sd_py_strip(s, &a, &b);
    int neg = 0;
    if (a < b && (s[a] == '+' || s[a] == '-')) neg = s[a++] == '-';
    sd_buf d = {0};
    for (size_t i = a; i < b; i++) {
        if (s[i] == '_' && i > a && i + 1 < b && s[i - 1] != '_' && s[i + 1] >= '0' && s[i + 1] <= '9') continue;
        if (s[i] < '0' || s[i] > '9') { sd_buf_free(&d); return 0; }
        if (d.len || s[i] != '0') sd_buf_append(&d, s + i, 1);
    }
    const int ok = b > a && d.len <= PV_MAX_DIGITS && !d.oom;
    if (ok) sd_buf_puts(out, d.len && neg ? "-" : ""), sd_buf_puts(out, d.len ? d.p : "0");
    sd_buf_free(&d);
    return ok;
}

/* Python's float(text) (sign, inf / infinity / nan, decimal with "_" between digits, whitespace
 * around), then vLLM's "an integral value as int": PV_OK, PV_FAIL (not a float, or NaN: int()
 * raises ValueError) or PV_EXC (infinite: int() raises OverflowError, which vLLM does not catch). */
static int sd_py_float_num(const char *s, size_t n, sd_buf *out) {
    size_t a = 0, b = n;
    sd_py_strip(s, &a, &b);
    char t[400];
    size_t k = 0;
    if (a < b && (s[a] == '+' || s[a] == '-')) t[k++] = s[a++];
    if (b - a == 3 && !strncasecmp(s + a, "nan", 3)) return PV_FAIL;
    if ((b - a == 3 && !strncasecmp(s + a, "inf", 3)) || (b - a == 8 && !strncasecmp(s + a, "infinity", 8))) return PV_EXC;
    int digits = 0, dot = 0, ex = 0;
    for (size_t i = a; i < b; i++) {
        const char c = s[i];
        const int dg = c >= '0' && c <= '9';
        if (c == '_' && i > a && i + 1 < b && s[i - 1] >= '0' && s[i - 1] <= '9' && s[i + 1] >= '0' && s[i + 1] <= '9') continue;
        if (dg) digits += !ex;
        else if (c == '.' && !dot && !ex) dot = 1;
        else if ((c == 'e' || c == 'E') && digits && !ex) {
            ex = 1;
            if (k + 2 >= sizeof t) return PV_FAIL;
            t[k++] = c;
            if (i + 1 < b && (s[i + 1] == '+' || s[i + 1] == '-')) t[k++] = s[++i];
            if (i + 1 >= b || s[i + 1] < '0' || s[i + 1] > '9') return PV_FAIL; /* digits must follow */
            continue;
        } else return PV_FAIL;
        if (k + 1 >= sizeof t) return PV_FAIL; /* longer than any float needs: refused, not cut */
        t[k++] = c;
    }
    t[k] = '\0';
    if (!digits) return PV_FAIL;
    const double x = strtod(t, NULL);
    if (isinf(x)) return PV_EXC;
    if (x != floor(x)) sd_py_float(out, x);
    else sd_buf_printf(out, "%.0f", x == 0 ? 0.0 : x); /* int(x): the double's exact integer */
    return PV_OK;
}

static int sd_ascii_ieq(const char *s, size_t n, const char *w) {
    return strlen(w) == n && !strncasecmp(s, w, n);
}

/* The declared type of parameter p[0..pl) (vLLM's str(type).strip().lower(); "string" when the
 * parameter's schema is not an object with "type"), into ty; 0, 1 when the parameter is not
 * declared, PV_EXC where vLLM raises (a "properties" that is not an object). */
static int sd_qc_type(const cJSON *config, const char *p, size_t pl, char *ty, size_t cap) {
    if (!config) return 1;
    const cJSON *x = NULL;
    if (cJSON_IsObject(config)) {
        for (const cJSON *c = config->child; c && !x; c = c->next)
            if (sd_name_is(c->string, p, pl)) x = c;
        if (!x) return 1;
    } else if (cJSON_IsArray(config)) { /* `name in list`, then list[name]: TypeError */
        for (const cJSON *c = config->child; c; c = c->next)
            if (cJSON_IsString(c) && sd_name_is(c->valuestring, p, pl)) return PV_EXC;
        return 1;
    } else if (cJSON_IsString(config)) { /* a substring test, then str[name]: TypeError */
        return memmem(config->valuestring, strlen(config->valuestring), p, pl) ? PV_EXC : 1;
    } else return PV_EXC; /* `in` on a number, a bool or None */
    const cJSON *t = cJSON_IsObject(x) ? cJSON_GetObjectItemCaseSensitive(x, "type") : NULL;
    if (!t) { snprintf(ty, cap, "string"); return 0; }
    if (!cJSON_IsString(t)) { snprintf(ty, cap, "?"); return 0; } /* str() of a non-string: no listed type */
    size_t a = 0, b = strlen(t->valuestring);
    sd_py_strip(t->valuestring, &a, &b);
    size_t k = 0;
    for (size_t i = a; i < b && k + 1 < cap; i++) {
        const char c = t->valuestring[i];
        ty[k++] = c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
    }
    ty[k] = '\0';
    return 0;
}

static int sd_starts(const char *s, const char *p) { return !strncmp(s, p, strlen(p)); }

/* vLLM's _convert_param_value, written as json.dumps writes the result. PV_OK or PV_EXC. */
static int sd_qc_value(const cJSON *config, const char *p, size_t pl, const char *v, size_t vl, sd_buf *out) {
    if (sd_ascii_ieq(v, vl, "null")) return sd_buf_puts(out, "null"), PV_OK;
    char ty[64];
    const int und = sd_qc_type(config, p, pl, ty, sizeof ty);
    if (und == PV_EXC) return PV_EXC;
    static const char *const strs[] = {"string", "str", "text", "varchar", "char", "enum"};
    int is_str = und == 1;
    for (size_t i = 0; i < sizeof strs / sizeof strs[0] && !is_str; i++) is_str = !strcmp(ty, strs[i]);
    int rc = PV_FAIL;
    if (is_str) rc = PV_FAIL;
    else if (sd_starts(ty, "int") || sd_starts(ty, "uint") || sd_starts(ty, "long") || sd_starts(ty, "short") ||
             sd_starts(ty, "unsigned"))
        rc = sd_py_int(v, vl, out) ? PV_OK : PV_FAIL;
    else if (sd_starts(ty, "num") || sd_starts(ty, "float")) rc = sd_py_float_num(v, vl, out);
    else if (!strcmp(ty, "boolean") || !strcmp(ty, "bool") || !strcmp(ty, "binary"))
        return sd_buf_puts(out, sd_ascii_ieq(v, vl, "true") ? "true" : "false"), PV_OK;
    else {
        const int container = !strcmp(ty, "object") || !strcmp(ty, "array") || !strcmp(ty, "arr") ||
                              sd_starts(ty, "dict") || sd_starts(ty, "list");
        if (container) rc = sd_pv_parse(v, vl, 2, out);
        if (rc == PV_FAIL) rc = sd_pv_parse(v, vl, 3, out);
    }
    if (rc == PV_FAIL) sd_tools_pystr(out, v, vl), rc = PV_OK; /* degenerates to the text */
    return rc;
}

/* The properties vLLM's _get_arguments_config gives for function fn[0..fl): NULL for {}. */
static const cJSON *sd_qc_config(const cJSON *tools, const char *fn, size_t fl) {
    const cJSON *par = sd_tool_params(tools, fn, fl);
    if (!par) return NULL;
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(par, "properties");
    return props ? props : par;
}

/* One function string f[0..n) (after "<function=") into c: GLM_CALL or GLM_EXC. */
static int sd_qc_function(const sd_tool_out *o, const char *f, size_t n, sd_tool_call *c) {
    const char *gt = memchr(f, '>', n);
    if (!gt) return GLM_EXC;
    const size_t nl = (size_t)(gt - f);
    const cJSON *config = sd_qc_config(o->tools, f, nl);
    const char *P = gt + 1;
    const size_t m = n - nl - 1;
    sd_pv_member *mem = NULL;
    int nm = 0, cap = 0, rc = GLM_CALL;
    for (size_t q = 0; rc == GLM_CALL;) {
        const char *s = q < m ? sd_tools_find(P + q, m - q, QC_PAR) : NULL;
        if (!s) break;
        const size_t v0 = (size_t)(s - P) + GLM_LEN(QC_PAR);
        size_t k = v0, end;
        for (;; k++) { /* the lazy group's first stop */
            if (sd_at(P, k, m, QC_PAR_END)) { end = k + GLM_LEN(QC_PAR_END); break; }
            if (sd_at(P, k, m, QC_PAR) || sd_at(P, k, m, QC_FUNC_END) || k == m || (k + 1 == m && P[k] == '\n')) {
                end = k;
                break;
            }
        }
        q = end;
        const char *pg = memchr(P + v0, '>', k - v0);
        if (!pg) { rc = GLM_EXC; break; }
        size_t a = (size_t)(pg - P) + 1, b = k;
        if (a < b && P[a] == '\n') a++;
        if (b > a && P[b - 1] == '\n') b--;
        sd_buf kb = {0}, vb = {0};
        sd_tools_pystr(&kb, P + v0, (size_t)(pg - P) - v0);
        const int vr = sd_qc_value(config, P + v0, (size_t)(pg - P) - v0, P + a, b - a, &vb);
        if (vr == PV_EXC) rc = GLM_EXC;
        if (rc == GLM_CALL && (kb.oom || vb.oom || !sd_pv_member_put(&mem, &nm, &cap, &kb, &vb, vr == PV_UNSER))) rc = GLM_EXC;
        sd_buf_free(&kb);
        sd_buf_free(&vb);
    }
    sd_buf args = {0};
    if (rc == GLM_CALL && sd_pv_members_dump(&args, mem, nm) != PV_OK) rc = GLM_EXC; /* json.dumps raises */
    sd_pv_members_free(mem, nm);
    char *name = rc == GLM_CALL ? malloc(nl + 1) : NULL;
    if (!name || args.oom) {
        free(name);
        sd_buf_free(&args);
        return GLM_EXC;
    }
    memcpy(name, f, nl);
    name[nl] = '\0';
    sd_tools_new_id(c->id, sizeof c->id, 0);
    c->name = name;
    c->args = args.p;
    return GLM_CALL;
}

/* The end of a whole-output parse: ok, the calls stay and the content is t[0..content_end) (none when
 * empty), 1; else the calls parsed so far are dropped, 0 (the whole output is content). */
static int sd_xml_result(sd_tool_result *r, int ok, const char *t, size_t content_end) {
    if (!ok) {
        sd_tools_calls_free(r->calls, r->n_calls);
        r->n_calls = 0;
        return 0;
    }
    r->content = content_end ? t : NULL;
    r->content_len = content_end;
    return 1;
}

/* The calls of block t[a..b) appended to r; 0 when vLLM would raise (or past the limit). */
static int sd_qc_block(const sd_tool_out *o, const char *t, size_t a, size_t b, sd_tool_result *r) {
    while (a < b) {
        const char *s = sd_tools_find(t + a, b - a, QC_FUNC);
        if (!s) break;
        const size_t f = (size_t)(s - t) + GLM_LEN(QC_FUNC);
        const char *e = sd_tools_find(t + f, b - f, QC_FUNC_END);
        const size_t fe = e ? (size_t)(e - t) : b; /* unclosed: to the block's end */
        sd_tool_call call;
        memset(&call, 0, sizeof call);
        if (r->n_calls >= SD_TOOLS_MAX_CALLS || sd_qc_function(o, t + f, fe - f, &call) != GLM_CALL) return 0;
        r->calls[r->n_calls++] = call;
        a = e ? fe + GLM_LEN(QC_FUNC_END) : b;
    }
    return 1;
}

int sd_tools_qwen3_coder_final(const sd_tool_out *o, const char *t, size_t n, sd_tool_result *r) {
    if (!sd_tools_find(t, n, QC_FUNC)) return 0;
    int any = 0, ok = 1;
    for (size_t p = 0; ok && p < n;) {
        const char *s = sd_tools_find(t + p, n - p, GLM_OPEN);
        if (!s) break;
        any = 1;
        const size_t a = (size_t)(s - t) + GLM_LEN(GLM_OPEN);
        const char *c = sd_tools_find(t + a, n - a, GLM_CLOSE);
        /* unclosed: the lazy group stops where "$" first matches, before a final "\n" */
        const size_t b = c ? (size_t)(c - t) : n > a && t[n - 1] == '\n' ? n - 1 : n;
        ok = sd_qc_block(o, t, a, b, r);
        p = c ? b + GLM_LEN(GLM_CLOSE) : n;
    }
    if (ok && !any) ok = sd_qc_block(o, t, 0, n, r);
    const char *s = sd_tools_find(t, n, GLM_OPEN);
    if (!s) s = sd_tools_find(t, n, QC_FUNC);
    return sd_xml_result(r, ok && r->n_calls > 0, t, (size_t)(s - t));
}

/* Streaming: content until a <tool_call> or <function= may have begun, then held and parsed at
 * the end (a later block can still turn the whole output into content). */
void sd_tools_qwen3_coder_feed(sd_tool_out *o, const char *t, size_t n, int final, sd_buf *out) {
    if (!o->in_block) {
        const char *s1 = sd_tools_find(t + o->pos, n - o->pos, GLM_OPEN), *s2 = sd_tools_find(t + o->pos, n - o->pos, QC_FUNC);
        const char *s = s1 && (!s2 || s1 < s2) ? s1 : s2;
        size_t end = s ? (size_t)(s - t) : n;
        if (!s && !final) {
            const size_t h1 = sd_tools_partial(t, o->pos, n, GLM_OPEN), h2 = sd_tools_partial(t, o->pos, n, QC_FUNC);
            end = n - (h1 > h2 ? h1 : h2);
        }
        sd_tools_delta_content(out, t + o->pos, end - o->pos);
        o->pos = end;
        if (!s) return;
        o->in_block = 1;
    }
    if (!final) return;
    sd_tool_result r;
    memset(&r, 0, sizeof r);
    if (sd_tools_qwen3_coder_final(o, t, n, &r)) {
        /* the whole answer's content may reach past where streaming stopped (a <function= before
           the first <tool_call>) */
        const size_t ce = r.content ? r.content_len : 0;
        if (ce > o->pos) sd_tools_delta_content(out, t + o->pos, ce - o->pos);
        sd_tools_delta_calls(o, r.calls, r.n_calls, out);
        r.n_calls = 0;
    } else sd_tools_delta_content(out, t + o->pos, n - o->pos);
    sd_tools_result_free(&r);
    o->pos = n;
}

/* ------------------------------------------------------------------------- */
/* deepseek_v3                                                                */
/* ------------------------------------------------------------------------- */
/* vLLM's deepseekv3_tool_parser (DeepSeek-V3 / R1-0528): after <｜tool▁calls▁begin｜>, every
 *   <｜tool▁call▁begin｜>TYPE<｜tool▁sep｜>NAME\n```json\nARGS\n```<｜tool▁call▁end｜>
 * with NAME and ARGS each one line (the regex has no DOTALL) is a call whose arguments are ARGS as
 * written; TYPE runs to the line's last separator and must be "function" (else vLLM's ToolCall
 * refuses it and the output is content). Content: the text before the calls' begin tag, null when
 * empty; a begin tag with no well-formed call still counts as called (vLLM's tools_called). */
#define DS_BAR "\xef\xbd\x9c" /* U+FF5C */
#define DS_SP "\xe2\x96\x81"  /* U+2581 */
static const char DS_CALLS[] = "<" DS_BAR "tool" DS_SP "calls" DS_SP "begin" DS_BAR ">",
                  DS_CALL[] = "<" DS_BAR "tool" DS_SP "call" DS_SP "begin" DS_BAR ">", DS_SEP[] = "<" DS_BAR "tool" DS_SP "sep" DS_BAR ">",
                  DS_END[] = "\n```<" DS_BAR "tool" DS_SP "call" DS_SP "end" DS_BAR ">", DS_JSON[] = "\n```json\n";

static char *sd_dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d) memcpy(d, s, n), d[n] = '\0';
    return d;
}

int sd_tools_deepseek_v3_final(const sd_tool_out *o, const char *t, size_t n, sd_tool_result *r) {
    (void)o;
    const char *calls = sd_tools_find(t, n, DS_CALLS);
    if (!calls) return 0;
    int ok = 1;
    for (size_t p = 0; ok && p < n;) {
        const char *b = sd_tools_find(t + p, n - p, DS_CALL);
        if (!b) break;
        const size_t i = (size_t)(b - t) + GLM_LEN(DS_CALL);
        const char *nl = memchr(t + i, '\n', n - i);
        const size_t le = nl ? (size_t)(nl - t) : n;
        /* the match is decided by this line and the next two: a failure here fails every later
           begin tag on the line too, so the search goes on from the line's end */
        const char *sep = NULL;
        for (const char *s = t + i; (s = sd_tools_find(s, le - (size_t)(s - t), DS_SEP)); s++) sep = s;
        const size_t a0 = le + GLM_LEN(DS_JSON);
        const char *nl2 = sep && sd_at(t, le, n, DS_JSON) ? memchr(t + a0, '\n', n - a0) : NULL;
        if (!nl2 || !sd_at(t, (size_t)(nl2 - t), n, DS_END)) {
            p = le > (size_t)(b - t) ? le : (size_t)(b - t) + 1;
            continue;
        }
        const size_t ae = (size_t)(nl2 - t), ns = (size_t)(sep - t) + GLM_LEN(DS_SEP);
        if ((size_t)(sep - t) - i != 8 || memcmp(t + i, "function", 8) || r->n_calls >= SD_TOOLS_MAX_CALLS) ok = 0;
        else {
            sd_tool_call *c = &r->calls[r->n_calls];
            c->name = sd_dup_n(t + ns, le - ns);
            c->args = sd_dup_n(t + a0, ae - a0);
            sd_tools_new_id(c->id, sizeof c->id, 0);
            r->n_calls++;
            ok = c->name && c->args;
        }
        p = ae + GLM_LEN(DS_END);
    }
    return sd_xml_result(r, ok, t, (size_t)(calls - t));
}

/* Streaming: content until the calls' begin tag may have begun, then held and parsed at the end. */
void sd_tools_deepseek_v3_feed(sd_tool_out *o, const char *t, size_t n, int final, sd_buf *out) {
    if (!o->in_block) {
        const char *s = sd_tools_find(t + o->pos, n - o->pos, DS_CALLS);
        const size_t end = s ? (size_t)(s - t) : final ? n : n - sd_tools_partial(t, o->pos, n, DS_CALLS);
        sd_tools_delta_content(out, t + o->pos, end - o->pos);
        o->pos = end;
        if (!s) return;
        o->in_block = 1;
    }
    if (!final) return;
    sd_tool_result r;
    memset(&r, 0, sizeof r);
    if (sd_tools_deepseek_v3_final(o, t, n, &r)) {
        sd_tools_delta_calls(o, r.calls, r.n_calls, out);
        r.n_calls = 0;
    } else sd_tools_delta_content(out, t + o->pos, n - o->pos);
    sd_tools_result_free(&r);
    o->pos = n;
}
