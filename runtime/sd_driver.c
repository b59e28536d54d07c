/* sd_driver.c — the generation driver (sd_driver.h). */
#include "sd_driver.h"

#include "sd_alloc.h"

specdec_status sd_driver_init(sd_driver *dv, sd_round *rd, int32_t cap, sd_errbuf *eb) {
    dv->rd = rd;
    dv->cap = cap;
    dv->batch = sd_malloc((size_t)cap * sizeof *dv->batch);
    dv->ran = sd_malloc((size_t)cap * sizeof *dv->ran);
    if (dv->batch && dv->ran) return SPECDEC_OK;
    sd_driver_free(dv);
    return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "driver: %d sequences", (int)cap);
}

void sd_driver_free(sd_driver *dv) {
    sd_free(dv->batch);
    sd_free(dv->ran);
    dv->batch = NULL;
    dv->ran = NULL;
}

specdec_status sd_driver_begin(sd_driver *dv, sd_gen *g) {
    int done = 0;
    return sd_driver_begin_step(dv, g, 1, 0, &done);
}

specdec_status sd_driver_begin_step(sd_driver *dv, sd_gen *g, int first, int32_t budget, int *done) {
    specdec_status st = sd_round_begin_step(dv->rd, &g->rs, first, budget, done);
    if (st == SPECDEC_OK && !*done) return SPECDEC_OK;
    g->rs.prompt_rows = NULL; /* prompt log-probabilities: the prefill's alone */
    g->rs.prompt_ctx = NULL;
    g->st->t_prefill_s = sd_gen_now() - g->t_start;
    g->st->n_cached_prompt = g->rs.prefix_hit;
    if (st != SPECDEC_OK) sd_fail(g->err, st, "%s", sd_round_err(dv->rd));
    g->status = st;
    return st;
}

specdec_status sd_driver_resume_step(sd_driver *dv, sd_gen *g, int first, int32_t budget, int *done) {
    const specdec_status st = sd_round_begin_step(dv->rd, &g->rs, first, budget, done);
    if (st != SPECDEC_OK) {
        sd_fail(g->err, st, "resuming a preempted sequence: %s", sd_round_err(dv->rd));
        g->status = st;
    }
    return st;
}

int32_t sd_driver_round(sd_driver *dv, sd_gen *const *gens, int32_t n) {
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        sd_gen *g = gens[i];
        if (g->status != SPECDEC_OK || !sd_gen_plan(g)) continue;
        dv->batch[k] = &g->rs;
        dv->ran[k++] = g;
    }
    if (k == 0) return 0;
    (void)sd_round_run(dv->rd, dv->batch, k);
    for (int32_t j = 0; j < k; j++) {
        sd_gen *g = dv->ran[j];
        specdec_status st = g->rs.status;
        if (st != SPECDEC_OK) sd_fail(g->err, st, "%s", sd_round_err(dv->rd));
        else st = sd_gen_absorb(g, dv->rd);
        g->status = st;
    }
    return k;
}
