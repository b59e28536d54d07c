/* serve_load_gate.c — `specdec serve` held in its loading state until a test lets it go,
 * so that test_hostile.py can watch /health answer 503 "loading" and then 200 without
 * racing a load that takes milliseconds.
 *
 * Usage: serve_load_gate GATE_FILE TARGET_DIR
 * Runs sd_server_run (the real server: port 0, CPU backend, --parallel 1) with the
 * config's before_load hook set: after the daemon listens ("listening on ..." on stdout)
 * the hook waits until GATE_FILE exists (at most 120 s), then the models load as usual.
 * SIGTERM ends it as it ends `specdec serve`. A test tool, never installed; the hook is
 * not reachable from the CLI (tools/server/sd_server.h). */
#define _POSIX_C_SOURCE 200809L /* nanosleep */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "sd_server.h"

static void wait_for_gate(void *arg) {
    const char *gate = arg;
    struct timespec tick = {0, 10 * 1000 * 1000};
    for (int i = 0; i < 12000 && access(gate, F_OK) != 0; i++) nanosleep(&tick, NULL);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: serve_load_gate GATE_FILE TARGET_DIR\n");
        return 2;
    }
    sd_server_config c;
    sd_server_config_default(&c);
    c.target_dir = argv[2];
    c.port = 0;
    c.parallel = 1;
    c.backend = SPECDEC_BACKEND_CPU;
    c.before_load = wait_for_gate;
    c.before_load_arg = argv[1];
    return sd_server_run(&c);
}
