/* gguf_compare.c — a GGUF-embedded tokenizer against the tokenizer.json it was made from.
 *
 * usage: gguf_compare REF GGUF [STRINGS]
 *   REF: a tokenizer directory (tokenizer.json + tokenizer_config.json) loaded by specdec's
 *   tokenizer.json loader (itself checked identical to the `tokenizers` library); GGUF: the .gguf
 *   written from it (tools/gen_gguf_tokenizer_fixtures.py); STRINGS: "SDGS1\n", u32 count, then per
 *   string u32 len + bytes (raw, possibly invalid UTF-8); without it a built-in list is used.
 * Checks: the vocabulary size and every id's piece; per string the ids of encode(add_special=0)
 * (identical), encode(add_special=1) (= the GGUF's BOS when it adds one, then the same ids), the
 * decodes with and without skip_special (identical; with skip_special only where no id's special
 * flag differs, those cases counted); the chat template text and a rendered conversation.
 * Prints "specials: ..." (BOS / EOS / add_bos of both) and every id whose special flag differs. */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_test.h"
#include "sd_test_util.h"
#include "sd_tokenizer.h"
#include "specdec.h"

static const char *builtin[] = {
    "", " ", "Hello world", "  leading spaces", "trailing  ", "the speculative decoding of a thing",
    "ab12 345.6, 7890!", "tabs\tand\nnewlines\r\n\n", "CJK 世界 你好", "emoji 😀👍🏽🇫🇷", "it's we'll THEY'RE",
    "<s>text</s> <unk> <tool> x", "<|endoftext|> <|im_start|>user\nhi<|im_end|>", "\xff\xfe invalid \xc3",
    "def f(x):\n    return x ** 2\n", "   \n\t  ", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
};

static int ids_eq(const int32_t *a, int32_t na, const int32_t *b, int32_t nb) {
    return na == nb && (na == 0 || !memcmp(a, b, (size_t)na * sizeof *a));
}

int main(int argc, char **argv) {
    if (argc < 3 || argc > 4) {
        fprintf(stderr, "usage: gguf_compare REF GGUF [STRINGS]\n");
        return 2;
    }
    specdec_tokenizer *ref = NULL, *gg = NULL;
    if (specdec_tokenizer_load(argv[1], &ref)) { fprintf(stderr, "load %s: %s\n", argv[1], specdec_last_error()); return 1; }
    double t0 = sd_test_now_s();
    specdec_status st = specdec_tokenizer_load(argv[2], &gg);
    double load_s = sd_test_now_s() - t0;
    if (st) { fprintf(stderr, "load %s: %s\n", argv[2], specdec_last_error()); return 1; }

    int32_t nv = specdec_tokenizer_vocab_size(ref);
    SD_CHECK(specdec_tokenizer_vocab_size(gg) == nv, "vocab size %d, tokenizer.json %d", specdec_tokenizer_vocab_size(gg), nv);
    printf("specials: bos %d/%d eos %d/%d add_bos %d/%d (GGUF/tokenizer.json)\n", specdec_tokenizer_bos_id(gg),
           specdec_tokenizer_bos_id(ref), specdec_tokenizer_eos_id(gg), specdec_tokenizer_eos_id(ref),
           specdec_tokenizer_add_bos(gg), specdec_tokenizer_add_bos(ref));
    char p1[70000], p2[70000];
    int bad_pieces = 0, special_diff = 0;
    unsigned char *sdiff = calloc((size_t)nv + 1, 1);
    for (int32_t id = 0; id < nv; id++) {
        size_t l1 = 0, l2 = 0;
        specdec_status s1 = specdec_token_to_piece(ref, id, p1, sizeof p1, &l1);
        specdec_status s2 = specdec_token_to_piece(gg, id, p2, sizeof p2, &l2);
        if (s1 != s2 || l1 != l2 || memcmp(p1, p2, l1)) {
            if (bad_pieces++ < 5) fprintf(stderr, "piece of id %d differs (status %d/%d)\n", id, s2, s1);
        }
        if (sd_tok_is_special(ref, id) != sd_tok_is_special(gg, id)) {
            sdiff[id] = 1;
            special_diff++;
            printf("special flag differs: id %d \"%.*s\" is %sspecial in the GGUF\n", id, (int)l1, p1,
                   sd_tok_is_special(gg, id) ? "" : "not ");
        }
    }
    SD_CHECK(bad_pieces == 0, "%d ids' pieces differ", bad_pieces);

    /* strings */
    unsigned char *data = NULL;
    size_t dl = 0;
    uint32_t count = sizeof builtin / sizeof *builtin;
    if (argc == 4) {
        FILE *f = fopen(argv[3], "rb");
        if (!f) { fprintf(stderr, "cannot open %s\n", argv[3]); return 2; }
        fseek(f, 0, SEEK_END);
        long fl = ftell(f);
        fseek(f, 0, SEEK_SET);
        data = malloc((size_t)fl + 1);
        if (!data || fread(data, 1, (size_t)fl, f) != (size_t)fl || fl < 10 || memcmp(data, "SDGS1\n", 6)) {
            fprintf(stderr, "bad strings file %s\n", argv[3]);
            return 2;
        }
        fclose(f);
        dl = (size_t)fl;
        memcpy(&count, data + 6, 4);
    }
    size_t at = 10, cap = 1 << 17;
    int32_t *a = malloc(cap * 4), *b = malloc(cap * 4);
    char *da = malloc(1 << 21), *db = malloc(1 << 21);
    uint32_t fails = 0, skipped_special = 0;
    for (uint32_t c = 0; c < count; c++) {
        const char *text;
        uint32_t tl;
        if (data) {
            if (dl - at < 4) break;
            memcpy(&tl, data + at, 4);
            at += 4;
            if (dl - at < tl) break;
            text = (const char *)data + at;
            at += tl;
        } else {
            text = builtin[c];
            tl = (uint32_t)strlen(text);
        }
        int32_t na = 0, nb = 0, nbs = 0;
        int bad = 0;
        if (specdec_tokenize(ref, text, tl, 0, a, (int32_t)cap, &na) || specdec_tokenize(gg, text, tl, 0, b, (int32_t)cap, &nb) ||
            !ids_eq(a, na, b, nb)) {
            bad = 1;
            if (fails < 6) fprintf(stderr, "case %u: encode ids differ (%d vs %d ids) for \"%.80s\"\n", c, nb, na, text);
        }
        /* add_special: the GGUF's BOS (when it adds one) and the same ids */
        int32_t off = specdec_tokenizer_add_bos(gg) ? 1 : 0;
        if (!bad && (specdec_tokenize(gg, text, tl, 1, b, (int32_t)cap, &nbs) || nbs != na + off ||
                     (off && b[0] != specdec_tokenizer_bos_id(gg)) || !ids_eq(a, na, b + off, nbs - off))) {
            bad = 1;
            if (fails < 6) fprintf(stderr, "case %u: encode(add_special=1) differs\n", c);
        }
        int has_sdiff = 0;
        for (int32_t i = 0; i < na; i++) has_sdiff |= a[i] >= 0 && a[i] < nv && sdiff[a[i]];
        for (int skip = 0; skip < 2 && !bad; skip++) {
            if (skip && has_sdiff) { skipped_special++; break; }
            size_t la = 0, lb = 0;
            specdec_status s1 = specdec_detokenize(ref, a, na, skip, da, 1 << 21, &la);
            specdec_status s2 = specdec_detokenize(gg, a, na, skip, db, 1 << 21, &lb);
            if (s1 != s2 || la != lb || memcmp(da, db, la)) {
                bad = 1;
                if (fails < 6) fprintf(stderr, "case %u: decode(skip_special=%d) differs\n", c, skip);
            }
        }
        fails += (uint32_t)bad;
    }
    SD_CHECK(fails == 0, "%u of %u strings differ", fails, count);

    /* chat template: the same text and the same rendering */
    const char *ta = specdec_tokenizer_chat_template(ref), *tb = specdec_tokenizer_chat_template(gg);
    SD_CHECK((!ta && !tb) || (ta && tb && !strcmp(ta, tb)), "chat templates differ");
    if (ta && tb) {
        specdec_chat_message msgs[3] = {{"system", "Be brief."}, {"user", "Hi there"}, {"assistant", "Hello!"}};
        char ra[8192], rb[8192];
        size_t la = 0, lb = 0;
        specdec_status s1 = specdec_chat_apply(ref, NULL, msgs + 1, 2, 1, ra, sizeof ra, &la);
        specdec_status s2 = specdec_chat_apply(gg, NULL, msgs + 1, 2, 1, rb, sizeof rb, &lb);
        SD_CHECK(s1 == s2 && la == lb && !memcmp(ra, rb, la), "chat renderings differ (status %d/%d)", s2, s1);
        printf("chat: %zu bytes rendered, status %d\n", lb, s2);
    }
    printf("%s: %u strings, %u differ, %u skip_special decodes not compared (special flag differs), %d ids' "
           "special flag differs; GGUF load %.3f s\n", argv[2], count, fails, skipped_special, special_diff, load_s);
    free(a);
    free(b);
    free(da);
    free(db);
    free(data);
    free(sdiff);
    specdec_tokenizer_free(ref);
    specdec_tokenizer_free(gg);
    return sd_test_done();
}
