/* sd_server_http.c — libmicrohttpd plumbing. One thread per connection
 * (MHD_USE_THREAD_PER_CONNECTION): a handler may block while its request is generated,
 * and a streaming response's reader blocks until the next piece of text exists.
 *
 * Per request: the first call (headers only) routes it, checks the API key and a
 * declared Content-Length against the body limit (sd_api_check_head: 401 / 404 / 405 /
 * 413 at once); body
 * chunks are collected up to the limit (beyond it they are dropped and the final call
 * answers 413) and must all arrive within body_timeout_s (else the connection is
 * closed: libmicrohttpd cannot send a response in the middle of an upload); the final
 * call dispatches. Idle connections are closed after body_timeout_s. */
#define _GNU_SOURCE /* POLLRDHUP */
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "sd_server_internal.h"

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

int sd_http_client_gone(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    struct pollfd p = {ci->connect_fd, POLLRDHUP, 0};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

enum MHD_Result sd_http_reply(sd_server *srv, struct MHD_Connection *c, sd_endpoint ep, int code,
                              const char *content_type, const char *body, size_t len) {
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, content_type);
    if (code == 401) MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, "Bearer");
    if (code == 429 || code == 503) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    enum MHD_Result ok = MHD_queue_response(c, (unsigned)code, r);
    MHD_destroy_response(r);
    sd_metrics_http(&srv->metrics, ep, code);
    if (srv->cfg.verbose) fprintf(stderr, "specdec serve: endpoint %d -> %d\n", (int)ep, code);
    return ok;
}

enum MHD_Result sd_http_reply_error(sd_server *srv, struct MHD_Connection *c, sd_endpoint ep,
                                    const sd_api_error *e) {
    sd_buf b = {0};
    sd_resp_error_json(&b, e);
    enum MHD_Result ok = b.oom ? MHD_NO : sd_http_reply(srv, c, ep, e->http, "application/json", b.p, b.len);
    sd_buf_free(&b);
    return ok;
}

static enum MHD_Result sd_http_fail(sd_server *srv, struct MHD_Connection *c, sd_endpoint ep, int code,
                                    const char *type, const char *msg) {
    sd_api_error e;
    sd_api_fail(&e, code, type, NULL, NULL, "%s", msg);
    return sd_http_reply_error(srv, c, ep, &e);
}

static enum MHD_Result sd_http_begin(sd_server *srv, struct MHD_Connection *c, const char *url, const char *method,
                                     void **con_cls) {
    sd_conn *cc = calloc(1, sizeof *cc);
    if (!cc) return MHD_NO;
    *con_cls = cc;
    cc->t_start = sd_now();
    sd_api_head h = {method, url, MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
                     MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH)};
    sd_api_error e;
    if (sd_api_check_head(&h, srv->cfg.api_key, srv->cfg.max_body, &cc->ep, &e))
        return sd_http_reply_error(srv, c, cc->ep, &e);
    return MHD_YES;
}

static enum MHD_Result sd_http_body(sd_server *srv, sd_conn *cc, const char *data, size_t *size) {
    if (sd_now() - cc->t_start > srv->cfg.body_timeout_s) return MHD_NO; /* too slow: close */
    if (!cc->too_large && cc->body.len + *size > srv->cfg.max_body) {
        cc->too_large = 1; /* chunked upload past the limit: drop it, answer 413 at the end */
        sd_buf_free(&cc->body);
    }
    if (!cc->too_large && sd_buf_append(&cc->body, data, *size)) return MHD_NO;
    *size = 0;
    return MHD_YES;
}

static enum MHD_Result sd_http_dispatch(sd_server *srv, struct MHD_Connection *c, sd_conn *cc) {
    if (cc->too_large) return sd_http_fail(srv, c, cc->ep, 413, "invalid_request_error", "request body too large");
    sd_buf b = {0};
    enum MHD_Result ok = MHD_NO;
    switch (cc->ep) {
    case SD_EP_COMPLETIONS:
    case SD_EP_CHAT: return sd_gen_handle(srv, c, cc->ep == SD_EP_CHAT, cc->body.p, cc->body.len);
    case SD_EP_HEALTH: {
        int down = atomic_load(&srv->stopping);
        const char *s = down ? "{\"status\":\"shutting down\"}" : "{\"status\":\"ok\"}";
        return sd_http_reply(srv, c, cc->ep, down ? 503 : 200, "application/json", s, strlen(s));
    }
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
    (void)version;
    sd_server *srv = cls;
    sd_conn *cc = *con_cls;
    if (!cc) return sd_http_begin(srv, c, url, method, con_cls);
    if (*upload_size) return sd_http_body(srv, cc, upload, upload_size);
    return sd_http_dispatch(srv, c, cc);
}

static void sd_http_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                              enum MHD_RequestTerminationCode why) {
    (void)cls, (void)c, (void)why;
    sd_conn *cc = *con_cls;
    if (!cc) return;
    sd_buf_free(&cc->body);
    free(cc);
    *con_cls = NULL;
}

/* host -> socket address with port (numeric or a name; the first result). */
static int sd_http_address(const sd_server *srv, struct sockaddr_storage *ss, int *v6) {
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
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *v6 = res->ai_family == AF_INET6;
    freeaddrinfo(res);
    return 0;
}

int sd_http_start(sd_server *srv) {
    struct sockaddr_storage ss;
    int v6 = 0;
    if (sd_http_address(srv, &ss, &v6)) return -1;
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    if (v6) flags |= MHD_USE_IPv6;
    if (srv->cfg.verbose) flags |= MHD_USE_ERROR_LOG;
    unsigned idle = (unsigned)ceil(srv->cfg.body_timeout_s);
    srv->daemon = MHD_start_daemon(flags, (uint16_t)srv->cfg.port, NULL, NULL, sd_http_access, srv,
                                   MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                                   MHD_OPTION_CONNECTION_LIMIT, (unsigned)srv->cfg.max_connections,
                                   MHD_OPTION_CONNECTION_TIMEOUT, idle ? idle : 1u,
                                   MHD_OPTION_NOTIFY_COMPLETED, sd_http_completed, srv,
                                   MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_END);
    if (!srv->daemon) {
        fprintf(stderr, "specdec serve: cannot listen on %s port %d (in use, or not an address of this machine?)\n",
                srv->cfg.host, srv->cfg.port);
        return -1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    int port = di ? (int)di->port : srv->cfg.port;
    printf("specdec serve: listening on http://%s%s%s:%d (model %s, %s backend, %s, parallel %d, chat template %s)\n",
           v6 ? "[" : "", srv->cfg.host, v6 ? "]" : "", port, srv->model_id, srv->backend_name,
           srv->draft ? "speculative" : "plain decoding", srv->cfg.parallel,
           srv->chat_family ? srv->chat_family : "unsupported");
    fflush(stdout);
    return 0;
}

void sd_http_stop(sd_server *srv) {
    if (srv->daemon) MHD_stop_daemon(srv->daemon);
    srv->daemon = NULL;
}
