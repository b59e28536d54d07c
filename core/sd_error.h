/* sd_error.h — internal error reporting: a status plus a formatted detail message.
 *
 * Every handle embeds an sd_errbuf; library functions call sd_fail() to record the
 * detail and return the status in one expression:
 *     return sd_fail(&m->err, SPECDEC_ERR_FORMAT, "%s: tensor '%s': ...", file, name);
 * Creation functions with no handle yet record into the thread-local buffer read by
 * specdec_last_error() (sd_fail(NULL, ...) does that). */
#ifndef SD_ERROR_H
#define SD_ERROR_H

#include <stdarg.h>
#include "specdec.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SD_ERRBUF_SIZE 512

typedef struct sd_errbuf {
    char msg[SD_ERRBUF_SIZE];
} sd_errbuf;

#if defined(__GNUC__)
#define SD_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define SD_PRINTF(a, b)
#endif

/* Record "<detail>" in eb (or the thread-local buffer when eb is NULL) and return st.
 * Also copies the message to the thread-local buffer so specdec_last_error() always
 * holds the most recent failure on this thread. */
specdec_status sd_fail(sd_errbuf *eb, specdec_status st, const char *fmt, ...) SD_PRINTF(3, 4);
/* Returns the status of x from the enclosing function when it is not SPECDEC_OK (its detail already
 * recorded by whatever failed). */
#define SD_TRY(x)                                  \
    do {                                           \
        const specdec_status sd_try_st_ = (x);     \
        if (sd_try_st_ != SPECDEC_OK) return sd_try_st_; \
    } while (0)
specdec_status sd_vfail(sd_errbuf *eb, specdec_status st, const char *fmt, va_list ap);
/* Copy the message of `from` into `to` (either may be NULL = thread-local). */
void sd_err_copy(sd_errbuf *to, const sd_errbuf *from);
void sd_err_clear(sd_errbuf *eb);
/* The thread-local buffer behind specdec_last_error(). */
sd_errbuf *sd_thread_err(void);

#ifdef __cplusplus
}
#endif

#endif
