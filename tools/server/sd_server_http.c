/* sd_server_http.c — libmicrohttpd plumbing. One thread per connection
 * (MHD_USE_THREAD_PER_CONNECTION): a handler may block while its request is generated,
 * and a streaming response's reader blocks until the next piece of text exists.
 *
 * Per request: the first call (headers only) checks the head's size (414 / 431) and the
 * framing (sd_api_check_framing: 400 / 501), each answered with a close, answers a
 * connection over --max-connections with 503 and Retry-After, then routes it and checks
 * Host, the API key, Content-Type and a declared Content-Length (sd_api_check_head:
 * 400 / 403 / 401 / 404 / 405 / 415 / 413 at once); while
 * loading or draining, everything but /health and /metrics gets 503. Body chunks are
 * collected up to the limit (beyond it they are dropped and the final call answers
 * 413); the final call dispatches. The whole request must arrive within --body-timeout
 * of the accept or of the previous response (sd_server_conn.c closes it otherwise);
 * the idle timeout (--idle-timeout) is raised while a request is being answered and
 * restored when the answer is done. An answer queued before the body was read closes
 * the connection (libmicrohttpd discards the rest of the request). What libmicrohttpd
 * answers itself is counted (see "libmicrohttpd's own answers" below). */
#define _GNU_SOURCE /* POLLRDHUP */
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "sd_server_internal.h"

#define SD_FRAMING_MAX 8              /* Content-Length / Transfer-Encoding headers looked at */
#define SD_MAX_HEAD ((size_t)16384)   /* request line + headers answered here (431 JSON) beyond this */
#define SD_MAX_TARGET ((size_t)8192)  /* request target answered here (414 JSON) beyond this */
#define SD_MHD_MEMORY ((size_t)65536) /* libmicrohttpd's per-connection pool: room for heads up to
                                         SD_MAX_HEAD and well beyond, so that ours answer first */

typedef struct sd_conn {
    sd_endpoint ep;
    sd_buf body;
    int too_large;
    double t_start;
} sd_conn;

double sd_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Gone = reset or closed both ways (POLLHUP / POLLERR). A client that only shut down its
 * sending side (half-close, FIN) still reads: it gets its answer. */
int sd_http_client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    struct pollfd p = {ci->connect_fd, 0, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLERR | POLLNVAL));
}

static enum MHD_Result sd_http_send(sd_server *srv, struct MHD_Connection *c, sd_endpoint ep, int code,
                                    const char *content_type, const char *body, size_t len, int close) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (code == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (code == 429 || code == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (close) MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)code, r);
    MHD_destroy_response(r);
    sd_metrics_http(&srv->metrics, ep, code);
    if (srv->cfg.verbose) fprintf(stderr, "specdec serve: endpoint %d -> %d\n", (int)ep, code);
    return ok;
}

enum MHD_Result sd_http_reply(sd_server *srv, struct MHD_Connection *c, sd_endpoint ep, int code,
                              const char *content_type, const char *body, size_t len) {
    return sd_http_send(srv, c, ep, code, content_type, body, len, 0);
}

enum MHD_Result sd_http_reply_error(sd_server *srv, struct MHD_Connection *c, sd_endpoint ep,
                                    const sd_api_error *e) {
    sd_buf b = {0};
    sd_resp_error_json(&b, e);
    enum MHD_Result ok =
        b.oom ? MHD_NO : sd_http_send(srv, c, ep, e->http, "application/json", b.p, b.len, e->close);
    sd_buf_free(&b);
    return ok;
}

static enum MHD_Result sd_http_fail(sd_server *srv, struct MHD_Connection *c, sd_endpoint ep, int code,
                                    const char *type, const char *msg) {
    sd_api_error e;
    sd_api_fail(&e, code, type, NULL, NULL, "%s", msg);
    return sd_http_reply_error(srv, c, ep, &e);
}

/* Every Content-Length and Transfer-Encoding header (libmicrohttpd keeps duplicates). */
typedef struct sd_framing {
    const char *cl[SD_FRAMING_MAX], *te[SD_FRAMING_MAX];
    int n_cl, n_te;
} sd_framing;

static enum MHD_Result sd_http_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
    (void)kind;
    sd_framing *f = cls;
    if (!strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) && f->n_cl < SD_FRAMING_MAX) f->cl[f->n_cl++] = value;
    if (!strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) && f->n_te < SD_FRAMING_MAX) f->te[f->n_te++] = value;
    return MHD_YES;
}

/* Refusals before routing: a head too large, bad framing, over the connection limit.
 * 0 or *e filled. */
static int sd_http_door(sd_server *srv, struct MHD_Connection *c, const char *url, sd_api_error *e) {
    const union MHD_ConnectionInfo *hi = MHD_get_connection_info(c, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
    size_t target = strlen(url);
    if (target > SD_MAX_TARGET || (hi && hi->header_size > SD_MAX_HEAD)) {
        if (target > SD_MAX_TARGET)
            sd_api_fail(e, 414, "invalid_request_error", NULL, NULL, "the request target has %zu bytes, over %zu",
                        target, SD_MAX_TARGET);
        else
            sd_api_fail(e, 431, "invalid_request_error", NULL, NULL,
                        "the request line and headers have %zu bytes, over %zu", hi->header_size, SD_MAX_HEAD);
        e->close = 1;
        return e->http;
    }
    sd_framing f = {{0}, {0}, 0, 0};
    MHD_get_connection_values(c, MHD_HEADER_KIND, sd_http_header, &f);
    if (sd_api_check_framing(f.cl, f.n_cl, f.te, f.n_te, e)) return e->http;
    if (sd_conn_over_limit(c)) {
        sd_metrics_count(&srv->metrics, &srv->metrics.over_limit);
        sd_api_fail(e, 503, "server_error", "too_many_connections", NULL,
                    "the server has %d connections open (--max-connections): retry", srv->cfg.max_connections);
        e->close = 1;
        return 503;
    }
    return 0;
}

/* While loading or draining only /health, /ping and /metrics are served. 0 or *e filled. */
static int sd_http_state(sd_server *srv, sd_endpoint ep, sd_api_error *e) {
    int st = atomic_load(&srv->state);
    if (st == SD_STATE_READY || ep == SD_EP_HEALTH || ep == SD_EP_PING || ep == SD_EP_METRICS) return 0;
    sd_api_fail(e, 503, "server_error", NULL, NULL, st == SD_STATE_LOADING ? "the model is loading: retry"
                                                                           : "the server is shutting down");
    e->close = st == SD_STATE_DRAINING;
    return 503;
}

static enum MHD_Result sd_http_begin(sd_server *srv, struct MHD_Connection *c, const char *url, const char *method,
                                     const char *version, void **con_cls) {
    sd_conn *cc = calloc(1, sizeof *cc);
    if (!cc) return MHD_NO;
    *con_cls = cc;
    atomic_fetch_add(&srv->open_requests, 1); /* until sd_http_completed */
    cc->t_start = sd_now();
    cc->ep = sd_api_endpoint_of(url); /* refusals at the door count under the target's path */
    sd_api_head h = {method,
                     url,
                     MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
                     MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH),
                     MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE),
                     MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST),
                     srv->hosts,
                     srv->n_hosts,
                     version};
    sd_api_error e;
    if (sd_http_door(srv, c, url, &e) || sd_api_check_head(&h, srv->cfg.api_key, srv->cfg.max_body, &cc->ep, &e) ||
        sd_http_state(srv, cc->ep, &e))
        return sd_http_reply_error(srv, c, cc->ep, &e);
    if (h.content_length) { /* room for the declared body at once (it is <= max_body) */
        unsigned long long n = strtoull(h.content_length, NULL, 10);
        if (n > 0 && sd_buf_reserve(&cc->body, (size_t)n)) return MHD_NO;
    }
    return MHD_YES;
}

static enum MHD_Result sd_http_body(sd_server *srv, sd_conn *cc, const char *data, size_t *size) {
    if (!cc->too_large && cc->body.len + *size > srv->cfg.max_body) {
        cc->too_large = 1; /* chunked upload past the limit: drop it, answer 413 at the end */
        sd_buf_free(&cc->body);
    }
    if (!cc->too_large && sd_buf_append(&cc->body, data, *size)) return MHD_NO;
    *size = 0;
    return MHD_YES;
}

static enum MHD_Result sd_http_health(sd_server *srv, struct MHD_Connection *c, sd_endpoint ep) {
    int st = atomic_load(&srv->state);
    const char *s = st == SD_STATE_READY     ? "{\"status\":\"ok\"}"
                    : st == SD_STATE_LOADING ? "{\"status\":\"loading\"}"
                                             : "{\"status\":\"draining\"}";
    return sd_http_reply(srv, c, ep, st == SD_STATE_READY ? 200 : 503, "application/json", s, strlen(s));
}

static enum MHD_Result sd_http_dispatch(sd_server *srv, struct MHD_Connection *c, sd_conn *cc) {
    sd_conn_arrived(srv, c); /* the request is in: its arrival deadline no longer applies */
    if (cc->too_large) return sd_http_fail(srv, c, cc->ep, 413, "invalid_request_error", "request body too large");
    sd_api_error e;
    if (sd_http_state(srv, cc->ep, &e)) return sd_http_reply_error(srv, c, cc->ep, &e); /* began draining */
    sd_buf b = {0};
    enum MHD_Result ok = MHD_NO;
    switch (cc->ep) {
    case SD_EP_COMPLETIONS:
    case SD_EP_CHAT: return sd_gen_handle(srv, c, cc->ep == SD_EP_CHAT, cc->body.p, cc->body.len);
    case SD_EP_HEALTH:
    case SD_EP_PING: return sd_http_health(srv, c, cc->ep);
    case SD_EP_TOKENIZE:
    case SD_EP_DETOKENIZE: return sd_tok_handle(srv, c, cc->ep, cc->body.p, cc->body.len);
    case SD_EP_VERSION:
        sd_buf_printf(&b, "{\"version\":\"%s\"}", specdec_version_string());
        if (!b.oom) ok = sd_http_reply(srv, c, cc->ep, 200, "application/json", b.p, b.len);
        break;
    case SD_EP_MODELS:
        sd_resp_models(&b, srv);
        if (!b.oom) ok = sd_http_reply(srv, c, cc->ep, 200, "application/json", b.p, b.len);
        break;
    case SD_EP_METRICS:
        sd_metrics_render(&b, srv);
        if (!b.oom) ok = sd_http_reply(srv, c, cc->ep, 200, "text/plain; version=0.0.4; charset=utf-8", b.p, b.len);
        break;
    default: break;
    }
    sd_buf_free(&b);
    return ok;
}

static enum MHD_Result sd_http_access(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                      const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    sd_server *srv = cls;
    sd_conn *cc = *con_cls;
    if (!cc) return sd_http_begin(srv, c, url, method, version, con_cls);
    if (*upload_size) return sd_http_body(srv, cc, upload, upload_size);
    return sd_http_dispatch(srv, c, cc);
}

/* ------------------------------------------------------------------------- */
/* libmicrohttpd's own answers                                                */
/* ------------------------------------------------------------------------- */
/* libmicrohttpd 0.9.75 answers malformed HTTP itself, before (or instead of) calling
 * sd_http_access, with fixed HTML bodies it offers no way to replace: a request line
 * with a bad version (400) or a version other than 1.x (505), a request line or head
 * over its memory pool (414 / 431; ours answer JSON up to SD_MAX_HEAD, and the pool is
 * SD_MHD_MEMORY so that ours come first), a header line without a colon (400), a
 * Content-Length that is no number (400) or overflows (413), bad chunked encoding (400;
 * a chunk size that overflows: 413), a malformed trailer (400). Each is logged through
 * transmit_error_response with one message that carries the status; the logger below
 * counts them (specdec_http_requests_total, and specdec_http_library_answers_total) under
 * the endpoint of the request's target, known once its request line is parsed (the URI
 * log callback runs on the connection's own thread, as the logger: thread-per-connection).
 * A request line without a space is closed without any answer: nothing is counted. */
#define SD_MHD_ERROR_LOG "Error processing request (HTTP response code is "

static _Thread_local int sd_tl_ep; /* 1 + the endpoint of the request this thread reads; 0: none yet */

static void *sd_http_uri(void *cls, const char *uri, struct MHD_Connection *c) {
    (void)cls;
    (void)c;
    sd_tl_ep = 1 + (int)sd_api_endpoint_of(uri ? uri : "");
    return NULL; /* the request's sd_conn is made by its first sd_http_access call */
}

#if defined(__GNUC__)
__attribute__((format(printf, 2, 0)))
#endif
static void sd_http_log(void *cls, const char *fmt, va_list ap) {
    sd_server *srv = cls;
    if (!strncmp(fmt, SD_MHD_ERROR_LOG, sizeof SD_MHD_ERROR_LOG - 1)) {
        va_list cp;
        va_copy(cp, ap);
        unsigned code = va_arg(cp, unsigned);
        va_end(cp);
        sd_metrics_http_library(&srv->metrics, sd_tl_ep ? (sd_endpoint)(sd_tl_ep - 1) : SD_EP_OTHER, (int)code);
    }
    if (!srv->cfg.verbose) return;
    fputs("specdec serve: libmicrohttpd: ", stderr);
    vfprintf(stderr, fmt, ap);
}

/* The request is answered (or abandoned): back to the idle timeout, and the next request
 * on this connection must arrive within --body-timeout from now. */
static void sd_http_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                              enum MHD_RequestTerminationCode why) {
    (void)why;
    sd_server *srv = cls;
    sd_tl_ep = 0;
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)ceil(srv->cfg.idle_timeout_s));
    sd_conn_idle(srv, c);
    sd_conn *cc = *con_cls;
    if (!cc) return;
    sd_buf_free(&cc->body);
    free(cc);
    *con_cls = NULL;
    atomic_fetch_sub(&srv->open_requests, 1);
}

/* Bind and listen ourselves (no SO_REUSEPORT: a second server on a busy port must fail,
 * not share it), so the error is exact. The listening socket, or -1 (message printed). */
static int sd_http_listen(sd_server *srv, int *v6) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    char port[16];
    snprintf(port, sizeof port, "%d", srv->cfg.port);
    int rc = getaddrinfo(srv->cfg.host, port, &hints, &res);
    if (rc != 0 || !res) {
        fprintf(stderr, "specdec serve: cannot resolve host '%s': %s\n", srv->cfg.host, gai_strerror(rc));
        return -1;
    }
    *v6 = res->ai_family == AF_INET6;
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1, err = 0;
    if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) ||
        bind(fd, res->ai_addr, res->ai_addrlen) || listen(fd, 511))
        err = errno;
    freeaddrinfo(res);
    if (!err) return fd;
    fprintf(stderr, "specdec serve: cannot listen on %s port %d: %s%s\n", srv->cfg.host, srv->cfg.port,
            err == EADDRINUSE ? "address already in use" : strerror(err),
            err == EADDRINUSE ? " (another server on this port? pick another with --port)" : "");
    if (fd >= 0) close(fd);
    return -1;
}

/* 1 for 127.0.0.0/8 and ::1. */
static int sd_http_loopback(int fd) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len)) return 0;
    if (ss.ss_family == AF_INET) return (ntohl(((struct sockaddr_in *)&ss)->sin_addr.s_addr) >> 24) == 127;
    return ss.ss_family == AF_INET6 && !memcmp(&((struct sockaddr_in6 *)&ss)->sin6_addr, &in6addr_loopback, 16);
}

/* The Host names a loopback server answers to: localhost, the loopback addresses, --host
 * and --allowed-hosts. */
static void sd_http_hosts(sd_server *srv) {
    static const char *const fixed[] = {"localhost", "127.0.0.1", "[::1]"};
    srv->n_hosts = 0;
    for (int i = 0; i < 3; i++) srv->hosts[srv->n_hosts++] = fixed[i];
    srv->hosts[srv->n_hosts++] = srv->cfg.host;
    snprintf(srv->hosts_buf, sizeof srv->hosts_buf, "%s", srv->cfg.allowed_hosts ? srv->cfg.allowed_hosts : "");
    for (char *save = NULL, *tok = strtok_r(srv->hosts_buf, ", ", &save); tok && srv->n_hosts < SD_MAX_HOSTS;
         tok = strtok_r(NULL, ", ", &save))
        srv->hosts[srv->n_hosts++] = tok;
}

static int sd_http_port(int fd) {
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &len)) return -1;
    return ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                          : ((struct sockaddr_in *)&ss)->sin_port);
}

int sd_http_start(sd_server *srv) {
    int v6 = 0, fd = sd_http_listen(srv, &v6);
    if (fd < 0) return -1;
    if (sd_http_loopback(fd)) sd_http_hosts(srv);
    /* the error log is always on: it is how libmicrohttpd's own answers are counted */
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ERROR_LOG;
    /* connections beyond max are answered 503 (sd_server_conn.c), which needs them accepted:
     * libmicrohttpd's limit is max + slack, and it closes any beyond that unanswered */
    unsigned max = (unsigned)srv->cfg.max_connections, slack = max / 4 > 16 ? max / 4 : 16;
    srv->daemon = MHD_start_daemon(flags, 0, NULL, NULL, sd_http_access, srv, MHD_OPTION_LISTEN_SOCKET, fd,
                                   MHD_OPTION_CONNECTION_LIMIT, max + slack,
                                   MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)ceil(srv->cfg.idle_timeout_s),
                                   MHD_OPTION_CONNECTION_MEMORY_LIMIT, SD_MHD_MEMORY,
                                   MHD_OPTION_NOTIFY_COMPLETED, sd_http_completed, srv,
                                   MHD_OPTION_NOTIFY_CONNECTION, sd_conn_notify, srv,
                                   MHD_OPTION_URI_LOG_CALLBACK, sd_http_uri, srv,
                                   MHD_OPTION_EXTERNAL_LOGGER, sd_http_log, srv,
                                   /* 0: a missing Host (HTTP/1.1) and a space in the target are
                                      answered here in JSON (level 1 answers the first in HTML with
                                      its head sent twice, and closes on the second without a word) */
                                   MHD_OPTION_STRICT_FOR_CLIENT, 0, MHD_OPTION_END);
    if (!srv->daemon) {
        fprintf(stderr, "specdec serve: cannot start the HTTP daemon on %s port %d\n", srv->cfg.host, srv->cfg.port);
        close(fd);
        return -1;
    }
    srv->listen_fd = fd;
    printf("specdec serve: listening on http://%s%s%s:%d (loading model %s)\n", v6 ? "[" : "", srv->cfg.host,
           v6 ? "]" : "", sd_http_port(fd), srv->model_id);
    fflush(stdout);
    return 0;
}

void sd_http_stop(sd_server *srv) {
    if (srv->daemon) MHD_stop_daemon(srv->daemon); /* closes the listening socket too */
    srv->daemon = NULL;
}
