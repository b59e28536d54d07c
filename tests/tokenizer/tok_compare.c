/* tok_compare.c — compares specdec's tokenizer with the `tokenizers` library's results
 * written by gen_fixtures.py.
 *
 * usage: tok_compare TOKENIZER_DIR_OR_JSON FIXTURE_FILE
 * Fixture format (little-endian): "SDTK1\n", u32 count, then per case:
 *   text (u32 len + bytes, raw, possibly invalid UTF-8),
 *   ids of encode(text, add_special_tokens=False), ids of encode(.., True) (u32 n + i32[n]),
 *   decode(ids_plain, skip_special_tokens=False), decode(ids_special, True) (u32 len + bytes).
 * The library saw text.decode("utf-8", errors="replace").
 * Checks per case: both id lists, both decodes, and that the streaming decoder's pieces
 * are valid UTF-8 and concatenate to the full decode. Prints the first mismatches. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sd_test.h"
#include "sd_test_util.h"
#include "specdec.h"

typedef struct { const unsigned char *p, *end; int bad; } rd_t;

static uint32_t rd_u32(rd_t *r) {
    if (r->end - r->p < 4) { r->bad = 1; return 0; }
    uint32_t v = (uint32_t)r->p[0] | (uint32_t)r->p[1] << 8 | (uint32_t)r->p[2] << 16 | (uint32_t)r->p[3] << 24;
    r->p += 4;
    return v;
}

static const unsigned char *rd_bytes(rd_t *r, uint32_t n) {
    if ((size_t)(r->end - r->p) < n) { r->bad = 1; return NULL; }
    const unsigned char *p = r->p;
    r->p += n;
    return p;
}

static int valid_utf8(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c = (unsigned char)s[i];
        size_t need;
        unsigned lo = 0x80, hi = 0xBF;
        if (c < 0x80) { i++; continue; }
        if (c >= 0xC2 && c <= 0xDF) need = 1;
        else if (c == 0xE0) { need = 2; lo = 0xA0; }
        else if (c == 0xED) { need = 2; hi = 0x9F; }
        else if (c >= 0xE1 && c <= 0xEF) need = 2;
        else if (c == 0xF0) { need = 3; lo = 0x90; }
        else if (c == 0xF4) { need = 3; hi = 0x8F; }
        else if (c >= 0xF1 && c <= 0xF3) need = 3;
        else return 0;
        for (size_t k = 1; k <= need; k++) {
            if (i + k >= n) return 0;
            unsigned d = (unsigned char)s[i + k];
            if (d < (k == 1 ? lo : 0x80) || d > (k == 1 ? hi : 0xBF)) return 0;
        }
        i += need + 1;
    }
    return 1;
}

static void print_ids(const char *label, const int32_t *ids, uint32_t n) {
    fprintf(stderr, "    %s (%u):", label, n);
    for (uint32_t i = 0; i < n && i < 40; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, n > 40 ? " ...\n" : "\n");
}

static void print_text(const char *label, const char *s, size_t n) {
    fprintf(stderr, "    %s (%zu bytes): \"", label, n);
    for (size_t i = 0; i < n && i < 160; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c < 0x20 || c == 0x7f || c == '"' || c == '\\') fprintf(stderr, "\\x%02x", c);
        else fputc(c, stderr);
    }
    fprintf(stderr, n > 160 ? "\"...\n" : "\"\n");
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: tok_compare TOKENIZER FIXTURE\n");
        return 2;
    }
    FILE *f = fopen(argv[2], "rb");
    if (!f) { fprintf(stderr, "cannot open %s\n", argv[2]); return 2; }
    fseek(f, 0, SEEK_END);
    long fl = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = malloc((size_t)fl + 1);
    if (!data || fread(data, 1, (size_t)fl, f) != (size_t)fl) { fprintf(stderr, "read error\n"); return 2; }
    fclose(f);
    if (fl < 6 || memcmp(data, "SDTK1\n", 6)) { fprintf(stderr, "bad fixture magic\n"); return 2; }
    rd_t r = {data + 6, data + fl, 0};

    double t0 = sd_test_now_s();
    specdec_tokenizer *tok = NULL;
    specdec_status st = specdec_tokenizer_load(argv[1], &tok);
    double load_s = sd_test_now_s() - t0;
    SD_CHECK(st == SPECDEC_OK, "load %s: %s", argv[1], specdec_last_error());
    if (st) return sd_test_done();

    uint32_t count = rd_u32(&r);
    size_t cap_ids = 1 << 16, cap_txt = 1 << 20;
    int32_t *ids = malloc(cap_ids * sizeof *ids);
    char *txt = malloc(cap_txt), *streamed = malloc(cap_txt);
    int shown = 0;
    uint32_t fails = 0, streamed_checks = 0;
    size_t total_bytes = 0;
    for (uint32_t c = 0; c < count && !r.bad; c++) {
        uint32_t tl = rd_u32(&r);
        const char *text = (const char *)rd_bytes(&r, tl);
        uint32_t n1 = rd_u32(&r);
        const int32_t *e1 = (const int32_t *)rd_bytes(&r, n1 * 4);
        uint32_t n2 = rd_u32(&r);
        const int32_t *e2 = (const int32_t *)rd_bytes(&r, n2 * 4);
        uint32_t d1l = rd_u32(&r);
        const char *d1 = (const char *)rd_bytes(&r, d1l);
        uint32_t d2l = rd_u32(&r);
        const char *d2 = (const char *)rd_bytes(&r, d2l);
        if (r.bad) break;
        total_bytes += tl;
        /* fixture ids are not aligned: copy */
        int32_t *x1 = malloc((n1 + 1) * 4), *x2 = malloc((n2 + 1) * 4);
        memcpy(x1, e1, n1 * 4);
        memcpy(x2, e2, n2 * 4);
        int bad = 0;
        for (int special = 0; special < 2; special++) {
            const int32_t *exp = special ? x2 : x1;
            uint32_t en = special ? n2 : n1;
            int32_t n = 0;
            st = specdec_tokenize(tok, text, tl, special, ids, (int32_t)cap_ids, &n);
            if (st || (uint32_t)n != en || memcmp(ids, exp, en * 4)) {
                bad = 1;
                if (shown < 8) {
                    fprintf(stderr, "MISMATCH case %u encode(add_special=%d) status %d %s\n", c, special, st,
                            st ? specdec_last_error() : "");
                    print_text("text", text, tl);
                    print_ids("expected", exp, en);
                    print_ids("got     ", ids, (uint32_t)n);
                }
            }
        }
        for (int k = 0; k < 2; k++) {
            const int32_t *in = k ? x2 : x1;
            uint32_t inn = k ? n2 : n1;
            const char *exp = k ? d2 : d1;
            uint32_t el = k ? d2l : d1l;
            size_t len = 0;
            st = specdec_detokenize(tok, in, (int32_t)inn, k, txt, cap_txt, &len);
            if (st || len != el || memcmp(txt, exp, el)) {
                bad = 1;
                if (shown < 8) {
                    fprintf(stderr, "MISMATCH case %u decode(skip_special=%d) status %d\n", c, k, st);
                    print_ids("ids", in, inn);
                    print_text("expected", exp, el);
                    print_text("got     ", txt, len);
                }
            }
        }
        /* streaming: pieces are valid UTF-8 and add up to decode(ids, skip=0) */
        specdec_detok_stream *s = NULL;
        if (specdec_detok_stream_create(tok, 0, &s) == SPECDEC_OK) {
            size_t sl = 0;
            int sbad = 0;
            for (uint32_t i = 0; i <= n1 && !sbad; i++) {
                const char *p;
                size_t pl;
                st = i < n1 ? specdec_detok_stream_push(s, x1[i], &p, &pl) : specdec_detok_stream_flush(s, &p, &pl);
                if (st || !valid_utf8(p, pl) || sl + pl > cap_txt) { sbad = 1; break; }
                memcpy(streamed + sl, p, pl);
                sl += pl;
            }
            if (sbad || sl != d1l || memcmp(streamed, d1, d1l)) {
                bad = 1;
                if (shown < 8) {
                    fprintf(stderr, "MISMATCH case %u streaming decode (status %d)\n", c, st);
                    print_text("expected", d1, d1l);
                    print_text("streamed", streamed, sl);
                }
            }
            streamed_checks++;
            specdec_detok_stream_free(s);
        }
        if (bad) { fails++; shown++; }
        free(x1);
        free(x2);
    }
    SD_CHECK(!r.bad, "fixture file truncated");
    SD_CHECK(fails == 0, "%u of %u cases differ from the tokenizers library", fails, count);
    printf("%s: %u cases (%zu bytes of text), %u differ, %u streamed; load %.3f s\n", argv[1], count, total_bytes, fails,
           streamed_checks, load_s);
    free(ids);
    free(txt);
    free(streamed);
    free(data);
    specdec_tokenizer_free(tok);
    return sd_test_done();
}
