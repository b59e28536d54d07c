/* sd_error.c — status strings, version, per-handle and per-thread error detail. */
#include "sd_error.h"

#include <stdio.h>
#include <string.h>

static _Thread_local sd_errbuf sd_tls_err;

sd_errbuf *sd_thread_err(void) { return &sd_tls_err; }

specdec_status sd_vfail(sd_errbuf *eb, specdec_status st, const char *fmt, va_list ap) {
    sd_errbuf *dst = eb ? eb : &sd_tls_err;
    vsnprintf(dst->msg, sizeof dst->msg, fmt, ap);
    if (dst != &sd_tls_err) memcpy(sd_tls_err.msg, dst->msg, sizeof dst->msg);
    return st;
}

specdec_status sd_fail(sd_errbuf *eb, specdec_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    sd_vfail(eb, st, fmt, ap);
    va_end(ap);
    return st;
}

void sd_err_copy(sd_errbuf *to, const sd_errbuf *from) {
    sd_errbuf *d = to ? to : &sd_tls_err;
    const sd_errbuf *s = from ? from : &sd_tls_err;
    if (d != s) memcpy(d->msg, s->msg, sizeof d->msg);
}

void sd_err_clear(sd_errbuf *eb) { (eb ? eb : &sd_tls_err)->msg[0] = '\0'; }

const char *specdec_last_error(void) { return sd_tls_err.msg; }

const char *specdec_status_string(specdec_status status) {
    switch (status) {
    case SPECDEC_OK: return "SPECDEC_OK: success";
    case SPECDEC_ERR_INVALID_ARGUMENT: return "SPECDEC_ERR_INVALID_ARGUMENT: invalid argument";
    case SPECDEC_ERR_OUT_OF_MEMORY: return "SPECDEC_ERR_OUT_OF_MEMORY: out of memory";
    case SPECDEC_ERR_IO: return "SPECDEC_ERR_IO: file missing or unreadable";
    case SPECDEC_ERR_FORMAT: return "SPECDEC_ERR_FORMAT: malformed file";
    case SPECDEC_ERR_UNSUPPORTED: return "SPECDEC_ERR_UNSUPPORTED: not supported";
    case SPECDEC_ERR_MODEL_MISMATCH: return "SPECDEC_ERR_MODEL_MISMATCH: model does not match";
    case SPECDEC_ERR_CONTEXT_FULL: return "SPECDEC_ERR_CONTEXT_FULL: context is full";
    case SPECDEC_ERR_BACKEND_UNAVAILABLE: return "SPECDEC_ERR_BACKEND_UNAVAILABLE: backend unavailable";
    case SPECDEC_ERR_DEVICE_LOST: return "SPECDEC_ERR_DEVICE_LOST: device error, engine unusable";
    case SPECDEC_ERR_BUSY: return "SPECDEC_ERR_BUSY: engine in use by another thread";
    case SPECDEC_ERR_BUFFER_TOO_SMALL: return "SPECDEC_ERR_BUFFER_TOO_SMALL: output buffer too small";
    case SPECDEC_ERR_INTERNAL: return "SPECDEC_ERR_INTERNAL: internal error";
    case SPECDEC_ERR_QUEUE_FULL: return "SPECDEC_ERR_QUEUE_FULL: scheduler queue full";
    case SPECDEC_ERR_NOT_FOUND: return "SPECDEC_ERR_NOT_FOUND: no such request";
    case SPECDEC_ERR_CANCELLED: return "SPECDEC_ERR_CANCELLED: request cancelled";
    case SPECDEC_ERR_TIMEOUT: return "SPECDEC_ERR_TIMEOUT: wait timed out";
    case SPECDEC_ERR_SHUT_DOWN: return "SPECDEC_ERR_SHUT_DOWN: scheduler shut down";
    }
    return "unknown specdec_status";
}

unsigned specdec_version_number(void) { return SPECDEC_VERSION_NUMBER; }
const char *specdec_version_string(void) { return SPECDEC_VERSION_STRING; }
