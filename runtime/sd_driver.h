/* sd_driver.h — THE generation driver, shared by the engine and the scheduler: it
 * begins sequences on a round (their prefill) and runs rounds over a set of
 * generations — plan each (runtime/sd_generate.c), ONE sd_round_run over the planned
 * ones (core/sd_round.h), absorb each. specdec_generate (runtime/sd_generate.c) is its
 * one-generation use on an engine's round; the scheduler's loop thread
 * (runtime/sd_sched_loop.c) drives it over its active slots on a shared round.
 * Nothing here allocates after sd_driver_init. */
#ifndef SD_DRIVER_H
#define SD_DRIVER_H

#include <stdint.h>

#include "sd_generate.h"
#include "sd_round.h"

typedef struct sd_driver {
    sd_round *rd;          /* borrowed */
    int32_t cap;           /* generations per round */
    sd_round_seq **batch;  /* [cap] one round's sequences */
    sd_gen **ran;          /* [cap] their generations */
} sd_driver;

/* A driver of up to cap generations per round on rd (borrowed). */
specdec_status sd_driver_init(sd_driver *dv, sd_round *rd, int32_t cap, sd_errbuf *eb);
void sd_driver_free(sd_driver *dv);

/* Begin g's sequence on the round (its prefill, timed into g's statistics). On failure
 * g->status and the detail in g->err. */
specdec_status sd_driver_begin(sd_driver *dv, sd_gen *g);
/* The same in steps (core/sd_round.h sd_round_begin_step: first call first = 1, at most
 * `budget` target rows per call, *done once begun); the statistics are set when done. */
specdec_status sd_driver_begin_step(sd_driver *dv, sd_gen *g, int first, int32_t budget, int *done);
/* The same for a generation that had run rounds and lost its caches (the scheduler's
 * preemption): tokens[0..length) prefilled again; its statistics are left alone. */
specdec_status sd_driver_resume_step(sd_driver *dv, sd_gen *g, int first, int32_t budget, int *done);

/* One round over gens[0..n) (n <= cap, each begun): a generation whose plan says it is
 * over (g->reason set) does not run; the others run together and absorb their tokens.
 * A generation whose round or absorption failed has g->status != OK (the detail in
 * g->err). Returns how many ran. */
int32_t sd_driver_round(sd_driver *dv, sd_gen *const *gens, int32_t n);

#endif
