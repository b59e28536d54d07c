/* sd_grammar.c — structured output at the token level (core/sd_grammar.h). */
#include "sd_grammar.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sd_alloc.h"

/* ------------------------------------------------------------------------- */
/* the vocabulary                                                             */
/* ------------------------------------------------------------------------- */
/* qsort has no context argument: the vocabulary being sorted (creation is serialised by the
 * tokenizer's lock, and nothing else sorts). */
static _Thread_local const sd_grammar_vocab *sd_gv_sorting;

static int sd_gv_cmp(const void *a, const void *b) {
    const sd_grammar_vocab *v = sd_gv_sorting;
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    const uint32_t lx = v->off[x + 1] - v->off[x], ly = v->off[y + 1] - v->off[y];
    const int c = memcmp(v->bytes + v->off[x], v->bytes + v->off[y], lx < ly ? lx : ly);
    if (c) return c;
    if (lx != ly) return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

static uint32_t sd_gv_common(const sd_grammar_vocab *v, int32_t x, int32_t y) {
    const uint32_t lx = v->off[x + 1] - v->off[x], ly = v->off[y + 1] - v->off[y], l = lx < ly ? lx : ly;
    uint32_t i = 0;
    while (i < l && v->bytes[v->off[x] + i] == v->bytes[v->off[y] + i]) i++;
    return i;
}

static void sd_gv_free(sd_grammar_vocab *v) {
    if (!v) return;
    sd_free(v->off);
    sd_free(v->bytes);
    sd_free(v->text);
    sd_free(v->order);
    sd_free(v->lcp);
    sd_free(v);
}

specdec_status sd_grammar_vocab_create(int32_t n, uint32_t *off, uint8_t *bytes, uint8_t *text, sd_grammar_vocab **out,
                                       sd_errbuf *eb) {
    *out = NULL;
    sd_grammar_vocab *v = sd_calloc(1, sizeof *v);
    if (!v) {
        sd_free(off);
        sd_free(bytes);
        sd_free(text);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "grammar: out of memory for the vocabulary");
    }
    atomic_init(&v->refs, 1);
    v->n = n;
    v->off = off;
    v->bytes = bytes;
    v->text = text;
    v->order = sd_malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    v->lcp = sd_malloc((size_t)(n > 0 ? n : 1) * sizeof(uint32_t));
    if (!v->order || !v->lcp) {
        sd_gv_free(v);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "grammar: out of memory for the vocabulary's order");
    }
    for (int32_t t = 0; t < n; t++) {
        const uint32_t l = off[t + 1] - off[t];
        if (l == 0 || l > SD_GRAMMAR_MAX_TOKEN_BYTES) text[t] = 0;
        if (!text[t]) continue;
        v->order[v->n_order++] = t;
        if ((int32_t)l > v->max_len) v->max_len = (int32_t)l;
    }
    sd_gv_sorting = v;
    qsort(v->order, (size_t)v->n_order, sizeof(int32_t), sd_gv_cmp);
    sd_gv_sorting = NULL;
    for (int32_t i = 0; i < v->n_order; i++) v->lcp[i] = i ? sd_gv_common(v, v->order[i - 1], v->order[i]) : 0;
    *out = v;
    return SPECDEC_OK;
}

void sd_grammar_vocab_retain(sd_grammar_vocab *v) { atomic_fetch_add(&v->refs, 1); }

void sd_grammar_vocab_release(sd_grammar_vocab *v) {
    if (v && atomic_fetch_sub(&v->refs, 1) == 1) sd_gv_free(v);
}

/* ------------------------------------------------------------------------- */
/* the grammar: automaton + mask cache, under one lock                         */
/* ------------------------------------------------------------------------- */
typedef struct sd_gmask {
    int32_t state;    /* -1: empty slot */
    int32_t accepting;
    int32_t n_allowed; /* text tokens allowed */
    uint64_t *bits;   /* ceil(n / 64) words */
} sd_gmask;

struct specdec_grammar {
    atomic_int refs;
    pthread_mutex_t lock;
    sd_grammar_vocab *v;
    sd_fsm *fsm;
    int32_t words;      /* per mask */
    int32_t cap;        /* slots (a power of two), at most half full */
    int32_t used;
    int32_t max_masks;  /* what SD_GRAMMAR_MASK_CACHE_BYTES holds */
    sd_gmask *slots;
    int32_t *stack;     /* [max_len + 1] automaton states along the walk */
};

static void sd_gm_clear(specdec_grammar *g) {
    for (int32_t i = 0; i < g->cap; i++) {
        sd_free(g->slots[i].bits);
        g->slots[i] = (sd_gmask){-1, 0, 0, NULL};
    }
    g->used = 0;
}

static void sd_gm_destroy(specdec_grammar *g) {
    if (g->slots) sd_gm_clear(g);
    sd_free(g->slots);
    sd_free(g->stack);
    sd_fsm_free(g->fsm);
    if (g->v) sd_grammar_vocab_release(g->v);
    pthread_mutex_destroy(&g->lock);
    sd_free(g);
}

specdec_status sd_grammar_create(sd_grammar_vocab *v, sd_fsm *fsm, specdec_grammar **out, sd_errbuf *eb) {
    *out = NULL;
    specdec_grammar *g = sd_calloc(1, sizeof *g);
    if (!g) {
        sd_fsm_free(fsm);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "grammar: out of memory");
    }
    atomic_init(&g->refs, 1);
    pthread_mutex_init(&g->lock, NULL);
    sd_grammar_vocab_retain(v);
    g->v = v;
    g->fsm = fsm;
    g->words = (v->n + 63) / 64;
    const size_t per = (size_t)(g->words > 0 ? g->words : 1) * sizeof(uint64_t);
    g->max_masks = (int32_t)(SD_GRAMMAR_MASK_CACHE_BYTES / per);
    if (g->max_masks < 16) g->max_masks = 16;
    if (g->max_masks > (1 << 20)) g->max_masks = 1 << 20;
    g->cap = 64;
    g->slots = sd_malloc((size_t)g->cap * sizeof *g->slots);
    g->stack = sd_malloc((size_t)(v->max_len + 1) * sizeof(int32_t));
    if (!g->slots || !g->stack) {
        sd_free(g->slots);
        g->slots = NULL;
        sd_gm_destroy(g);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "grammar: out of memory");
    }
    for (int32_t i = 0; i < g->cap; i++) g->slots[i] = (sd_gmask){-1, 0, 0, NULL};
    *out = g;
    return SPECDEC_OK;
}

void sd_grammar_retain(const specdec_grammar *g) { atomic_fetch_add(&((specdec_grammar *)g)->refs, 1); }

void sd_grammar_release(const specdec_grammar *g) {
    if (g && atomic_fetch_sub(&((specdec_grammar *)g)->refs, 1) == 1) sd_gm_destroy((specdec_grammar *)g);
}

int32_t sd_grammar_start(const specdec_grammar *g) { return g->fsm->start; }

/* Token t's bytes from state s (the lock held). */
static int32_t sd_gm_walk(specdec_grammar *g, int32_t s, int32_t t) {
    const sd_grammar_vocab *v = g->v;
    if (t < 0 || t >= v->n || !v->text[t] || sd_grammar_gated(s)) return SD_FSM_DEAD;
    for (uint32_t i = v->off[t]; i < v->off[t + 1] && s >= 0; i++) s = sd_fsm_step(g->fsm, s, v->bytes[i]);
    return s;
}

int32_t sd_grammar_next(const specdec_grammar *cg, int32_t s, int32_t t) {
    specdec_grammar *g = (specdec_grammar *)cg;
    pthread_mutex_lock(&g->lock);
    s = sd_gm_walk(g, s, t);
    pthread_mutex_unlock(&g->lock);
    return s;
}

/* State s's mask into m->bits (zeroed): every text token's bytes walked from s, each shared
 * prefix once (the sorted order), every token below a dead prefix skipped. */
static int sd_gm_build(specdec_grammar *g, int32_t s, sd_gmask *m) {
    const sd_grammar_vocab *v = g->v;
    int32_t *st = g->stack;
    uint32_t valid = 0, dead_at = UINT32_MAX;
    st[0] = s;
    m->n_allowed = 0;
    for (int32_t k = 0; k < v->n_order; k++) {
        const int32_t t = v->order[k];
        const uint32_t l = v->lcp[k], len = v->off[t + 1] - v->off[t];
        const uint8_t *b = v->bytes + v->off[t];
        if (dead_at <= l) continue; /* shares the prefix that died */
        uint32_t d = l < valid ? l : valid;
        int32_t x = st[d];
        dead_at = UINT32_MAX;
        for (; d < len; d++) {
            x = sd_fsm_step(g->fsm, x, b[d]);
            if (x == SD_FSM_FULL) return -1;
            if (x < 0) {
                dead_at = d + 1;
                break;
            }
            st[d + 1] = x;
        }
        valid = dead_at == UINT32_MAX ? len : dead_at - 1;
        if (dead_at != UINT32_MAX) continue;
        m->bits[t >> 6] |= (uint64_t)1 << (t & 63);
        m->n_allowed++;
    }
    m->accepting = sd_fsm_accepting(g->fsm, s);
    return 0;
}

static uint32_t sd_gm_hash(int32_t s) { return (uint32_t)s * 2654435761u; }

/* The cached slot of state s, or a fresh one (its state set, bits NULL). NULL: out of memory. */
static sd_gmask *sd_gm_slot(specdec_grammar *g, int32_t s) {
    if (g->used >= g->max_masks) sd_gm_clear(g);
    if ((g->used + 1) * 2 > g->cap) {
        sd_gmask *ns = sd_malloc((size_t)g->cap * 2 * sizeof *ns);
        if (!ns) return NULL;
        for (int32_t i = 0; i < g->cap * 2; i++) ns[i] = (sd_gmask){-1, 0, 0, NULL};
        for (int32_t i = 0; i < g->cap; i++) {
            if (g->slots[i].state < 0) continue;
            uint32_t h = sd_gm_hash(g->slots[i].state) & (uint32_t)(g->cap * 2 - 1);
            while (ns[h].state >= 0) h = (h + 1) & (uint32_t)(g->cap * 2 - 1);
            ns[h] = g->slots[i];
        }
        sd_free(g->slots);
        g->slots = ns;
        g->cap *= 2;
    }
    uint32_t h = sd_gm_hash(s) & (uint32_t)(g->cap - 1);
    while (g->slots[h].state >= 0 && g->slots[h].state != s) h = (h + 1) & (uint32_t)(g->cap - 1);
    return &g->slots[h];
}

/* The mask of state s, built on first use (the lock held). */
static specdec_status sd_gm_mask(specdec_grammar *g, int32_t s, const sd_gmask **out, sd_errbuf *eb) {
    sd_gmask *m = sd_gm_slot(g, s);
    if (!m) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "grammar: out of memory for a token mask");
    if (m->state == s) {
        *out = m;
        return SPECDEC_OK;
    }
    uint64_t *bits = sd_calloc((size_t)(g->words > 0 ? g->words : 1), sizeof(uint64_t));
    if (!bits) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "grammar: out of memory for a token mask");
    sd_gmask tmp = {s, 0, 0, bits};
    if (sd_gm_build(g, s, &tmp)) {
        sd_free(bits);
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "grammar: the automaton passed its limit of %d states",
                       (int)g->fsm->vt->n_states(g->fsm));
    }
    *m = tmp;
    g->used++;
    *out = m;
    return SPECDEC_OK;
}

int sd_grammar_is_end(int32_t t, const int32_t *ends, int32_t n_ends) {
    for (int32_t i = 0; i < n_ends; i++)
        if (ends[i] == t) return 1;
    return 0;
}

int32_t sd_grammar_initial(const specdec_grammar *g, const sd_grammar_gate *gate) {
    return gate && gate->n > 0 ? SD_GRAMMAR_GATED : g->fsm->start;
}

/* From gated state s (k = s - SD_GRAMMAR_GATED marker tokens matched) after text token t: the
 * longest prefix of the marker that ends the output (KMP without a table: markers are short), the
 * automaton's start once the whole marker is there. */
static int32_t sd_gm_gate_step(const specdec_grammar *g, const sd_grammar_gate *gate, int32_t s, int32_t t) {
    const int32_t k = s - SD_GRAMMAR_GATED, n = gate ? gate->n : 0;
    if (k < 0 || k >= n) return SD_FSM_DEAD; /* a gated state without its gate: never */
    for (int32_t j = k + 1; j > 0; j--) /* gate[0..j) == gate[k-j+1..k) then t */
        if (gate->tok[j - 1] == t && !memcmp(gate->tok, gate->tok + k - j + 1, (size_t)(j - 1) * sizeof(int32_t)))
            return j == n ? g->fsm->start : SD_GRAMMAR_GATED + j;
    return SD_GRAMMAR_GATED;
}

int32_t sd_grammar_step(const specdec_grammar *g, int32_t s, int32_t t, const int32_t *ends, int32_t n_ends,
                        const sd_grammar_gate *gate) {
    if (s < 0) return SD_FSM_DEAD;
    if (sd_grammar_is_end(t, ends, n_ends)) return s;
    return sd_grammar_gated(s) ? sd_gm_gate_step(g, gate, s, t) : sd_grammar_next(g, s, t);
}

specdec_status sd_grammar_apply(const specdec_grammar *cg, int32_t s, float *row, int32_t n_row, const int32_t *ends,
                                int32_t n_ends, int *only_end, sd_errbuf *eb) {
    specdec_grammar *g = (specdec_grammar *)cg;
    *only_end = 0;
    if (sd_grammar_gated(s)) return SPECDEC_OK; /* before the marker: the row as it is */
    if (n_ends > SD_GRAMMAR_MAX_ENDS)
        return sd_fail(eb, SPECDEC_ERR_INTERNAL, "grammar: %d end tokens (at most %d)", (int)n_ends, SD_GRAMMAR_MAX_ENDS);
    float saved[SD_GRAMMAR_MAX_ENDS];
    for (int32_t i = 0; i < n_ends; i++) saved[i] = ends[i] >= 0 && ends[i] < n_row ? row[ends[i]] : 0.0f;
    pthread_mutex_lock(&g->lock);
    const sd_gmask *m = NULL;
    specdec_status st = sd_gm_mask(g, s, &m, eb);
    if (st == SPECDEC_OK) {
        const int32_t nv = g->v->n < n_row ? g->v->n : n_row;
        for (int32_t w = 0; w * 64 < nv; w++) {
            const uint64_t bits = m->bits[w];
            if (bits == ~(uint64_t)0) continue;
            const int32_t end = (w + 1) * 64 < nv ? (w + 1) * 64 : nv;
            for (int32_t t = w * 64; t < end; t++)
                if (!((bits >> (t & 63)) & 1)) row[t] = -INFINITY;
        }
        for (int32_t t = nv; t < n_row; t++) row[t] = -INFINITY;
        /* the end tokens: as they were where the output may end, else -inf (even one whose bytes
         * would continue the match: it would end the output) */
        const int end_ok = m->accepting || m->n_allowed == 0;
        for (int32_t i = 0; i < n_ends; i++)
            if (ends[i] >= 0 && ends[i] < n_row) row[ends[i]] = end_ok ? saved[i] : -INFINITY;
        *only_end = m->n_allowed == 0;
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

specdec_status sd_grammar_forced(const specdec_grammar *cg, int32_t s, int32_t n_row, const int32_t *ends, int32_t n_ends,
                                 int32_t *token, sd_errbuf *eb) {
    specdec_grammar *g = (specdec_grammar *)cg;
    *token = -1;
    if (sd_grammar_gated(s)) return SPECDEC_OK;
    pthread_mutex_lock(&g->lock);
    const sd_gmask *m = NULL;
    specdec_status st = sd_gm_mask(g, s, &m, eb);
    /* the end tokens are allowed where the output may end; otherwise they are -inf even when
     * their bytes continue the match, so up to n_ends of the allowed text tokens may not count */
    if (st == SPECDEC_OK && !m->accepting && m->n_allowed > 0 && m->n_allowed <= 1 + n_ends) {
        const int32_t nv = g->v->n < n_row ? g->v->n : n_row;
        int32_t found = -1, n = 0;
        for (int32_t w = 0; w * 64 < nv && n < 2; w++) {
            for (uint64_t bits = m->bits[w]; bits && n < 2; bits &= bits - 1) {
                const int32_t t = w * 64 + __builtin_ctzll(bits);
                if (t >= nv || sd_grammar_is_end(t, ends, n_ends)) continue;
                found = t;
                n++;
            }
        }
        if (n == 1) *token = found;
    }
    pthread_mutex_unlock(&g->lock);
    return st;
}

specdec_status sd_grammar_state_at(const specdec_grammar *cg, sd_grammar_cursor *cur, const int32_t *gen, int32_t n_gen,
                                   const int32_t *path, int32_t n_path, const int32_t *ends, int32_t n_ends,
                                   const sd_grammar_gate *gate, int32_t *state, sd_errbuf *eb) {
    specdec_grammar *g = (specdec_grammar *)cg;
    specdec_status st = SPECDEC_OK;
    pthread_mutex_lock(&g->lock);
    if (cur->n_done > n_gen || cur->state < 0) *cur = (sd_grammar_cursor){0, sd_grammar_initial(g, gate)};
    for (; cur->n_done < n_gen; cur->n_done++) {
        const int32_t t = gen[cur->n_done];
        if (sd_grammar_is_end(t, ends, n_ends)) continue;
        const int32_t x = sd_grammar_gated(cur->state) ? sd_gm_gate_step(g, gate, cur->state, t)
                                                       : sd_gm_walk(g, cur->state, t);
        if (x < 0) {
            st = x == SD_FSM_FULL ? sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "grammar: the automaton passed its state limit")
                                  : sd_fail(eb, SPECDEC_ERR_INTERNAL,
                                            "grammar: generated token %d (output position %d) breaks the grammar",
                                            (int)t, (int)cur->n_done);
            break;
        }
        cur->state = x;
    }
    int32_t s = cur->state;
    for (int32_t i = 0; i < n_path && st == SPECDEC_OK && s >= 0; i++)
        if (!sd_grammar_is_end(path[i], ends, n_ends))
            s = sd_grammar_gated(s) ? sd_gm_gate_step(g, gate, s, path[i]) : sd_gm_walk(g, s, path[i]);
    if (s == SD_FSM_FULL && st == SPECDEC_OK)
        st = sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "grammar: the automaton passed its state limit");
    pthread_mutex_unlock(&g->lock);
    *state = s;
    return st;
}
