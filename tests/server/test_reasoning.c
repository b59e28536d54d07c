/* test_reasoning.c — the reasoning split of chat outputs (tools/server/sd_server_reasoning.c,
 * vLLM's --reasoning-parser qwen3 / deepseek_r1 / glm45):
 *  - whole outputs (non-streamed) against a table written from vLLM's parsers: both tags, a
 *    missing start tag (the template put it in the prompt), no end tag (deepseek_r1 and qwen3:
 *    all reasoning; qwen3 with enable_thinking false: all content), an end tag right at the end
 *    (content null), a prompt that closed the thinking (all content), a <tool_call> inside the
 *    thinking (reasoning text), tags that are not the parser's;
 *  - streaming: every output of the table and 2000 random texts over an alphabet of tag pieces
 *    (fixed seed) fed in pieces of 1, 3 and 7 bytes and of random sizes: the reasoning deltas and
 *    the content deltas, concatenated, equal the whole split (where vLLM's streaming and whole
 *    answers agree), come in order, and no delta holds a tag or a part of one that the other
 *    side holds the rest of (a tag split across pieces is held back until it is decided);
 *    glm45 (vLLM's glm4_moe_reasoning_parser) streams an output that begins with a start tag (after
 *    whitespace) as reasoning up to the end tag, any other as content; its whole answer needs both
 *    tags (else all content) and drops what precedes the first start tag: streamed and whole agree
 *    where the output begins with the start tag and has an end tag, or has not both tags;
 *  - the prompt check (last end tag after the last start tag; glm45: after the last
 *    "<|assistant|>") and the tag option's parser. */
#define _DEFAULT_SOURCE /* rand_r */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_server_reasoning.h"
#include "sd_test.h"

typedef struct rcase {
    sd_reasoning_parser p;
    int off, prompt_ended;
    const char *text;
    const char *reasoning, *content; /* NULL: null */
} rcase;

static const rcase CASES[] = {
    {SD_RP_QWEN3, 0, 0, "<think>\nplan</think>\n\nanswer", "\nplan", "\n\nanswer"},
    {SD_RP_DEEPSEEK_R1, 0, 0, "<think>\nplan</think>\n\nanswer", "\nplan", "\n\nanswer"},
    {SD_RP_QWEN3, 0, 0, "plan</think>answer", "plan", "answer"},          /* <think> in the prompt */
    {SD_RP_DEEPSEEK_R1, 0, 0, "plan</think>answer", "plan", "answer"},
    {SD_RP_QWEN3, 0, 0, "<think>still thinking", "still thinking", NULL}, /* cut by max_tokens */
    {SD_RP_DEEPSEEK_R1, 0, 0, "still thinking", "still thinking", NULL},
    {SD_RP_QWEN3, 1, 0, "just an answer", NULL, "just an answer"},          /* enable_thinking false */
    {SD_RP_QWEN3, 1, 0, "<think>a</think>b", "a", "b"},                     /* the model thought anyway */
    {SD_RP_DEEPSEEK_R1, 1, 0, "just an answer", "just an answer", NULL},    /* deepseek_r1 has no switch */
    {SD_RP_QWEN3, 0, 0, "<think>done</think>", "done", NULL},               /* "content or None" */
    {SD_RP_QWEN3, 0, 0, "</think>x", "", "x"},
    {SD_RP_QWEN3, 0, 1, "<think>a</think>b", NULL, "<think>a</think>b"},    /* the prompt closed it */
    {SD_RP_DEEPSEEK_R1, 0, 1, "answer", NULL, "answer"},
    {SD_RP_QWEN3, 0, 0, "a <tool_call>{}</tool_call></think><tool_call>{}</tool_call>", "a <tool_call>{}</tool_call>",
     "<tool_call>{}</tool_call>"},
    {SD_RP_QWEN3, 0, 0, "a</think>b</think>c", "a", "b</think>c"},         /* the first end tag */
    {SD_RP_QWEN3, 0, 0, "x<think>y</think>z", "x<think>y", "z"},           /* only a leading start tag */
    {SD_RP_QWEN3, 0, 0, "<thin", "<thin", NULL},                           /* not a tag after all */
    {SD_RP_QWEN3, 0, 0, "a</thin", "a</thin", NULL},
    {SD_RP_QWEN3, 0, 0, "", "", NULL},
    {SD_RP_NONE, 0, 0, "<think>a</think>b", NULL, "<think>a</think>b"},
    /* glm45: vLLM's glm4_moe_reasoning_parser.extract_reasoning */
    {SD_RP_GLM45, 0, 0, "\n<think>plan</think>\nanswer", "plan", "\nanswer"},
    {SD_RP_GLM45, 0, 0, "<think>plan</think>", "plan", NULL},
    {SD_RP_GLM45, 0, 0, "no thinking at all", NULL, "no thinking at all"},
    {SD_RP_GLM45, 0, 0, "<think>cut by max_tokens", NULL, "<think>cut by max_tokens"}, /* needs both tags */
    {SD_RP_GLM45, 0, 0, "plan</think>answer", NULL, "plan</think>answer"},
    {SD_RP_GLM45, 0, 0, "Sure<think>a</think>b", "a", "b"},      /* the text before the start tag dropped */
    {SD_RP_GLM45, 0, 0, "a</think>b<think>c", NULL, "c"},        /* no end tag after the start tag */
    {SD_RP_GLM45, 0, 0, "</think><think>", NULL, ""},
    {SD_RP_GLM45, 0, 0, "<think></think>x", "", "x"},
    {SD_RP_GLM45, 0, 0, "  <think>a</think>b</think>c", "a", "b</think>c"},
    {SD_RP_GLM45, 0, 0, "", NULL, ""},
    {SD_RP_GLM45, 1, 0, "<think>a</think>b", "a", "b"},          /* no enable_thinking switch of its own */
    {SD_RP_GLM45, 0, 1, "<think>a</think>b", NULL, "<think>a</think>b"}, /* the prompt closed it */
};

static int same(const char *text, int has, size_t off, size_t len, const char *want) {
    if (!want) return !has;
    return has && len == strlen(want) && !memcmp(text + off, want, len);
}

/* text streamed in pieces (size > 0: that many bytes; 0: random 1..9); the concatenations. 0 if a
 * check failed. */
static int stream(const rcase *c, const char *text, size_t n, int size, unsigned *seed, char *rs, size_t *rn, char *cs,
                  size_t *cn, int *ended) {
    sd_reasoning r;
    sd_reasoning_init(&r, c->p, NULL, NULL, c->off, c->prompt_ended);
    *rn = *cn = 0;
    size_t at = 0, last = 0;
    int ok = 1;
    while (at < n || at == 0) {
        size_t step = size > 0 ? (size_t)size : 1 + (size_t)(rand_r(seed) % 9);
        at = at + step < n ? at + step : n;
        size_t ra, rb, ca, cb;
        sd_reasoning_feed(&r, text, at, at == n, &ra, &rb, &ca, &cb);
        ok &= ra <= rb && rb <= at && ca <= cb && cb <= at;
        if (rb > ra) ok &= ra >= last && *cn == 0, memcpy(rs + *rn, text + ra, rb - ra), *rn += rb - ra, last = rb;
        if (cb > ca) ok &= ca >= last, memcpy(cs + *cn, text + ca, cb - ca), *cn += cb - ca, last = cb;
        if (at == n) break;
    }
    *ended = r.phase == 2;
    return ok;
}

static void check_stream(const rcase *c, const char *text, size_t n, long *bad, long *n_runs) {
    sd_reasoning cfg;
    sd_reasoning_init(&cfg, c->p, NULL, NULL, c->off, c->prompt_ended);
    sd_reasoning_split w;
    sd_reasoning_whole(&cfg, text, n, &w);
    static char rs[4096], cs[4096];
    static const int sizes[] = {1, 3, 7, 0, 0};
    unsigned seed = 7u + (unsigned)n;
    size_t lead = 0; /* glm45: whitespace and the start tag that open the output, 0 when it does not so begin */
    while (lead < n && strchr(" \t\r\n", text[lead]) && text[lead]) lead++;
    lead = n - lead >= 7 && !memcmp(text + lead, "<think>", 7) ? lead + 7 : 0;
    const char *lead_end = lead ? strstr(text + lead, "</think>") : NULL; /* (texts hold no NUL) */
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        size_t rn, cn;
        int ended;
        int ok = stream(c, text, n, sizes[s], &seed, rs, &rn, cs, &cn, &ended);
        if (c->p == SD_RP_GLM45 && !c->prompt_ended) {
            /* streamed: reasoning after a leading start tag up to the end tag, the rest content; any
               other output all content. The whole answer agrees where both tags exist and the output
               began with the start tag, or where the output has not both tags (the whole answer is
               then all content, and a leading start tag's text goes out as reasoning, as vLLM's
               streaming sends it) */
            const size_t re = lead_end ? (size_t)(lead_end - text) : n, co = lead_end ? re + 8 : n;
            ok &= lead ? rn == re - lead && !memcmp(rs, text + lead, rn) && cn == n - co && !memcmp(cs, text + co, cn)
                       : rn == 0 && cn == n && !memcmp(cs, text, n);
            const int both = strstr(text, "<think>") && strstr(text, "</think>");
            if (lead && lead_end) ok &= w.has_r && w.r_len == rn && w.r_off == lead && (w.has_c ? w.c_len : 0) == cn;
            if (!both) ok &= !w.has_r && w.has_c && w.c_off == 0 && w.c_len == n;
        } else if (w.has_r || ended || c->prompt_ended || c->p == SD_RP_NONE) {
            /* where vLLM's streaming and whole answers agree: all but qwen3 / thinking off / no end tag */
            ok &= (w.has_r ? rn == w.r_len && !memcmp(rs, text + w.r_off, rn) : rn == 0);
            ok &= (w.has_c ? cn == w.c_len && !memcmp(cs, text + w.c_off, cn) : cn == 0);
        } else {
            ok &= cn == 0 && rn == w.c_len && !memcmp(rs, text + w.c_off, rn); /* vLLM streams it as reasoning */
        }
        if (!ok && (*bad)++ < 5)
            fprintf(stderr, "stream parser %d off %d pieces %d: '%.*s' -> reasoning '%.*s' content '%.*s'\n", (int)c->p,
                    c->off, sizes[s], (int)n, text, (int)rn, rs, (int)cn, cs);
        (*n_runs)++;
    }
}

int main(void) {
    long bad = 0, runs = 0;
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++) {
        const rcase *c = &CASES[i];
        sd_reasoning cfg;
        sd_reasoning_init(&cfg, c->p, NULL, NULL, c->off, c->prompt_ended);
        sd_reasoning_split w;
        const size_t n = strlen(c->text);
        sd_reasoning_whole(&cfg, c->text, n, &w);
        SD_CHECK(same(c->text, w.has_r, w.r_off, w.r_len, c->reasoning) &&
                     same(c->text, w.has_c, w.c_off, w.c_len, c->content),
                 "case %zu '%s': reasoning %s'%.*s' content %s'%.*s' (want '%s' / '%s')", i, c->text,
                 w.has_r ? "" : "null ", (int)w.r_len, c->text + w.r_off, w.has_c ? "" : "null ", (int)w.c_len,
                 c->text + w.c_off, c->reasoning ? c->reasoning : "null", c->content ? c->content : "null");
        check_stream(c, c->text, n, &bad, &runs);
    }
    /* random texts over tag pieces: tags arrive whole, split, doubled, half-written */
    static const char *const PIECES[] = {"<think>", "</think>", "<", "</", "think", ">", "</th", "ink>", "a", " ", "\n",
                                         "<tool_call>", "é"};
    unsigned seed = 12345;
    char text[512];
    for (int k = 0; k < 2000; k++) {
        size_t n = 0;
        const int np = 1 + (int)(rand_r(&seed) % 24);
        for (int i = 0; i < np; i++) {
            const char *p = PIECES[rand_r(&seed) % (sizeof PIECES / sizeof PIECES[0])];
            memcpy(text + n, p, strlen(p));
            n += strlen(p);
        }
        text[n] = '\0';
        for (int m = 0; m < 7; m++) {
            const rcase c = {m < 2 ? SD_RP_QWEN3 : m < 4 ? SD_RP_DEEPSEEK_R1 : m == 4 ? SD_RP_QWEN3 : SD_RP_GLM45, m & 1,
                             m == 4 || m == 6, text, NULL, NULL};
            check_stream(&c, text, n, &bad, &runs);
            /* whole: no tag in the content's first bytes that the split should have taken */
            sd_reasoning cfg;
            sd_reasoning_init(&cfg, c.p, NULL, NULL, c.off, c.prompt_ended);
            sd_reasoning_split w;
            sd_reasoning_whole(&cfg, text, n, &w);
            const char *st = strstr(text, "<think>"); /* glm45: the first end tag after the first start tag */
            const char *e = c.p == SD_RP_GLM45 ? (st ? strstr(st + 7, "</think>") : NULL) : strstr(text, "</think>");
            if (w.has_r && e) /* the reasoning ends at the first end tag (after a leading start tag) */
                bad += w.r_off + w.r_len != (size_t)(e - text);
            bad += c.p == SD_RP_GLM45 && !c.prompt_ended && w.has_r != (st && e); /* both tags, in that order */
        }
    }
    SD_CHECK(bad == 0, "%ld of %ld streamed runs differ from the whole split", bad, runs);
    /* the prompt check */
    sd_reasoning r;
    sd_reasoning_init(&r, SD_RP_QWEN3, NULL, NULL, 0, 0);
    static const struct {
        const char *p;
        int want;
    } PROMPTS[] = {{"<|im_start|>assistant\n<think>\n\n</think>\n\n", 1}, {"<|im_start|>assistant\n<think>\n", 0},
                   {"<|im_start|>assistant\n", 0}, {"</think> old turn <|im_start|>assistant\n", 1},
                   {"</think><think>", 0}, {"", 0}};
    for (size_t i = 0; i < sizeof PROMPTS / sizeof PROMPTS[0]; i++)
        SD_CHECK(sd_reasoning_prompt_ended(&r, PROMPTS[i].p, strlen(PROMPTS[i].p)) == PROMPTS[i].want,
                 "prompt '%s' should %sclose the thinking", PROMPTS[i].p, PROMPTS[i].want ? "" : "not ");
    /* glm45 (vLLM's Glm4MoeModelReasoningParser.is_reasoning_end): an end tag after the last
       "<|assistant|>"; GLM-4.5's template writes "<think></think>" after every earlier assistant turn,
       and after the last one when enable_thinking is false */
    sd_reasoning_init(&r, SD_RP_GLM45, NULL, NULL, 0, 0);
    static const struct {
        const char *p;
        int want;
    } GLM_PROMPTS[] = {{"[gMASK]<sop><|user|>hi<|assistant|>\n<think></think>", 1},
                       {"<|user|>hi<|assistant|>", 0},
                       {"<|assistant|>\n<think></think>old<|user|>q<|assistant|>", 0},
                       {"<|user|>hi<|assistant|></think>x<think>", 1},
                       {"", 0}};
    for (size_t i = 0; i < sizeof GLM_PROMPTS / sizeof GLM_PROMPTS[0]; i++)
        SD_CHECK(sd_reasoning_prompt_ended(&r, GLM_PROMPTS[i].p, strlen(GLM_PROMPTS[i].p)) == GLM_PROMPTS[i].want,
                 "glm45 prompt '%s' should %sclose the thinking", GLM_PROMPTS[i].p, GLM_PROMPTS[i].want ? "" : "not ");
    /* tags set by the option (the server's tests use words the bundled model writes) */
    char s[SD_REASONING_TAG_MAX + 1], e[SD_REASONING_TAG_MAX + 1];
    SD_CHECK(sd_server_reasoning_tags("And God", s, e) == 0 && !strcmp(s, "And") && !strcmp(e, "God"), "tags");
    SD_CHECK(sd_server_reasoning_tags("one", s, e) != 0 && sd_server_reasoning_tags(" x", s, e) != 0 &&
                 sd_server_reasoning_tags("x ", s, e) != 0 && sd_server_reasoning_tags("a b c", s, e) != 0,
             "malformed tags are refused");
    sd_reasoning_init(&r, SD_RP_DEEPSEEK_R1, "And", "God", 0, 0);
    sd_reasoning_split w;
    sd_reasoning_whole(&r, "And the earth. God said", 23, &w);
    SD_CHECK(w.has_r && w.r_len == 12 && w.has_c && w.c_len == 5, "custom tags split");
    SD_CHECK(sd_reasoning_parser_named("qwen3") == SD_RP_QWEN3 && sd_reasoning_parser_named("deepseek_r1") ==
                 SD_RP_DEEPSEEK_R1 && sd_reasoning_parser_named("glm45") == SD_RP_GLM45 &&
                 sd_reasoning_parser_named("qwen") == SD_RP_NONE &&
                 sd_reasoning_parser_named(NULL) == SD_RP_NONE,
             "parser names");
    printf("%zu whole cases, %ld streamed runs (pieces of 1, 3, 7 and random bytes)\n", sizeof CASES / sizeof CASES[0],
           runs);
    return sd_test_done();
}
