/* sd_adapt.c — adaptive draft length (the rule is in sd_adapt.h). */
#include "sd_adapt.h"

#include <math.h>

#include "specdec.h"

/* Decay per round of the acceptance counts and the cost regression: about the last
 * ten rounds dominate, so γ follows text whose predictability changes. */
#define SD_ADAPT_DECAY 0.9
#define SD_ADAPT_COST_EWMA 0.2
/* Cost ratio used while timings are unavailable or zero: one draft step costs this
 * fraction of a verify pass. */
#define SD_ADAPT_DEFAULT_RATIO 0.1

void sd_adapt_observe(sd_adapt *a, int32_t gamma, int32_t n_acc, double t_draft, double t_verify) {
    if (gamma <= 0) return;
    a->acc = SD_ADAPT_DECAY * a->acc + (double)n_acc;
    a->rej = SD_ADAPT_DECAY * a->rej + (n_acc < gamma ? 1.0 : 0.0);
    double cd = t_draft / (double)gamma;
    if (isfinite(cd) && cd >= 0) a->c_draft = a->n_obs == 0 ? cd : (1 - SD_ADAPT_COST_EWMA) * a->c_draft + SD_ADAPT_COST_EWMA * cd;
    if (isfinite(t_verify) && t_verify >= 0) {
        double xv = (double)(gamma + 1);
        a->s_w = SD_ADAPT_DECAY * a->s_w + 1.0;
        a->s_x = SD_ADAPT_DECAY * a->s_x + xv;
        a->s_y = SD_ADAPT_DECAY * a->s_y + t_verify;
        a->s_xx = SD_ADAPT_DECAY * a->s_xx + xv * xv;
        a->s_xy = SD_ADAPT_DECAY * a->s_xy + xv * t_verify;
    }
    a->n_obs++;
}

int32_t sd_adapt_choose_gamma(const sd_adapt *a, int32_t cur, int32_t gmax) {
    if (gmax < 1) return 1;
    if (gmax > SPECDEC_MAX_DRAFT) gmax = SPECDEC_MAX_DRAFT;
    if (a->n_obs < 2) return cur < 1 ? 1 : cur > gmax ? gmax : cur;
    /* α: acceptance per draft token, Beta(1,1)-smoothed: never exactly 0 or 1 */
    double alpha = (a->acc + 1.0) / (a->acc + a->rej + 2.0);
    /* c_verify(γ) = c0 + c1·(γ+1) by weighted least squares; a flat fit (one γ seen so
     * far) means c1 = 0, i.e. verify cost independent of γ (memory-bound GPU passes) */
    double c0 = 0, c1 = 0;
    if (a->s_w > 0) {
        double mx = a->s_x / a->s_w, my = a->s_y / a->s_w;
        double vxx = a->s_xx / a->s_w - mx * mx;
        double vxy = a->s_xy / a->s_w - mx * my;
        if (vxx > 1e-9) c1 = vxy / vxx;
        if (c1 < 0) c1 = 0;
        c0 = my - c1 * mx;
        if (c0 < 0) {
            c0 = 0;
            c1 = mx > 0 ? my / mx : 0;
        }
    }
    double cd = a->c_draft;
    if (!(c0 + c1 > 0) || !isfinite(c0 + c1 + cd) || cd < 0) {
        c0 = 1.0;
        c1 = 0.0;
        cd = SD_ADAPT_DEFAULT_RATIO;
    }
    int32_t best = 1;
    double best_v = -1;
    for (int32_t gm = 1; gm <= gmax; gm++) {
        double expect = (1.0 - pow(alpha, gm + 1)) / (1.0 - alpha);
        double cost = gm * cd + c0 + c1 * (gm + 1);
        double v = expect / cost;
        if (v > best_v * (1 + 1e-12)) {
            best_v = v;
            best = gm;
        }
    }
    return best;
}
