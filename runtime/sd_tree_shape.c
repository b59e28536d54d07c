/* sd_tree_shape.c — requested draft trees and their per-round clipping (see
 * sd_tree_shape.h), and specdec_generate_params_set_tree. */
#include "sd_tree_shape.h"

#include <string.h>

/* widths[0..depth): each in [1, SPECDEC_MAX_TREE_NODES], at most that many nodes. */
static specdec_status tree_widths_check(const int32_t *w, int32_t depth, sd_errbuf *eb) {
    if (depth < 0 || depth > SPECDEC_MAX_DRAFT)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "draft tree: depth %d outside [0, %d] (SPECDEC_MAX_DRAFT)",
                       (int)depth, SPECDEC_MAX_DRAFT);
    int64_t level = 1, total = 0;
    for (int32_t d = 0; d < depth; d++) {
        if (w[d] < 1 || w[d] > SPECDEC_MAX_TREE_NODES)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "draft tree: width %d at depth %d outside [1, %d]",
                           (int)w[d], (int)d + 1, SPECDEC_MAX_TREE_NODES);
        level *= w[d];
        total += level;
        if (total > SPECDEC_MAX_TREE_NODES)
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                           "draft tree: more than %d nodes (SPECDEC_MAX_TREE_NODES) by depth %d", SPECDEC_MAX_TREE_NODES,
                           (int)d + 1);
    }
    return SPECDEC_OK;
}

specdec_status specdec_generate_params_set_tree(specdec_generate_params *params, const int32_t *widths,
                                                int32_t depth) {
    if (!params || (depth > 0 && !widths))
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate_params_set_tree: %s is NULL",
                       params ? "widths" : "params");
    specdec_status st = tree_widths_check(widths, depth, NULL);
    if (st != SPECDEC_OK) return st;
    memset(params->tree_width, 0, sizeof params->tree_width);
    for (int32_t d = 0; d < depth; d++) params->tree_width[d] = (uint8_t)widths[d];
    return SPECDEC_OK;
}

specdec_status sd_tree_request(const specdec_generate_params *p, int has_drafter, sd_draft_shape *shape,
                               int *is_tree, sd_errbuf *eb) {
    int32_t w[SPECDEC_MAX_DRAFT], depth = 0;
    while (depth < SPECDEC_MAX_DRAFT && p->tree_width[depth]) {
        w[depth] = p->tree_width[depth];
        depth++;
    }
    for (int32_t d = depth; d < SPECDEC_MAX_DRAFT; d++)
        if (p->tree_width[d])
            return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                           "specdec_generate: tree_width[%d] = %d after tree_width[%d] = 0 (a shape has no zero)", (int)d,
                           (int)p->tree_width[d], (int)depth);
    specdec_status st = tree_widths_check(w, depth, eb);
    if (st != SPECDEC_OK) return st;
    if (p->draft_nodes < 0 || p->draft_nodes > SPECDEC_MAX_TREE_NODES)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: draft_nodes %d outside [0, %d]",
                       (int)p->draft_nodes, SPECDEC_MAX_TREE_NODES);
    *is_tree = depth > 0 || p->draft_nodes > 0;
    if (!*is_tree) return SPECDEC_OK;
    if (!has_drafter)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                       "specdec_generate: a draft tree needs a draft model or draft_method NGRAM");
    if (p->adaptive_draft)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_generate: adaptive_draft applies to chains, not trees");
    /* draft_nodes alone: any branching, depth up to SPECDEC_MAX_DRAFT (and the budget) */
    shape->depth = depth > 0 ? depth : p->draft_nodes < SPECDEC_MAX_DRAFT ? p->draft_nodes : SPECDEC_MAX_DRAFT;
    for (int32_t d = 0; d < SPECDEC_MAX_DRAFT; d++) shape->width[d] = depth > 0 ? (d < depth ? w[d] : 1) : SPECDEC_MAX_TREE_NODES;
    shape->n_nodes = p->draft_nodes;
    return SPECDEC_OK;
}

sd_draft_shape sd_tree_round_shape(const sd_draft_shape *req, int32_t room, int32_t fit) {
    sd_draft_shape s = *req;
    if (room < 0) room = 0;
    if (fit > SPECDEC_MAX_TREE_NODES) fit = SPECDEC_MAX_TREE_NODES;
    if (s.depth > room) s.depth = room;
    if (s.depth == 0) return sd_draft_chain(0);
    if (s.n_nodes > 0) {
        if (s.n_nodes > fit) s.n_nodes = fit;
        if (s.n_nodes < 1) return sd_draft_chain(0);
        return s;
    }
    return sd_draft_shape_nodes(&s) <= fit ? s : sd_draft_chain(s.depth);
}
