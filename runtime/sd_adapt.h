/* sd_adapt.h — online estimates of what speculation costs and yields, per sequence.
 *
 * Adaptive draft length (the model drafter; the rule is specdec.h's
 * specdec_generate_params.adaptive_draft):
 *   α = (A + 1) / (A + R + 2) from accepted drafts A and rejections R, both decayed by
 *   0.9 per round; E(γ) = (1 − α^(γ+1)) / (1 − α); C(γ) = γ·c_draft + c0 + c1·(γ+1),
 *   c_draft an EWMA of the seconds per draft step, c0 + c1·tokens a decayed least-squares
 *   fit of the verify-pass seconds (c1 = 0 until two γ were seen; c_draft / c_verify =
 *   0.1 when no timing is usable); next γ = argmax over [1, gmax] of E / C.
 *
 * The n-gram drafter's cost (specdec_generate_params.ngram_cost; docs/DRAFTERS.md "When
 * to propose"), from the same measured round times and the same least-squares fit, of
 * the seconds of every round (drafting, verify pass, verification) against the tokens its
 * target pass verified (1 for a plain step), decayed by 0.98 per round (a pass's cost
 * changes slowly: ~50 rounds count): y ≈ c0 + c1·t. The gate needs ρ = c1 / (c0 + c1),
 * a verified draft token's cost in plain steps; the fit's ρ is trusted in proportion to
 * the information about the slope, I = Σ w·(t − t̄)²: ρ = (16·ρ0 + I·ρ_fit) / (16 + I),
 * ρ0 = SD_ADAPT_NGRAM_PRIOR, so that a few noisy rounds do not decide. The acceptance
 * evidence is the drafter's (sd_ngram_state). */
#ifndef SD_ADAPT_H
#define SD_ADAPT_H

#include <stdint.h>

#include "specdec.h"
#include "sd_drafter.h"

/* Decayed weighted least squares of seconds y against tokens x: y ≈ c0 + c1·x. */
typedef struct sd_cost_fit {
    double s_w, s_x, s_y, s_xx, s_xy;
} sd_cost_fit;

typedef struct sd_adapt {
    double acc;        /* exponentially-weighted count of accepted draft tokens */
    double rej;        /* exponentially-weighted count of rejections */
    double c_draft;    /* EWMA seconds per draft forward step (one token) */
    sd_cost_fit verify; /* verify-pass seconds against its tokens */
    int32_t n_obs;     /* rounds observed */
    /* the n-gram drafter (sd_adapt_ngram_*) */
    sd_cost_fit round; /* round seconds against the target pass's tokens */
    sd_ngram_state ngram;
} sd_adapt;

/* Record one round: `gamma` drafted, `n_acc` accepted, draft / verify-pass seconds. */
void sd_adapt_observe(sd_adapt *a, int32_t gamma, int32_t n_acc, double t_draft, double t_verify);
/* The draft length in [1, gmax] maximising E(γ)/C(γ); `cur` until two rounds were seen. */
int32_t sd_adapt_choose_gamma(const sd_adapt *a, int32_t cur, int32_t gmax);

/* The fit: add an observation (every weight decayed by `decay` first; non-finite or
 * negative seconds are ignored); solve for c0, c1 >= 0 (c0 < 0: refit through the
 * origin). Returns 1 when the slope is identified (two token counts seen), 0 otherwise
 * (c1 = 0; c0 = the weighted mean, 0 without any observation). */
void sd_cost_fit_add(sd_cost_fit *f, double decay, double tokens, double seconds);
int sd_cost_fit_solve(const sd_cost_fit *f, double *c0, double *c1);
/* The information about the slope: the decayed Σ w·(x − x̄)². */
double sd_cost_fit_info(const sd_cost_fit *f);

/* An n-gram sequence's round: its target pass verified `tokens` (drafts + 1) in `seconds`. */
void sd_adapt_ngram_observe(sd_adapt *a, int32_t tokens, double seconds);
/* Before a round: a->ngram's gate and cost for the params' ngram_cost mode, in plain
 * steps: c0 = 1 − ρ, c1 = ρ with MEASURED's ρ (above) or FIXED's token_cost; OFF: no gate. */
void sd_adapt_ngram_prepare(sd_adapt *a, specdec_ngram_cost mode, float token_cost);
/* ρ0: a verified draft token's cost in plain steps before the fit is trusted (optimistic:
 * a one-token probe at the acceptance prior 1/2 pays); its weight in Σ w·(t − t̄)² */
#define SD_ADAPT_NGRAM_PRIOR 0.25
#define SD_ADAPT_NGRAM_PRIOR_INFO 16.0

#endif
