/* test_json_fsm_diff.c — core/sd_json_fsm.h against cJSON (tests/common/sd_json_oracle.h: cJSON's
 * sd_json_parse for the structure, a strict scan of its own for whitespace, numbers, strings and
 * the bounds, cJSON's tree for depth and object_only) on random texts, fixed seed:
 *   - N_GEN random JSON values of depth <= 6 (all kinds; numbers with digit runs up to the bound;
 *     strings with escapes, \u of any hex, 2/3/4-byte UTF-8; whitespace runs of 1..16 between
 *     any tokens and before the value), half of them objects at the top;
 *   - N_MUT mutations of fresh ones (1..3 of: replace a byte by a random or a JSON-ish byte,
 *     insert one, delete one, truncate, insert a whitespace run of 1..20);
 * each walked through six automata (object_only 0/1 x max_depth 3/6/64): accepted at the end
 * must equal the oracle (so every prefix of an accepted text was live); and viability, both
 * ways: at the byte where a walk dies, the live prefix before it must have a completion (its
 * greedy completion is in the oracle's language) and the dead prefix must have none (its greedy
 * completion is not: the completion is exact, see sd_jo_complete), and so must a live end and
 * two random live prefixes. Every disagreement is a failure; the counts are printed. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_json_fsm.h"
#include "sd_json_oracle.h"
#include "sd_test.h"

#define N_GEN 20000
#define N_MUT 20000
#define GEN_MAX_DEPTH 6
#define TEXT_CAP 6144 /* generation stops adding elements past TEXT_CAP / 2 */

static uint64_t rng_state = 0x5EED0F15ull;

static uint32_t rnd(uint32_t n) { /* splitmix64, uniform enough for n << 2^32 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) % n);
}

typedef struct buf {
    uint8_t b[TEXT_CAP];
    size_t n;
} buf;

static void put(buf *t, const char *s, size_t n) {
    for (size_t i = 0; i < n && t->n < TEXT_CAP; i++) t->b[t->n++] = (uint8_t)s[i];
}
static void putc1(buf *t, uint8_t c) { put(t, (const char *)&c, 1); }

static void gen_ws(buf *t) {
    if (rnd(3)) return;
    const int len = rnd(4) ? 1 + (int)rnd(3) : 1 + (int)rnd(SD_JSON_FSM_MAX_WS);
    for (int i = 0; i < len; i++) putc1(t, (uint8_t)" \t\n\r"[rnd(4)]);
}

static void gen_digits(buf *t, int first_nonzero) {
    const int len = rnd(6) ? 1 + (int)rnd(4) : 1 + (int)rnd(SD_JSON_FSM_MAX_DIGITS);
    for (int i = 0; i < len; i++) putc1(t, (uint8_t)('0' + (i == 0 && first_nonzero ? 1 + rnd(9) : rnd(10))));
}

static void gen_number(buf *t) {
    if (rnd(3) == 0) putc1(t, '-');
    if (rnd(4) == 0) putc1(t, '0');
    else gen_digits(t, 1);
    if (rnd(3) == 0) putc1(t, '.'), gen_digits(t, 0);
    if (rnd(4) == 0) {
        putc1(t, rnd(2) ? 'e' : 'E');
        if (rnd(2)) putc1(t, rnd(2) ? '+' : '-');
        gen_digits(t, 0);
    }
}

/* One scalar value as UTF-8: of 1..4 bytes, at the range edges sometimes. */
static void gen_utf8(buf *t) {
    static const uint32_t lo[4] = {0x20, 0x80, 0x800, 0x10000}, hi[4] = {0x7E, 0x7FF, 0xFFFF, 0x10FFFF};
    const int k = (int)rnd(4);
    uint32_t cp = rnd(8) == 0 ? (rnd(2) ? lo[k] : hi[k]) : lo[k] + rnd(hi[k] - lo[k] + 1);
    if (cp >= 0xD800 && cp <= 0xDFFF) cp = 0xE000 + (cp & 0xFF);
    if (cp == '"' || cp == '\\') cp = 'q';
    uint8_t e[4];
    if (k == 0) e[0] = (uint8_t)cp;
    else if (k == 1) e[0] = (uint8_t)(0xC0 | cp >> 6), e[1] = (uint8_t)(0x80 | (cp & 0x3F));
    else if (k == 2)
        e[0] = (uint8_t)(0xE0 | cp >> 12), e[1] = (uint8_t)(0x80 | (cp >> 6 & 0x3F)), e[2] = (uint8_t)(0x80 | (cp & 0x3F));
    else
        e[0] = (uint8_t)(0xF0 | cp >> 18), e[1] = (uint8_t)(0x80 | (cp >> 12 & 0x3F)),
        e[2] = (uint8_t)(0x80 | (cp >> 6 & 0x3F)), e[3] = (uint8_t)(0x80 | (cp & 0x3F));
    put(t, (const char *)e, (size_t)k + 1);
}

static void gen_string(buf *t) {
    putc1(t, '"');
    for (int n = (int)rnd(9); n > 0; n--) {
        const uint32_t r = rnd(10);
        if (r < 5) {
            gen_utf8(t);
        } else if (r < 7) {
            static const char *const esc[8] = {"\\\"", "\\\\", "\\/", "\\b", "\\f", "\\n", "\\r", "\\t"};
            put(t, esc[rnd(8)], 2);
        } else if (r < 9) {
            put(t, "\\u", 2);
            const int surrogate = rnd(4) == 0; /* an escaped surrogate, paired or not */
            if (surrogate) put(t, rnd(2) ? "D8" : "dC", 2);
            for (int i = surrogate ? 2 : 0; i < 4; i++) putc1(t, (uint8_t)"0123456789abcdefABCDEF"[rnd(22)]);
        } else {
            putc1(t, (uint8_t)('a' + rnd(26)));
        }
    }
    putc1(t, '"');
}

static void gen_value(buf *t, int depth, int object) {
    const uint32_t r = object ? 0 : rnd(depth < GEN_MAX_DEPTH ? 10 : 6);
    if (r >= 6) object = r >= 8;
    if (object || r >= 6) {
        putc1(t, object ? '{' : '[');
        const int n = t->n > TEXT_CAP / 2 ? 0 : (int)rnd(depth < 2 ? 5 : 3);
        for (int i = 0; i < n; i++) {
            if (i) gen_ws(t), putc1(t, ',');
            gen_ws(t);
            if (object) gen_string(t), gen_ws(t), putc1(t, ':'), gen_ws(t);
            gen_value(t, depth + 1, 0);
        }
        gen_ws(t);
        putc1(t, object ? '}' : ']');
        return;
    }
    static const char *const lits[3] = {"true", "false", "null"};
    if (r < 2) gen_number(t);
    else if (r < 4) gen_string(t);
    else {
        const char *lit = lits[r == 4 ? rnd(2) : 2];
        put(t, lit, strlen(lit));
    }
}

static void gen_text(buf *t) {
    t->n = 0;
    gen_value(t, 0, (int)rnd(2));
}

static void mutate(buf *t) {
    static const char jsonish[] = "{}[],:\"\\ \t\n\r0123456789-+.eEtfnulr\x80\xbf\xc3\xe0\xed\xf0\xf4\xff\x01\x1f";
    for (int k = 1 + (int)rnd(3); k > 0; k--) {
        const uint32_t op = rnd(5);
        const size_t at = rnd((uint32_t)t->n + 1);
        const uint8_t byte = rnd(2) ? (uint8_t)rnd(256) : (uint8_t)jsonish[rnd(sizeof jsonish - 1)];
        if (op == 0 && at < t->n) {
            t->b[at] = byte;
        } else if ((op == 1 || op == 4) && t->n < TEXT_CAP - 24) {
            const size_t len = op == 1 ? 1 : 1 + rnd(20);
            memmove(t->b + at + len, t->b + at, t->n - at);
            for (size_t i = 0; i < len; i++) t->b[at + i] = op == 1 ? byte : (uint8_t)" \t\n\r"[rnd(4)];
            t->n += len;
        } else if (op == 2 && at < t->n) {
            memmove(t->b + at, t->b + at + 1, t->n - at - 1);
            t->n--;
        } else if (op == 3) {
            t->n = at;
        }
    }
}

typedef struct stats {
    long texts, accepted[2][3], mismatches, prefixes, viab_live, viab_dead, viab_bad, full;
} stats;

static const int32_t DEPTHS[3] = {3, 6, 64};

static void show(const char *what, const buf *t, size_t n, int oo, int md) {
    fprintf(stderr, "  %s (object_only %d, max_depth %d, %zu bytes): ", what, oo, md, n);
    for (size_t i = 0; i < n && i < 300; i++)
        fprintf(stderr, t->b[i] >= 0x20 && t->b[i] < 0x7F && t->b[i] != '\\' ? "%c" : "\\x%02x", t->b[i]);
    fputc('\n', stderr);
}

/* viable(prefix t[0..n)) by the oracle: its greedy completion is accepted. */
static int viable(const buf *t, size_t n, int oo, int md) {
    static uint8_t out[TEXT_CAP + SD_JO_COMPLETE_EXTRA];
    const size_t len = sd_jo_complete(t->b, n, oo, out);
    return sd_jo_accepts(out, len, oo, md) == 1;
}

/* One text through one automaton: the end against the oracle, viability at the death point,
 * the end and two random live prefixes. */
static void check_one(sd_fsm *f, const buf *t, int oo, int di, int expect, stats *st) {
    const int md = DEPTHS[di];
    const size_t p1 = rnd((uint32_t)t->n + 1), p2 = rnd((uint32_t)t->n + 1);
    int32_t s = f->start;
    size_t i = 0;
    for (; i < t->n; i++) {
        if ((i == p1 || i == p2) && !viable(t, i, oo, md)) {
            st->viab_bad++;
            if (st->viab_bad <= 5) show("live prefix without completion", t, i, oo, md);
        }
        st->viab_live += i == p1 || i == p2;
        const int32_t next = sd_fsm_step(f, s, t->b[i]);
        if (next == SD_FSM_FULL) st->full++;
        if (next < 0) break;
        s = next;
        st->prefixes++;
    }
    const int live = i == t->n, got = live && sd_fsm_accepting(f, s);
    st->accepted[oo][di] += got;
    if (got != expect) {
        st->mismatches++;
        if (st->mismatches <= 10) show(got ? "accepted, oracle refuses" : "refused, oracle accepts", t, t->n, oo, md);
    }
    const int v_live = viable(t, i, oo, md), v_dead = live || !viable(t, i + 1, oo, md);
    st->viab_live++, st->viab_dead += !live;
    if (!v_live || !v_dead) {
        st->viab_bad++;
        if (st->viab_bad <= 5) show(!v_live ? "live prefix without completion" : "dead prefix with a completion", t,
                                    v_live ? i + 1 : i, oo, md);
    }
}

static void run(sd_fsm *fsms[2][3], buf *t, stats *st) {
    for (int oo = 0; oo < 2; oo++)
        for (int di = 0; di < 3; di++) {
            const int expect = sd_jo_accepts(t->b, t->n, oo, DEPTHS[di]);
            SD_CHECK(expect >= 0, "oracle out of memory");
            check_one(fsms[oo][di], t, oo, di, expect == 1, st);
        }
    st->texts++;
}

static void report(const char *what, const stats *st, sd_fsm *fsms[2][3]) {
    printf("%s: %ld texts, %ld live prefixes walked; accepted (object_only 0 | 1, max_depth 3/6/64): "
           "%ld %ld %ld | %ld %ld %ld; viability checks %ld live + %ld dead; mismatches %ld, viability "
           "failures %ld, FULL %ld; states %d %d %d | %d %d %d\n",
           what, st->texts, st->prefixes, st->accepted[0][0], st->accepted[0][1], st->accepted[0][2],
           st->accepted[1][0], st->accepted[1][1], st->accepted[1][2], st->viab_live, st->viab_dead, st->mismatches,
           st->viab_bad, st->full, (int)fsms[0][0]->vt->n_states(fsms[0][0]), (int)fsms[0][1]->vt->n_states(fsms[0][1]),
           (int)fsms[0][2]->vt->n_states(fsms[0][2]), (int)fsms[1][0]->vt->n_states(fsms[1][0]),
           (int)fsms[1][1]->vt->n_states(fsms[1][1]), (int)fsms[1][2]->vt->n_states(fsms[1][2]));
    SD_CHECK(st->mismatches == 0 && st->viab_bad == 0 && st->full == 0, "%s: %ld mismatches, %ld viability, %ld FULL",
             what, st->mismatches, st->viab_bad, st->full);
}

int main(void) {
    sd_fsm *fsms[2][3] = {{NULL}};
    int ok = 1;
    for (int oo = 0; oo < 2; oo++)
        for (int di = 0; di < 3; di++) {
            sd_errbuf eb;
            ok &= sd_json_fsm_create(oo, DEPTHS[di], 1 << 22, &fsms[oo][di], &eb) == SPECDEC_OK;
        }
    SD_CHECK(ok, "create");
    static buf t;
    if (ok) {
        stats gen = {0}, mut = {0};
        for (int k = 0; k < N_GEN; k++) gen_text(&t), run(fsms, &t, &gen);
        report("generated", &gen, fsms);
        /* the generator writes only valid JSON of depth <= 6: with no mismatch, the automaton and
         * the oracle both accept every one at max_depth 64 (a generator or oracle bug shows here) */
        SD_CHECK(gen.accepted[0][2] == N_GEN, "generated texts accepted at max_depth 64: %ld of %d",
                 gen.accepted[0][2], N_GEN);
        for (int k = 0; k < N_MUT; k++) gen_text(&t), mutate(&t), run(fsms, &t, &mut);
        report("mutated", &mut, fsms);
        /* the mutations must give both sides substantially, else the comparison says little */
        SD_CHECK(mut.accepted[0][2] > N_MUT / 20 && mut.accepted[0][2] < N_MUT - N_MUT / 20,
                 "mutations accepted at depth 64: %ld of %d", mut.accepted[0][2], N_MUT);
    }
    for (int oo = 0; oo < 2; oo++)
        for (int di = 0; di < 3; di++) sd_fsm_free(fsms[oo][di]);
    return sd_test_done();
}
