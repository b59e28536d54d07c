/* sd_adapt.c — adaptive draft length and the n-gram drafter's cost (the rules are in
 * sd_adapt.h). */
#include "sd_adapt.h"

#include <math.h>

/* Decay per round of the acceptance counts and the cost regression: about the last
 * ten rounds dominate, so γ follows text whose predictability changes. */
#define SD_ADAPT_DECAY 0.9
#define SD_ADAPT_COST_EWMA 0.2
/* Cost ratio used while timings are unavailable or zero: one draft step costs this
 * fraction of a verify pass. */
#define SD_ADAPT_DEFAULT_RATIO 0.1
/* Decay per round of the n-gram drafter's round-cost fit */
#define SD_ADAPT_NGRAM_DECAY 0.98

void sd_cost_fit_add(sd_cost_fit *f, double decay, double tokens, double seconds) {
    if (!isfinite(seconds) || seconds < 0) return;
    f->s_w = decay * f->s_w + 1.0;
    f->s_x = decay * f->s_x + tokens;
    f->s_y = decay * f->s_y + seconds;
    f->s_xx = decay * f->s_xx + tokens * tokens;
    f->s_xy = decay * f->s_xy + tokens * seconds;
}

int sd_cost_fit_solve(const sd_cost_fit *f, double *c0, double *c1) {
    /* c(x) = c0 + c1·x by weighted least squares; a flat fit (one x seen so far) means
     * c1 = 0, i.e. a cost independent of x (memory-bound GPU passes) */
    int slope = 0;
    *c0 = *c1 = 0;
    if (!(f->s_w > 0)) return 0;
    const double mx = f->s_x / f->s_w, my = f->s_y / f->s_w;
    const double vxx = f->s_xx / f->s_w - mx * mx;
    const double vxy = f->s_xy / f->s_w - mx * my;
    if (vxx > 1e-9) *c1 = vxy / vxx, slope = 1;
    if (*c1 < 0) *c1 = 0;
    *c0 = my - *c1 * mx;
    if (*c0 < 0) {
        *c0 = 0;
        *c1 = mx > 0 ? my / mx : 0;
    }
    return slope;
}

double sd_cost_fit_info(const sd_cost_fit *f) {
    if (!(f->s_w > 0)) return 0;
    const double v = f->s_xx - f->s_x * f->s_x / f->s_w;
    return v > 0 && isfinite(v) ? v : 0;
}

void sd_adapt_observe(sd_adapt *a, int32_t gamma, int32_t n_acc, double t_draft, double t_verify) {
    if (gamma <= 0) return;
    a->acc = SD_ADAPT_DECAY * a->acc + (double)n_acc;
    a->rej = SD_ADAPT_DECAY * a->rej + (n_acc < gamma ? 1.0 : 0.0);
    double cd = t_draft / (double)gamma;
    if (isfinite(cd) && cd >= 0) a->c_draft = a->n_obs == 0 ? cd : (1 - SD_ADAPT_COST_EWMA) * a->c_draft + SD_ADAPT_COST_EWMA * cd;
    sd_cost_fit_add(&a->verify, SD_ADAPT_DECAY, (double)(gamma + 1), t_verify);
    a->n_obs++;
}

int32_t sd_adapt_choose_gamma(const sd_adapt *a, int32_t cur, int32_t gmax) {
    if (gmax < 1) return 1;
    if (gmax > SPECDEC_MAX_DRAFT) gmax = SPECDEC_MAX_DRAFT;
    if (a->n_obs < 2) return cur < 1 ? 1 : cur > gmax ? gmax : cur;
    /* α: acceptance per draft token, Beta(1,1)-smoothed: never exactly 0 or 1 */
    double alpha = (a->acc + 1.0) / (a->acc + a->rej + 2.0);
    double c0, c1;
    (void)sd_cost_fit_solve(&a->verify, &c0, &c1);
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

void sd_adapt_ngram_observe(sd_adapt *a, int32_t tokens, double seconds) {
    sd_cost_fit_add(&a->round, SD_ADAPT_NGRAM_DECAY, (double)tokens, seconds);
}

void sd_adapt_ngram_prepare(sd_adapt *a, specdec_ngram_cost mode, float token_cost) {
    sd_ngram_state *g = &a->ngram;
    g->gate = mode != SPECDEC_NGRAM_COST_OFF;
    double rho = (double)token_cost;
    if (mode != SPECDEC_NGRAM_COST_FIXED) {
        double c0, c1, fit = SD_ADAPT_NGRAM_PRIOR;
        const double info = sd_cost_fit_solve(&a->round, &c0, &c1) ? sd_cost_fit_info(&a->round) : 0.0;
        if (info > 0 && c0 + c1 > 0 && isfinite(c1 / (c0 + c1))) fit = c1 / (c0 + c1);
        rho = (SD_ADAPT_NGRAM_PRIOR_INFO * SD_ADAPT_NGRAM_PRIOR + info * fit) / (SD_ADAPT_NGRAM_PRIOR_INFO + info);
    }
    if (!(rho >= 0)) rho = 0;
    g->c0 = 1.0 - rho;
    g->c1 = rho;
}
