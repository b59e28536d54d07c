/* sd_sample_rules.c — the host-only part of the sampling rules: the parameters of a
 * generate request as the rules see them, and their validation (one place, used by the
 * generation loop and by every launcher that takes sd_sampling_params). */
#include "sd_sample_rules.h"

#include <math.h>

sd_sampling_params sd_sampling_params_from(const specdec_generate_params *gp) {
    sd_sampling_params sp;
    sp.temperature = gp->temperature;
    sp.top_k = gp->top_k;
    sp.top_p = gp->top_p;
    sp.min_p = gp->min_p;
    return sp;
}

specdec_status sd_sampling_check_params(const sd_sampling_params *sp, sd_errbuf *eb) {
    if (!sp) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sampling: params is NULL");
    if (!(sp->temperature >= 0.0f) || isinf(sp->temperature))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sampling: temperature %g must be finite and >= 0",
                       (double)sp->temperature);
    if (sp->top_k < 0)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sampling: top_k %d must be >= 0", (int)sp->top_k);
    if (!(sp->top_p > 0.0f && sp->top_p <= 1.0f))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sampling: top_p %g must be in (0, 1]", (double)sp->top_p);
    if (!(sp->min_p >= 0.0f && sp->min_p <= 1.0f))
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sampling: min_p %g must be in [0, 1]", (double)sp->min_p);
    return SPECDEC_OK;
}
