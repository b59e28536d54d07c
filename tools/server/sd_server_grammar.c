/* sd_server_grammar.c — the compiled grammars of structured output (docs/STRUCTURED.md),
 * shared by the requests that give the same constraint: an LRU cache keyed by (kind, the
 * spec's exact bytes) of at most --grammar-cache entries.
 *
 * Why a cache: a grammar keeps the token masks of the automaton states it has visited, so a
 * second request with the same schema (the usual case: one application, one schema) skips
 * both the compile and most of the mask work. Entries are counted references: the cache holds
 * one while the entry is in it, each request one from sd_gcache_get until it has submitted
 * its choices (the scheduler then holds the library's own reference per choice, so the
 * cache may drop the entry while they run). An entry evicted while a request holds it is
 * freed by that request's sd_gcache_put. Compiles run outside the lock (on the prep pool), so
 * a long compile never blocks a lookup; two requests compiling the same spec at once both
 * compile and the second keeps the first's grammar. Failed compiles are not cached. */
#include <stdlib.h>
#include <string.h>

#include "sd_server_internal.h"

struct sd_gentry {
    sd_gentry *prev, *next; /* in the cache's list, most recently used first (when cached) */
    specdec_grammar_kind kind;
    char *spec;             /* [len], owned copy of the key */
    size_t len;
    uint64_t hash;
    specdec_grammar *grammar;
    int refs;               /* the cache's (while cached) + the requests' */
    int cached;
};

struct sd_gcache {
    pthread_mutex_t mu;
    int capacity, n;
    sd_gentry *head, *tail;
    long hits, misses;
};

sd_gcache *sd_gcache_create(int capacity) {
    sd_gcache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    if (pthread_mutex_init(&c->mu, NULL) != 0) {
        free(c);
        return NULL;
    }
    c->capacity = capacity > 0 ? capacity : 0;
    return c;
}

static void sd_gentry_free(sd_gentry *x) {
    specdec_grammar_free(x->grammar);
    free(x->spec);
    free(x);
}

static void sd_gcache_unlink(sd_gcache *c, sd_gentry *x) {
    if (x->prev) x->prev->next = x->next;
    else c->head = x->next;
    if (x->next) x->next->prev = x->prev;
    else c->tail = x->prev;
    x->prev = x->next = NULL;
}

static void sd_gcache_push_front(sd_gcache *c, sd_gentry *x) {
    x->prev = NULL;
    x->next = c->head;
    if (c->head) c->head->prev = x;
    c->head = x;
    if (!c->tail) c->tail = x;
}

void sd_gcache_free(sd_gcache *c) {
    if (!c) return;
    for (sd_gentry *x = c->head, *nx; x; x = nx) { /* requests are all answered at shutdown: refs is 1 */
        nx = x->next;
        sd_gentry_free(x);
    }
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static uint64_t sd_gkey_hash(specdec_grammar_kind kind, const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull ^ (uint64_t)kind;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

/* The cached entry of the key, retained and made the most recent; NULL when absent. Under mu. */
static sd_gentry *sd_gcache_find(sd_gcache *c, specdec_grammar_kind kind, const char *spec, size_t len,
                                 uint64_t hash) {
    for (sd_gentry *x = c->head; x; x = x->next)
        if (x->hash == hash && x->kind == kind && x->len == len && (!len || !memcmp(x->spec, spec, len))) {
            x->refs++;
            sd_gcache_unlink(c, x);
            sd_gcache_push_front(c, x);
            return x;
        }
    return NULL;
}

/* Cache x (the caller's reference stays with it), dropping the least recently used entries
 * beyond the capacity; those no request holds are returned in *drop to be freed unlocked.
 * Under mu. */
static void sd_gcache_insert(sd_gcache *c, sd_gentry *x, sd_gentry **drop) {
    *drop = NULL;
    if (c->capacity == 0) return;
    x->cached = 1;
    x->refs++;
    sd_gcache_push_front(c, x);
    c->n++;
    while (c->n > c->capacity) {
        sd_gentry *old = c->tail;
        sd_gcache_unlink(c, old);
        c->n--;
        old->cached = 0;
        if (--old->refs == 0) {
            old->next = *drop;
            *drop = old;
        }
    }
}

/* The library's refusal of g's spec as the request's error: 400 naming the field for a bad
 * or unsupported spec, 500 for anything else (out of memory). */
static int sd_gcache_fail(specdec_status st, const sd_api_guided *g, sd_api_error *e) {
    const char *d = specdec_last_error();
    if (st == SPECDEC_ERR_INVALID_ARGUMENT)
        return sd_api_fail(e, 400, "invalid_request_error", NULL, g->param, "'%s': %s", g->param, d);
    if (st == SPECDEC_ERR_UNSUPPORTED)
        return sd_api_fail(e, 400, "invalid_request_error", "unsupported_value", g->param, "'%s': %s", g->param, d);
    return sd_api_fail(e, 500, "server_error", NULL, g->param, "compiling '%s': %s: %s", g->param,
                       specdec_status_string(st), d);
}

/* A new entry holding g's key and its compiled grammar (one reference, the caller's). */
static int sd_gentry_compile(const specdec_tokenizer *tok, const sd_api_guided *g, uint64_t hash, sd_gentry **out,
                             sd_api_error *e) {
    sd_gentry *x = calloc(1, sizeof *x);
    if (!x || (g->len && !(x->spec = malloc(g->len)))) {
        free(x);
        return sd_api_fail(e, 500, "server_error", NULL, g->param, "out of memory for '%s'", g->param);
    }
    if (g->len) memcpy(x->spec, g->spec, g->len);
    x->kind = g->kind;
    x->len = g->len;
    x->hash = hash;
    x->refs = 1;
    specdec_status st = specdec_grammar_compile(tok, g->kind, g->spec, g->len, &x->grammar);
    if (st != SPECDEC_OK) {
        int rc = sd_gcache_fail(st, g, e);
        sd_gentry_free(x);
        return rc;
    }
    *out = x;
    return 0;
}

int sd_gcache_get(sd_gcache *c, const specdec_tokenizer *tok, const sd_api_guided *g, sd_gentry **out,
                  sd_api_error *e) {
    *out = NULL;
    const uint64_t hash = sd_gkey_hash(g->kind, g->spec, g->len);
    pthread_mutex_lock(&c->mu);
    sd_gentry *x = sd_gcache_find(c, g->kind, g->spec, g->len, hash);
    if (x) c->hits++;
    else c->misses++;
    pthread_mutex_unlock(&c->mu);
    if (x) {
        *out = x;
        return 0;
    }
    int rc = sd_gentry_compile(tok, g, hash, &x, e);
    if (rc) return rc;
    sd_gentry *drop = NULL;
    pthread_mutex_lock(&c->mu);
    sd_gentry *raced = sd_gcache_find(c, g->kind, g->spec, g->len, hash); /* compiled meanwhile by another */
    if (!raced) sd_gcache_insert(c, x, &drop);
    pthread_mutex_unlock(&c->mu);
    if (raced) {
        sd_gentry_free(x);
        x = raced;
    }
    while (drop) {
        sd_gentry *nx = drop->next;
        sd_gentry_free(drop);
        drop = nx;
    }
    *out = x;
    return 0;
}

const specdec_grammar *sd_gentry_grammar(const sd_gentry *x) { return x ? x->grammar : NULL; }

void sd_gcache_put(sd_gcache *c, sd_gentry *x) {
    if (!x) return;
    pthread_mutex_lock(&c->mu);
    const int last = --x->refs == 0; /* 0 only once evicted (or never cached) */
    pthread_mutex_unlock(&c->mu);
    if (last) sd_gentry_free(x);
}

void sd_gcache_stats(sd_gcache *c, long *hits, long *misses, int *entries) {
    pthread_mutex_lock(&c->mu);
    *hits = c->hits;
    *misses = c->misses;
    *entries = c->n;
    pthread_mutex_unlock(&c->mu);
}
