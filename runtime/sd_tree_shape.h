/* sd_tree_shape.h — the draft tree a generate call asks for (specdec_generate_params
 * tree_width / draft_nodes, docs/TREE.md) and the shape of each round after clipping to
 * the budget, the context and the runners. */
#ifndef SD_TREE_SHAPE_H
#define SD_TREE_SHAPE_H

#include <stdint.h>

#include "specdec.h"
#include "sd_error.h"
#include "sd_round.h"

/* The requested tree of p: *is_tree = 0 when neither field is set (a chain of n_draft).
 * INVALID_ARGUMENT with detail on a zero inside tree_width, a width or a node count out
 * of range, draft_nodes outside [0, SPECDEC_MAX_TREE_NODES], a tree without a drafter
 * (has_drafter 0: no draft model and not NGRAM) or with adaptive_draft. */
specdec_status sd_tree_request(const specdec_generate_params *p, int has_drafter, sd_draft_shape *shape,
                               int *is_tree, sd_errbuf *eb);

/* The shape of one round of the requested tree `req`: depth clipped to `room` (tokens
 * that may still be emitted, minus one), the node count to `fit` (cache rows left and
 * one call of each runner); a fixed shape that does not fit becomes a chain of its
 * clipped depth. Depends only on its arguments (positions, never on random draws), so
 * it keeps every verify mode exact. */
sd_draft_shape sd_tree_round_shape(const sd_draft_shape *req, int32_t room, int32_t fit);

#endif
