/* sd_jinja.h — a Jinja2 interpreter for chat templates.
 *
 * transformers renders a model's chat_template with jinja2 in an ImmutableSandboxedEnvironment
 * (trim_blocks, lstrip_blocks, the loopcontrols extension, its own {% generation %} tag) with the
 * globals raise_exception, strftime_now, namespace and dict and its own tojson filter. This is a
 * small interpreter of the part of that language published chat templates use, written to give
 * byte-identical output: Python's str()/repr() of values, json.dumps for tojson, Python string
 * methods, Jinja's scoping (a for-loop body is a fresh scope every iteration; {% set %} inside it
 * does not leak), Undefined semantics (printing and iterating an undefined value is fine, using it
 * in arithmetic or reading an attribute of it is an error).
 *
 * Parsing (sd_jinja_parse) builds an AST once; a template outside the subset — a tag such as
 * {% include %} / {% extends %} / {% recursive %} loops, a filter or test specdec does not
 * implement, invalid syntax — is refused there with SPECDEC_ERR_UNSUPPORTED and a message naming
 * the construct and its line. Rendering (sd_jinja_render) is bounded: output bytes, memory, steps
 * and nesting depth have limits, so a hostile template ends with an error instead of hanging or
 * exhausting memory. Values live in a per-render arena freed at the end; the parsed template is
 * read-only while rendering, so one template may be rendered by several threads at once.
 *
 * Files: sd_jinja_lex.c (lexer: whitespace control, string literals), sd_jinja_parse.c (parser),
 * sd_jinja_value.c (arena, values, str/repr/tojson, comparisons), sd_jinja_eval.c (statements and
 * expressions), sd_jinja_filters.c (filters, tests), sd_jinja_methods.c (str/dict methods, globals,
 * strftime). Internals shared by them: sd_jinja_int.h. */
#ifndef SD_JINJA_H
#define SD_JINJA_H

#include <stddef.h>
#include <stdint.h>

#include "sd_tokenizer.h"
#include "specdec.h"

struct cJSON;

typedef struct sd_jinja_tmpl sd_jinja_tmpl;

/* Resource limits of one render. Every byte of every string built (not only the final text)
 * counts towards max_bytes; max_steps counts evaluated nodes and iterations; max_depth bounds
 * macro calls and nested statements/expressions together (C stack use is proportional). */
typedef struct sd_jinja_limits {
    size_t max_bytes;   /* strings built, in total */
    size_t max_memory;  /* arena bytes */
    uint64_t max_steps;
    int max_depth;
} sd_jinja_limits;

/* 64 MiB of strings, 256 MiB of memory, 20 M steps, depth 256. */
sd_jinja_limits sd_jinja_default_limits(void);

/* strftime_now reads the system clock (local time, as Python's datetime.now()). */
#define SD_JINJA_NOW_SYSTEM INT64_MIN

/* Parse the template text src[0..n) (UTF-8). On success *out owns the AST (free with
 * sd_jinja_free). UNSUPPORTED with a message naming the construct or the syntax error and its line
 * (recorded per thread, sd_fail(NULL, ...)), OUT_OF_MEMORY. *out is NULL on failure. */
specdec_status sd_jinja_parse(const char *src, size_t n, sd_jinja_tmpl **out);
void sd_jinja_free(sd_jinja_tmpl *t);

/* One variable of a render. */
enum { SD_JINJA_NONE, SD_JINJA_BOOL, SD_JINJA_STR, SD_JINJA_JSON, SD_JINJA_MESSAGES };
typedef struct sd_jinja_var {
    const char *name;
    int kind;
    int b;                           /* SD_JINJA_BOOL */
    const char *s;                   /* SD_JINJA_STR: NUL-terminated UTF-8 */
    const struct cJSON *json;        /* SD_JINJA_JSON: any JSON value (null = None) */
    const specdec_chat_message *msgs; /* SD_JINJA_MESSAGES: a list of {"role": ..., "content": ...} dicts */
    int32_t n_msgs;
} sd_jinja_var;

/* Render t with vars[0..n_vars) (a variable not given is undefined) and append the text to out.
 * now: seconds since the epoch that strftime_now formats (in local time), or
 * SD_JINJA_NOW_SYSTEM. lim: NULL = defaults. Errors: INVALID_ARGUMENT where jinja2 raises
 * (raise_exception: "chat template: " + its message verbatim; an undefined value used, a type
 * error, a string that is not UTF-8, ...), UNSUPPORTED for what specdec does not implement at
 * run time (e.g. case mapping of non-ASCII letters) or a limit exceeded, OUT_OF_MEMORY. out may
 * hold a partial text on failure. */
specdec_status sd_jinja_render(const sd_jinja_tmpl *t, const sd_jinja_var *vars, size_t n_vars, int64_t now,
                               const sd_jinja_limits *lim, sd_tok_buf *out);

#endif
