/* sd_round.c — checks every implementation of the round contract shares (core/sd_round.h). */
#include "sd_round.h"

specdec_status sd_round_tree_check(const sd_round_seq *s, const sd_runner *target, const sd_runner *draft,
                                   const char *who, sd_errbuf *eb, int32_t *nodes_out) {
    const sd_draft_shape *sh = &s->shape;
    for (int32_t d = 0; d < sh->depth; d++)
        if (sh->width[d] < 1 || sh->width[d] > SPECDEC_MAX_TREE_NODES)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: tree width[%d] = %d outside [1, %d]", who, (int)d,
                           (int)sh->width[d], SPECDEC_MAX_TREE_NODES);
    const int64_t nodes = sd_draft_shape_nodes(sh);
    if (sh->n_nodes < 0 || nodes < 1 || nodes > SPECDEC_MAX_TREE_NODES)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: a tree of %lld nodes (1..%d)", who, (long long)nodes,
                       SPECDEC_MAX_TREE_NODES);
    const int64_t L = s->length;
    if (!target || !draft || L + nodes > target->n_ctx || L + nodes > draft->n_ctx || nodes + 1 > target->max_batch ||
        nodes > draft->max_batch)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                       "%s: a tree of %lld nodes at length %d does not fit the context or one call", who,
                       (long long)nodes, (int)s->length);
    if (nodes_out) *nodes_out = (int32_t)nodes;
    return SPECDEC_OK;
}
