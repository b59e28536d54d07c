/* sd_server_reasoning.h — reasoning outputs of chat completions (vLLM's --reasoning-parser,
 * vllm/reasoning/: qwen3, deepseek_r1, glm45): the thinking text between "<think>" and "</think>" goes
 * to the message's "reasoning" (and the older "reasoning_content"), the rest to "content"; tool
 * calls are parsed from the content only. README.md "Reasoning outputs" lists the differences
 * from vLLM. Pure text functions (tests/server/test_reasoning.c). */
#ifndef SD_SERVER_REASONING_H
#define SD_SERVER_REASONING_H

#include <stddef.h>

typedef enum sd_reasoning_parser { SD_RP_NONE = 0, SD_RP_QWEN3, SD_RP_DEEPSEEK_R1, SD_RP_GLM45 } sd_reasoning_parser;
#define SD_REASONING_PARSER_NAMES "qwen3, deepseek_r1, glm45"
#define SD_REASONING_GLM_TURN "<|assistant|>" /* glm45: the tag that opens each assistant turn */
#define SD_REASONING_TAG_MAX 64 /* the longest start / end tag */

/* The parser of that name (--reasoning-parser); SD_RP_NONE for an unknown one or NULL. */
sd_reasoning_parser sd_reasoning_parser_named(const char *name);

/* "START END" (two tags of 1..SD_REASONING_TAG_MAX bytes, one space between, none inside) into
 * start / end (each SD_REASONING_TAG_MAX + 1 bytes; NULL: only checked). 0, or -1 when malformed. */
int sd_server_reasoning_tags(const char *spec, char *start, char *end);

/* One choice's reasoning split: its configuration, then the streaming state. */
typedef struct sd_reasoning {
    sd_reasoning_parser parser; /* NONE: everything is content */
    char start[SD_REASONING_TAG_MAX + 1], end[SD_REASONING_TAG_MAX + 1]; /* "<think>", "</think>" */
    int thinking_off;  /* chat_template_kwargs.enable_thinking false (qwen3: no end tag = content) */
    int prompt_ended;  /* the prompt closed the thinking (sd_reasoning_prompt_ended): all content */
    /* streaming */
    int phase;         /* 0: a leading start tag not decided yet, 1: reasoning, 2: content */
    size_t pos;        /* text[0..pos) decided */
    size_t content_at; /* phase 2: the content is text[content_at..) */
} sd_reasoning;

/* r for parser with tags start / end (NULL: "<think>" / "</think>"; each at most
 * SD_REASONING_TAG_MAX bytes, not empty, else the defaults). */
void sd_reasoning_init(sd_reasoning *r, sd_reasoning_parser parser, const char *start, const char *end,
                       int thinking_off, int prompt_ended);

/* 1 when the prompt text[0..n) leaves the thinking closed: its last end tag comes after its last
 * start tag (vLLM's is_reasoning_end over the prompt: e.g. Qwen3's template with
 * enable_thinking false ends the prompt with "<think>\n\n</think>\n\n"); glm45: after its last
 * "<|assistant|>" (GLM's template writes "<think></think>" into every earlier assistant turn). */
int sd_reasoning_prompt_ended(const sd_reasoning *r, const char *text, size_t n);

/* Streaming: text[0..n) is the output so far (n never shrinks; final: it ended). Sets the newly
 * decided reasoning text[*ra..*rb) and content text[*ca..*cb) (either may be empty). A leading
 * start tag is dropped; the text before the first end tag is reasoning, the end tag dropped, the
 * rest content (glm45: only after a start tag, which may follow whitespace; an output that does not
 * begin so is all content). Bytes that may begin a tag are held back until the text says (or final). */
void sd_reasoning_feed(sd_reasoning *r, const char *text, size_t n, int final, size_t *ra, size_t *rb, size_t *ca,
                       size_t *cb);

/* A whole output's split (non-streamed): reasoning text[r_off..r_off+r_len) (has_r 0: null),
 * content text[c_off..c_off+c_len) (has_c 0: null). As streaming decides it, and: no end tag with
 * qwen3 and enable_thinking false gives all content (vLLM), an end tag right at the end null
 * content (vLLM's "content or None"). glm45 is vLLM's glm4_moe_reasoning_parser: without both tags
 * in the output all content; else the text before the first start tag dropped, the reasoning up to
 * the next end tag (none: the rest is content), the content after it (null when empty). */
typedef struct sd_reasoning_split {
    size_t r_off, r_len, c_off, c_len;
    int has_r, has_c;
} sd_reasoning_split;
void sd_reasoning_whole(const sd_reasoning *cfg, const char *text, size_t n, sd_reasoning_split *s);

#endif
