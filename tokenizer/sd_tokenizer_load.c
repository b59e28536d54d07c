/* sd_tokenizer_load.c — tokenizer.json (+ tokenizer_config.json) -> specdec_tokenizer.
 *
 * Validates everything it reads: wrong types, missing keys, ids out of range, merges
 * naming tokens absent from the vocabulary, unknown component types. Every failure
 * names the file, the key and the offending value. Model types other than BPE are
 * refused with SPECDEC_ERR_UNSUPPORTED. "truncation" and "padding" are ignored:
 * specdec encodes prompts, whose length limit is the engine's context. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

#include "sd_alloc.h"
#include "sd_chat_template.h"
#include "sd_gguf_tokenizer.h"
#include "sd_grammar.h"
#include "sd_tokenizer.h"

void sd_tok_merge_put(sd_tok_mergemap *m, int32_t a, int32_t b, int32_t rank, int32_t id);

typedef struct sd_tok_ld {
    const char *what; /* file name for messages */
    int nul_masked;   /* "\\u0000" escapes were rewritten to U+F0000 before parsing */
    specdec_tokenizer *tok;
    sd_tok_work w;
} sd_tok_ld;

#define LD_FAIL(ld, st, ...) sd_fail(NULL, st, __VA_ARGS__)

static const char *sd_tok_jtype(const cJSON *j) {
    if (!j) return "missing";
    if (cJSON_IsString(j)) return "a string";
    if (cJSON_IsNumber(j)) return "a number";
    if (cJSON_IsBool(j)) return "a boolean";
    if (cJSON_IsNull(j)) return "null";
    if (cJSON_IsArray(j)) return "an array";
    if (cJSON_IsObject(j)) return "an object";
    return "invalid";
}

static char *sd_tok_dupn(const char *s, size_t n) {
    char *p = sd_malloc(n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

/* cJSON strings are NUL-terminated, so a vocabulary entry "\u0000" would be cut off.
 * Before parsing, such escapes are rewritten to U+F0000 (a private-use character the
 * file is checked not to contain); this turns them back into NUL bytes in place and
 * returns the real length. */
static size_t sd_tok_unnul(const sd_tok_ld *ld, char *s) {
    size_t n = strlen(s);
    if (!ld->nul_masked) return n;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (i + 4 <= n && !memcmp(s + i, "\xF3\xB0\x80\x80", 4)) { s[o++] = '\0'; i += 4; }
        else s[o++] = s[i++];
    }
    if (o < n) s[o] = '\0';
    return o;
}

/* Rewrite \u0000 escapes (see sd_tok_unnul). Returns a new buffer or NULL when none
 * are present (*err set on OOM / conflict). */
static char *sd_tok_mask_nul(const char *json, size_t len, size_t *out_len, int *err) {
    size_t hits = 0;
    *err = 0;
    for (size_t i = 0; i + 1 < len; i++) {
        if (json[i] != '\\') continue;
        if (json[i + 1] == 'u' && i + 6 <= len && !memcmp(json + i + 2, "0000", 4)) hits++;
        i++; /* skip the escaped character */
    }
    if (!hits) return NULL;
    for (size_t i = 0; i + 4 <= len; i++)
        if (!memcmp(json + i, "\xF3\xB0\x80\x80", 4)) { *err = 2; return NULL; }
    char *o = sd_malloc(len + hits * 6 + 1);
    if (!o) { *err = 1; return NULL; }
    size_t k = 0;
    for (size_t i = 0; i < len; i++) {
        if (json[i] == '\\' && i + 1 < len) {
            if (json[i + 1] == 'u' && i + 6 <= len && !memcmp(json + i + 2, "0000", 4)) {
                memcpy(o + k, "\\udb80\\udc00", 12);
                k += 12;
                i += 5;
                continue;
            }
            o[k++] = json[i++];
        }
        o[k++] = json[i];
    }
    o[k] = '\0';
    *out_len = k;
    return o;
}

/* Optional boolean: absent/null -> def; wrong type -> error. */
static specdec_status sd_tok_get_bool(sd_tok_ld *ld, const cJSON *o, const char *ctx, const char *key, int def,
                                      int *out) {
    *out = def;
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!j || cJSON_IsNull(j)) { *out = def; return SPECDEC_OK; }
    if (!cJSON_IsBool(j))
        return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: %s.%s must be a boolean, got %s", ld->what, ctx, key, sd_tok_jtype(j));
    *out = cJSON_IsTrue(j);
    return SPECDEC_OK;
}

static specdec_status sd_tok_get_int(sd_tok_ld *ld, const cJSON *j, const char *ctx, long lo, long hi, long *out) {
    *out = lo;
    if (!cJSON_IsNumber(j))
        return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: %s must be an integer, got %s", ld->what, ctx, sd_tok_jtype(j));
    double d = j->valuedouble;
    if (!(d >= (double)lo && d <= (double)hi) || d != (double)(long)d)
        return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: %s = %g is not an integer in [%ld, %ld]", ld->what, ctx, d, lo, hi);
    *out = (long)d;
    return SPECDEC_OK;
}

/* Required string (or optional when out_null allowed). */
static specdec_status sd_tok_get_str(sd_tok_ld *ld, const cJSON *o, const char *ctx, const char *key, int optional,
                                     const char **out) {
    *out = optional ? NULL : "";
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
    if ((!j || cJSON_IsNull(j)) && optional) { *out = NULL; return SPECDEC_OK; }
    if (!cJSON_IsString(j))
        return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: %s.%s must be a string, got %s", ld->what, ctx, key, sd_tok_jtype(j));
    *out = j->valuestring;
    return SPECDEC_OK;
}

/* {"String": s} or {"Regex": r} -> literal or compiled regex. */
static specdec_status sd_tok_get_pattern(sd_tok_ld *ld, const cJSON *o, const char *ctx, char **lit, size_t *lit_len,
                                         sd_tok_regex *re, int want_regex_for_string) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "pattern");
    if (!cJSON_IsObject(p))
        return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: %s.pattern must be an object, got %s", ld->what, ctx, sd_tok_jtype(p));
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(p, "String");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(p, "Regex");
    if (cJSON_IsString(s)) {
        size_t n = strlen(s->valuestring);
        if (want_regex_for_string) return sd_tok_regex_compile(re, s->valuestring, n, 1, NULL, ctx);
        if (n == 0)
            return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: %s.pattern.String is empty", ld->what, ctx);
        *lit = sd_tok_dupn(s->valuestring, n);
        if (!*lit) return LD_FAIL(ld, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", ld->what);
        *lit_len = n;
        return SPECDEC_OK;
    }
    if (cJSON_IsString(r)) {
        specdec_status st = sd_tok_regex_compile(re, r->valuestring, strlen(r->valuestring), 0, NULL, ctx);
        if (st) {
            char msg[SD_ERRBUF_SIZE];
            snprintf(msg, sizeof msg, "%s", specdec_last_error());
            return LD_FAIL(ld, st, "%s: %s", ld->what, msg);
        }
        return SPECDEC_OK;
    }
    return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: %s.pattern needs a \"String\" or \"Regex\" string", ld->what, ctx);
}

/* ---- normalizers ---------------------------------------------------------------------- */
static void sd_tok_norm_clear(sd_tok_norm *n) {
    if (!n) return;
    sd_free(n->str);
    sd_free(n->content);
    sd_tok_regex_free(&n->re);
    for (int i = 0; i < n->n_child; i++) sd_tok_norm_clear(&n->child[i]);
    sd_free(n->child);
}

static specdec_status sd_tok_parse_norm(sd_tok_ld *ld, const cJSON *j, sd_tok_norm *n, int depth) {
    memset(n, 0, sizeof *n);
    if (depth > SD_TOK_MAX_DEPTH)
        return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: normalizer nested deeper than %d", ld->what, SD_TOK_MAX_DEPTH);
    if (!cJSON_IsObject(j))
        return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: normalizer must be an object, got %s", ld->what, sd_tok_jtype(j));
    const char *type;
    specdec_status st = sd_tok_get_str(ld, j, "normalizer", "type", 0, &type);
    if (st) return st;
    if (!strcmp(type, "NFC")) n->kind = SD_NORM_NFC;
    else if (!strcmp(type, "NFKC")) n->kind = SD_NORM_NFKC;
    else if (!strcmp(type, "NFD")) n->kind = SD_NORM_NFD;
    else if (!strcmp(type, "NFKD")) n->kind = SD_NORM_NFKD;
    else if (!strcmp(type, "Lowercase")) n->kind = SD_NORM_LOWERCASE;
    else if (!strcmp(type, "StripAccents")) n->kind = SD_NORM_STRIP_ACCENTS;
    else if (!strcmp(type, "Strip")) {
        n->kind = SD_NORM_STRIP;
        if ((st = sd_tok_get_bool(ld, j, "normalizer Strip", "strip_left", 1, &n->left))) return st;
        if ((st = sd_tok_get_bool(ld, j, "normalizer Strip", "strip_right", 1, &n->right))) return st;
    } else if (!strcmp(type, "Prepend")) {
        n->kind = SD_NORM_PREPEND;
        const char *p;
        if ((st = sd_tok_get_str(ld, j, "normalizer Prepend", "prepend", 0, &p))) return st;
        n->str_len = strlen(p);
        if (!(n->str = sd_tok_dupn(p, n->str_len))) return LD_FAIL(ld, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", ld->what);
    } else if (!strcmp(type, "Replace")) {
        n->kind = SD_NORM_REPLACE;
        const char *c;
        if ((st = sd_tok_get_str(ld, j, "normalizer Replace", "content", 0, &c))) return st;
        n->content_len = strlen(c);
        if (!(n->content = sd_tok_dupn(c, n->content_len)))
            return LD_FAIL(ld, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", ld->what);
        if ((st = sd_tok_get_pattern(ld, j, "normalizer Replace", &n->str, &n->str_len, &n->re, 0))) return st;
    } else if (!strcmp(type, "Sequence")) {
        n->kind = SD_NORM_SEQUENCE;
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "normalizers");
        if (!cJSON_IsArray(a))
            return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: normalizer Sequence.normalizers must be an array, got %s", ld->what,
                           sd_tok_jtype(a));
        int cnt = cJSON_GetArraySize(a);
        if (cnt > 64) return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: normalizer Sequence has %d entries (max 64)", ld->what, cnt);
        if (cnt && !(n->child = sd_calloc((size_t)cnt, sizeof *n->child)))
            return LD_FAIL(ld, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", ld->what);
        const cJSON *e;
        cJSON_ArrayForEach(e, a) {
            st = sd_tok_parse_norm(ld, e, &n->child[n->n_child], depth + 1);
            n->n_child++;
            if (st) return st;
        }
    } else {
        return LD_FAIL(ld, SPECDEC_ERR_UNSUPPORTED, "%s: normalizer type \"%s\" is not supported", ld->what, type);
    }
    return SPECDEC_OK;
}

/* ---- pre-tokenizers --------------------------------------------------------------------- */
static const char sd_tok_gpt2_re[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
/* Oniguruma's \w: letters, marks, numbers, connector punctuation. */
static const char sd_tok_ws_re[] = "[\\p{L}\\p{M}\\p{N}\\p{Pc}]+|[^\\p{L}\\p{M}\\p{N}\\p{Pc}\\s]+";

static void sd_tok_pre_clear(sd_tok_pre *p) {
    if (!p) return;
    sd_tok_regex_free(&p->re);
    for (int i = 0; i < p->n_child; i++) sd_tok_pre_clear(&p->child[i]);
    sd_free(p->child);
}

static specdec_status sd_tok_parse_behavior(sd_tok_ld *ld, const cJSON *j, const char *ctx, sd_tok_behavior def,
                                            sd_tok_behavior *out) {
    const char *b = NULL;
    specdec_status st = sd_tok_get_str(ld, j, ctx, "behavior", 1, &b);
    if (st) return st;
    if (!b) *out = def;
    else if (!strcmp(b, "Removed")) *out = SD_SPLIT_REMOVED;
    else if (!strcmp(b, "Isolated")) *out = SD_SPLIT_ISOLATED;
    else if (!strcmp(b, "MergedWithPrevious")) *out = SD_SPLIT_MERGED_PREV;
    else if (!strcmp(b, "MergedWithNext")) *out = SD_SPLIT_MERGED_NEXT;
    else if (!strcmp(b, "Contiguous")) *out = SD_SPLIT_CONTIGUOUS;
    else return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: %s.behavior \"%s\" is unknown", ld->what, ctx, b);
    return SPECDEC_OK;
}

/* Metaspace replacement char and prepend scheme (new "prepend_scheme" or legacy
 * "add_prefix_space"), shared by the pre-tokenizer and the decoder. */
static specdec_status sd_tok_parse_metaspace(sd_tok_ld *ld, const cJSON *j, const char *ctx, char *rep, size_t *rep_len,
                                             sd_tok_prepend *prepend) {
    const char *r = "";
    specdec_status st = sd_tok_get_str(ld, j, ctx, "replacement", 0, &r);
    if (st) return st;
    size_t n = strlen(r), bad;
    if (n == 0 || n > 4 || sd_utf8_seq_len((const unsigned char *)r, n, &bad) != n)
        return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: %s.replacement \"%s\" must be one character", ld->what, ctx, r);
    memcpy(rep, r, n);
    *rep_len = n;
    const char *ps;
    if ((st = sd_tok_get_str(ld, j, ctx, "prepend_scheme", 1, &ps))) return st;
    if (ps) {
        if (!strcmp(ps, "always")) *prepend = SD_PREPEND_ALWAYS;
        else if (!strcmp(ps, "first")) *prepend = SD_PREPEND_FIRST;
        else if (!strcmp(ps, "never")) *prepend = SD_PREPEND_NEVER;
        else return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: %s.prepend_scheme \"%s\" is unknown", ld->what, ctx, ps);
    } else {
        int aps;
        if ((st = sd_tok_get_bool(ld, j, ctx, "add_prefix_space", 1, &aps))) return st;
        *prepend = aps ? SD_PREPEND_ALWAYS : SD_PREPEND_NEVER;
    }
    return SPECDEC_OK;
}

static specdec_status sd_tok_parse_pre(sd_tok_ld *ld, const cJSON *j, sd_tok_pre *p, int depth) {
    memset(p, 0, sizeof *p);
    if (depth > SD_TOK_MAX_DEPTH)
        return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: pre_tokenizer nested deeper than %d", ld->what, SD_TOK_MAX_DEPTH);
    if (!cJSON_IsObject(j))
        return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: pre_tokenizer must be an object, got %s", ld->what, sd_tok_jtype(j));
    const char *type;
    specdec_status st = sd_tok_get_str(ld, j, "pre_tokenizer", "type", 0, &type);
    if (st) return st;
    if (!strcmp(type, "ByteLevel")) {
        p->kind = SD_PRE_BYTELEVEL;
        if ((st = sd_tok_get_bool(ld, j, "pre_tokenizer ByteLevel", "add_prefix_space", 1, &p->add_prefix_space))) return st;
        if ((st = sd_tok_get_bool(ld, j, "pre_tokenizer ByteLevel", "use_regex", 1, &p->use_regex))) return st;
        if (p->use_regex && (st = sd_tok_regex_compile(&p->re, sd_tok_gpt2_re, sizeof sd_tok_gpt2_re - 1, 0, NULL, "ByteLevel")))
            return st;
    } else if (!strcmp(type, "Split")) {
        p->kind = SD_PRE_SPLIT;
        if ((st = sd_tok_get_bool(ld, j, "pre_tokenizer Split", "invert", 0, &p->invert))) return st;
        if ((st = sd_tok_parse_behavior(ld, j, "pre_tokenizer Split", SD_SPLIT_ISOLATED, &p->behavior))) return st;
        if (!cJSON_GetObjectItemCaseSensitive(j, "behavior"))
            return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: pre_tokenizer Split.behavior is missing", ld->what);
        char *unused = NULL;
        size_t ul = 0;
        if ((st = sd_tok_get_pattern(ld, j, "pre_tokenizer Split", &unused, &ul, &p->re, 1))) return st;
    } else if (!strcmp(type, "Metaspace")) {
        p->kind = SD_PRE_METASPACE;
        if ((st = sd_tok_parse_metaspace(ld, j, "pre_tokenizer Metaspace", p->rep, &p->rep_len, &p->prepend))) return st;
        if ((st = sd_tok_get_bool(ld, j, "pre_tokenizer Metaspace", "split", 1, &p->split))) return st;
    } else if (!strcmp(type, "Digits")) {
        p->kind = SD_PRE_DIGITS;
        if ((st = sd_tok_get_bool(ld, j, "pre_tokenizer Digits", "individual_digits", 0, &p->individual_digits))) return st;
    } else if (!strcmp(type, "Punctuation")) {
        p->kind = SD_PRE_PUNCTUATION;
        if ((st = sd_tok_parse_behavior(ld, j, "pre_tokenizer Punctuation", SD_SPLIT_ISOLATED, &p->behavior))) return st;
    } else if (!strcmp(type, "Whitespace")) {
        p->kind = SD_PRE_WHITESPACE;
        if ((st = sd_tok_regex_compile(&p->re, sd_tok_ws_re, sizeof sd_tok_ws_re - 1, 0, NULL, "Whitespace"))) return st;
    } else if (!strcmp(type, "WhitespaceSplit")) {
        p->kind = SD_PRE_WHITESPACE_SPLIT;
    } else if (!strcmp(type, "Sequence")) {
        p->kind = SD_PRE_SEQUENCE;
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "pretokenizers");
        if (!cJSON_IsArray(a))
            return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: pre_tokenizer Sequence.pretokenizers must be an array, got %s",
                           ld->what, sd_tok_jtype(a));
        int cnt = cJSON_GetArraySize(a);
        if (cnt > 64) return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: pre_tokenizer Sequence has %d entries (max 64)", ld->what, cnt);
        if (cnt && !(p->child = sd_calloc((size_t)cnt, sizeof *p->child)))
            return LD_FAIL(ld, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", ld->what);
        const cJSON *e;
        cJSON_ArrayForEach(e, a) {
            st = sd_tok_parse_pre(ld, e, &p->child[p->n_child], depth + 1);
            p->n_child++;
            if (st) return st;
        }
    } else {
        return LD_FAIL(ld, SPECDEC_ERR_UNSUPPORTED, "%s: pre_tokenizer type \"%s\" is not supported", ld->what, type);
    }
    return SPECDEC_OK;
}

/* ---- decoders --------------------------------------------------------------------------- */
static void sd_tok_dec_clear(sd_tok_dec *d) {
    if (!d) return;
    sd_free(d->str);
    sd_free(d->content);
    sd_tok_regex_free(&d->re);
    for (int i = 0; i < d->n_child; i++) sd_tok_dec_clear(&d->child[i]);
    sd_free(d->child);
}

static specdec_status sd_tok_parse_dec(sd_tok_ld *ld, const cJSON *j, sd_tok_dec *d, int depth) {
    memset(d, 0, sizeof *d);
    if (depth > SD_TOK_MAX_DEPTH)
        return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: decoder nested deeper than %d", ld->what, SD_TOK_MAX_DEPTH);
    if (!cJSON_IsObject(j))
        return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: decoder must be an object, got %s", ld->what, sd_tok_jtype(j));
    const char *type;
    specdec_status st = sd_tok_get_str(ld, j, "decoder", "type", 0, &type);
    if (st) return st;
    if (!strcmp(type, "ByteLevel")) d->kind = SD_DEC_BYTELEVEL;
    else if (!strcmp(type, "ByteFallback")) d->kind = SD_DEC_BYTEFALLBACK;
    else if (!strcmp(type, "Fuse")) d->kind = SD_DEC_FUSE;
    else if (!strcmp(type, "Metaspace")) {
        d->kind = SD_DEC_METASPACE;
        if ((st = sd_tok_parse_metaspace(ld, j, "decoder Metaspace", d->rep, &d->rep_len, &d->prepend))) return st;
    } else if (!strcmp(type, "Strip")) {
        d->kind = SD_DEC_STRIP;
        const char *c;
        if ((st = sd_tok_get_str(ld, j, "decoder Strip", "content", 0, &c))) return st;
        size_t n = strlen(c), bad;
        if (n == 0 || sd_utf8_seq_len((const unsigned char *)c, n, &bad) != n)
            return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: decoder Strip.content \"%s\" must be one character", ld->what, c);
        sd_utf8_next(c, n, &d->strip_cp);
        long v;
        if ((st = sd_tok_get_int(ld, cJSON_GetObjectItemCaseSensitive(j, "start"), "decoder Strip.start", 0, 1 << 20, &v)))
            return st;
        d->start = (int)v;
        if ((st = sd_tok_get_int(ld, cJSON_GetObjectItemCaseSensitive(j, "stop"), "decoder Strip.stop", 0, 1 << 20, &v)))
            return st;
        d->stop = (int)v;
    } else if (!strcmp(type, "Replace")) {
        d->kind = SD_DEC_REPLACE;
        const char *c;
        if ((st = sd_tok_get_str(ld, j, "decoder Replace", "content", 0, &c))) return st;
        d->content_len = strlen(c);
        if (!(d->content = sd_tok_dupn(c, d->content_len)))
            return LD_FAIL(ld, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", ld->what);
        if ((st = sd_tok_get_pattern(ld, j, "decoder Replace", &d->str, &d->str_len, &d->re, 0))) return st;
    } else if (!strcmp(type, "BPEDecoder")) {
        d->kind = SD_DEC_BPE;
        const char *s;
        if ((st = sd_tok_get_str(ld, j, "decoder BPEDecoder", "suffix", 1, &s))) return st;
        if (!s) s = "</w>";
        d->str_len = strlen(s);
        if (!(d->str = sd_tok_dupn(s, d->str_len))) return LD_FAIL(ld, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", ld->what);
    } else if (!strcmp(type, "Sequence")) {
        d->kind = SD_DEC_SEQUENCE;
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "decoders");
        if (!cJSON_IsArray(a))
            return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: decoder Sequence.decoders must be an array, got %s", ld->what,
                           sd_tok_jtype(a));
        int cnt = cJSON_GetArraySize(a);
        if (cnt > 64) return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: decoder Sequence has %d entries (max 64)", ld->what, cnt);
        if (cnt && !(d->child = sd_calloc((size_t)cnt, sizeof *d->child)))
            return LD_FAIL(ld, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", ld->what);
        const cJSON *e;
        cJSON_ArrayForEach(e, a) {
            st = sd_tok_parse_dec(ld, e, &d->child[d->n_child], depth + 1);
            d->n_child++;
            if (st) return st;
        }
    } else {
        return LD_FAIL(ld, SPECDEC_ERR_UNSUPPORTED, "%s: decoder type \"%s\" is not supported", ld->what, type);
    }
    return SPECDEC_OK;
}

/* ---- post-processor ----------------------------------------------------------------------- */
static specdec_status sd_tok_ids_append(sd_tok_ld *ld, int32_t **v, int32_t *n, const int32_t *src, int32_t k,
                                        int at_front) {
    if (*n + (int64_t)k > 4096) return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: post_processor adds more than 4096 ids", ld->what);
    int32_t *p = sd_realloc(*v, (size_t)(*n + k + 1) * sizeof *p);
    if (!p) return LD_FAIL(ld, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", ld->what);
    if (k && at_front) {
        memmove(p + k, p, (size_t)*n * sizeof *p);
        memcpy(p, src, (size_t)k * sizeof *p);
    } else if (k) {
        memcpy(p + *n, src, (size_t)k * sizeof *p);
    }
    *v = p;
    *n += k;
    return SPECDEC_OK;
}

/* Wrap the current post-processing: new = pre_k + (pre + A + post) + post_k. */
static specdec_status sd_tok_post_wrap(sd_tok_ld *ld, sd_tok_post *pp, const int32_t *pre, int32_t npre,
                                       const int32_t *post, int32_t npost) {
    specdec_status st = sd_tok_ids_append(ld, &pp->pre, &pp->n_pre, pre, npre, 1);
    if (st) return st;
    return sd_tok_ids_append(ld, &pp->post, &pp->n_post, post, npost, 0);
}

static specdec_status sd_tok_parse_post(sd_tok_ld *ld, const cJSON *j, sd_tok_post *pp, int depth) {
    if (depth > SD_TOK_MAX_DEPTH)
        return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: post_processor nested deeper than %d", ld->what, SD_TOK_MAX_DEPTH);
    if (!cJSON_IsObject(j))
        return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: post_processor must be an object, got %s", ld->what, sd_tok_jtype(j));
    const char *type;
    specdec_status st = sd_tok_get_str(ld, j, "post_processor", "type", 0, &type);
    if (st) return st;
    long v;
    if (!strcmp(type, "ByteLevel")) return SPECDEC_OK; /* only adjusts offsets */
    if (!strcmp(type, "Sequence")) {
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "processors");
        if (!cJSON_IsArray(a))
            return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: post_processor Sequence.processors must be an array, got %s",
                           ld->what, sd_tok_jtype(a));
        const cJSON *e;
        cJSON_ArrayForEach(e, a) if ((st = sd_tok_parse_post(ld, e, pp, depth + 1))) return st;
        return SPECDEC_OK;
    }
    if (!strcmp(type, "BertProcessing") || !strcmp(type, "RobertaProcessing")) {
        int32_t ids[2];
        const char *keys[2] = {"cls", "sep"};
        for (int k = 0; k < 2; k++) {
            const cJSON *p = cJSON_GetObjectItemCaseSensitive(j, keys[k]);
            if (!cJSON_IsArray(p) || cJSON_GetArraySize(p) != 2)
                return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: post_processor %s.%s must be [token, id]", ld->what, type, keys[k]);
            if ((st = sd_tok_get_int(ld, cJSON_GetArrayItem(p, 1), "post_processor cls/sep id", 0, SD_TOK_MAX_ID - 1, &v)))
                return st;
            ids[k] = (int32_t)v;
        }
        return sd_tok_post_wrap(ld, pp, &ids[0], 1, &ids[1], 1);
    }
    if (strcmp(type, "TemplateProcessing"))
        return LD_FAIL(ld, SPECDEC_ERR_UNSUPPORTED, "%s: post_processor type \"%s\" is not supported", ld->what, type);
    const cJSON *single = cJSON_GetObjectItemCaseSensitive(j, "single");
    const cJSON *specials = cJSON_GetObjectItemCaseSensitive(j, "special_tokens");
    if (!cJSON_IsArray(single))
        return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: post_processor TemplateProcessing.single must be an array, got %s",
                       ld->what, sd_tok_jtype(single));
    if (specials && !cJSON_IsObject(specials))
        return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: post_processor TemplateProcessing.special_tokens must be an object",
                       ld->what);
    int32_t *pre = NULL, *post = NULL, npre = 0, npost = 0;
    int seen_a = 0;
    const cJSON *piece;
    st = SPECDEC_OK;
    cJSON_ArrayForEach(piece, single) {
        const cJSON *seq = cJSON_GetObjectItemCaseSensitive(piece, "Sequence");
        const cJSON *sp = cJSON_GetObjectItemCaseSensitive(piece, "SpecialToken");
        if (cJSON_IsObject(seq)) {
            if (seen_a) { st = LD_FAIL(ld, SPECDEC_ERR_UNSUPPORTED, "%s: TemplateProcessing.single uses the sequence twice", ld->what); break; }
            seen_a = 1;
            continue;
        }
        const cJSON *name = cJSON_IsObject(sp) ? cJSON_GetObjectItemCaseSensitive(sp, "id") : NULL;
        if (!cJSON_IsString(name)) {
            st = LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: TemplateProcessing.single entries must be {Sequence} or {SpecialToken: {id}}",
                         ld->what);
            break;
        }
        const cJSON *def = specials ? cJSON_GetObjectItemCaseSensitive(specials, name->valuestring) : NULL;
        const cJSON *ids = def ? cJSON_GetObjectItemCaseSensitive(def, "ids") : NULL;
        if (!cJSON_IsArray(ids)) {
            st = LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: TemplateProcessing special token \"%s\" is missing from special_tokens",
                         ld->what, name->valuestring);
            break;
        }
        const cJSON *e;
        cJSON_ArrayForEach(e, ids) {
            if ((st = sd_tok_get_int(ld, e, "TemplateProcessing special token id", 0, SD_TOK_MAX_ID - 1, &v))) break;
            int32_t id = (int32_t)v;
            if ((st = sd_tok_ids_append(ld, seen_a ? &post : &pre, seen_a ? &npost : &npre, &id, 1, 0))) break;
        }
        if (st) break;
    }
    if (!st && !seen_a) st = LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: TemplateProcessing.single has no Sequence", ld->what);
    if (!st) st = sd_tok_post_wrap(ld, pp, pre, npre, post, npost);
    sd_free(pre);
    sd_free(post);
    return st;
}

/* ---- the model --------------------------------------------------------------------------- */
static int sd_tok_set_id(specdec_tokenizer *t, int32_t id, int32_t entry, int override) {
    if (id < 0 || id >= t->n_ids) return -1;
    if (t->id_entry[id] == -1 || override) t->id_entry[id] = entry;
    return 0;
}

static specdec_status sd_tok_parse_model(sd_tok_ld *ld, const cJSON *m, const cJSON *added) {
    specdec_tokenizer *t = ld->tok;
    if (!cJSON_IsObject(m))
        return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: \"model\" must be an object, got %s", ld->what, sd_tok_jtype(m));
    const char *type;
    specdec_status st = sd_tok_get_str(ld, m, "model", "type", 1, &type);
    if (st) return st;
    if (type && strcmp(type, "BPE"))
        return LD_FAIL(ld, SPECDEC_ERR_UNSUPPORTED, "%s: model type \"%s\" is not supported (only BPE)", ld->what, type);
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(m, "vocab");
    const cJSON *merges = cJSON_GetObjectItemCaseSensitive(m, "merges");
    if (!cJSON_IsObject(vocab))
        return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: model.vocab must be an object, got %s", ld->what, sd_tok_jtype(vocab));
    if (!type && !merges)
        return LD_FAIL(ld, SPECDEC_ERR_UNSUPPORTED, "%s: model has no \"type\" and no merges: not a BPE model", ld->what);
    if (merges && !cJSON_IsArray(merges) && !cJSON_IsNull(merges))
        return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: model.merges must be an array, got %s", ld->what, sd_tok_jtype(merges));
    const cJSON *dropout = cJSON_GetObjectItemCaseSensitive(m, "dropout");
    if (dropout && !cJSON_IsNull(dropout) && !(cJSON_IsNumber(dropout) && dropout->valuedouble == 0.0))
        return LD_FAIL(ld, SPECDEC_ERR_UNSUPPORTED, "%s: model.dropout is set: BPE dropout is not supported", ld->what);
    if ((st = sd_tok_get_bool(ld, m, "model", "byte_fallback", 0, &t->byte_fallback))) return st;
    if ((st = sd_tok_get_bool(ld, m, "model", "fuse_unk", 0, &t->fuse_unk))) return st;
    if ((st = sd_tok_get_bool(ld, m, "model", "ignore_merges", 0, &t->ignore_merges))) return st;
    const char *unk, *pfx, *sfx;
    if ((st = sd_tok_get_str(ld, m, "model", "unk_token", 1, &unk))) return st;
    if ((st = sd_tok_get_str(ld, m, "model", "continuing_subword_prefix", 1, &pfx))) return st;
    if ((st = sd_tok_get_str(ld, m, "model", "end_of_word_suffix", 1, &sfx))) return st;
    if (pfx && *pfx) {
        t->cont_prefix_len = strlen(pfx);
        if (!(t->cont_prefix = sd_tok_dupn(pfx, t->cont_prefix_len))) return LD_FAIL(ld, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", ld->what);
    }
    if (sfx && *sfx) {
        t->eow_suffix_len = strlen(sfx);
        if (!(t->eow_suffix = sd_tok_dupn(sfx, t->eow_suffix_len))) return LD_FAIL(ld, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", ld->what);
    }

    /* vocabulary */
    size_t n = 0, bytes = 0;
    int32_t max_id = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, vocab) {
        long v;
        if (!cJSON_IsNumber(e))
            return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: model.vocab[\"%.64s\"] must be an integer id, got %s", ld->what,
                           e->string, sd_tok_jtype(e));
        if ((st = sd_tok_get_int(ld, e, "model.vocab id", 0, SD_TOK_MAX_ID - 1, &v))) return st;
        size_t l = strlen(e->string);
        if (l > SD_TOK_MAX_TOKEN_BYTES)
            return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: model.vocab entry %zu is %zu bytes long (max %d)", ld->what, n, l,
                           SD_TOK_MAX_TOKEN_BYTES);
        if (v > max_id) max_id = (int32_t)v;
        bytes += l;
        n++;
    }
    long n_added_json = 0;
    if (added) {
        if (!cJSON_IsArray(added))
            return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: \"added_tokens\" must be an array, got %s", ld->what, sd_tok_jtype(added));
        cJSON_ArrayForEach(e, added) {
            long v;
            if ((st = sd_tok_get_int(ld, cJSON_GetObjectItemCaseSensitive(e, "id"), "added_tokens[].id", 0, SD_TOK_MAX_ID - 1, &v)))
                return st;
            if (v > max_id) max_id = (int32_t)v;
            n_added_json++;
        }
    }
    if (n == 0) return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: model.vocab is empty", ld->what);
    t->n_vocab = n;
    t->n_ids = max_id + 1;
    t->blob = sd_malloc(bytes + 1);
    t->key_off = sd_malloc(n * sizeof *t->key_off);
    t->key_len = sd_malloc(n * sizeof *t->key_len);
    t->key_id = sd_malloc(n * sizeof *t->key_id);
    t->id_entry = sd_malloc((size_t)t->n_ids * sizeof *t->id_entry);
    size_t cap = 16;
    while (cap < n * 2) cap *= 2;
    t->vocab.slots = sd_calloc(cap, sizeof *t->vocab.slots);
    if (!t->blob || !t->key_off || !t->key_len || !t->key_id || !t->id_entry || !t->vocab.slots)
        return LD_FAIL(ld, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory for a vocabulary of %zu entries", ld->what, n);
    for (int32_t i = 0; i < t->n_ids; i++) t->id_entry[i] = -1;
    t->vocab.mask = cap - 1;
    t->vocab.blob = t->blob;
    t->vocab.key_off = t->key_off;
    t->vocab.key_len = t->key_len;
    t->vocab.val = t->key_id;
    size_t k = 0, off = 0;
    cJSON_ArrayForEach(e, vocab) {
        size_t l = sd_tok_unnul(ld, e->string);
        memcpy(t->blob + off, e->string, l);
        t->key_off[k] = off;
        t->key_len[k] = (uint32_t)l;
        t->key_id[k] = (int32_t)e->valuedouble;
        size_t i = (size_t)sd_tok_hash(e->string, l) & t->vocab.mask;
        int dup = 0;
        while (t->vocab.slots[i]) {
            uint32_t o = t->vocab.slots[i] - 1;
            if (t->key_len[o] == l && memcmp(t->blob + t->key_off[o], e->string, l) == 0) { dup = 1; break; }
            i = (i + 1) & t->vocab.mask;
        }
        if (dup) return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: model.vocab has \"%.64s\" twice", ld->what, e->string);
        t->vocab.slots[i] = (uint32_t)k + 1;
        sd_tok_set_id(t, t->key_id[k], (int32_t)k, 0);
        off += l;
        k++;
    }
    t->blob_len = off;

    t->unk_id = -1;
    if (unk) {
        t->unk_id = sd_tok_strmap_get(&t->vocab, unk, strlen(unk));
        if (t->unk_id < 0)
            return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: model.unk_token \"%.64s\" is not in the vocabulary", ld->what, unk);
    }
    for (int b = 0; b < 256; b++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", b);
        t->byte_ids[b] = sd_tok_strmap_get(&t->vocab, s, 6);
    }

    /* merges */
    int nm = merges && cJSON_IsArray(merges) ? cJSON_GetArraySize(merges) : 0;
    cap = 16;
    while (cap < (size_t)nm * 2) cap *= 2;
    t->merges.slots = sd_calloc(cap, sizeof *t->merges.slots);
    if (!t->merges.slots) return LD_FAIL(ld, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory for %d merges", ld->what, nm);
    t->merges.mask = cap - 1;
    sd_tok_buf cat = {0};
    int32_t rank = 0;
    st = SPECDEC_OK;
    if (nm) cJSON_ArrayForEach(e, merges) {
        const char *a, *b;
        size_t la, lb;
        if (cJSON_IsString(e)) {
            const char *s = e->valuestring;
            if (!strncmp(s, "#version", 8)) continue;
            size_t sl = sd_tok_unnul(ld, e->valuestring);
            const char *sp = memchr(s, ' ', sl);
            if (!sp || memchr(sp + 1, ' ', sl - (size_t)(sp + 1 - s))) {
                st = LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: model.merges[%d] = \"%.64s\" is not two tokens separated by one space",
                             ld->what, rank, s);
                break;
            }
            a = s; la = (size_t)(sp - s); b = sp + 1; lb = sl - la - 1;
        } else if (cJSON_IsArray(e) && cJSON_GetArraySize(e) == 2 && cJSON_IsString(cJSON_GetArrayItem(e, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(e, 1))) {
            a = cJSON_GetArrayItem(e, 0)->valuestring; la = sd_tok_unnul(ld, cJSON_GetArrayItem(e, 0)->valuestring);
            b = cJSON_GetArrayItem(e, 1)->valuestring; lb = sd_tok_unnul(ld, cJSON_GetArrayItem(e, 1)->valuestring);
        } else {
            st = LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: model.merges[%d] must be \"a b\" or [\"a\", \"b\"], got %s", ld->what, rank,
                         sd_tok_jtype(e));
            break;
        }
        int32_t ia = sd_tok_strmap_get(&t->vocab, a, la), ib = sd_tok_strmap_get(&t->vocab, b, lb);
        if (ia < 0 || ib < 0) {
            st = LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: model.merges[%d] names \"%.*s\", which is not in the vocabulary", ld->what,
                         rank, ia < 0 ? (int)(la > 64 ? 64 : la) : (int)(lb > 64 ? 64 : lb), ia < 0 ? a : b);
            break;
        }
        /* the merged token drops the right part's continuing-subword prefix */
        if (t->cont_prefix && lb >= t->cont_prefix_len && !memcmp(b, t->cont_prefix, t->cont_prefix_len)) {
            b += t->cont_prefix_len;
            lb -= t->cont_prefix_len;
        }
        cat.len = 0;
        if (sd_tok_buf_put(&cat, a, la) || sd_tok_buf_put(&cat, b, lb)) {
            st = LD_FAIL(ld, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", ld->what);
            break;
        }
        int32_t id = sd_tok_strmap_get(&t->vocab, cat.p, cat.len);
        if (id < 0) {
            st = LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: model.merges[%d]: merged token \"%.*s\" is not in the vocabulary", ld->what,
                         rank, (int)(cat.len > 64 ? 64 : cat.len), cat.p);
            break;
        }
        sd_tok_merge_put(&t->merges, ia, ib, rank, id);
        rank++;
    }
    sd_tok_buf_free(&cat);
    t->n_merges = (size_t)rank;
    return st;
}

/* ---- added tokens --------------------------------------------------------------------------- */
static specdec_status sd_tok_build_matcher(sd_tok_ld *ld, sd_tok_matcher *m, int normalized) {
    specdec_tokenizer *t = ld->tok;
    int32_t cnt[257] = {0};
    for (int32_t i = 0; i < t->n_added; i++)
        if (t->added[i].normalized == normalized && t->added[i].len) cnt[(unsigned char)t->added[i].content[0]]++;
    m->start[0] = 0;
    for (int b = 0; b < 256; b++) m->start[b + 1] = m->start[b] + cnt[b];
    m->order = sd_malloc((size_t)(m->start[256] + 1) * sizeof *m->order);
    if (!m->order) return LD_FAIL(ld, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", ld->what);
    int32_t fill[256];
    for (int b = 0; b < 256; b++) fill[b] = m->start[b];
    for (int32_t i = 0; i < t->n_added; i++) {
        const sd_tok_added *a = &t->added[i];
        if (a->normalized != normalized || !a->len) continue;
        m->order[fill[(unsigned char)a->content[0]]++] = i;
        if (a->len > m->max_len) m->max_len = a->len;
    }
    return SPECDEC_OK;
}

static specdec_status sd_tok_parse_added(sd_tok_ld *ld, const cJSON *added) {
    specdec_tokenizer *t = ld->tok;
    int n = added ? cJSON_GetArraySize(added) : 0;
    if (n) {
        t->added = sd_calloc((size_t)n, sizeof *t->added);
        if (!t->added) return LD_FAIL(ld, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", ld->what);
    }
    const cJSON *e;
    specdec_status st;
    if (n) cJSON_ArrayForEach(e, added) {
        sd_tok_added *a = &t->added[t->n_added];
        const char *content;
        char ctx[64];
        snprintf(ctx, sizeof ctx, "added_tokens[%d]", t->n_added);
        if ((st = sd_tok_get_str(ld, e, ctx, "content", 0, &content))) return st;
        int sw, ls, rs, nz, sp;
        if ((st = sd_tok_get_bool(ld, e, ctx, "single_word", 0, &sw))) return st;
        if ((st = sd_tok_get_bool(ld, e, ctx, "lstrip", 0, &ls))) return st;
        if ((st = sd_tok_get_bool(ld, e, ctx, "rstrip", 0, &rs))) return st;
        if ((st = sd_tok_get_bool(ld, e, ctx, "special", 0, &sp))) return st;
        if ((st = sd_tok_get_bool(ld, e, ctx, "normalized", !sp, &nz))) return st;
        size_t l = sd_tok_unnul(ld, (char *)content);
        if (l > SD_TOK_MAX_TOKEN_BYTES)
            return LD_FAIL(ld, SPECDEC_ERR_FORMAT, "%s: %s.content is %zu bytes (max %d)", ld->what, ctx, l, SD_TOK_MAX_TOKEN_BYTES);
        a->id = (int32_t)cJSON_GetObjectItemCaseSensitive(e, "id")->valuedouble; /* range-checked in parse_model */
        /* The library keeps the model's id for a token already in the vocabulary. */
        int32_t vid = sd_tok_strmap_get(&t->vocab, content, l);
        if (vid >= 0) a->id = vid;
        a->single_word = (uint8_t)sw; a->lstrip = (uint8_t)ls; a->rstrip = (uint8_t)rs;
        a->normalized = (uint8_t)nz; a->special = (uint8_t)sp;
        if (nz && t->norm && l) {
            /* normalized tokens are matched in normalized text, so store their normalized form */
            ld->w.tmp.len = 0;
            ld->w.grow_cap = sd_tok_grow_cap(l);
            int r = sd_tok_normalize(t->norm, &ld->w, content, l, &ld->w.tmp);
            if (r) return LD_FAIL(ld, r == -1 ? SPECDEC_ERR_OUT_OF_MEMORY : SPECDEC_ERR_FORMAT,
                                  "%s: %s: normalizing \"%.64s\" failed%s", ld->what, ctx, content,
                                  r == SD_TOK_GROWN ? " (the normalizers grow it more than 64x)" : "");
            a->content = sd_tok_dupn(ld->w.tmp.p ? ld->w.tmp.p : "", ld->w.tmp.len);
            a->len = ld->w.tmp.len;
        } else {
            a->content = sd_tok_dupn(content, l);
            a->len = l;
        }
        if (!a->content) return LD_FAIL(ld, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", ld->what);
        t->n_added++;
        sd_tok_set_id(t, a->id, -(t->n_added - 1) - 2, 1);
    }
    if ((st = sd_tok_build_matcher(ld, &t->match_raw, 0))) return st;
    return sd_tok_build_matcher(ld, &t->match_norm, 1);
}

static int32_t sd_tok_find_token(const specdec_tokenizer *t, const char *s) {
    if (!s) return -1;
    size_t l = strlen(s);
    for (int32_t i = 0; i < t->n_added; i++)
        if (!strcmp(t->added[i].content, s) && !t->added[i].normalized) return t->added[i].id;
    int32_t id = sd_tok_strmap_get(&t->vocab, s, l);
    if (id >= 0) return id;
    for (int32_t i = 0; i < t->n_added; i++)
        if (!strcmp(t->added[i].content, s)) return t->added[i].id;
    return -1;
}

/* bos/eos/add_bos from tokenizer_config.json; defaults from the post-processor and
 * well-known token names when the file is absent. */
static const char *sd_tok_cfg_token(const cJSON *cfg, const char *key) {
    const cJSON *j = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsString(j)) return j->valuestring;
    if (cJSON_IsObject(j)) {
        const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "content");
        if (cJSON_IsString(c)) return c->valuestring;
    }
    return NULL;
}

static void sd_tok_specials(specdec_tokenizer *t, const cJSON *cfg) {
    static const char *bos_names[] = {"<s>", "<|begin_of_text|>", "<|startoftext|>", "<bos>", "<|endoftext|>"};
    static const char *eos_names[] = {"</s>", "<|end_of_text|>", "<|endoftext|>", "<eos>", "<|im_end|>"};
    t->bos_id = t->eos_id = -1;
    t->add_bos = t->post.n_pre > 0;
    int have_cfg_bos = 0, have_cfg_eos = 0;
    if (cfg) {
        const char *b = sd_tok_cfg_token(cfg, "bos_token"), *e = sd_tok_cfg_token(cfg, "eos_token");
        const cJSON *jb = cJSON_GetObjectItemCaseSensitive(cfg, "bos_token");
        if (b) { t->bos_id = sd_tok_find_token(t, b); have_cfg_bos = 1; }
        else if (cJSON_IsNull(jb)) have_cfg_bos = 1; /* explicitly none (Qwen2) */
        if (e) { t->eos_id = sd_tok_find_token(t, e); have_cfg_eos = 1; }
        const cJSON *ab = cJSON_GetObjectItemCaseSensitive(cfg, "add_bos_token");
        if (cJSON_IsBool(ab)) t->add_bos = cJSON_IsTrue(ab);
    }
    if (!have_cfg_bos) {
        if (t->post.n_pre > 0) t->bos_id = t->post.pre[0];
        for (size_t i = 0; t->bos_id < 0 && i < sizeof bos_names / sizeof *bos_names; i++)
            t->bos_id = sd_tok_find_token(t, bos_names[i]);
    }
    if (!have_cfg_eos)
        for (size_t i = 0; t->eos_id < 0 && i < sizeof eos_names / sizeof *eos_names; i++)
            t->eos_id = sd_tok_find_token(t, eos_names[i]);
    if (t->bos_id < 0) t->add_bos = 0;
}

void specdec_tokenizer_free(specdec_tokenizer *t) {
    if (!t) return;
    sd_free(t->blob);
    sd_free(t->key_off);
    sd_free(t->key_len);
    sd_free(t->key_id);
    sd_free(t->vocab.slots);
    sd_free(t->merges.slots);
    sd_free(t->id_entry);
    sd_free(t->cont_prefix);
    sd_free(t->eow_suffix);
    for (int32_t i = 0; i < t->n_added; i++) sd_free(t->added[i].content);
    sd_free(t->added);
    sd_free(t->match_raw.order);
    sd_free(t->match_norm.order);
    if (t->norm) { sd_tok_norm_clear(t->norm); sd_free(t->norm); }
    if (t->pre) { sd_tok_pre_clear(t->pre); sd_free(t->pre); }
    if (t->dec) { sd_tok_dec_clear(t->dec); sd_free(t->dec); }
    sd_free(t->post.pre);
    sd_free(t->post.post);
    sd_chat_free(t);
    sd_grammar_vocab_release(t->gv);
    pthread_mutex_destroy(&t->gv_lock);
    sd_free(t);
}

static char *sd_tok_read_file(const char *path, size_t *len, specdec_status *st, int optional) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        if (optional && errno == ENOENT) { *st = SPECDEC_OK; return NULL; }
        *st = sd_fail(NULL, SPECDEC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    for (;;) {
        if (n == cap) {
            if (cap >= ((size_t)1 << 31)) {
                *st = sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: larger than 2 GiB", path);
                sd_free(buf); fclose(f); return NULL;
            }
            cap = cap ? cap * 2 : 1 << 16;
            char *p = sd_realloc(buf, cap + 1);
            if (!p) { *st = sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory reading", path); sd_free(buf); fclose(f); return NULL; }
            buf = p;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (r == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) { *st = sd_fail(NULL, SPECDEC_ERR_IO, "%s: read error", path); sd_free(buf); return NULL; }
    buf[n] = '\0';
    *len = n;
    *st = SPECDEC_OK;
    return buf;
}

/* Builds the tokenizer from a parsed tokenizer.json document. cfg: the tokenizer_config fields, or NULL to read
 * dir/tokenizer_config.json (when dir is given). dir also locates chat_template.jinja. */
static specdec_status sd_tok_load_tree(cJSON *root, int nul_masked, const char *what, const cJSON *cfg_in,
                                       const char *dir, specdec_tokenizer **out) {
    sd_tok_ld ld = {.what = what, .nul_masked = nul_masked};
    cJSON *cfg = NULL;
    specdec_status st = SPECDEC_OK;
    specdec_tokenizer *t = sd_calloc(1, sizeof *t);
    if (!t) { st = sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", what); goto done; }
    pthread_mutex_init(&t->gv_lock, NULL);
    ld.tok = t;
    if (!cJSON_IsObject(root)) { st = sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: top level must be a JSON object", what); goto done; }
    const cJSON *j;
    j = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    if (j && !cJSON_IsNull(j)) {
        if (!(t->norm = sd_calloc(1, sizeof *t->norm))) { st = sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", what); goto done; }
        if ((st = sd_tok_parse_norm(&ld, j, t->norm, 0))) goto done;
    }
    j = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    if (j && !cJSON_IsNull(j)) {
        if (!(t->pre = sd_calloc(1, sizeof *t->pre))) { st = sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", what); goto done; }
        if ((st = sd_tok_parse_pre(&ld, j, t->pre, 0))) goto done;
    }
    j = cJSON_GetObjectItemCaseSensitive(root, "decoder");
    if (j && !cJSON_IsNull(j)) {
        if (!(t->dec = sd_calloc(1, sizeof *t->dec))) { st = sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", what); goto done; }
        if ((st = sd_tok_parse_dec(&ld, j, t->dec, 0))) goto done;
    }
    j = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
    if (j && !cJSON_IsNull(j) && (st = sd_tok_parse_post(&ld, j, &t->post, 0))) goto done;
    if (!cJSON_HasObjectItem(root, "model")) { st = sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: \"model\" is missing", what); goto done; }
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    if (cJSON_IsNull(added)) added = NULL;
    if ((st = sd_tok_parse_model(&ld, cJSON_GetObjectItemCaseSensitive(root, "model"), added))) goto done;
    if ((st = sd_tok_parse_added(&ld, added))) goto done;
    for (int32_t i = 0; i < t->post.n_pre + t->post.n_post; i++) {
        int32_t id = i < t->post.n_pre ? t->post.pre[i] : t->post.post[i - t->post.n_pre];
        if (id >= t->n_ids || t->id_entry[id] == -1) {
            st = sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: post_processor inserts id %d, which is not in the vocabulary", what, id);
            goto done;
        }
    }
    if (!cfg_in && dir) {
        char cpath[4200];
        snprintf(cpath, sizeof cpath, "%s/tokenizer_config.json", dir);
        size_t clen = 0;
        char *ctext = sd_tok_read_file(cpath, &clen, &st, 1);
        if (st) goto done;
        if (ctext) {
            cfg = cJSON_ParseWithLength(ctext, clen);
            sd_free(ctext);
            if (!cfg || !cJSON_IsObject(cfg)) { st = sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: not a valid JSON object", cpath); goto done; }
        }
    }
    sd_tok_specials(t, cfg_in ? cfg_in : cfg);
    if ((st = sd_chat_load(t, cfg_in ? cfg_in : cfg, dir))) goto done;
done:
    sd_tok_work_free(&ld.w);
    cJSON_Delete(cfg);
    if (st) {
        specdec_tokenizer_free(t);
        return st;
    }
    *out = t;
    return SPECDEC_OK;
}

specdec_status sd_tokenizer_load_doc(cJSON *root, const cJSON *cfg, const char *what, specdec_tokenizer **out) {
    if (!out) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "tokenizer: out is NULL");
    *out = NULL;
    return sd_tok_load_tree(root, 0, what, cfg, NULL, out);
}

specdec_status sd_tokenizer_load_json(const char *json, size_t len, const char *dir, specdec_tokenizer **out) {
    if (!out) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "tokenizer: out is NULL");
    *out = NULL;
    if (!json) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "tokenizer: json is NULL");
    char what[320];
    snprintf(what, sizeof what, "%s%stokenizer.json", dir ? dir : "", dir ? "/" : "");
    if (!sd_utf8_valid((const unsigned char *)json, len)) /* the library reads the file as a UTF-8 string too */
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: not valid UTF-8", what);
    size_t mlen = 0;
    int merr = 0;
    char *masked = sd_tok_mask_nul(json, len, &mlen, &merr);
    if (merr == 1) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", what);
    if (merr == 2)
        return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: holds both \\u0000 and U+F0000, which specdec cannot tell apart", what);
    cJSON *root = masked ? cJSON_ParseWithLength(masked, mlen) : cJSON_ParseWithLength(json, len);
    int nul_masked = masked != NULL;
    sd_free(masked);
    if (!root) {
        const char *ep = cJSON_GetErrorPtr();
        size_t at = ep && ep >= json && ep <= json + len ? (size_t)(ep - json) : 0;
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: not valid JSON (error near byte %zu)", what, at);
    }
    specdec_status st = sd_tok_load_tree(root, nul_masked, what, NULL, dir, out);
    cJSON_Delete(root);
    return st;
}

specdec_status specdec_tokenizer_load(const char *path, specdec_tokenizer **out) {
    if (!out) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_tokenizer_load: out is NULL");
    *out = NULL;
    if (!path) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_tokenizer_load: path is NULL");
    size_t pl = strlen(path);
    if (pl > 4000) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_tokenizer_load: path too long");
    struct stat sb;
    char file[4200], dir[4100];
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        snprintf(dir, sizeof dir, "%s", path);
        while (pl > 1 && dir[pl - 1] == '/') dir[--pl] = '\0';
        snprintf(file, sizeof file, "%s/tokenizer.json", dir);
    } else if (sd_gguf_tokenizer_is(path)) { /* by the magic, whatever the file's name */
        return sd_gguf_tokenizer_load(path, out);
    } else {
        snprintf(file, sizeof file, "%s", path);
        snprintf(dir, sizeof dir, "%s", path);
        char *slash = strrchr(dir, '/');
        if (slash == dir) dir[1] = '\0';
        else if (slash) *slash = '\0';
        else snprintf(dir, sizeof dir, ".");
    }
    specdec_status st;
    size_t len = 0;
    char *text = sd_tok_read_file(file, &len, &st, 0);
    if (!text) return st;
    st = sd_tokenizer_load_json(text, len, dir, out);
    sd_free(text);
    return st;
}

const char *specdec_tokenizer_last_error(const specdec_tokenizer *tok) {
    (void)tok; /* tokenizer calls are const and thread-safe: their detail is the thread's */
    return specdec_last_error();
}
