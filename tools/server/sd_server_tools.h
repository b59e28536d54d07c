/* sd_server_tools.h — tool calling in /v1/chat/completions, with vLLM's semantics
 * (vllm/entrypoints/openai/serving_chat.py, protocol.py, tool_parsers/).
 *
 * Request side (sd_tools_parse, called by sd_api_parse): "tools" checked and normalised to what
 * vLLM hands the chat template (each tool's model_dump: {"type": "function", "function": {"name",
 * "description", "parameters", ...extra keys}}), "tool_choice" resolved ("none"; "auto", the
 * default when tools are given; "required"; a named function), "chat_template_kwargs" kept as
 * text, and for "required" / a named function the structured-output constraint the output must
 * follow (a JSON Schema: the named tool's parameters; for "required" vLLM's array of
 * {"name", "parameters"} objects, one anyOf branch per tool).
 *
 * Response side (sd_tool_out): the generated text of one choice turned into content and
 * tool_calls, whole (sd_tools_final, vLLM's extract_tool_calls) or streamed (sd_tools_feed: the
 * OpenAI delta events; only a possible start of a call is held back, a call's arguments go out in
 * one delta once its block is complete, a named call's arguments as they come). Parsers for
 * "auto": hermes (<tool_call>{json}</tool_call>), llama3_json ({"name", "parameters" |
 * "arguments"} objects separated by "; ", optionally after <|python_tag|>), mistral
 * ([TOOL_CALLS] followed by a JSON list), glm45 (<tool_call>NAME\n<arg_key>K</arg_key><arg_value>V
 * </arg_value>...</tool_call>, GLM-4.5 / 4.6), qwen3_coder (<function=NAME><parameter=P>V
 * </parameter>...</function>, Qwen3-Coder) and deepseek_v3 (<｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME
 * and a ```json block, DeepSeek-V3; these three in sd_server_tools_xml.c). Text a parser cannot read
 * stays content: never an error.
 * Pure (no model, no sockets): tests/server/test_server_parse.c drives it with adversarial text. */
#ifndef SD_SERVER_TOOLS_H
#define SD_SERVER_TOOLS_H

#include <stddef.h>

#include "sd_server_request.h"
#include "sd_server_text.h"

struct cJSON;

#define SD_API_MAX_TOOLS 128        /* tools of one request */
#define SD_API_MAX_TOOL_NAME 256    /* bytes of a tool's name */
#define SD_API_MAX_SCHEMA_DEPTH 32  /* nesting of a tool's parameters (objects and lists) */
#define SD_API_MAX_KWARGS_BYTES ((size_t)64 << 10) /* chat_template_kwargs as text */
#define SD_TOOLS_MAX_CALLS 64       /* calls parsed from one output; more stay content */

typedef enum sd_tool_choice { SD_TC_NONE = 0, SD_TC_AUTO, SD_TC_REQUIRED, SD_TC_NAMED } sd_tool_choice;
typedef enum sd_tool_parser {
    SD_TP_NONE = 0,
    SD_TP_HERMES,
    SD_TP_LLAMA3_JSON,
    SD_TP_MISTRAL,
    SD_TP_GLM45,
    SD_TP_QWEN3_CODER,
    SD_TP_DEEPSEEK_V3
} sd_tool_parser;
#define SD_TOOL_PARSER_NAMES "hermes, llama3_json, mistral, glm45, qwen3_coder, deepseek_v3"

/* A name of SD_TOOL_PARSER_NAMES -> the parser, SD_TP_NONE for any other name. */
sd_tool_parser sd_tools_parser_named(const char *name);

/* Parse tools / tool_choice / chat_template_kwargs of a chat request into r (messages already
 * parsed; r->guided already set from the other structured-output fields). 0 or the HTTP status
 * with *e filled (400 naming "tools", "tool_choice" or "chat_template_kwargs"). */
int sd_tools_parse(const struct cJSON *root, sd_api_request *r, sd_api_error *e);

/* Python's json.dumps(v, ensure_ascii=False) of v (", " and ": " separators): how vLLM writes a
 * parsed call's arguments. Numbers come from doubles: an integral value is written without a
 * fraction. */
void sd_tools_pydump(sd_buf *b, const struct cJSON *v);

/* One parsed call. */
typedef struct sd_tool_call {
    char id[48];    /* "chatcmpl-tool-" + 32 hex digits (mistral: 9 alphanumerics) */
    char *name;     /* owned */
    char *args;     /* owned: the arguments as JSON text */
} sd_tool_call;

/* The state of one choice's output. */
typedef struct sd_tool_out {
    sd_tool_choice choice;
    sd_tool_parser parser;  /* SD_TC_AUTO only */
    const char *named;      /* SD_TC_NAMED: the function's name (borrowed from the request) */
    const struct cJSON *tools; /* borrowed, NULL = none: the request's tools as sd_tools_parse normalised
                                  them (glm45, qwen3_coder read the declared parameter types); set
                                  after init */
    /* streaming */
    size_t pos;             /* text before it is decided: sent as content, part of a call sent, or dropped */
    int n_calls;            /* calls sent (each a delta with id, type, name) */
    int in_block;           /* hermes: inside <tool_call>...; glm45: past the first <tool_call>; mistral /
                               llama3_json / qwen3_coder / deepseek_v3: holding the rest */
    int plain;              /* llama3_json: decided the output is text; glm45: content (not only
                               whitespace) went out */
    int depth, in_str, esc; /* "required": the JSON scanner over the array; glm45 esc: a block made
                               vLLM raise before any call went out (the rest is content) */
    size_t elem;            /* "required": where the current array element started; glm45: scanned up to */
    size_t held;            /* glm45: text[held..) is held (from the first block) until a call is parsed */
    size_t scan;            /* glm45: the open block's end tag is not before text[scan] */
    char named_id[48];
} sd_tool_out;

void sd_tools_out_init(sd_tool_out *o, sd_tool_choice choice, sd_tool_parser parser, const char *named);

/* A whole output's message. */
typedef struct sd_tool_result {
    const char *content;    /* NULL: the message's content is null; else content_len bytes */
    size_t content_len;
    sd_tool_call calls[SD_TOOLS_MAX_CALLS];
    int n_calls;
    int called;             /* "auto" / "required" parsed calls: finish_reason "tool_calls" */
    char *own;              /* owned text content may point into */
} sd_tool_result;

/* Whole output text[0..n) (vLLM's extract_tool_calls): a named call's arguments are the text
 * (content ""); "required" parses the list (not a list of calls: the text stays content);
 * "auto" runs the parser (not parsed: the text is content). Free with sd_tools_result_free. */
void sd_tools_final(const sd_tool_out *o, const char *text, size_t n, sd_tool_result *r);
void sd_tools_result_free(sd_tool_result *r);
void sd_tools_calls_free(sd_tool_call *calls, int n);

/* Streaming: the events of text[o->pos..n) (text is the whole output so far, n never shrinks;
 * final: it ended). Appends to out one "delta" object per line ("{...}\n"; the caller wraps each
 * in a chunk): {"content"}, a call's first delta {"tool_calls": [{index, id, type, function:
 * {name, arguments}}]}, or {"tool_calls": [{index, function: {arguments}}]} (a named call's
 * later text). o->n_calls > 0 afterwards when a call was sent. */
void sd_tools_feed(sd_tool_out *o, const char *text, size_t n, int final, sd_buf *out);

/* Shared by sd_server_tools.c and sd_server_tools_xml.c (not for other callers). */
const char *sd_tools_find(const char *s, size_t n, const char *pat); /* first pat in s[0..n), or NULL */
void sd_tools_new_id(char *id, size_t cap, int mistral);            /* a fresh call id */
size_t sd_tools_partial(const char *t, size_t from, size_t n, const char *marker); /* tail that may begin marker */
void sd_tools_delta_content(sd_buf *out, const char *s, size_t n);
void sd_tools_delta_calls(sd_tool_out *o, sd_tool_call *c, int nc, sd_buf *out); /* sends and frees c[0..nc) */
void sd_tools_pystr(sd_buf *b, const char *s, size_t n);            /* json.dumps of a str (ensure_ascii=False) */
/* glm45 (sd_server_tools_xml.c): the whole output's calls (1: parsed, r->calls / n_calls / content set;
 * 0: not a call output, everything content) and the streaming step. */
int sd_tools_glm45_final(const sd_tool_out *o, const char *text, size_t n, sd_tool_result *r);
void sd_tools_glm45_feed(sd_tool_out *o, const char *text, size_t n, int final, sd_buf *out);
int sd_tools_qwen3_coder_final(const sd_tool_out *o, const char *text, size_t n, sd_tool_result *r);
void sd_tools_qwen3_coder_feed(sd_tool_out *o, const char *text, size_t n, int final, sd_buf *out);
int sd_tools_deepseek_v3_final(const sd_tool_out *o, const char *text, size_t n, sd_tool_result *r);
void sd_tools_deepseek_v3_feed(sd_tool_out *o, const char *text, size_t n, int final, sd_buf *out);

#endif
