/* sd_tokenizer_util.c — building blocks of the tokenizer: growable buffers, UTF-8
 * validation with the library's replacement rule, Unicode character classes as Rust's
 * char methods define them, hash maps for vocabulary and merges, the GPT-2 byte table,
 * and PCRE2 regex find-all with the `tokenizers` split semantics. */
#include <string.h>

#include <utf8proc.h>

#include "sd_alloc.h"
#include "sd_tokenizer.h"

/* ---- buffers ------------------------------------------------------------- */
int sd_tok_buf_reserve(sd_tok_buf *b, size_t extra) {
    if (b->cap - b->len >= extra) return 0;
    size_t need = b->len + extra;
    if (need < b->len) return -1;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) {
        if (cap > SIZE_MAX / 2) return -1;
        cap *= 2;
    }
    char *p = sd_realloc(b->p, cap);
    if (!p) return -1;
    b->p = p;
    b->cap = cap;
    return 0;
}

int sd_tok_buf_put(sd_tok_buf *b, const void *s, size_t n) {
    if (sd_tok_buf_reserve(b, n)) return -1;
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

void sd_tok_buf_free(sd_tok_buf *b) {
    sd_free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

int sd_tok_spans_push(sd_tok_spans *s, size_t off, size_t len, int32_t id, int32_t at_start) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 64;
        sd_tok_span *v = sd_realloc(s->v, cap * sizeof *v);
        if (!v) return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n++] = (sd_tok_span){off, len, id, at_start};
    return 0;
}

void sd_tok_spans_free(sd_tok_spans *s) {
    sd_free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

void sd_tok_work_free(sd_tok_work *w) {
    sd_tok_buf_free(&w->text);
    sd_tok_buf_free(&w->a);
    sd_tok_buf_free(&w->b);
    sd_tok_buf_free(&w->tmp);
    sd_tok_buf_free(&w->text2);
    sd_tok_spans_free(&w->s4);
    sd_tok_spans_free(&w->s1);
    sd_tok_spans_free(&w->s2);
    sd_tok_spans_free(&w->s3);
    sd_free(w->ids);
    sd_free(w->bpe_sym);
    sd_free(w->bpe_heap);
    sd_free(w->u32);
    if (w->md) pcre2_match_data_free(w->md);
    if (w->mt) sd_free(w->mt->v);
    sd_free(w->mt);
    memset(w, 0, sizeof *w);
}

/* ---- UTF-8 ------------------------------------------------------------------- */

int sd_tok_utf8_sanitize(sd_tok_buf *out, const char *s, size_t n) {
    if (sd_tok_buf_reserve(out, n)) return -1;
    size_t i = 0, run = 0;
    while (i < n) {
        if ((unsigned char)s[i] < 0x80) { i++; continue; }
        size_t bad, l = sd_utf8_seq_len((const unsigned char *)s + i, n - i, &bad);
        if (l) { i += l; continue; }
        if (sd_tok_buf_put(out, s + run, i - run) || sd_tok_buf_put(out, "\xEF\xBF\xBD", 3)) return -1;
        i += bad;
        run = i;
    }
    return sd_tok_buf_put(out, s + run, n - run);
}



int sd_tok_is_whitespace(int32_t c) {
    return (c >= 9 && c <= 13) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
           c == 0x3000;
}

int sd_tok_is_numeric(int32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9';
    utf8proc_category_t k = utf8proc_category(c);
    return k == UTF8PROC_CATEGORY_ND || k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

int sd_tok_is_word_char(int32_t c) {
    if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
    utf8proc_category_t k = utf8proc_category(c);
    return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) || k == UTF8PROC_CATEGORY_ND ||
           k == UTF8PROC_CATEGORY_NL || k == UTF8PROC_CATEGORY_NO;
}

int sd_tok_is_punctuation(int32_t c) {
    if (c < 0x80) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
    utf8proc_category_t k = utf8proc_category(c);
    return k >= UTF8PROC_CATEGORY_PC && k <= UTF8PROC_CATEGORY_PO;
}

/* ---- hashing --------------------------------------------------------------------- */
uint64_t sd_tok_hash(const char *s, size_t n) {
    /* FNV-1a with a final avalanche; keys are short strings. */
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    h ^= h >> 32;
    h *= 0xd6e8feb86659fd93ull;
    h ^= h >> 32;
    return h;
}

int32_t sd_tok_strmap_get(const sd_tok_strmap *m, const char *s, size_t n) {
    if (!m->slots) return -1;
    size_t i = (size_t)sd_tok_hash(s, n) & m->mask;
    for (;;) {
        uint32_t e = m->slots[i];
        if (!e) return -1;
        e--;
        if (m->key_len[e] == n && (n == 0 || memcmp(m->blob + m->key_off[e], s, n) == 0)) return m->val[e]; /* s may be NULL when n == 0 */
        i = (i + 1) & m->mask;
    }
}

static uint64_t sd_tok_mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

const sd_tok_merge_slot *sd_tok_merge_get(const sd_tok_mergemap *m, int32_t a, int32_t b) {
    if (!m->slots) return NULL;
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t i = (size_t)sd_tok_mix64(key) & m->mask;
    for (;;) {
        const sd_tok_merge_slot *s = &m->slots[i];
        if (s->key == key) return s;
        if (!s->key) return NULL;
        i = (i + 1) & m->mask;
    }
}

/* Used by the loader to fill the merge map (overwriting: a repeated pair keeps its
 * last rank, as the library's HashMap collect does). */
void sd_tok_merge_put(sd_tok_mergemap *m, int32_t a, int32_t b, int32_t rank, int32_t id);
void sd_tok_merge_put(sd_tok_mergemap *m, int32_t a, int32_t b, int32_t rank, int32_t id) {
    uint64_t key = (((uint64_t)(uint32_t)a << 32) | (uint32_t)b) + 1;
    size_t i = (size_t)sd_tok_mix64(key) & m->mask;
    while (m->slots[i].key && m->slots[i].key != key) i = (i + 1) & m->mask;
    m->slots[i].key = key;
    m->slots[i].rank = rank;
    m->slots[i].id = id;
}

/* ---- GPT-2 byte table -------------------------------------------------------------- */
/* Printable Latin-1 bytes map to themselves; the other 68 bytes to U+0100.. in order. */
const uint16_t sd_tok_byte_to_cp[256] = {
    0x100, 0x101, 0x102, 0x103, 0x104, 0x105, 0x106, 0x107, 0x108, 0x109, 0x10A, 0x10B, 0x10C, 0x10D, 0x10E, 0x10F,
    0x110, 0x111, 0x112, 0x113, 0x114, 0x115, 0x116, 0x117, 0x118, 0x119, 0x11A, 0x11B, 0x11C, 0x11D, 0x11E, 0x11F,
    0x120, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47,
    48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63,
    64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79,
    80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95,
    96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111,
    112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 0x121,
    0x122, 0x123, 0x124, 0x125, 0x126, 0x127, 0x128, 0x129, 0x12A, 0x12B, 0x12C, 0x12D, 0x12E, 0x12F, 0x130, 0x131,
    0x132, 0x133, 0x134, 0x135, 0x136, 0x137, 0x138, 0x139, 0x13A, 0x13B, 0x13C, 0x13D, 0x13E, 0x13F, 0x140, 0x141,
    0x142, 161, 162, 163, 164, 165, 166, 167, 168, 169, 170, 171, 172, 0x143, 174, 175,
    176, 177, 178, 179, 180, 181, 182, 183, 184, 185, 186, 187, 188, 189, 190, 191,
    192, 193, 194, 195, 196, 197, 198, 199, 200, 201, 202, 203, 204, 205, 206, 207,
    208, 209, 210, 211, 212, 213, 214, 215, 216, 217, 218, 219, 220, 221, 222, 223,
    224, 225, 226, 227, 228, 229, 230, 231, 232, 233, 234, 235, 236, 237, 238, 239,
    240, 241, 242, 243, 244, 245, 246, 247, 248, 249, 250, 251, 252, 253, 254, 255,
};

int sd_tok_cp_to_byte(int32_t cp) {
    if (cp >= 0x100 && cp <= 0x143) {
        /* Inverse of the table's non-printable part: the k-th such byte. */
        static int16_t inv[68];
        static int ready = 0; /* benign: computed identically by any racing thread */
        if (!ready) {
            for (int b = 0; b < 256; b++)
                if (sd_tok_byte_to_cp[b] >= 0x100) inv[sd_tok_byte_to_cp[b] - 0x100] = (int16_t)b;
            __atomic_store_n(&ready, 1, __ATOMIC_RELEASE);
        }
        return inv[cp - 0x100];
    }
    if (cp >= 0 && cp < 256 && sd_tok_byte_to_cp[cp] == cp) return cp;
    return -1;
}

/* ---- regex ----------------------------------------------------------------------------- */
static void *sd_tok_pcre_malloc(PCRE2_SIZE n, void *ud) { (void)ud; return sd_malloc(n); }
static void sd_tok_pcre_free(void *p, void *ud) { (void)ud; sd_free(p); }

/* Oniguruma (used by `tokenizers`) gives \s the Unicode White_Space set, which holds
 * U+0085 (NEL); PCRE2 10.42's \s in UCP mode does not. Rewrite \s / \S so both agree. */
static int sd_tok_regex_rewrite(sd_tok_buf *o, const char *p, size_t n) {
    int in_class = 0;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char d = p[i + 1];
            int r;
            if (d == 's') r = sd_tok_buf_put(o, in_class ? "\\s\\x{85}" : "[\\s\\x{85}]", in_class ? 8 : 10);
            else if (d == 'S' && !in_class) r = sd_tok_buf_put(o, "[^\\s\\x{85}]", 11);
            else r = sd_tok_buf_put(o, p + i, 2);
            if (r) return -1;
            i++;
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = 1;
            if (sd_tok_buf_put(o, p + i, 1)) return -1;
            /* a ']' (after an optional '^') right at the start is a literal */
            if (i + 1 < n && p[i + 1] == '^') { if (sd_tok_buf_put(o, "^", 1)) return -1; i++; }
            if (i + 1 < n && p[i + 1] == ']') { if (sd_tok_buf_put(o, "]", 1)) return -1; i++; }
            continue;
        }
        if (c == '[' && in_class && i + 1 < n && p[i + 1] == ':') {
            const char *e = NULL;
            for (size_t j = i + 2; j + 1 < n; j++)
                if (p[j] == ':' && p[j + 1] == ']') { e = p + j + 2; break; }
            if (e) {
                if (sd_tok_buf_put(o, p + i, (size_t)(e - (p + i)))) return -1;
                i = (size_t)(e - p) - 1;
                continue;
            }
        }
        if (c == ']' && in_class) in_class = 0;
        if (sd_tok_buf_put(o, &c, 1)) return -1;
    }
    return 0;
}

int sd_tok_regex_compile(sd_tok_regex *re, const char *pattern, size_t len, int literal, sd_errbuf *eb,
                         const char *what) {
    pcre2_general_context *gc = pcre2_general_context_create(sd_tok_pcre_malloc, sd_tok_pcre_free, NULL);
    if (!gc) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "tokenizer: out of memory compiling %s", what);
    pcre2_compile_context *cc = pcre2_compile_context_create(gc);
    if (!cc) {
        pcre2_general_context_free(gc);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "tokenizer: out of memory compiling %s", what);
    }
    sd_tok_buf pat = {0};
    int rr = literal ? sd_tok_buf_put(&pat, pattern, len) : sd_tok_regex_rewrite(&pat, pattern, len);
    if (rr) {
        sd_tok_buf_free(&pat);
        pcre2_compile_context_free(cc);
        pcre2_general_context_free(gc);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "tokenizer: out of memory compiling %s", what);
    }
    int errcode = 0;
    PCRE2_SIZE erroff = 0;
    uint32_t opts = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    re->code = pcre2_compile((PCRE2_SPTR)(pat.p ? pat.p : ""), pat.len, opts, &errcode, &erroff, cc);
    sd_tok_buf_free(&pat);
    pcre2_compile_context_free(cc);
    pcre2_general_context_free(gc);
    if (!re->code) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(errcode, msg, sizeof msg);
        if (errcode == PCRE2_ERROR_NOMEMORY || errcode == PCRE2_ERROR_HEAP_FAILED || errcode == PCRE2_ERROR_HEAPLIMIT)
            return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "tokenizer: out of memory compiling %s", what);
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "tokenizer: %s: regex '%.*s' does not compile at offset %zu: %s",
                       what, (int)(len > 200 ? 200 : len), pattern, (size_t)erroff, (const char *)msg);
    }
    /* JIT is an optimisation: without it (no JIT support, no executable memory) the
     * interpreter gives the same matches. */
    (void)pcre2_jit_compile(re->code, PCRE2_JIT_COMPLETE);
    return SPECDEC_OK;
}

void sd_tok_regex_free(sd_tok_regex *re) {
    if (re->code) pcre2_code_free(re->code);
    re->code = NULL;
}

static int sd_tok_matches_push(sd_tok_matches *m, size_t s, size_t e, int is_match) {
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 64;
        sd_tok_match *v = sd_realloc(m->v, cap * sizeof *v);
        if (!v) return -1;
        m->v = v;
        m->cap = cap;
    }
    m->v[m->n++] = (sd_tok_match){s, e, is_match};
    return 0;
}

int sd_tok_regex_find(const sd_tok_regex *re, sd_tok_work *w, const char *s, size_t n, sd_tok_matches *out) {
    out->n = 0;
    if (n == 0) return sd_tok_matches_push(out, 0, 0, 0);
    if (!w->md) {
        pcre2_general_context *gc = pcre2_general_context_create(sd_tok_pcre_malloc, sd_tok_pcre_free, NULL);
        if (!gc) return -1;
        w->md = pcre2_match_data_create(1, gc);
        pcre2_general_context_free(gc);
        if (!w->md) return -1;
    }
    size_t prev = 0, pos = 0;
    while (pos <= n) {
        int rc = pcre2_match(re->code, (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, w->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc == PCRE2_ERROR_NOMEMORY) return -1;
        if (rc < 0) return -2;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(w->md);
        size_t ms = ov[0], me = ov[1];
        if (ms > n || me > n || me < ms) return -2;
        if (prev != ms && sd_tok_matches_push(out, prev, ms, 0)) return -1;
        if (sd_tok_matches_push(out, ms, me, 1)) return -1;
        prev = me;
        if (me == ms) {
            /* empty match: step over one character */
            if (me >= n) break;
            int32_t cp;
            pos = me + sd_utf8_next(s + me, n - me, &cp);
        } else {
            pos = me;
        }
    }
    if (prev != n && sd_tok_matches_push(out, prev, n, 0)) return -1;
    return 0;
}
