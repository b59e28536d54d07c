/* sd_ngram_corpus.c — the n-gram drafter's cross-request corpus (core/sd_drafter.h
 * sd_ngram_corpus; docs/DRAFTERS.md "Across requests"): the token sequences of finished
 * generations, which the drafter searches for the current sequence's suffix after the
 * sequence itself, as SuffixDecoding's global cache of earlier responses does.
 *
 * Entries are kept whole, oldest evicted first, within a budget of tokens; an entry is a
 * generation's output with the last SD_NGRAM_MAX tokens of its prompt in front (so a match
 * can straddle the prompt's end). One mutex guards adds and scans: the scheduler's and an
 * engine's rounds run on one thread, the server's requests on others; a scan copies out the
 * continuations it returns. A failed allocation drops the entry (the corpus only ever costs
 * proposals, never an error). Scans are linear in the corpus's tokens, newest entry first. */
#include <pthread.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_drafter.h"

typedef struct corpus_entry {
    int32_t *tok;
    int32_t n;
} corpus_entry;

struct sd_ngram_corpus {
    pthread_mutex_t mu;
    int64_t cap_tokens, n_tokens;
    corpus_entry *ring; /* entries in ring[(head + i) % cap_entries], i = 0 oldest */
    int32_t cap_entries, head, n_entries;
    int64_t n_added;    /* entries added since creation (statistics, tests) */
};

specdec_status sd_ngram_corpus_create(int64_t cap_tokens, sd_ngram_corpus **out, sd_errbuf *eb) {
    *out = NULL;
    if (cap_tokens < 1 || cap_tokens > SD_NGRAM_CORPUS_MAX_TOKENS)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "n-gram corpus: %lld tokens (1 .. %d)", (long long)cap_tokens,
                       SD_NGRAM_CORPUS_MAX_TOKENS);
    sd_ngram_corpus *c = sd_calloc(1, sizeof *c);
    if (c) c->ring = sd_calloc(SD_NGRAM_CORPUS_MAX_ENTRIES, sizeof *c->ring);
    if (!c || !c->ring || pthread_mutex_init(&c->mu, NULL) != 0) {
        if (c) sd_free(c->ring);
        sd_free(c);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "n-gram corpus: out of memory");
    }
    c->cap_tokens = cap_tokens;
    c->cap_entries = SD_NGRAM_CORPUS_MAX_ENTRIES;
    *out = c;
    return SPECDEC_OK;
}

void sd_ngram_corpus_free(sd_ngram_corpus *c) {
    if (!c) return;
    for (int32_t i = 0; i < c->n_entries; i++) sd_free(c->ring[(c->head + i) % c->cap_entries].tok);
    pthread_mutex_destroy(&c->mu);
    sd_free(c->ring);
    sd_free(c);
}

/* Drops the oldest entry (the lock held). */
static void corpus_evict(sd_ngram_corpus *c) {
    corpus_entry *e = &c->ring[c->head];
    c->n_tokens -= e->n;
    sd_free(e->tok);
    e->tok = NULL, e->n = 0;
    c->head = (c->head + 1) % c->cap_entries;
    c->n_entries--;
}

void sd_ngram_corpus_add(sd_ngram_corpus *c, const int32_t *tokens, int32_t n_prompt, int32_t n) {
    if (!c || !tokens || n_prompt < 0 || n <= n_prompt) return; /* nothing generated: nothing new */
    int32_t from = n_prompt > SD_NGRAM_MAX ? n_prompt - SD_NGRAM_MAX : 0;
    if ((int64_t)(n - from) > c->cap_tokens) from = n - (int32_t)c->cap_tokens; /* its newest tokens */
    const int32_t len = n - from;
    if (len < 2) return; /* no continuation to propose */
    int32_t *copy = sd_malloc((size_t)len * sizeof *copy);
    if (!copy) return;
    memcpy(copy, tokens + from, (size_t)len * sizeof *copy);
    pthread_mutex_lock(&c->mu);
    while (c->n_entries > 0 && (c->n_entries == c->cap_entries || c->n_tokens + len > c->cap_tokens)) corpus_evict(c);
    c->ring[(c->head + c->n_entries) % c->cap_entries] = (corpus_entry){copy, len};
    c->n_entries++;
    c->n_tokens += len;
    c->n_added++;
    pthread_mutex_unlock(&c->mu);
}

void sd_ngram_corpus_stats(sd_ngram_corpus *c, int32_t *n_entries, int64_t *n_tokens, int64_t *n_added) {
    pthread_mutex_lock(&c->mu);
    if (n_entries) *n_entries = c->n_entries;
    if (n_tokens) *n_tokens = c->n_tokens;
    if (n_added) *n_added = c->n_added;
    pthread_mutex_unlock(&c->mu);
}

int32_t sd_ngram_corpus_scan(sd_ngram_corpus *c, const int32_t *tokens, int32_t L, int32_t nmin, int32_t nmax,
                             int32_t depth, int32_t cap, sd_ngram_found *found) {
    if (!c || L < 1 || nmin < 1 || nmin > nmax || cap < 1 || depth < 1) return 0;
    if (nmax > L) nmax = L;
    if (nmin > nmax) return 0;
    const int32_t last = tokens[L - 1];
    int32_t m = 0;
    pthread_mutex_lock(&c->mu);
    for (int32_t i = c->n_entries - 1; i >= 0; i--) { /* newest first */
        const corpus_entry *en = &c->ring[(c->head + i) % c->cap_entries];
        for (int32_t e = en->n - 2; e >= 0; e--) { /* e: where the suffix ends; e + 1 continues it */
            if (en->tok[e] != last) continue;
            int32_t k = 1;
            while (k < nmax && k <= e && en->tok[e - k] == tokens[L - 1 - k]) k++;
            if (k < nmin || (m == cap && k <= found[m - 1].n)) continue;
            /* rank: n descending, equal n in scan order (newest entry, latest position first) */
            int32_t at = m < cap ? m : cap - 1;
            while (at > 0 && found[at - 1].n < k) at--;
            const int32_t top = m < cap ? m : cap - 1;
            memmove(found + at + 1, found + at, (size_t)(top - at) * sizeof *found);
            sd_ngram_found *f = &found[at];
            f->n = k;
            f->len = en->n - 1 - e < depth ? en->n - 1 - e : depth;
            memcpy(f->tok, en->tok + e + 1, (size_t)f->len * sizeof *f->tok);
            if (m < cap) m++;
        }
    }
    pthread_mutex_unlock(&c->mu);
    return m;
}
