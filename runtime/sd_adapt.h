/* sd_adapt.h — adaptive draft length: online estimates of the acceptance rate and the
 * cost of a round, and the γ that maximises expected tokens per second. The rule is
 * specdec.h's (specdec_generate_params.adaptive_draft):
 *   α = (A + 1) / (A + R + 2) from accepted drafts A and rejections R, both decayed by
 *   0.9 per round; E(γ) = (1 − α^(γ+1)) / (1 − α); C(γ) = γ·c_draft + c0 + c1·(γ+1),
 *   c_draft an EWMA of the seconds per draft step, c0 + c1·tokens a decayed least-squares
 *   fit of the verify-pass seconds (c1 = 0 until two γ were seen; c_draft / c_verify =
 *   0.1 when no timing is usable); next γ = argmax over [1, gmax] of E / C. */
#ifndef SD_ADAPT_H
#define SD_ADAPT_H

#include <stdint.h>

typedef struct sd_adapt {
    double acc;        /* exponentially-weighted count of accepted draft tokens */
    double rej;        /* exponentially-weighted count of rejections */
    double c_draft;    /* EWMA seconds per draft forward step (one token) */
    double s_w, s_x, s_y, s_xx, s_xy; /* decayed least squares of verify time vs tokens */
    int32_t n_obs;     /* rounds observed */
} sd_adapt;

/* Record one round: `gamma` drafted, `n_acc` accepted, draft / verify-pass seconds. */
void sd_adapt_observe(sd_adapt *a, int32_t gamma, int32_t n_acc, double t_draft, double t_verify);
/* The draft length in [1, gmax] maximising E(γ)/C(γ); `cur` until two rounds were seen. */
int32_t sd_adapt_choose_gamma(const sd_adapt *a, int32_t cur, int32_t gmax);

#endif
