/* sd_server_chat.c — a chat conversation as one prompt.
 *
 * TODO(chat templates): replace the body of sd_render_chat with
 *   specdec_chat_apply(tok, template_name_or_NULL, messages, n, 1, buf, cap, &len)
 * once that public function exists (it renders with the model family's template and
 * falls back to this same "plain" format for models without one), and let
 * sd_chat_template_supported ask it. Until then only "plain" exists: one
 * "Role: content" line per message (role capitalised), then "Assistant:". */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "sd_server_internal.h"

int sd_chat_template_supported(const char *template_name) {
    return !template_name || !strcmp(template_name, "plain") ? 0 : -1;
}

int sd_render_chat(const char *template_name, const sd_api_message *m, int n, char **out, size_t *len,
                   sd_api_error *e) {
    *out = NULL;
    *len = 0;
    if (sd_chat_template_supported(template_name))
        return sd_api_fail(e, 500, "server_error", NULL, NULL, "chat template '%s' is not available", template_name);
    sd_buf b = {0};
    for (int i = 0; i < n; i++) {
        char first = (char)toupper((unsigned char)m[i].role[0]);
        sd_buf_append(&b, &first, 1);
        sd_buf_puts(&b, m[i].role + 1);
        sd_buf_puts(&b, ": ");
        sd_buf_puts(&b, m[i].content);
        sd_buf_puts(&b, "\n");
    }
    sd_buf_puts(&b, "Assistant:");
    if (b.oom) {
        sd_buf_free(&b);
        return sd_api_fail(e, 500, "server_error", NULL, NULL, "out of memory rendering the conversation");
    }
    *out = b.p;
    *len = b.len;
    return 0;
}
