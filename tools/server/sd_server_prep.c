/* sd_server_prep.c — bounded work before a request reaches the scheduler.
 *
 * The pool: a fixed number of threads run the jobs that parse a body and turn its prompt
 * into ids (sd_gen_prep), FIFO, while the connection threads that queued them wait. However
 * many connections deliver bodies at once, at most that many bodies are parsed and
 * tokenized at once, so the memory and CPU of that step are bounded.
 *
 * The prompt's cost: a text longer than the byte limit cannot fit and is refused without
 * tokenizing; a longer-than-one-piece text is counted piece by piece and refused at the
 * first piece that takes the count past the context. */
#include <stdlib.h>
#include <string.h>

#include "sd_server_internal.h"

#define SD_PREP_MAX 4                 /* pool threads at most */
#define SD_PIECE ((size_t)16384)      /* bytes tokenized at once by the running count */
#define SD_CUT_SLACK 4                /* tokens a cut may add (a prepended "▁", a split word) */
#define SD_PREP_SMALL ((size_t)65536) /* bodies up to this size take the small lane */

typedef struct sd_prep_job {
    void (*fn)(void *);
    void *arg;
    int done;
    struct sd_prep_job *next;
} sd_prep_job;

/* Two FIFO lanes: small jobs are taken first, so that a burst of big bodies delays a small
 * request by at most the big jobs already running, not by every big one queued. */
typedef struct sd_prep_lane {
    sd_prep_job *head, *tail;
} sd_prep_lane;

struct sd_prep {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    sd_prep_lane lane[2]; /* [0]: small, [1]: big */
    int stop, n;
    pthread_t th[SD_PREP_MAX];
};

/* Under mu: the next job (small first), or NULL. */
static sd_prep_job *sd_prep_take(sd_prep *p) {
    for (int i = 0; i < 2; i++) {
        sd_prep_lane *l = &p->lane[i];
        sd_prep_job *j = l->head;
        if (!j) continue;
        l->head = j->next;
        if (!l->head) l->tail = NULL;
        return j;
    }
    return NULL;
}

static void *sd_prep_main(void *arg) {
    sd_prep *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        sd_prep_job *j;
        while (!(j = sd_prep_take(p)) && !p->stop) pthread_cond_wait(&p->work, &p->mu);
        if (!j) break; /* stopping and nothing left */
        pthread_mutex_unlock(&p->mu);
        j->fn(j->arg);
        pthread_mutex_lock(&p->mu);
        j->done = 1;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

sd_prep *sd_prep_create(int threads) {
    sd_prep *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    if (pthread_mutex_init(&p->mu, NULL) || pthread_cond_init(&p->work, NULL) || pthread_cond_init(&p->done, NULL)) {
        free(p); /* (initialisation of these does not fail on Linux) */
        return NULL;
    }
    if (threads < 1) threads = 1;
    if (threads > SD_PREP_MAX) threads = SD_PREP_MAX;
    while (p->n < threads && pthread_create(&p->th[p->n], NULL, sd_prep_main, p) == 0) p->n++;
    if (p->n == 0) {
        sd_prep_free(p);
        return NULL;
    }
    return p;
}

void sd_prep_free(sd_prep *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n; i++) pthread_join(p->th[i], NULL);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->work);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

void sd_prep_run(sd_prep *p, size_t bytes, void (*fn)(void *), void *arg) {
    if (!p) {
        fn(arg);
        return;
    }
    sd_prep_job j = {fn, arg, 0, NULL};
    pthread_mutex_lock(&p->mu);
    sd_prep_lane *l = &p->lane[bytes > SD_PREP_SMALL];
    if (l->tail) l->tail->next = &j;
    else l->head = &j;
    l->tail = &j;
    pthread_cond_signal(&p->work);
    while (!j.done) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

int sd_prep_pending(sd_prep *p) {
    int n = 0;
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < 2; i++)
        for (const sd_prep_job *j = p->lane[i].head; j; j = j->next) n++;
    pthread_mutex_unlock(&p->mu);
    return n;
}

/* ------------------------------------------------------------------------- */
/* the prompt's cost                                                          */
/* ------------------------------------------------------------------------- */
size_t sd_prep_default_bytes(const sd_server *srv) {
    size_t longest = 1, len = 0;
    char buf[256];
    for (int32_t id = 0; id < specdec_tokenizer_vocab_size(srv->tok); id++) {
        specdec_status st = specdec_detokenize(srv->tok, &id, 1, 1, buf, sizeof buf, &len);
        if ((st == SPECDEC_OK || st == SPECDEC_ERR_BUFFER_TOO_SMALL) && len > longest) longest = len;
    }
    size_t bytes = 2 * (size_t)srv->n_ctx * longest;
    return bytes < 4096 ? 4096 : bytes;
}

int sd_prep_bytes(const sd_server *srv, size_t len, const char *param, sd_api_error *e) {
    if (len <= srv->max_prompt_bytes) return 0;
    return sd_api_fail(e, 400, "invalid_request_error", "context_length_exceeded", param,
                       "This model's maximum context length is %d tokens; the prompt has %zu bytes, more than the "
                       "%zu that can fit (--max-prompt-bytes)",
                       (int)srv->n_ctx, len, srv->max_prompt_bytes);
}

/* The end of the piece that starts at off: before a space that follows a non-space
 * (where pre-tokenizers split anyway) in the second half of the window, else at a
 * UTF-8 character boundary. */
static size_t sd_prep_cut(const char *s, size_t off, size_t len) {
    size_t end = off + SD_PIECE;
    if (end >= len) return len;
    for (size_t p = end; p > off + SD_PIECE / 2; p--)
        if (s[p] == ' ' && !strchr(" \t\r\n", s[p - 1])) return p;
    while (end > off + 1 && ((unsigned char)s[end] & 0xC0) == 0x80) end--;
    return end;
}

int sd_prep_bound(sd_server *srv, sd_bound *b, const char *text, size_t len, const char *param, sd_api_error *e) {
    if (len <= SD_PIECE && b->cuts == 0) return 0;
    for (size_t off = 0; off < len;) {
        size_t end = sd_prep_cut(text, off, len);
        int32_t n = 0;
        specdec_status st = specdec_tokenize(srv->tok, text + off, end - off, 0, NULL, 0, &n);
        if (st != SPECDEC_OK && st != SPECDEC_ERR_BUFFER_TOO_SMALL) return 0; /* the exact pass reports it */
        b->count += n;
        if (b->count - (long)SD_CUT_SLACK * b->cuts > b->limit)
            return sd_api_fail(e, 400, "invalid_request_error", "context_length_exceeded", param,
                               "This model's maximum context length is %d tokens; the prompt has more than %ld "
                               "(counted up to byte %zu of %zu)",
                               (int)srv->n_ctx, b->count - (long)SD_CUT_SLACK * b->cuts, end, len);
        b->cuts++;
        off = end;
    }
    return 0;
}
