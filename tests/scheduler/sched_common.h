/* sched_common.h — shared by the scheduler tests (header-only): the bundled pair,
 * prompt encoding, generation parameters of the two reproducible modes (greedy, and
 * match = coupled sampling, whose output equals plain decoding for any draft and γ),
 * reference outputs from specdec_generate alone, and a small fixed-seed RNG. */
#ifndef SCHED_COMMON_H
#define SCHED_COMMON_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sd_test.h"
#include "specdec.h"

typedef struct sc_env {
    specdec_model *tm, *dm;
    specdec_tokenizer *tok;
    specdec_engine *ref;      /* for reference outputs: specdec_generate alone */
} sc_env;

static const char *const SC_PROMPTS[] = {
    "And God said",
    "In the beginning God created",
    "And the LORD spake unto Moses, saying,",
    "Blessed are they that",
    "Then answered Jesus and said unto them,",
    "And it came to pass, when the king",
};
#define SC_N_PROMPTS (int)(sizeof SC_PROMPTS / sizeof SC_PROMPTS[0])

/* The backend of the schedulers and of the reference engine: the CPU (reproducible
 * everywhere; the scheduler is backend-agnostic), or CUDA for a test's GPU variant
 * (sc_backend_arg: `--cuda` as the first argument). */
static specdec_backend sc_backend = SPECDEC_BACKEND_CPU;

static inline specdec_engine_params sc_engine_params(void) {
    specdec_engine_params ep = specdec_engine_default_params();
    ep.backend = sc_backend;
    return ep;
}

/* `--cuda` as argv[1]: run on CUDA (the arguments shift by one). Returns 1 when given,
 * 0 when not, -1 when given but no device is usable (the test then skips with 77). */
static inline int sc_backend_arg(int argc, char **argv) {
    if (argc < 2 || strcmp(argv[1], "--cuda") != 0) return 0;
    if (specdec_cuda_device_count() <= 0) return -1;
    sc_backend = SPECDEC_BACKEND_CUDA;
    return 1;
}

static inline void sc_env_free(sc_env *e) {
    specdec_engine_free(e->ref);
    specdec_tokenizer_free(e->tok);
    specdec_model_free(e->dm);
    specdec_model_free(e->tm);
    memset(e, 0, sizeof *e);
}

/* The EAGLE-3 head in dir and an engine of e's target with it as the draft: 0 on success; prints
 * why and returns non-zero otherwise. */
static inline int sc_head_load(const sc_env *e, const char *dir, specdec_model **head, specdec_engine **eh) {
    specdec_engine_params ep = sc_engine_params();
    *head = NULL;
    *eh = NULL;
    if (specdec_model_load(dir, NULL, head) || specdec_engine_create(e->tm, *head, &ep, eh)) {
        fprintf(stderr, "loading the EAGLE-3 head: %s\n", specdec_last_error());
        return 1;
    }
    return 0;
}

/* 0 on success; prints why and returns non-zero otherwise. */
static inline int sc_env_load(sc_env *e, const char *tdir, const char *ddir) {
    memset(e, 0, sizeof *e);
    specdec_engine_params ep = sc_engine_params();
    if (specdec_model_load(tdir, NULL, &e->tm) || specdec_model_load(ddir, NULL, &e->dm) ||
        specdec_tokenizer_load(tdir, &e->tok) || specdec_engine_create(e->tm, e->dm, &ep, &e->ref)) {
        fprintf(stderr, "loading the bundled pair: %s\n", specdec_last_error());
        sc_env_free(e);
        return 1;
    }
    return 0;
}

/* Prompt ids (with BOS as the tokenizer says), or -1. */
static inline int32_t sc_encode(const sc_env *e, const char *text, int32_t *ids, int32_t cap) {
    int32_t n = 0;
    if (specdec_tokenize(e->tok, text, strlen(text), 1, ids, cap, &n) != SPECDEC_OK) return -1;
    return n;
}

/* mode 0: greedy; mode 1: match-mode sampling with `seed`. */
static inline specdec_generate_params sc_params(int mode, uint64_t seed, int32_t n_predict, int32_t n_draft) {
    specdec_generate_params gp = specdec_generate_default_params();
    gp.n_predict = n_predict;
    gp.n_draft = n_draft;
    if (mode == 0) {
        gp.temperature = 0.0f;
        gp.verify = SPECDEC_VERIFY_GREEDY;
    } else {
        gp.temperature = 0.8f;
        gp.verify = SPECDEC_VERIFY_MATCH;
        gp.seed = seed;
    }
    return gp;
}

/* Reference output of specdec_generate alone; returns the count or -1. */
static inline int32_t sc_reference(sc_env *e, const int32_t *prompt, int32_t n_prompt,
                                   const specdec_generate_params *gp, int32_t *out, int32_t cap,
                                   specdec_stats *stats) {
    int32_t n = 0;
    specdec_stats local;
    specdec_status st = specdec_generate(e->ref, prompt, n_prompt, gp, out, cap, &n, stats ? stats : &local);
    if (st != SPECDEC_OK) {
        fprintf(stderr, "reference generate: %s: %s\n", specdec_status_string(st), specdec_engine_last_error(e->ref));
        return -1;
    }
    return n;
}

/* xorshift64*: fixed-seed schedules. */
static inline uint64_t sc_rand(uint64_t *s) {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ULL;
}
static inline int sc_rand_int(uint64_t *s, int lo, int hi) { /* [lo, hi] */
    return lo + (int)(sc_rand(s) % (uint64_t)(hi - lo + 1));
}

static inline void sc_sleep_us(long us) {
    struct timespec t = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&t, NULL);
}

static inline double sc_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* 1 if a[0..n) == b[0..n). */
static inline int sc_same(const int32_t *a, const int32_t *b, int32_t n) {
    return n == 0 || memcmp(a, b, (size_t)n * sizeof(int32_t)) == 0;
}

#endif
