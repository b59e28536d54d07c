/* sd_chat_template.h — a tokenizer's chat template: loaded with the tokenizer (chat_template.jinja,
 * else tokenizer_config.json's "chat_template" string or its list entry named "default"), parsed
 * once by the Jinja interpreter (sd_jinja.h) and rendered per request with the variables
 * transformers' apply_chat_template passes: messages, add_generation_prompt, tools=None,
 * documents=None and the tokenizer's special tokens (bos_token, eos_token, unk_token, sep_token,
 * pad_token, cls_token, mask_token: tokenizer_config.json strings or AddedToken objects' "content";
 * absent or null ones are undefined). Forced family names render a built-in reference template
 * (sd_chat_builtin.c); "plain" is specdec's own format for tokenizers without a template.
 *
 * sd_chat_template.c: loading, the public API. sd_chat_builtin.c: the reference templates. */
#ifndef SD_CHAT_TEMPLATE_H
#define SD_CHAT_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include "sd_jinja.h"
#include "sd_tokenizer.h"
#include "specdec.h"

struct cJSON;

/* Largest template text kept (published ones are < 20 KiB). */
#define SD_CHAT_MAX_TEMPLATE ((size_t)1 << 20)

#define SD_CHAT_N_SPECIAL 7
extern const char *const sd_chat_special_names[SD_CHAT_N_SPECIAL];

/* The built-in template text of a family name ("llama3", "chatml", "llama2", "mistral",
 * "zephyr", "phi3"), NULL for any other name. Static. */
const char *sd_chat_builtin(const char *name);

/* Called by the tokenizer loader: special-token texts and the chat template from
 * tokenizer_config.json (cfg, may be NULL) and dir/chat_template.jinja (dir may be NULL); the
 * template is parsed here. A template that cannot be used (outside the supported subset, too
 * long, a list without "default") is recorded in t->chat_problem, not an error. Returns
 * OUT_OF_MEMORY or IO (an unreadable chat_template.jinja), else OK. */
specdec_status sd_chat_load(specdec_tokenizer *t, const struct cJSON *cfg, const char *dir);
/* Free what sd_chat_load stored in t. */
void sd_chat_free(specdec_tokenizer *t);

/* Render msgs[0..n) with tmpl and the tokenizer's special tokens, appending to out; now as for
 * sd_jinja_render (the public API passes SD_JINJA_NOW_SYSTEM; tests inject a time). */
specdec_status sd_chat_render_with(const specdec_tokenizer *tok, const sd_jinja_tmpl *tmpl,
                                   const specdec_chat_message *msgs, int32_t n, int add_generation_prompt,
                                   int64_t now, sd_tok_buf *out);

/* What a template name resolves to: a family index 0..5 (its built-in template),
 * SD_CHAT_FORMAT_PLAIN or SD_CHAT_FORMAT_JINJA (the tokenizer's own). INVALID_ARGUMENT for an
 * unknown name, UNSUPPORTED when the tokenizer's template cannot be used. */
enum { SD_CHAT_FORMAT_PLAIN = 6, SD_CHAT_FORMAT_JINJA = 7 };
specdec_status sd_chat_resolve_name(const specdec_tokenizer *tok, const char *name, int *which);
/* specdec's plain format of msgs[0..n) (checked by the caller), appended to o. */
specdec_status sd_chat_render_plain(const specdec_chat_message *m, int32_t n, int agp, sd_tok_buf *o);

/* The variables transformers' apply_chat_template passes besides "messages", written from v[0]:
 * add_generation_prompt, tools (NULL: None), documents = None, the tokenizer's special tokens.
 * Their count, at most SD_CHAT_CONTEXT_VARS. */
#define SD_CHAT_CONTEXT_VARS (3 + SD_CHAT_N_SPECIAL)
size_t sd_chat_context_vars(const specdec_tokenizer *tok, int add_generation_prompt, const struct cJSON *tools,
                            sd_jinja_var *v);

/* The Jinja template of a resolved name that is not plain (sd_chat_resolve_name): the
 * tokenizer's own, or a family's built-in one parsed into *own (the caller sd_jinja_free's it). */
specdec_status sd_chat_template_of(const specdec_tokenizer *tok, int which, const sd_jinja_tmpl **t,
                                   sd_jinja_tmpl **own);

/* A rendered text to the caller's buffer, as the public renderers answer: *len = its length;
 * BUFFER_TOO_SMALL (fn named) unless it fits with its NUL. */
specdec_status sd_chat_copy_out(const sd_tok_buf *out, char *text, size_t capacity, size_t *len, const char *fn);

#endif
