/* sd_server_text.h — a growable byte buffer (with JSON string escaping) and the
 * stop-sequence filter over generated text. */
#ifndef SD_SERVER_TEXT_H
#define SD_SERVER_TEXT_H

#include <stddef.h>

typedef struct sd_buf {
    char *p;       /* NUL-terminated when len > 0 */
    size_t len, cap;
    int oom;       /* an append failed: the content is incomplete */
} sd_buf;

int sd_buf_append(sd_buf *b, const void *s, size_t n); /* 0, or -1 (and b->oom) */
int sd_buf_reserve(sd_buf *b, size_t extra);          /* room for extra more bytes (and a NUL): 0 or -1 */
int sd_buf_puts(sd_buf *b, const char *s);
int sd_buf_printf(sd_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* s[0..n) as a JSON string literal, quotes included (NUL and controls escaped). */
int sd_buf_json_str(sd_buf *b, const char *s, size_t n);
/* The same without the quotes: escaping is per byte, so pieces written one after another
 * inside one pair of quotes make the literal of their concatenation. */
int sd_buf_json_chars(sd_buf *b, const char *s, size_t n);
void sd_buf_free(sd_buf *b);

/* OpenAI semantics for "stop": the text ends before the stop sequence, which is not
 * returned. Generation stops after the token (piece) that completes a stop sequence;
 * the text is cut at the earliest start among the sequences that piece completes.
 * While generating, a tail that could be the start of a stop sequence is held back, so
 * streamed text never has to be taken back. Generated text never ends inside
 * a UTF-8 sequence and stop sequences are valid UTF-8, so `safe` and `stop_at` are
 * always character boundaries. */
typedef struct sd_stopper {
    char *const *stops; /* borrowed, n of them */
    int n;
    size_t stop_at;     /* offset of the first stop sequence, or (size_t)-1 */
    size_t safe;        /* bytes of the text that can be released */
    int include;        /* vLLM's include_stop_str_in_output: the text ends after the stop sequence
                           (stop_end), and nothing is held back while none is found */
    size_t stop_end;    /* with stop_at: where that stop sequence ends */
} sd_stopper;

/* include: 1 keeps the stop sequence in the released text (include_stop_str_in_output). */
void sd_stop_init(sd_stopper *st, char *const *stops, int n, int include);
/* The text grew from old_len to len bytes: update stop_at and safe. */
void sd_stop_scan(sd_stopper *st, const char *text, size_t old_len, size_t len);
/* Generation ended: release everything before the stop (or all of it). */
void sd_stop_finish(sd_stopper *st, size_t len);

#endif
