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
 * proposals, never an error).
 *
 * The index: every token position is on two hash chains, one by its token (unigram) and one by
 * it and the token before it (bigram), newest position first (entries are added in order and an
 * entry's positions in order, each prepended), so a chain lists positions in the linear scan's
 * order (newest entry first, latest position first). Eviction is lazy: a chain is cut where it
 * reaches an evicted entry (everything after is older). A scan walks the bigram chain of the
 * suffix's last two tokens (the matches of 2 tokens or more), then, while fewer than `cap` were
 * found, the unigram chain for the matches of exactly 1: the result is the linear scan's
 * (sd_ngram_corpus_scan_linear, kept for the tests and the benchmark) at a cost proportional to
 * the matches instead of the corpus. */
#include <pthread.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_drafter.h"

/* A token position: entry `seq` (the n-th added), offset e. seq < 0: none. */
typedef struct corpus_ref {
    int64_t seq;
    int32_t e;
} corpus_ref;

typedef struct corpus_entry {
    int32_t *tok;
    corpus_ref *unext, *bnext; /* [n] each position's successor on its unigram / bigram chain */
    int32_t n;
    int64_t seq;
} corpus_entry;

struct sd_ngram_corpus {
    pthread_mutex_t mu;
    int64_t cap_tokens, n_tokens;
    corpus_entry *ring; /* entries in ring[(head + i) % cap_entries], i = 0 oldest */
    int32_t cap_entries, head, n_entries;
    int64_t n_added;    /* entries added since creation (statistics, tests); the next entry's seq */
    corpus_ref *ubuck, *bbuck; /* chain heads, [mask + 1] each */
    uint32_t mask;
};

/* The bucket of token b (a = -1: the unigram chains) or of the pair (a, b) (the bigram chains). */
static uint32_t corpus_hash(const sd_ngram_corpus *c, int32_t a, int32_t b) {
    uint32_t h = (uint32_t)b * 0x9E3779B1u;
    if (a != -1) h ^= ((uint32_t)a + 0x7F4A7C15u) * 0x85EBCA77u;
    h ^= h >> 15;
    return h & c->mask;
}

/* The live entry of seq, or NULL (evicted, or never added). */
static const corpus_entry *corpus_entry_of(const sd_ngram_corpus *c, int64_t seq) {
    if (c->n_entries == 0 || seq < 0) return NULL;
    const int64_t first = c->ring[c->head].seq;
    if (seq < first || seq >= first + c->n_entries) return NULL;
    return &c->ring[(c->head + (int32_t)(seq - first)) % c->cap_entries];
}

specdec_status sd_ngram_corpus_create(int64_t cap_tokens, sd_ngram_corpus **out, sd_errbuf *eb) {
    *out = NULL;
    if (cap_tokens < 1 || cap_tokens > SPECDEC_MAX_NGRAM_CORPUS_TOKENS)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "n-gram corpus: %lld tokens (1 .. %d)", (long long)cap_tokens,
                       SPECDEC_MAX_NGRAM_CORPUS_TOKENS);
    sd_ngram_corpus *c = sd_calloc(1, sizeof *c);
    uint32_t buckets = 1024; /* about one per two tokens, at most 2^21 (chains grow beyond) */
    while (buckets < (1u << 21) && (int64_t)buckets * 2 < cap_tokens) buckets *= 2;
    if (c) {
        c->ring = sd_calloc(SD_NGRAM_CORPUS_MAX_ENTRIES, sizeof *c->ring);
        c->ubuck = sd_malloc(buckets * sizeof *c->ubuck);
        c->bbuck = sd_malloc(buckets * sizeof *c->bbuck);
    }
    if (!c || !c->ring || !c->ubuck || !c->bbuck || pthread_mutex_init(&c->mu, NULL) != 0) {
        if (c) sd_free(c->ring), sd_free(c->ubuck), sd_free(c->bbuck);
        sd_free(c);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "n-gram corpus: out of memory");
    }
    c->mask = buckets - 1;
    for (uint32_t i = 0; i < buckets; i++) c->ubuck[i] = c->bbuck[i] = (corpus_ref){-1, 0};
    c->cap_tokens = cap_tokens;
    c->cap_entries = SD_NGRAM_CORPUS_MAX_ENTRIES;
    *out = c;
    return SPECDEC_OK;
}

void sd_ngram_corpus_free(sd_ngram_corpus *c) {
    if (!c) return;
    for (int32_t i = 0; i < c->n_entries; i++) {
        corpus_entry *e = &c->ring[(c->head + i) % c->cap_entries];
        sd_free(e->tok), sd_free(e->unext), sd_free(e->bnext);
    }
    pthread_mutex_destroy(&c->mu);
    sd_free(c->ring), sd_free(c->ubuck), sd_free(c->bbuck);
    sd_free(c);
}

/* Drops the oldest entry (the lock held). */
static void corpus_evict(sd_ngram_corpus *c) {
    corpus_entry *e = &c->ring[c->head];
    c->n_tokens -= e->n;
    sd_free(e->tok), sd_free(e->unext), sd_free(e->bnext);
    e->tok = NULL, e->unext = e->bnext = NULL, e->n = 0;
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
    corpus_ref *un = sd_malloc((size_t)len * sizeof *un), *bn = sd_malloc((size_t)len * sizeof *bn);
    if (!copy || !un || !bn) {
        sd_free(copy), sd_free(un), sd_free(bn);
        return;
    }
    memcpy(copy, tokens + from, (size_t)len * sizeof *copy);
    pthread_mutex_lock(&c->mu);
    while (c->n_entries > 0 && (c->n_entries == c->cap_entries || c->n_tokens + len > c->cap_tokens)) corpus_evict(c);
    const int64_t seq = c->n_added;
    for (int32_t e = 0; e < len; e++) { /* each position onto the front of its chains */
        const uint32_t hu = corpus_hash(c, -1, copy[e]);
        un[e] = c->ubuck[hu], c->ubuck[hu] = (corpus_ref){seq, e};
        bn[e] = (corpus_ref){-1, 0};
        if (e > 0) {
            const uint32_t hb = corpus_hash(c, copy[e - 1], copy[e]);
            bn[e] = c->bbuck[hb], c->bbuck[hb] = (corpus_ref){seq, e};
        }
    }
    c->ring[(c->head + c->n_entries) % c->cap_entries] = (corpus_entry){copy, un, bn, len, seq};
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

/* Offer a match of k tokens ending at en->tok[e] to the ranking found[0..*m) (n descending; equal n in arrival
 * order), at most cap kept. */
static void corpus_offer(const corpus_entry *en, int32_t e, int32_t k, int32_t depth, int32_t cap, sd_ngram_found *found,
                         int32_t *m) {
    if (*m == cap && k <= found[*m - 1].n) return;
    int32_t at = *m < cap ? *m : cap - 1;
    while (at > 0 && found[at - 1].n < k) at--;
    const int32_t top = *m < cap ? *m : cap - 1;
    memmove(found + at + 1, found + at, (size_t)(top - at) * sizeof *found);
    sd_ngram_found *f = &found[at];
    f->n = k;
    f->len = en->n - 1 - e < depth ? en->n - 1 - e : depth;
    memcpy(f->tok, en->tok + e + 1, (size_t)f->len * sizeof *f->tok);
    if (*m < cap) (*m)++;
}

/* The length of the match of tokens[..L)'s suffix with en's tokens ending at e, at most nmax (tok[e] == last). */
static int32_t corpus_match(const corpus_entry *en, int32_t e, const int32_t *tokens, int32_t L, int32_t nmax) {
    int32_t k = 1;
    while (k < nmax && k <= e && en->tok[e - k] == tokens[L - 1 - k]) k++;
    return k;
}

/* 1 when a scan with these arguments can find anything; *nmax cut to the sequence. */
static int corpus_scan_args(const sd_ngram_corpus *c, int32_t L, int32_t nmin, int32_t *nmax, int32_t depth,
                            int32_t cap) {
    if (!c || L < 1 || nmin < 1 || nmin > *nmax || cap < 1 || depth < 1) return 0;
    if (*nmax > L) *nmax = L;
    return nmin <= *nmax;
}

int32_t sd_ngram_corpus_scan_linear(sd_ngram_corpus *c, const int32_t *tokens, int32_t L, int32_t nmin, int32_t nmax,
                                    int32_t depth, int32_t cap, sd_ngram_found *found) {
    if (!corpus_scan_args(c, L, nmin, &nmax, depth, cap)) return 0;
    int32_t m = 0;
    pthread_mutex_lock(&c->mu);
    for (int32_t i = c->n_entries - 1; i >= 0; i--) { /* newest first */
        const corpus_entry *en = &c->ring[(c->head + i) % c->cap_entries];
        for (int32_t e = en->n - 2; e >= 0; e--) { /* e: where the suffix ends; e + 1 continues it */
            if (en->tok[e] != tokens[L - 1]) continue;
            const int32_t k = corpus_match(en, e, tokens, L, nmax);
            if (k >= nmin) corpus_offer(en, e, k, depth, cap, found, &m);
        }
    }
    pthread_mutex_unlock(&c->mu);
    return m;
}

int32_t sd_ngram_corpus_scan(sd_ngram_corpus *c, const int32_t *tokens, int32_t L, int32_t nmin, int32_t nmax,
                             int32_t depth, int32_t cap, sd_ngram_found *found) {
    if (!corpus_scan_args(c, L, nmin, &nmax, depth, cap)) return 0;
    const int32_t last = tokens[L - 1], prev = L >= 2 ? tokens[L - 2] : -1;
    int32_t m = 0;
    pthread_mutex_lock(&c->mu);
    if (nmax >= 2) /* the matches of 2 tokens or more: the bigram chain, newest first (full of nmax-token matches,
                    * nothing later can rank higher: done) */
        for (corpus_ref r = c->bbuck[corpus_hash(c, prev, last)]; !(m == cap && found[cap - 1].n >= nmax);) {
            const corpus_entry *en = corpus_entry_of(c, r.seq);
            if (!en) break; /* the end, or an evicted entry: all after it are older */
            const corpus_ref next = en->bnext[r.e];
            if (r.e <= en->n - 2 && en->tok[r.e] == last && en->tok[r.e - 1] == prev) { /* (a hash collision: not) */
                const int32_t k = corpus_match(en, r.e, tokens, L, nmax);
                if (k >= nmin) corpus_offer(en, r.e, k, depth, cap, found, &m);
            }
            r = next;
        }
    if (nmin <= 1 && m < cap) /* the matches of exactly 1 token: the unigram chain, those the bigram chain lacks */
        for (corpus_ref r = c->ubuck[corpus_hash(c, -1, last)]; m < cap;) {
            const corpus_entry *en = corpus_entry_of(c, r.seq);
            if (!en) break;
            const corpus_ref next = en->unext[r.e];
            if (r.e <= en->n - 2 && en->tok[r.e] == last &&
                !(nmax >= 2 && r.e >= 1 && en->tok[r.e - 1] == prev))
                corpus_offer(en, r.e, 1, depth, cap, found, &m);
            r = next;
        }
    pthread_mutex_unlock(&c->mu);
    return m;
}
