/* test_token_bytes.c — structured output's view of a vocabulary (tokenizer/sd_tokenizer_grammar.c:
 * every token's bytes as they appear inside a text) against the tokenizer's own decoding, on the
 * bundled tokenizer and the real ones of ../shared/tokenizers (byte-level BPE: GPT-2, Llama 3,
 * Qwen2.5, Phi-3; SentencePiece-style with byte fallback: TinyLlama, Mistral).
 * For every text token t whose bytes are valid UTF-8: decode([A, t]) == decode([A]) + bytes(t),
 * where A is the token spelled "a" (so no decoder's start-of-text rule touches t). Tokens whose
 * bytes are not valid UTF-8 alone (parts of a character): decode of the pair with a completing
 * token is not checked; "<0xHH>" fallback tokens must be the byte HH. Special tokens have no text.
 * Folders that are absent are skipped with a message; the bundled one is always there. */
#include <stdio.h>
#include <string.h>

#include "sd_grammar.h"
#include "sd_test.h"
#include "sd_tokenizer.h"
#include "sd_utf8.h"

static int32_t find_a(const sd_grammar_vocab *v) {
    for (int32_t t = 0; t < v->n; t++)
        if (v->text[t] && v->off[t + 1] - v->off[t] == 1 && v->bytes[v->off[t]] == 'a') return t;
    return -1;
}

static void check_dir(const char *dir) {
    specdec_tokenizer *tok = NULL;
    if (specdec_tokenizer_load(dir, &tok) != SPECDEC_OK) {
        printf("skipped %s: %s\n", dir, specdec_last_error());
        return;
    }
    sd_grammar_vocab *v = NULL;
    SD_CHECK(sd_tok_grammar_vocab(tok, &v, NULL) == SPECDEC_OK, "%s: vocab: %s", dir, specdec_last_error());
    if (!v) return specdec_tokenizer_free(tok);
    const int32_t A = find_a(v);
    SD_CHECK(A >= 0, "%s: no token spells \"a\"", dir);
    static char base[64], got[1 << 17];
    size_t lb = 0, lg = 0;
    SD_CHECK(specdec_detokenize(tok, &A, 1, 0, base, sizeof base, &lb) == SPECDEC_OK && lb == 1, "%s: decode a", dir);
    long checked = 0, partial = 0, bad = 0, special_text = 0, n_text = 0;
    for (int32_t t = 0; t < v->n && A >= 0; t++) {
        if (sd_tok_is_special(tok, t)) special_text += v->text[t];
        if (!v->text[t]) continue;
        n_text++;
        const uint8_t *b = v->bytes + v->off[t];
        const size_t n = v->off[t + 1] - v->off[t];
        size_t l;
        const char *s = sd_tok_id_str(tok, t, &l);
        if (l == 6 && !memcmp(s, "<0x", 3) && s[5] == '>' && tok->byte_fallback) {
            unsigned x = 0;
            sscanf(s + 3, "%2x", &x);
            bad += n != 1 || b[0] != x;
        }
        if (!sd_utf8_valid(b, n)) {
            partial++;
            continue;
        }
        const int32_t ids[2] = {A, t};
        if (specdec_detokenize(tok, ids, 2, 0, got, sizeof got, &lg) != SPECDEC_OK) {
            bad++;
            continue;
        }
        checked++;
        if (lg != 1 + n || memcmp(got, base, 1) || memcmp(got + 1, b, n)) {
            if (bad++ < 5)
                fprintf(stderr, "%s: token %d (%.*s): bytes \"%.*s\", decode after 'a' \"%.*s\"\n", dir, (int)t, (int)l, s,
                        (int)n, (const char *)b, (int)lg, got);
        }
    }
    printf("%s: %ld tokens, %ld text, %ld checked, %ld partial characters, %ld differ\n", dir, (long)v->n, n_text,
           checked, partial, bad);
    SD_CHECK(bad == 0, "%s: %ld tokens' bytes differ from their decoding", dir, bad);
    SD_CHECK(special_text == 0, "%s: %ld special tokens have text", dir, special_text);
    SD_CHECK(checked * 10 >= n_text * 8, "%s: most text tokens are whole characters (%ld of %ld)", dir, checked, n_text);
    sd_grammar_vocab_release(v);
    specdec_tokenizer_free(tok);
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) check_dir(argv[i]);
    return sd_test_done();
}
