/* sd_server_conn.c — every connection is tracked from accept to close
 * (MHD_OPTION_NOTIFY_CONNECTION), for what libmicrohttpd 0.9.75 cannot do itself:
 *
 *  - a total deadline for a request to arrive (headers and body): --body-timeout from
 *    the accept, or from the end of the connection's previous response. libmicrohttpd's
 *    own timeout is an idle timer that every byte resets, so a header dribbled a byte at
 *    a time would hold a connection forever. The main thread sweeps the list every tick
 *    and shuts down (shutdown(2); libmicrohttpd then closes it) each connection past its
 *    deadline. The fd stays valid while tracked: libmicrohttpd reports the close before
 *    it closes the socket, and both sides hold conn_mu.
 *  - the connection limit answered in HTTP: libmicrohttpd's own limit is set above
 *    --max-connections (sd_conn_slack); a connection accepted beyond --max-connections is
 *    marked here, answered 503 with Retry-After as soon as its request head is in, and
 *    closed (its deadline is SD_OVER_LIMIT_S, so a silent one goes quickly). */
#define _GNU_SOURCE
#include <malloc.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "sd_server_internal.h"

#define SD_OVER_LIMIT_S 2.0 /* an over-limit connection must send its request head within this */

struct sd_track {
    sd_track *prev, *next;
    int fd;
    int over;        /* accepted beyond --max-connections */
    double deadline; /* the request must have arrived by then (sd_now); 0: none */
};

int sd_conn_init(sd_server *srv) {
    srv->tracks = NULL;
    srv->n_open = 0;
    return pthread_mutex_init(&srv->conn_mu, NULL) == 0 ? 0 : -1;
}

void sd_conn_destroy(sd_server *srv) { pthread_mutex_destroy(&srv->conn_mu); }

static sd_track *sd_conn_track(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? (sd_track *)ci->socket_context : NULL;
}

static void sd_conn_started(sd_server *srv, struct MHD_Connection *c, void **ctx) {
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    sd_track *t = calloc(1, sizeof *t);
    *ctx = t;
    if (!t) { /* cannot bound it: refuse it */
        if (ci) shutdown(ci->connect_fd, SHUT_RDWR);
        return;
    }
    t->fd = ci ? ci->connect_fd : -1;
    pthread_mutex_lock(&srv->conn_mu);
    t->over = ++srv->n_open > srv->cfg.max_connections;
    t->deadline = sd_now() + (t->over ? SD_OVER_LIMIT_S : srv->cfg.body_timeout_s);
    t->next = srv->tracks;
    if (t->next) t->next->prev = t;
    srv->tracks = t;
    pthread_mutex_unlock(&srv->conn_mu);
}

void sd_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                    enum MHD_ConnectionNotificationCode code) {
    sd_server *srv = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        sd_conn_started(srv, c, socket_context);
        return;
    }
    sd_track *t = *socket_context;
    if (!t) return;
    pthread_mutex_lock(&srv->conn_mu);
    if (t->prev) t->prev->next = t->next;
    else srv->tracks = t->next;
    if (t->next) t->next->prev = t->prev;
    srv->n_open--;
    srv->trim_pending = 1;
    pthread_mutex_unlock(&srv->conn_mu);
    free(t);
    *socket_context = NULL;
}

int sd_conn_over_limit(struct MHD_Connection *c) {
    sd_track *t = sd_conn_track(c);
    return t && t->over; /* set once at accept, before the connection's thread starts */
}

static void sd_conn_set(sd_server *srv, struct MHD_Connection *c, double deadline) {
    sd_track *t = sd_conn_track(c);
    if (!t) return;
    pthread_mutex_lock(&srv->conn_mu);
    t->deadline = deadline;
    pthread_mutex_unlock(&srv->conn_mu);
}

void sd_conn_arrived(sd_server *srv, struct MHD_Connection *c) { sd_conn_set(srv, c, 0); }

void sd_conn_idle(sd_server *srv, struct MHD_Connection *c) {
    sd_conn_set(srv, c, sd_now() + srv->cfg.body_timeout_s);
}

void sd_conn_sweep(sd_server *srv) {
    double now = sd_now();
    long cut = 0;
    pthread_mutex_lock(&srv->conn_mu);
    for (sd_track *t = srv->tracks; t; t = t->next) {
        if (t->deadline <= 0 || now <= t->deadline) continue;
        shutdown(t->fd, SHUT_RDWR); /* libmicrohttpd sees the end and closes it */
        t->deadline = 0;
        cut++;
    }
    /* after a burst, hand freed memory back once no connection is open (request bodies and
     * parse trees come from many threads' arenas; malloc keeps their free pages) */
    int trim = srv->trim_pending && srv->n_open == 0;
    if (trim) srv->trim_pending = 0;
    pthread_mutex_unlock(&srv->conn_mu);
    if (cut) {
        pthread_mutex_lock(&srv->metrics.mu);
        srv->metrics.deadline_closes += cut;
        pthread_mutex_unlock(&srv->metrics.mu);
    }
    if (trim) malloc_trim(0);
}
