/* sd_runner.c — the generic part of the runner contract (core/sd_runner.h). */
#include "sd_runner.h"

specdec_status sd_runner_forward_chunked(sd_runner *r, const int32_t *tokens, int32_t n, int32_t pos, float *logits) {
    const int32_t mb = r->max_batch > 0 ? r->max_batch : n;
    for (int32_t off = 0; off < n;) {
        const int32_t c = n - off < mb ? n - off : mb;
        float *rows = logits ? logits + (size_t)off * (size_t)r->n_vocab : NULL;
        specdec_status st = sd_runner_forward(r, tokens + off, c, pos + off, rows);
        if (st != SPECDEC_OK) return st;
        if (r->kv_len != pos + off + c)
            return sd_fail(&r->err, SPECDEC_ERR_INTERNAL, "runner: kv length %d after a forward of %d tokens at %d",
                           (int)r->kv_len, (int)c, (int)(pos + off));
        off += c;
    }
    return SPECDEC_OK;
}
