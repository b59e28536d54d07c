/* regex_probe.c — the C side of test_regex_diff.py: reads lines from stdin and answers one line
 * each on stdout.
 *   P <hex pattern>   compile (max_states 200000): "ok <n_states>" or "err <status> <message>"
 *   S <hex bytes>     walk the last compiled pattern: "<accept> <dead_at> <witness>" where accept
 *                     is 1 when the whole string matches, dead_at the index of the byte whose step
 *                     gave SD_FSM_DEAD (-1: none; -2: SD_FSM_FULL), and witness the hex of a
 *                     shortest byte string that leads from the last live state to an accepting one
 *                     ("-" when empty, "?" when the search passed its bound), found by a
 *                     breadth-first search over all 256 bytes. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_regex.h"

#define PROBE_STATES 200000

static size_t unhex(const char *s, uint8_t *out) {
    size_t n = 0;
    for (; s[0] && s[1] && s[0] != '\n'; s += 2) {
        unsigned v;
        if (sscanf(s, "%2x", &v) != 1) break;
        out[n++] = (uint8_t)v;
    }
    return n;
}

typedef struct probe_bfs {
    int32_t *parent, *queue;
    uint8_t *byte;
} probe_bfs;

/* Prints a shortest path from s to acceptance (hex), "-" if s accepts, "?" past the bound. */
static void witness(sd_fsm *f, int32_t s, probe_bfs *B) {
    if (sd_fsm_accepting(f, s)) {
        fputs("-", stdout);
        return;
    }
    for (int32_t k = 0; k < PROBE_STATES; k++) B->parent[k] = -2;
    int32_t qh = 0, qt = 0, found = -1;
    B->parent[s] = -1;
    B->queue[qt++] = s;
    while (qh < qt && found < 0) {
        const int32_t u = B->queue[qh++];
        for (int b = 0; b < 256 && found < 0; b++) {
            const int32_t t = sd_fsm_step(f, u, (uint8_t)b);
            if (t < 0 || B->parent[t] != -2) continue;
            B->parent[t] = u;
            B->byte[t] = (uint8_t)b;
            B->queue[qt++] = t;
            if (sd_fsm_accepting(f, t)) found = t;
        }
    }
    if (found < 0) {
        fputs("?", stdout);
        return;
    }
    uint8_t path[4096];
    int n = 0;
    for (int32_t t = found; t != s && n < 4096; t = B->parent[t]) path[n++] = B->byte[t];
    while (n > 0) printf("%02x", path[--n]);
}

int main(void) {
    static char line[1 << 21];
    uint8_t *buf = malloc(1 << 20);
    probe_bfs B = {malloc(PROBE_STATES * sizeof(int32_t)), malloc(PROBE_STATES * sizeof(int32_t)), malloc(PROBE_STATES)};
    sd_fsm *f = NULL;
    if (!buf || !B.parent || !B.queue || !B.byte) return 2;
    while (fgets(line, sizeof line, stdin)) {
        const size_t n = unhex(line + 2, buf);
        if (line[0] == 'P') {
            sd_fsm_free(f);
            f = NULL;
            sd_errbuf eb = {{0}};
            specdec_status st = sd_regex_fsm_create((const char *)buf, n, PROBE_STATES, &f, &eb);
            if (st == SPECDEC_OK) printf("ok %d\n", f->vt->n_states(f));
            else printf("err %d %s\n", (int)st, eb.msg);
        } else if (line[0] == 'S' && f) {
            int32_t s = f->start, last = s;
            long dead_at = -1;
            for (size_t i = 0; i < n; i++) {
                s = sd_fsm_step(f, s, buf[i]);
                if (s < 0) {
                    dead_at = s == SD_FSM_DEAD ? (long)i : -2;
                    break;
                }
                last = s;
            }
            printf("%d %ld ", s >= 0 && sd_fsm_accepting(f, s), dead_at);
            witness(f, last, &B);
            putchar('\n');
        } else if (line[0] == 'S') {
            printf("no pattern\n");
        } else {
            printf("bad line\n");
        }
    }
    sd_fsm_free(f);
    free(buf);
    free(B.parent);
    free(B.queue);
    free(B.byte);
    return 0;
}
