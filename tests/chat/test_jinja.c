/* test_jinja — the Jinja interpreter (tokenizer/sd_jinja*) without Python: what
 * test_jinja_templates.py cannot check against jinja2.
 *   - limits: hostile templates (nested loops, doubling strings, growing lists, unbounded
 *     recursion, deep nesting, huge repeats, integer overflow) end with UNSUPPORTED naming the
 *     limit, under small limits and under the defaults (where they must end within seconds);
 *   - the injected clock of strftime_now, and the system clock;
 *   - every variable kind, and invalid UTF-8 in a variable;
 *   - allocation failure injected at every allocation of parse + render of published templates:
 *     OUT_OF_MEMORY each time, never a crash or a leak (ASan);
 *   - 4000 mutations (cut, splice, Jinja punctuation; fixed seed) of the committed templates:
 *     every status is OK, INVALID_ARGUMENT or UNSUPPORTED;
 *   - one parsed template rendered by 4 threads at once gives the same text.
 * Usage: test_jinja TEMPLATES_DIR (tests/chat/templates) */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cjson/cJSON.h>

#include "chat_util.h"
#include "sd_alloc.h"
#include "sd_jinja.h"
#include "sd_test.h"
#include "specdec.h"

static const char *g_dir;

static const specdec_chat_message g_msgs[] = {{"system", "Be brief."},      {"user", "Hi \xc3\xa9 \xf0\x9f\x8e\x89"},
                                              {"assistant", " Hello! "},    {"user", "Count to three."}};

static char *read_file(const char *dir, const char *name) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return chat_read_file(p);
}

/* Render src with the chat variables; the text (malloc'd) or NULL with *st set. */
static char *render_src(const char *src, const sd_jinja_limits *lim, int64_t now, specdec_status *st) {
    sd_jinja_tmpl *t = NULL;
    *st = sd_jinja_parse(src, strlen(src), &t);
    if (*st) return NULL;
    sd_jinja_var v[] = {{"messages", SD_JINJA_MESSAGES, 0, NULL, NULL, g_msgs, 4},
                        {"add_generation_prompt", SD_JINJA_BOOL, 1, NULL, NULL, NULL, 0},
                        {"tools", SD_JINJA_NONE, 0, NULL, NULL, NULL, 0},
                        {"bos_token", SD_JINJA_STR, 0, "<s>", NULL, NULL, 0},
                        {"eos_token", SD_JINJA_STR, 0, "</s>", NULL, NULL, 0}};
    sd_tok_buf out = {0};
    *st = sd_jinja_render(t, v, sizeof v / sizeof v[0], now, lim, &out);
    sd_jinja_free(t);
    char *s = NULL;
    if (!*st && (s = malloc(out.len + 1))) {
        if (out.len) memcpy(s, out.p, out.len);
        s[out.len] = '\0';
    }
    sd_tok_buf_free(&out);
    return s;
}

static void expect_refused(const char *src, const sd_jinja_limits *lim, specdec_status want, const char *what, const char *msg) {
    specdec_status st;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    char *s = render_src(src, lim, SD_JINJA_NOW_SYSTEM, &st);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
    SD_CHECK(!s && st == want && strstr(specdec_last_error(), msg), "%s: status %d (want %d), message %s", what, st, want,
             specdec_last_error());
    printf("  %-28s %s %.2f s: %s\n", what, lim ? "small limits" : "defaults    ", secs, specdec_last_error());
    free(s);
}

static void test_limits(void) {
    sd_jinja_limits small = {1 << 20, 8 << 20, 200000, 64};
    const struct { const char *src, *what, *msg; specdec_status st; } cases[] = {
        {"{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "nested loops", "",
         SPECDEC_ERR_UNSUPPORTED},
        {"{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s|length }}",
         "doubling string", "MiB of text", SPECDEC_ERR_UNSUPPORTED},
        {"{% set ns = namespace(l=[]) %}{% for i in range(100000) %}{% set ns.l = ns.l + [i, i, i, i] %}{% endfor %}",
         "growing list", "", SPECDEC_ERR_UNSUPPORTED},
        {"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "unbounded recursion", "deeper than",
         SPECDEC_ERR_UNSUPPORTED},
        {"{{ 'x' * 1000000000000 }}", "huge repeat", "MiB of text", SPECDEC_ERR_UNSUPPORTED},
        {"{{ [1, 2] * 1000000000000 }}", "huge list repeat", "repeated", SPECDEC_ERR_UNSUPPORTED},
        {"{{ 9223372036854775807 + 1 }}", "integer overflow", "overflow", SPECDEC_ERR_UNSUPPORTED},
        {"{{ 3 ** 64 }}", "power overflow", "overflow", SPECDEC_ERR_UNSUPPORTED},
        {"{{ range(200000) }}", "range too big", "MAX_RANGE", SPECDEC_ERR_INVALID_ARGUMENT},
    };
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            expect_refused(cases[i].src, pass ? NULL : &small, cases[i].st, cases[i].what, cases[i].msg);
    /* nesting deeper than the parser accepts: refused at load */
    char deep[2600];
    size_t o = (size_t)snprintf(deep, sizeof deep, "{{ ");
    for (int i = 0; i < 1000; i++) deep[o++] = '(';
    deep[o++] = '1';
    for (int i = 0; i < 1000; i++) deep[o++] = ')';
    snprintf(deep + o, sizeof deep - o, " }}");
    sd_jinja_tmpl *t = NULL;
    specdec_status st = sd_jinja_parse(deep, strlen(deep), &t);
    SD_CHECK(st == SPECDEC_ERR_UNSUPPORTED && !t && strstr(specdec_last_error(), "nested"), "deep parse: %d %s", st,
             specdec_last_error());
    char *ifs = malloc(20000);
    o = 0;
    for (int i = 0; i < 1000; i++) o += (size_t)sprintf(ifs + o, "{%% if 1 %%}");
    ifs[o] = '\0';
    st = sd_jinja_parse(ifs, o, &t);
    SD_CHECK(st == SPECDEC_ERR_UNSUPPORTED && !t, "deep statements: %d %s", st, specdec_last_error());
    free(ifs);
    /* within the limits, a template that loops a lot still renders */
    char *s = render_src("{% for i in range(1000) %}{% for j in range(100) %}{% endfor %}{% endfor %}ok", NULL,
                         SD_JINJA_NOW_SYSTEM, &st);
    SD_CHECK(s && !strcmp(s, "ok"), "100k iterations: %s", s ? s : specdec_last_error());
    free(s);
}

static void test_clock(void) {
    specdec_status st;
    /* 2025-07-05 09:05:03 UTC; formatted in local time, so compare with localtime_r */
    time_t when = 1751706303;
    struct tm tmv;
    localtime_r(&when, &tmv);
    char want[128];
    strftime(want, sizeof want, "%Y-%m-%d %H:%M:%S %a %b %j", &tmv); /* C locale: this process never sets one */
    char *s = render_src("{{ strftime_now('%Y-%m-%d %H:%M:%S %a %b %j') }}", NULL, when, &st);
    SD_CHECK(s && !strcmp(s, want), "injected clock: %s vs %s", s ? s : specdec_last_error(), want);
    free(s);
    s = render_src("{{ strftime_now('%Q') }}", NULL, when, &st);
    SD_CHECK(!s && st == SPECDEC_ERR_UNSUPPORTED && strstr(specdec_last_error(), "%Q"), "unknown directive: %d", st);
    free(s);
    time_t now = time(NULL);
    localtime_r(&now, &tmv);
    char year[16];
    snprintf(year, sizeof year, "%d", tmv.tm_year + 1900);
    s = render_src("{{ strftime_now('%Y') }}", NULL, SD_JINJA_NOW_SYSTEM, &st);
    SD_CHECK(s && !strcmp(s, year), "system clock: %s", s ? s : specdec_last_error());
    free(s);
}

static void test_vars(void) {
    const char *src = "{{ a }}|{{ b }}|{{ c }}|{{ j.k[1] }}|{{ messages[1].content }}|{{ missing is defined }}";
    sd_jinja_tmpl *t = NULL;
    SD_CHECK(sd_jinja_parse(src, strlen(src), &t) == SPECDEC_OK, "parse");
    cJSON *j = cJSON_Parse("{\"k\": [1, 2.5, null]}");
    sd_jinja_var v[] = {{"a", SD_JINJA_NONE, 0, NULL, NULL, NULL, 0},      {"b", SD_JINJA_BOOL, 1, NULL, NULL, NULL, 0},
                        {"c", SD_JINJA_STR, 0, "\xc3\xa9", NULL, NULL, 0}, {"j", SD_JINJA_JSON, 0, NULL, j, NULL, 0},
                        {"messages", SD_JINJA_MESSAGES, 0, NULL, NULL, g_msgs, 4}};
    sd_tok_buf out = {0};
    specdec_status st = sd_jinja_render(t, v, 5, SD_JINJA_NOW_SYSTEM, NULL, &out);
    const char *want = "None|True|\xc3\xa9|2.5|Hi \xc3\xa9 \xf0\x9f\x8e\x89|False";
    SD_CHECK(st == SPECDEC_OK && out.len == strlen(want) && !memcmp(out.p, want, out.len), "variables: %.*s",
             (int)out.len, out.p ? out.p : "");
    sd_tok_buf_free(&out);
    v[2].s = "\xff";
    st = sd_jinja_render(t, v, 5, SD_JINJA_NOW_SYSTEM, NULL, &out);
    SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT && strstr(specdec_last_error(), "UTF-8"), "invalid UTF-8: %d", st);
    sd_tok_buf_free(&out);
    v[2].s = "x";
    specdec_chat_message bad[] = {{"user", NULL}};
    v[4].msgs = bad;
    v[4].n_msgs = 1;
    st = sd_jinja_render(t, v, 5, SD_JINJA_NOW_SYSTEM, NULL, &out);
    SD_CHECK(st == SPECDEC_ERR_INVALID_ARGUMENT, "NULL content: %d", st);
    sd_tok_buf_free(&out);
    cJSON_Delete(j);
    sd_jinja_free(t);
}

/* Every allocation of parse + render fails in turn: OUT_OF_MEMORY, then success. */
static void test_alloc_failures(void) {
    static const char *names[] = {"Qwen__Qwen3-0.6B.jinja", "meta-llama__Llama-3.1-8B-Instruct.jinja",
                                  "openai__gpt-oss-120b.jinja", "mistralai__Mistral-7B-Instruct-v0.3--rev2.jinja"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char *src = read_file(g_dir, names[i]);
        SD_CHECK(src != NULL, "read %s", names[i]);
        if (!src) continue;
        int done = 0, bad = 0;
        long k = 0;
        for (; k < 100000 && !done; k++) {
            specdec_status st;
            sd_alloc_fail_after(k);
            char *s = render_src(src, NULL, 1751706303, &st);
            sd_alloc_fail_after(-1);
            if (s) done = 1;
            else if (st != SPECDEC_ERR_OUT_OF_MEMORY) bad = 1;
            free(s);
        }
        SD_CHECK(done && !bad, "%s under allocation failures: done %d bad %d after %ld", names[i], done, bad, k);
        free(src);
    }
}

/* The committed templates, cut/spliced/sprinkled with punctuation. */
static void test_mutations(void) {
    DIR *d = opendir(g_dir);
    SD_CHECK(d != NULL, "open %s", g_dir);
    if (!d) return;
    char *seeds[128];
    int ns = 0;
    for (struct dirent *e; (e = readdir(d)) && ns < 128;) {
        size_t n = strlen(e->d_name);
        if (n > 6 && !strcmp(e->d_name + n - 6, ".jinja") && (seeds[ns] = read_file(g_dir, e->d_name))) ns++;
    }
    closedir(d);
    SD_CHECK(ns > 15, "%d templates", ns);
    static const char punct[] = "{}%#-+'\"\\|[]()., \n~*=!<>0x";
    sd_jinja_limits lim = {1 << 22, 64 << 20, 100000, 128};
    uint64_t x = 0x9E3779B97F4A7C15ull;
    int counts[3] = {0, 0, 0}, other = 0;
    for (int it = 0; it < 4000 && ns; it++) {
        const char *src = seeds[it % ns];
        size_t n = strlen(src), cap = n + 16;
        char *t = malloc(cap + 1);
        memcpy(t, src, n + 1);
        for (int k = 0; k < 1 + it % 5; k++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            size_t at = (size_t)(x >> 33) % (n + 1);
            int op = (int)((x >> 20) % 4);
            if (op == 0) n = at + (n - at) / 2; /* cut */
            else if (op == 1 && n < cap) {      /* insert punctuation */
                memmove(t + at + 1, t + at, n - at);
                t[at] = punct[(x >> 8) % (sizeof punct - 1)];
                n++;
            } else if (op == 2 && n > at) { /* delete */
                memmove(t + at, t + at + 1, n - at - 1);
                n--;
            } else if (n > 8) { /* swap two bytes */
                size_t b = (size_t)(x >> 12) % n;
                char tmp = t[at < n ? at : n - 1];
                t[at < n ? at : n - 1] = t[b];
                t[b] = tmp;
            }
            t[n] = '\0';
        }
        specdec_status st;
        char *s = render_src(t, &lim, 1751706303, &st);
        free(s);
        if (st == SPECDEC_OK) counts[0]++;
        else if (st == SPECDEC_ERR_INVALID_ARGUMENT) counts[1]++;
        else if (st == SPECDEC_ERR_UNSUPPORTED) counts[2]++;
        else other++;
        free(t);
    }
    SD_CHECK(other == 0 && counts[0] > 0 && counts[2] > 0, "mutations: %d rendered, %d raised, %d refused, %d other",
             counts[0], counts[1], counts[2], other);
    printf("mutated templates: %d rendered, %d raised, %d refused\n", counts[0], counts[1], counts[2]);
    for (int i = 0; i < ns; i++) free(seeds[i]);
}

typedef struct {
    const sd_jinja_tmpl *t;
    char *text;
    int ok;
} thread_arg;

static void *render_thread(void *p) {
    thread_arg *a = p;
    sd_jinja_var v[] = {{"messages", SD_JINJA_MESSAGES, 0, NULL, NULL, g_msgs, 4},
                        {"add_generation_prompt", SD_JINJA_BOOL, 1, NULL, NULL, NULL, 0},
                        {"bos_token", SD_JINJA_STR, 0, "<s>", NULL, NULL, 0}};
    a->ok = 1;
    for (int i = 0; i < 200; i++) {
        sd_tok_buf out = {0};
        if (sd_jinja_render(a->t, v, 3, 1751706303, NULL, &out)) a->ok = 0;
        if (i == 0 && (a->text = malloc(out.len + 1))) {
            memcpy(a->text, out.p, out.len);
            a->text[out.len] = '\0';
        } else if (a->text && (out.len != strlen(a->text) || memcmp(out.p, a->text, out.len))) {
            a->ok = 0;
        }
        sd_tok_buf_free(&out);
    }
    return NULL;
}

static void test_threads(void) {
    char *src = read_file(g_dir, "meta-llama__Llama-3.2-3B-Instruct.jinja");
    sd_jinja_tmpl *t = NULL;
    SD_CHECK(src && sd_jinja_parse(src, strlen(src), &t) == SPECDEC_OK, "parse Llama 3.2");
    thread_arg args[4] = {{t, NULL, 0}, {t, NULL, 0}, {t, NULL, 0}, {t, NULL, 0}};
    pthread_t th[4];
    for (int i = 0; t && i < 4; i++) pthread_create(&th[i], NULL, render_thread, &args[i]);
    for (int i = 0; t && i < 4; i++) pthread_join(th[i], NULL);
    for (int i = 0; t && i < 4; i++)
        SD_CHECK(args[i].ok && args[i].text && args[0].text && !strcmp(args[i].text, args[0].text), "thread %d", i);
    SD_CHECK(t && args[0].ok && args[0].text && strstr(args[0].text, "Today Date: 05 Jul 2025"), "Llama 3.2 date line");
    for (int i = 0; i < 4; i++) free(args[i].text);
    sd_jinja_free(t);
    free(src);
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: test_jinja TEMPLATES_DIR\n");
        return 2;
    }
    g_dir = argv[1];
    test_limits();
    test_clock();
    test_vars();
    test_alloc_failures();
    test_mutations();
    test_threads();
    return sd_test_done();
}
