/* bench_grammar.c — what structured output (docs/STRUCTURED.md) adds to a row. For each tokenizer
 * given (default: the bundled one; the published ones of ../shared/tokenizers when named), and
 * four grammars (json_object; a JSON schema of a small record; a regex of a date list; a JSON
 * GBNF grammar of llama.cpp's json.gbnf shape, core/sd_gbnf.h), it
 * tokenizes an output the grammar accepts and walks it token by token as a generation would:
 *   - the first compile of a tokenizer (indexing its vocabulary: every token's bytes, sorted);
 *   - per row, cold: the grammar's state after the tokens so far, then its mask on a row of V
 *     logits, the first time the state is seen (the mask is walked over the vocabulary);
 *   - per row, warm: the same walk again (every mask cached);
 * against sd_sampling_process of a row of the same V (T 0.8, top-k 40, top-p 0.95, min-p 0.05),
 * all in the same run. Medians of `repeats` (default 5) runs; cold rows are a fresh compile each
 * run. Usage: bench_grammar [--repeats N] [tokenizer dir ...]  (results in bench/results/). */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "sd_cpu_sample.h"
#include "sd_grammar.h"

static const char SCHEMA[] =
    "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"age\":{\"type\":\"integer\"},"
    "\"email\":{\"type\":\"string\"},\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
    "\"active\":{\"type\":\"boolean\"}},\"required\":[\"name\",\"age\",\"email\",\"tags\",\"active\"]}";
static const char RECORD[] =
    "{\"name\":\"Ada Lovelace\",\"age\":36,\"email\":\"ada@example.org\",\"tags\":[\"math\",\"poetry\","
    "\"engines\"],\"active\":true}";
static const char REGEX[] = "\\d{4}-\\d{2}-\\d{2}(, \\d{4}-\\d{2}-\\d{2})*";
static const char GBNF_JSON[] =
    "root ::= object\n"
    "value ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::= \"{\" ws (string \":\" ws value (\",\" ws string \":\" ws value)*)? \"}\" ws\n"
    "array ::= \"[\" ws (value (\",\" ws value)*)? \"]\" ws\n"
    "string ::= \"\\\"\" ([^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}))* \"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9]+)? ws\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";
static const char DATES[] = "1815-12-10, 1843-07-01, 1852-11-27, 2026-11-28";

typedef struct gcase {
    const char *name;
    specdec_grammar_kind kind;
    const char *spec, *text;
} gcase;

/* One walk over ids with grammar g: rows per second of state + mask. */
static double walk_us(const specdec_grammar *g, const int32_t *ids, int32_t n, float *row, int32_t V,
                      const int32_t *ends) {
    sd_grammar_cursor cur = {0, sd_grammar_start(g)};
    const double t0 = bench_now_s();
    for (int32_t i = 0; i <= n; i++) {
        int32_t s;
        int only_end;
        if (sd_grammar_state_at(g, &cur, ids, i, NULL, 0, ends, 1, NULL, &s, NULL) != SPECDEC_OK || s < 0) return NAN;
        if (sd_grammar_apply(g, s, row, V, ends, 1, &only_end, NULL) != SPECDEC_OK) return NAN;
    }
    return (bench_now_s() - t0) / (n + 1) * 1e6;
}

/* The ids of text as a generation would emit them: a SentencePiece tokenizer gives the first
 * piece its '\u2581' (a space the grammar refuses), so "x" + text is tokenized and the "x" dropped. */
static int tokens_of(const specdec_tokenizer *tok, const char *text, int32_t *ids, int32_t *n) {
    char buf[1024], back[1024];
    size_t lb = 0;
    snprintf(buf, sizeof buf, "x%s", text);
    if (specdec_tokenize(tok, buf, strlen(buf), 0, ids, 512, n) != SPECDEC_OK || *n < 2) return 1;
    memmove(ids, ids + 1, (size_t)(--*n) * sizeof *ids);
    if (specdec_detokenize(tok, ids, *n, 1, back, sizeof back, &lb) != SPECDEC_OK) return 1;
    return lb != strlen(text) || memcmp(back, text, lb) != 0;
}

static void bench_tok(const char *dir, int reps) {
    specdec_tokenizer *tok = NULL;
    if (specdec_tokenizer_load(dir, &tok) != SPECDEC_OK) {
        printf("| %s | skipped: %s |||||\n", dir, specdec_last_error());
        return;
    }
    const int32_t V = specdec_tokenizer_vocab_size(tok), ends[1] = {specdec_tokenizer_eos_id(tok)};
    const gcase cases[4] = {{"json_object", SPECDEC_GRAMMAR_JSON_OBJECT, NULL, RECORD},
                            {"json schema", SPECDEC_GRAMMAR_JSON_SCHEMA, SCHEMA, RECORD},
                            {"regex dates", SPECDEC_GRAMMAR_REGEX, REGEX, DATES},
                            {"gbnf json", SPECDEC_GRAMMAR_GBNF, GBNF_JSON, RECORD}};
    float *row = malloc((size_t)V * sizeof *row), *p = malloc((size_t)V * sizeof *p);
    const size_t ss = sd_sampling_scratch_size(V);
    void *scratch = malloc(ss);
    const sd_sampling_params sp = {0.8f, 40, 0.95f, 0.05f};
    double t0 = bench_now_s(), tc[16], tw[16], ts[16];
    specdec_grammar *g = NULL;
    if (specdec_grammar_compile(tok, SPECDEC_GRAMMAR_REGEX, "a", 1, &g) != SPECDEC_OK) return;
    const double index_ms = (bench_now_s() - t0) * 1e3;
    specdec_grammar_free(g);
    for (int32_t i = 0; i < V; i++) row[i] = (float)((i * 7919) % 1000) / 100.0f;
    for (int r = 0; r < reps; r++) {
        t0 = bench_now_s();
        for (int k = 0; k < 20; k++) sd_sampling_process(row, V, &sp, scratch, ss, p, NULL);
        ts[r] = (bench_now_s() - t0) / 20 * 1e6;
    }
    const double samp = bench_median(ts, reps);
    for (int c = 0; c < 4; c++) {
        int32_t ids[512], n = 0;
        if (tokens_of(tok, cases[c].text, ids, &n)) {
            printf("| %s | %s | cannot tokenize the text as a mid-text run |||||\n", dir, cases[c].name);
            continue;
        }
        int r = 0;
        for (; r < reps; r++) {
            const char *spec = cases[c].spec;
            if (specdec_grammar_compile(tok, cases[c].kind, spec, spec ? strlen(spec) : 0, &g) != SPECDEC_OK) {
                printf("| %s | %s | compile failed: %s |||||\n", dir, cases[c].name, specdec_last_error());
                break;
            }
            tc[r] = walk_us(g, ids, n, row, V, ends);
            tw[r] = walk_us(g, ids, n, row, V, ends);
            specdec_grammar_free(g);
        }
        if (r < reps) continue;
        const double cold = bench_median(tc, reps), warm = bench_median(tw, reps);
        printf("| %s | %d | %.0f | %s | %d | %.1f | %.1f | %.1f | %.2f |\n", strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir,
               (int)V, index_ms, cases[c].name, (int)n, cold, warm, samp, warm / samp);
    }
    free(row), free(p), free(scratch);
    specdec_tokenizer_free(tok);
}

int main(int argc, char **argv) {
    int reps = 5, a = 1;
    if (argc > 2 && !strcmp(argv[1], "--repeats")) reps = atoi(argv[2]), a = 3;
    if (reps < 1 || reps > 16) {
        fprintf(stderr, "usage: bench_grammar [--repeats 1..16] [tokenizer dir ...]\n");
        return 2;
    }
    printf("| tokenizer | V | index ms | grammar | tokens | cold us/row | warm us/row | sampler us/row | warm/sampler |\n"
           "|---|---|---|---|---|---|---|---|---|\n");
    if (a >= argc) bench_tok(SPECDEC_SOURCE_DIR "/models/kjv-target", reps);
    for (; a < argc; a++) bench_tok(argv[a], reps);
    printf("\nPer row: the grammar's state after the tokens so far and its mask applied to a row of V logits\n"
           "(cold: each state's mask walked over the vocabulary on first use; warm: cached). The sampler\n"
           "column processes one row of the same V. index: the first compile of the tokenizer. This\n"
           "machine, this run.\n");
    return 0;
}
