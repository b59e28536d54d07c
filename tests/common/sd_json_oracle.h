/* sd_json_oracle.h — the reference that tests core/sd_json_fsm.h against (header-only;
 * test_json_fsm_diff and fuzz_json_fsm use it): cJSON (core/sd_json.h sd_json_parse) for the
 * structure, plus a strict token scan of its own for what cJSON is lax or narrow about:
 *   - cJSON takes every byte <= 0x20 as whitespace, any bytes (control characters, ill-formed
 *     UTF-8) inside strings, numbers by strtod ("01", "1.", "1.e5", "-.5" pass) and at most 63
 *     number characters; the scan allows only " \t\n\r" in runs of at most SD_JSON_FSM_MAX_WS,
 *     none before or after the value, well-formed UTF-8 without bytes < 0x20 in strings, the RFC 8259
 *     number grammar with each digit run at most SD_JSON_FSM_MAX_DIGITS;
 *   - cJSON refuses unpaired escaped surrogates, which the automaton accepts by design, and
 *     numbers over 63 characters: the scan hands cJSON a copy with those escapes as \u0041 and
 *     those numbers as " 0 " (the scan has checked them already; the spaces keep a number next
 *     to it a separate token, as "6-66...6" is two numbers, not "60").
 * Then: the depth of cJSON's tree <= max_depth, and an object at the top for object_only.
 *
 * sd_jo_complete() writes the greedy completion of a prefix (finish the open token, give a key
 * its ':' and value, an open ',' or ':' its value, close the open containers): a prefix can be
 * completed to a text in the language iff its greedy completion is in it (see the comment
 * there), so viable(prefix) = sd_jo_accepts(complete(prefix)). */
#ifndef SD_JSON_ORACLE_H
#define SD_JSON_ORACLE_H

/* The most bytes sd_jo_complete() adds to a prefix. */
#define SD_JO_COMPLETE_EXTRA (2 * SD_JSON_FSM_MAX_DEPTH + 32)

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "sd_json.h"
#include "sd_json_fsm.h"

/* ------------------------------------------------------------------ strict token scan */

static inline int sd_jo_ws(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }
static inline int sd_jo_digit(uint8_t b) { return b >= '0' && b <= '9'; }
static inline int sd_jo_hexval(uint8_t b) {
    if (sd_jo_digit(b)) return b - '0';
    if (b >= 'a' && b <= 'f') return b - 'a' + 10;
    if (b >= 'A' && b <= 'F') return b - 'A' + 10;
    return -1;
}

/* Decodes one UTF-8 scalar value at t[i..n): its length, or 0 if ill-formed (overlong, a
 * surrogate, above U+10FFFF, truncated, a bad continuation). */
static inline size_t sd_jo_utf8(const uint8_t *t, size_t i, size_t n) {
    const uint8_t b = t[i];
    size_t len;
    uint32_t cp;
    if (b < 0x80) return 1;
    if ((b & 0xE0) == 0xC0) len = 2, cp = b & 0x1Fu;
    else if ((b & 0xF0) == 0xE0) len = 3, cp = b & 0x0Fu;
    else if ((b & 0xF8) == 0xF0) len = 4, cp = b & 0x07u;
    else return 0;
    if (i + len > n) return 0;
    for (size_t k = 1; k < len; k++) {
        if ((t[i + k] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (t[i + k] & 0x3Fu);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
    return len;
}

/* A string at t[i] == '"': its end (after the closing quote), or 0 if it is not a valid JSON
 * string. Escaped surrogates are rewritten to \u0041 in cj (the copy cJSON gets). */
static inline size_t sd_jo_string(const uint8_t *t, size_t i, size_t n, uint8_t *cj) {
    for (i++; i < n;) {
        const uint8_t b = t[i];
        if (b == '"') return i + 1;
        if (b < 0x20) return 0;
        if (b != '\\') {
            const size_t len = sd_jo_utf8(t, i, n);
            if (!len) return 0;
            i += len;
            continue;
        }
        if (i + 1 >= n) return 0;
        const uint8_t e = t[i + 1];
        if (e != 'u') {
            if (!strchr("\"\\/bfnrt", e) || e == 0) return 0;
            i += 2;
            continue;
        }
        if (i + 6 > n) return 0;
        int v = 0;
        for (int k = 0; k < 4; k++) {
            const int h = sd_jo_hexval(t[i + 2 + (size_t)k]);
            if (h < 0) return 0;
            v = v << 4 | h;
        }
        if (v >= 0xD800 && v <= 0xDFFF) memcpy(cj + i + 2, "0041", 4);
        i += 6;
    }
    return 0;
}

/* A run of digits at t[i]: its length (0 if none or longer than SD_JSON_FSM_MAX_DIGITS: *ok = 0). */
static inline size_t sd_jo_digits(const uint8_t *t, size_t i, size_t n, int *ok) {
    size_t k = 0;
    while (i + k < n && sd_jo_digit(t[i + k])) k++;
    if (k == 0 || k > SD_JSON_FSM_MAX_DIGITS) *ok = 0;
    return k;
}

/* A number at t[i] ('-' or a digit): its end, or 0 if it breaks the grammar or a digit bound. */
static inline size_t sd_jo_number(const uint8_t *t, size_t i, size_t n) {
    int ok = 1;
    if (t[i] == '-') i++;
    if (i < n && t[i] == '0') i++;
    else i += sd_jo_digits(t, i, n, &ok);
    if (ok && i < n && t[i] == '.') i += 1 + sd_jo_digits(t, i + 1, n, &ok);
    if (ok && i < n && (t[i] == 'e' || t[i] == 'E')) {
        i++;
        if (i < n && (t[i] == '+' || t[i] == '-')) i++;
        i += sd_jo_digits(t, i, n, &ok);
    }
    if (ok && i < n && sd_jo_digit(t[i])) ok = 0; /* "01", or a digit run past the bound */
    return ok ? i : 0;
}

/* The strict scan of t[0..n): 1 if every token and whitespace run is allowed (structure is
 * cJSON's job); cj (n + 1 bytes) receives the copy for cJSON, *cj_len its length. */
static inline int sd_jo_scan(const uint8_t *t, size_t n, uint8_t *cj, size_t *cj_len) {
    size_t i = 0, o = 0, ws = 0;
    memcpy(cj, t, n);
    while (i < n) {
        const uint8_t b = t[i];
        if (sd_jo_ws(b)) {
            if (i == 0 || ++ws > SD_JSON_FSM_MAX_WS) return 0; /* none before the top value */
            cj[o++] = b, i++;
            continue;
        }
        ws = 0;
        size_t end = 0;
        if (b == '"') {
            end = sd_jo_string(t, i, n, cj);
            if (end) memmove(cj + o, cj + i, end - i), o += end - i;
        } else if (b == '-' || sd_jo_digit(b)) {
            end = sd_jo_number(t, i, n);
            if (end && end - i > 60) memcpy(cj + o, " 0 ", 3), o += 3; /* spaced: "6" + long must not read "60" */
            else if (end) memmove(cj + o, t + i, end - i), o += end - i;
        } else if (strchr("{}[],:", b) && b) {
            end = i + 1, cj[o++] = b;
        } else {
            static const char *const lits[3] = {"true", "false", "null"};
            for (int k = 0; k < 3 && !end; k++) {
                const size_t len = strlen(lits[k]);
                if (n - i >= len && !memcmp(t + i, lits[k], len)) end = i + len;
            }
            if (end) memmove(cj + o, t + i, end - i), o += end - i;
        }
        if (!end) return 0;
        i = end;
    }
    *cj_len = o;
    return ws == 0 && n > 0; /* no whitespace after the value */
}

static inline int sd_jo_depth(const cJSON *v) {
    if (!cJSON_IsArray(v) && !cJSON_IsObject(v)) return 0;
    int d = 0;
    for (const cJSON *c = v->child; c; c = c->next) {
        const int k = sd_jo_depth(c);
        if (k > d) d = k;
    }
    return d + 1;
}

/* The cJSON side alone: 1 if sd_json_parse takes the cJSON copy, with *depth and *object. */
static inline int sd_jo_cjson(const uint8_t *cj, size_t len, int *depth, int *object) {
    cJSON *root = NULL;
    sd_errbuf eb;
    if (sd_json_parse((const char *)cj, len, "oracle", &root, &eb) != SPECDEC_OK) return 0;
    *depth = sd_jo_depth(root);
    *object = cJSON_IsObject(root);
    cJSON_Delete(root);
    return 1;
}

/* 1 if t[0..n) is in the automaton's language for (object_only, max_depth); -1 out of memory. */
static inline int sd_jo_accepts(const uint8_t *t, size_t n, int object_only, int max_depth) {
    uint8_t *cj = malloc(n + 1);
    if (!cj) return -1;
    size_t len = 0;
    int depth = 0, object = 0, ok = sd_jo_scan(t, n, cj, &len);
    ok = ok && sd_jo_cjson(cj, len, &depth, &object) && depth <= max_depth && (object || !object_only);
    free(cj);
    return ok;
}

/* ------------------------------------------------------------------ greedy completion */

/* Writes to out (room for n + SD_JO_COMPLETE_EXTRA bytes; returns the length) the prefix
 * t[0..n) followed by its greedy completion: the open token finished by the fewest bytes (a string:
 * the pending UTF-8 continuation bytes at the bottom of their allowed range, an escape 'n' or
 * hex '0's, then '"'; a number ending in '-', '.', 'e' or a sign: '0'; a literal: its rest),
 * then ":0" after a key, "0" after ':' or ',' in an array, "\"k\":0" after ',' in an object,
 * "{}" or "0" at the start, then the closing brackets. It is exact for viability: each step
 * adds no whitespace, no digit to a run that has one, no depth, and produces only what every
 * completion of a viable prefix must also be able to have there, so if the prefix has any
 * completion in the language this one is. A prefix that is not viable gets some text the
 * oracle refuses. */
static inline size_t sd_jo_complete(const uint8_t *t, size_t n, int object_only, uint8_t *out) {
    char stack[SD_JSON_FSM_MAX_DEPTH + 8];
    int depth = 0;
    char last = 0; /* the last structural token, 'k' a key string, 'v' a value, 0 none */
    size_t i = 0, o = 0;
    memcpy(out, t, n);
    o = n;
    while (i < n) {
        const uint8_t b = t[i];
        if (sd_jo_ws(b)) {
            i++;
        } else if (b == '"') {
            const int key = depth > 0 && stack[depth - 1] == '{' && (last == '{' || last == ',');
            size_t j = i + 1, need = 0;
            uint8_t first_lo = 0x80;
            int esc = 0, hex = -1;
            for (; j < n && (t[j] != '"' || esc || hex >= 0); j++) {
                const uint8_t c = t[j];
                if (hex >= 0) hex = hex == 3 ? -1 : hex + 1;
                else if (esc) esc = 0, hex = c == 'u' ? 0 : -1;
                else if (need) need--, first_lo = 0x80;
                else if (c == '\\') esc = 1;
                else if (c >= 0xC0) {
                    need = c >= 0xF0 ? 3 : c >= 0xE0 ? 2 : 1;
                    first_lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
                }
            }
            if (j >= n) { /* open at the end */
                if (esc) out[o++] = 'n';
                for (; hex >= 0 && hex < 4; hex++) out[o++] = '0';
                for (; need; need--, first_lo = 0x80) out[o++] = first_lo;
                out[o++] = '"';
            }
            last = key ? 'k' : 'v';
            i = j + 1;
        } else if (b == '-' || sd_jo_digit(b)) {
            size_t j = i;
            while (j < n && (sd_jo_digit(t[j]) || strchr("+-.eE", t[j]))) j++;
            if (j == n && strchr("+-.eE", t[n - 1])) out[o++] = '0';
            last = 'v';
            i = j;
        } else if (b >= 'a' && b <= 'z') {
            size_t j = i;
            while (j < n && t[j] >= 'a' && t[j] <= 'z') j++;
            static const char *const lits[3] = {"true", "false", "null"};
            for (int k = 0; k < 3 && j == n; k++) {
                const size_t len = strlen(lits[k]);
                if (j - i < len && !memcmp(t + i, lits[k], j - i)) {
                    memcpy(out + o, lits[k] + (j - i), len - (j - i));
                    o += len - (j - i);
                    break;
                }
            }
            last = 'v';
            i = j;
        } else {
            if ((b == '{' || b == '[') && depth < (int)sizeof stack) stack[depth++] = (char)b;
            else if ((b == '}' || b == ']') && depth > 0) depth--;
            last = (b == '}' || b == ']') ? 'v' : (char)b;
            i++;
        }
    }
    const int in_obj = depth > 0 && stack[depth - 1] == '{';
    if (last == 0) {
        memcpy(out + o, object_only ? "{}" : "0", object_only ? 2 : 1);
        o += object_only ? 2 : 1;
    } else if (last == 'k') {
        out[o++] = ':', out[o++] = '0';
    } else if (last == ':' || (last == ',' && !in_obj)) {
        out[o++] = '0';
    } else if (last == ',') {
        memcpy(out + o, "\"k\":0", 5);
        o += 5;
    }
    while (depth > 0) out[o++] = stack[--depth] == '{' ? '}' : ']';
    return o;
}

#endif
