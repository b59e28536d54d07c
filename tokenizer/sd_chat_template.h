/* sd_chat_template.h — chat templates without Jinja: a tokenizer's chat_template text is
 * recognised as one of a few families (sd_chat_spec_detect) and the variant details that
 * change the rendered bytes are read from it into an sd_chat_spec; sd_chat_render then writes
 * the conversation exactly as transformers' apply_chat_template renders that template.
 *
 * sd_chat_template.c: loading (chat_template.jinja / tokenizer_config.json), template text
 * scanning, family detection, the public API. sd_chat_render.c: the renderers. */
#ifndef SD_CHAT_TEMPLATE_H
#define SD_CHAT_TEMPLATE_H

#include <stddef.h>

#include "sd_tokenizer.h"
#include "specdec.h"

struct cJSON;

/* Largest template text kept (published ones are < 10 KiB). */
#define SD_CHAT_MAX_TEMPLATE ((size_t)1 << 20)

typedef enum sd_chat_family {
    SD_CHAT_LLAMA3, SD_CHAT_CHATML, SD_CHAT_LLAMA2, SD_CHAT_MISTRAL, SD_CHAT_ZEPHYR, SD_CHAT_PHI3, SD_CHAT_PLAIN,
    SD_CHAT_N_FAMILIES
} sd_chat_family;

/* Which user turns a Mistral template merges the system message into. */
typedef enum sd_chat_sysmode { SD_SYS_NONE, SD_SYS_EVERY, SD_SYS_FIRST, SD_SYS_LAST } sd_chat_sysmode;

/* A string held in sd_chat_spec.arena; set == 0 means absent. */
typedef struct sd_chat_str {
    size_t off, len;
    int set;
} sd_chat_str;

typedef struct sd_chat_spec {
    sd_chat_family family;
    int bos;               /* the template writes bos_token once at the start (llama3, mistral, phi3, chatml) */
    int trim;              /* llama3 / chatml: content | trim */
    int gen_always;        /* llama3 base: assistant header even without add_generation_prompt */
    int qwen_roles;        /* chatml: Qwen2.5 role rules ("tool" as <tool_response>, unknown roles dropped) */
    int sys_branch;        /* llama2: a later system message is rendered as its own <<SYS>> block */
    int eos_end;           /* phi3: eos_token at the end when no generation prompt */
    int any_role;          /* phi3: '<|' + role + '|>' for every role (else system/user/assistant only) */
    int skip_empty_system; /* phi3.5: a system message with empty content is dropped */
    int nl;                /* zephyr: a newline after each message block and the generation prompt */
    /* mistral */
    int strip_system;      /* a first system message is taken out of the loop (system_message) */
    int prepass;           /* roles are checked in a loop of their own before rendering (v0.3) */
    int user_trim, asst_trim;
    sd_chat_sysmode sys_mode;
    sd_chat_str user_pre, user_post, sys_sep, asst_pre, asst_post, asst_after;
    sd_chat_str default_system; /* chatml: system prompt used when the first message is not "system" */
    sd_chat_str err_alt, err_role, err_tool; /* the template's raise_exception messages */
    sd_tok_buf arena;
} sd_chat_spec;

/* The family of template text tmpl and its variant details. UNSUPPORTED (detail recorded per
 * thread) when it belongs to no family or to a variant that is not reproduced; OUT_OF_MEMORY.
 * spec must be zeroed by the caller; free it with sd_chat_spec_free in every case. */
specdec_status sd_chat_spec_detect(const char *tmpl, sd_chat_spec *spec);
/* The reference variant of family f (documented in specdec.h). 0 ok, -1 out of memory. */
int sd_chat_spec_reference(sd_chat_family f, sd_chat_spec *spec);
void sd_chat_spec_free(sd_chat_spec *spec);
/* Store s[0..n) in the spec's arena as *dst. 0 ok, -1 out of memory. */
int sd_chat_spec_set(sd_chat_spec *spec, sd_chat_str *dst, const char *s, size_t n);

/* Render msgs (already validated: non-NULL, valid UTF-8, n >= 1) into out (appended).
 * bos/eos: the tokenizer's bos_token/eos_token text ("" when it has none).
 * INVALID_ARGUMENT with the template's message when it rejects the conversation. */
specdec_status sd_chat_render(const sd_chat_spec *spec, const char *bos, const char *eos,
                              const specdec_chat_message *msgs, int32_t n, int add_generation_prompt, sd_tok_buf *out);

/* Python's str.isspace() for one code point (what Jinja's trim and str.strip() remove). */
int sd_chat_py_space(int32_t cp);
/* The span of valid UTF-8 s[0..n) without leading/trailing Python whitespace. */
void sd_chat_py_strip(const char *s, size_t n, size_t *off, size_t *len);

/* Called by the tokenizer loader: take bos/eos text and the chat template from
 * tokenizer_config.json (cfg, may be NULL) and dir/chat_template.jinja (dir may be NULL).
 * A template that cannot be used is recorded in t->chat_problem, not an error. Returns
 * OUT_OF_MEMORY or IO (an unreadable chat_template.jinja), else OK. */
specdec_status sd_chat_load(specdec_tokenizer *t, const struct cJSON *cfg, const char *dir);

#endif
