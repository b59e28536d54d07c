/* test_gbnf_diff.c — core/sd_gbnf.h against oracles written independently from the grammar
 * TEXTS: for ten fixed grammars, either a regular expression translated by hand and run through
 * core/sd_regex.h (the regular ones) or a small hand-written recognizer (a^n b^n, arithmetic
 * with parentheses, nested brackets). With a fixed seed it generates valid strings (random walks
 * over the regex DFA; hand-written generators for the others) and mutations of them, and checks:
 *   - accepting-at-end of the GBNF automaton equals the oracle's answer on every string;
 *   - every prefix of a valid string is live (never SD_FSM_DEAD / SD_FSM_FULL);
 *   - from sampled live states an accepting state is reachable (BFS over all bytes).
 * Hypothesis: the automaton accepts exactly the grammar's language (within its depth bound, which
 * the a^n b^n oracle models and the generators of the others stay far below); any difference is a
 * bug, so the expected count of mismatches is 0 (no statistics). Counts are printed.
 * Built a second time with SD_GBNF_MUTANT_STAR_AS_PLUS (core/sd_gbnf.c reads x* as x+): that
 * build must find mismatches, which shows that the comparison can fail.
 * Usage: test_gbnf_diff [n_per_grammar] (default 2500: 25000 valid strings and 25000 mutations). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_fsm_check.h"
#include "sd_gbnf.h"
#include "sd_regex.h"
#include "sd_test.h"

#define MAXLEN 512

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) { /* splitmix64 */
    uint64_t z = (rng_state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return (uint32_t)((z ^ (z >> 31)) >> 32);
}
static uint32_t rndn(uint32_t n) { return rnd() % n; }

/* ------------------------------------------------------------------ hand-written oracles */

typedef struct buf {
    char s[MAXLEN + 8];
    size_t n;
    int over; /* a generator passed MAXLEN: the string is cut, the caller retries */
} buf;

static void put(buf *b, const char *t) {
    const size_t l = strlen(t);
    if (b->n + l <= MAXLEN) memcpy(b->s + b->n, t, l), b->n += l;
    else b->over = 1;
}

/* a^n b^n, n <= SD_GBNF_MAX_DEPTH (root ::= "a" root "b" | ""). */
static int anbn_ok(const char *s, size_t n) {
    if (n % 2) return 0;
    for (size_t i = 0; i < n / 2; i++)
        if (s[i] != 'a' || s[n / 2 + i] != 'b') return 0;
    return n / 2 <= SD_GBNF_MAX_DEPTH;
}
static void anbn_gen(buf *b) {
    const int k = (int)rndn(SD_GBNF_MAX_DEPTH + 1);
    for (int i = 0; i < k; i++) put(b, "a");
    for (int i = 0; i < k; i++) put(b, "b");
}

/* Arithmetic: expr = term (("+"|"-") term)*, term = factor (("*"|"/") factor)*,
 * factor = [0-9]+ | "(" expr ")" | "-" factor. Recursive descent over the text. */
typedef struct rd {
    const char *s;
    size_t n, i;
    int depth;
} rd;
static int rd_expr(rd *r);
static int rd_factor(rd *r) {
    if (++r->depth > 200) return 0;
    int ok = 0;
    if (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') {
        while (r->i < r->n && r->s[r->i] >= '0' && r->s[r->i] <= '9') r->i++;
        ok = 1;
    } else if (r->i < r->n && r->s[r->i] == '(') {
        r->i++;
        ok = rd_expr(r) && r->i < r->n && r->s[r->i] == ')';
        if (ok) r->i++;
    } else if (r->i < r->n && r->s[r->i] == '-') {
        r->i++;
        ok = rd_factor(r);
    }
    r->depth--;
    return ok;
}
static int rd_term(rd *r) {
    if (!rd_factor(r)) return 0;
    while (r->i < r->n && (r->s[r->i] == '*' || r->s[r->i] == '/')) {
        r->i++;
        if (!rd_factor(r)) return 0;
    }
    return 1;
}
static int rd_expr(rd *r) {
    if (!rd_term(r)) return 0;
    while (r->i < r->n && (r->s[r->i] == '+' || r->s[r->i] == '-')) {
        r->i++;
        if (!rd_term(r)) return 0;
    }
    return 1;
}
static int arith_ok(const char *s, size_t n) {
    rd r = {s, n, 0, 0};
    return rd_expr(&r) && r.i == n;
}
static void arith_expr(buf *b, int d);
static void arith_factor(buf *b, int d) {
    const uint32_t c = rndn(d >= 5 ? 2 : 5);
    if (c == 0 || c == 2) {
        char num[8];
        snprintf(num, sizeof num, "%u", rndn(c == 0 ? 10 : 100000));
        put(b, num);
    } else if (c == 1) {
        put(b, "-");
        arith_factor(b, d + 1);
    } else {
        put(b, "(");
        arith_expr(b, d + 1);
        put(b, ")");
    }
}
static void arith_term(buf *b, int d) {
    arith_factor(b, d);
    for (uint32_t k = rndn(3); k > 0; k--) put(b, rndn(2) ? "*" : "/"), arith_factor(b, d);
}
static void arith_expr(buf *b, int d) {
    arith_term(b, d);
    for (uint32_t k = rndn(3); k > 0; k--) put(b, rndn(2) ? "+" : "-"), arith_term(b, d);
}
static void arith_gen(buf *b) { arith_expr(b, 0); }

/* Nested brackets: root = item*, item = "(" item* ")" | "[" item* "]" | [a-z]. A stack matcher. */
static int brk_ok(const char *s, size_t n) {
    char stk[MAXLEN + 8];
    size_t sp = 0;
    for (size_t i = 0; i < n; i++) {
        const char c = s[i];
        if (c == '(' || c == '[') stk[sp++] = c;
        else if (c == ')' || c == ']') {
            if (!sp || stk[sp - 1] != (c == ')' ? '(' : '[')) return 0;
            sp--;
        } else if (c < 'a' || c > 'z') return 0;
    }
    return sp == 0;
}
static void brk_items(buf *b, int d) {
    for (uint32_t k = rndn(d >= 6 ? 3 : 4); k > 0; k--) {
        const uint32_t c = rndn(d >= 6 ? 1 : 3);
        if (c == 0) {
            char ch[2] = {(char)('a' + rndn(26)), 0};
            put(b, ch);
        } else {
            put(b, c == 1 ? "(" : "[");
            brk_items(b, d + 1);
            put(b, c == 1 ? ")" : "]");
        }
    }
}
static void brk_gen(buf *b) { brk_items(b, 0); }

/* ------------------------------------------------------------------ the grammars */

typedef struct grammar_t {
    const char *name, *gbnf, *regex; /* regex: the oracle, or NULL with ok/gen */
    int (*ok)(const char *, size_t);
    void (*gen)(buf *);
} grammar_t;

#define MOVE_RE "(?:(?:[a-h]x)?[a-h][1-8](?:=[NBKQR])?|[NBKQR][a-h]?[1-8]?x?[a-h][1-8]|O-O(?:-O)?)[+#]?"

static const grammar_t GRAMMARS[] = {
    {"reps", "root ::= \"x\"{2,4} [0-9]{3} (\"ab\"){0,2} \"-\"{1,}\n", "x{2,4}[0-9]{3}(?:ab){0,2}-+", NULL, NULL},
    {"chess",
     "root ::= \"1. \" move \" \" move \"\\n\" ([1-9] [0-9]? \". \" move \" \" move \"\\n\")+\n"
     "move ::= (pawn | nonpawn | castle) [+#]?\n"
     "pawn ::= ([a-h] \"x\")? [a-h] [1-8] (\"=\" [NBKQR])?\n"
     "nonpawn ::= [NBKQR] [a-h]? [1-8]? \"x\"? [a-h] [1-8]\n"
     "castle ::= \"O-O\" \"-O\"?\n",
     "1\\. " MOVE_RE " " MOVE_RE "\\n(?:[1-9][0-9]?\\. " MOVE_RE " " MOVE_RE "\\n)+", NULL, NULL},
    {"utf8", "root ::= [a-zé-ÿ\\u4e00-\\u4e0f\\U0001F600-\\U0001F60F]+ [^a-z\\n]?\n",
     "[a-z\\u00e9-\\u00ff\\u4e00-\\u4e0f\\U0001F600-\\U0001F60F]+[^a-z\\n]?", NULL, NULL},
    {"nullable", "root ::= a b c d\na ::= \"x\"?\nb ::= (\"y\" | )\nc ::= \"z\"*\nd ::= e\ne ::=\n", "x?y?z*", NULL, NULL},
    {"dot", "root ::= \"<\" .{0,2} \">\" .*\n", "<[\\s\\S]{0,2}>[\\s\\S]*", NULL, NULL},
    {"star", "root ::= (\"ab\" | \"c\")* \"d\"? ([^a-c]{1,3})*\n", "(?:ab|c)*d?(?:[^a-c]{1,3})*", NULL, NULL},
    {"words", "root ::= word (\" \" word)*\nword ::= [a-z]+ | [0-9]+ \".\" [0-9]*  # two kinds\n",
     "(?:[a-z]+|[0-9]+\\.[0-9]*)(?: (?:[a-z]+|[0-9]+\\.[0-9]*))*", NULL, NULL},
    {"anbn", "root ::= \"a\" root \"b\" | \"\"\n", NULL, anbn_ok, anbn_gen},
    {"arith",
     "root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\nterm ::= factor ((\"*\" | \"/\") factor)*\n"
     "factor ::= num | \"(\" expr \")\" | \"-\" factor\nnum ::= [0-9]+\n",
     NULL, arith_ok, arith_gen},
    {"brackets", "root ::= item*\nitem ::= \"(\" item* \")\" | \"[\" item* \"]\" | [a-z]\n", NULL, brk_ok, brk_gen},
};
#define N_GRAMMARS (sizeof GRAMMARS / sizeof GRAMMARS[0])

/* 1 if the automaton accepts s (every byte live, accepting at the end); *full if FULL was met. */
static int fsm_accepts(sd_fsm *f, const char *s, size_t n, int *full, size_t *dead_at) {
    int32_t st = f->start;
    for (size_t i = 0; i < n; i++) {
        st = sd_fsm_step(f, st, (uint8_t)s[i]);
        if (st == SD_FSM_FULL) *full = 1;
        if (st < 0) {
            *dead_at = i;
            return 0;
        }
    }
    *dead_at = n;
    return sd_fsm_accepting(f, st);
}

/* A random string of the regex: a walk over live bytes, ending at an accepting state with
 * probability 1/6 per step; 0 if the walk grows past MAXLEN / 2 (the caller retries). */
static int regex_gen(sd_fsm *re, buf *b) {
    int32_t s = re->start;
    int32_t next[256];
    uint8_t bytes[256];
    while (b->n < MAXLEN / 2) {
        if (sd_fsm_accepting(re, s) && rndn(6) == 0) return 1;
        int k = 0;
        for (int c = 0; c < 256; c++) {
            const int32_t t = sd_fsm_step(re, s, (uint8_t)c);
            if (t >= 0) next[k] = t, bytes[k] = (uint8_t)c, k++;
        }
        if (k == 0) return sd_fsm_accepting(re, s);
        const int j = (int)rndn((uint32_t)k);
        b->s[b->n++] = (char)bytes[j];
        s = next[j];
    }
    return 0;
}

/* One to three random edits: delete, insert, replace, duplicate a span, swap two bytes. */
static void mutate(const buf *in, buf *out, const char *alphabet) {
    *out = *in;
    const size_t na = strlen(alphabet);
    for (uint32_t e = 1 + rndn(3); e > 0; e--) {
        const uint32_t op = rndn(5);
        const size_t at = out->n ? rndn((uint32_t)out->n + 1) : 0;
        const char c = rndn(4) ? alphabet[rndn((uint32_t)na)] : (char)rndn(256);
        if (op == 0 && out->n && at < out->n) memmove(out->s + at, out->s + at + 1, out->n - at - 1), out->n--;
        else if (op == 1 && out->n < MAXLEN) memmove(out->s + at + 1, out->s + at, out->n - at), out->s[at] = c, out->n++;
        else if (op == 2 && at < out->n) out->s[at] = c;
        else if (op == 3 && at < out->n) {
            const size_t len = 1 + rndn(4), l = at + len <= out->n ? len : out->n - at;
            if (out->n + l <= MAXLEN) memmove(out->s + at + l, out->s + at, out->n - at), out->n += l;
        } else if (op == 4 && out->n >= 2) {
            const size_t j = rndn((uint32_t)out->n), i = at < out->n ? at : 0;
            const char t = out->s[i];
            out->s[i] = out->s[j], out->s[j] = t;
        }
    }
}

typedef struct counts {
    long valid, mutants, accepted_mutants, mismatches, prefix_dead, full, completions, no_completion;
} counts;

static int oracle(const grammar_t *g, sd_fsm *re, const buf *b, int *full) {
    if (!re) return g->ok(b->s, b->n);
    size_t at;
    return fsm_accepts(re, b->s, b->n, full, &at);
}

static void run_grammar(const grammar_t *g, int n, counts *c, int32_t *queue, uint8_t *seen) {
    sd_errbuf eb;
    sd_fsm *f = NULL, *re = NULL;
    if (sd_gbnf_fsm_create(g->gbnf, strlen(g->gbnf), 200000, &f, &eb) != SPECDEC_OK) {
        SD_CHECK(0, "%s: %s", g->name, eb.msg);
        return;
    }
    if (g->regex && sd_regex_fsm_create(g->regex, strlen(g->regex), 200000, &re, &eb) != SPECDEC_OK) {
        SD_CHECK(0, "%s regex: %s", g->name, eb.msg);
        sd_fsm_free(f);
        return;
    }
    const char *alphabet = g->regex ? "xab0123456789-1. NBKQROae8+#=\nyzcd<>\xc3\xa9\xe4\xb8\x80" : "ab()[]+-*/09xyz";
    long mism = 0;
    for (int i = 0; i < n; i++) {
        buf v = {{0}, 0, 0}, m;
        if (re) {
            while (!regex_gen(re, &v)) v.n = 0;
        } else
            do v.n = 0, v.over = 0, g->gen(&v);
            while (v.over);
        int full = 0;
        size_t dead_at;
        const int got = fsm_accepts(f, v.s, v.n, &full, &dead_at);
        c->valid++;
        if (!oracle(g, re, &v, &full)) SD_CHECK(0, "%s: generator produced an invalid string", g->name);
        if (dead_at < v.n) c->prefix_dead++;
        if (!got) {
            if (mism++ < 3) fprintf(stderr, "%s: valid <<%.*s>> refused at byte %zu\n", g->name, (int)v.n, v.s, dead_at);
        }
        if (i % 16 == 0) { /* completion search from the state after a random prefix */
            int32_t s = f->start;
            const size_t cut = v.n ? rndn((uint32_t)v.n + 1) : 0;
            for (size_t k = 0; k < cut && s >= 0; k++) s = sd_fsm_step(f, s, (uint8_t)v.s[k]);
            long bad = 0;
            if (s >= 0) {
                c->completions++;
                if (sd_fsm_can_accept(f, s, 200000, queue, seen, &bad) != 1 || bad) c->no_completion++;
            }
        }
        mutate(&v, &m, alphabet);
        const int want = oracle(g, re, &m, &full);
        const int have = fsm_accepts(f, m.s, m.n, &full, &dead_at);
        c->mutants++;
        c->accepted_mutants += want;
        if (want != have && mism++ < 3)
            fprintf(stderr, "%s: mutant <<%.*s>> oracle %d automaton %d\n", g->name, (int)m.n, m.s, want, have);
        c->full += full;
    }
    c->mismatches += mism;
    printf("%-9s %d valid + %d mutants, %ld mismatches, %d automaton states\n", g->name, n, n, mism, f->vt->n_states(f));
    sd_fsm_free(f);
    sd_fsm_free(re);
}

int main(int argc, char **argv) {
    const int n = argc > 1 ? atoi(argv[1]) : 2500;
    int32_t *queue = malloc(200000 * sizeof(int32_t));
    uint8_t *seen = malloc(200000);
    if (!queue || !seen) return 1;
    counts c;
    memset(&c, 0, sizeof c);
    for (size_t g = 0; g < N_GRAMMARS; g++) run_grammar(&GRAMMARS[g], n, &c, queue, seen);
    printf("total: %ld valid strings, %ld mutants (%ld of them valid), %ld mismatches, %ld valid strings with a dead "
           "prefix, %ld FULL, %ld completion searches (%ld failed)\n",
           c.valid, c.mutants, c.accepted_mutants, c.mismatches, c.prefix_dead, c.full, c.completions, c.no_completion);
    free(queue);
    free(seen);
#ifdef SD_GBNF_MUTANT_STAR_AS_PLUS
    /* the planted mutant must be caught */
    printf("planted mutant (x* read as x+): %s\n", c.mismatches > 0 ? "detected" : "NOT detected");
    return c.mismatches > 0 && c.valid >= 10 * (long)n ? 0 : 1;
#else
    SD_CHECK(c.valid >= 10 * (long)n && c.mutants >= 10 * (long)n, "counts");
    SD_CHECK(c.mismatches == 0, "%ld mismatches", c.mismatches);
    SD_CHECK(c.prefix_dead == 0, "%ld valid strings with a dead prefix", c.prefix_dead);
    SD_CHECK(c.full == 0, "%ld FULL", c.full);
    SD_CHECK(c.no_completion == 0 && c.completions > 0, "%ld of %ld completion searches failed", c.no_completion,
             c.completions);
    SD_CHECK(c.accepted_mutants > 0 && c.accepted_mutants < c.mutants, "mutants valid %ld of %ld", c.accepted_mutants,
             c.mutants);
    return sd_test_done();
#endif
}
