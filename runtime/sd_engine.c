/* sd_engine.c — the engine: a target runner, an optional draft runner and the rounds
 * that drive them (created from models on a backend, or from runners by tests), and
 * the low-level forward / KV-cache API. Generation is in sd_generate.c. */
#include "sd_engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sd_alloc.h"
#include "sd_cpu_pool.h"
#include "sd_cpu_runner.h"
#include "sd_cuda_backend.h"
#include "sd_eagle3_cpu.h"
#include "sd_eagle3_load.h"
#include "sd_mtp_cpu.h"
#include "sd_host_round.h"
#include "sd_math.h"
#include "sd_model.h"

specdec_status sd_engine_enter(specdec_engine *e) {
    if (atomic_flag_test_and_set_explicit(&e->busy, memory_order_acquire))
        return sd_fail(&e->err, SPECDEC_ERR_BUSY, "engine is in use by another thread (one call at a time per engine)");
    return SPECDEC_OK;
}
void sd_engine_leave(specdec_engine *e) { atomic_flag_clear_explicit(&e->busy, memory_order_release); }

sd_driver *sd_engine_driver(specdec_engine *e) {
    if (e->round_kind == SD_ENGINE_ROUND_HOST || !e->device_exec) {
        sd_round_set_exec(e->round, e->host_exec, NULL);
    } else {
        if (e->device_exec_cuda) sd_cuda_exec_use_graphs(e->device_exec, e->round_kind == SD_ENGINE_ROUND_DEVICE_GRAPH);
        sd_round_set_exec(e->round, e->device_exec, e->host_exec);
    }
    return &e->driver;
}

/* ------------------------------------------------------------------------- */
/* creation                                                                   */
/* ------------------------------------------------------------------------- */
static void sd_engine_destroy(specdec_engine *e) {
    if (!e) return;
    sd_driver_free(&e->driver);
    sd_round_destroy(e->round); /* the round and the executors borrow the runners: first */
    sd_exec_destroy(e->device_exec);
    sd_exec_destroy(e->host_exec);
    sd_runner_destroy(e->target);
    sd_runner_destroy(e->draft);
    sd_free(e->seq);
    sd_free(e->text_win);
    sd_ngram_corpus_free(e->env.corpus);
    sd_free(e);
}

static specdec_status sd_engine_check_runners(const sd_runner *target, const sd_runner *draft,
                                              const sd_engine_special *special) {
    if (target->n_vocab <= 0 || target->n_ctx <= 0)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "engine: target runner has n_vocab %d, n_ctx %d",
                       (int)target->n_vocab, (int)target->n_ctx);
    if (draft && draft->n_vocab != target->n_vocab)
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "engine: target vocab_size %d != draft vocab_size %d",
                       (int)target->n_vocab, (int)draft->n_vocab);
    if (draft && draft->backend != target->backend)
        return sd_fail(NULL, SPECDEC_ERR_INTERNAL, "engine: target and draft runners on different backends");
    if (special && (special->n_eos < 0 || special->n_eos > SPECDEC_MAX_EOS))
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "engine: n_eos %d outside [0, %d]", (int)special->n_eos,
                       SPECDEC_MAX_EOS);
    return SPECDEC_OK;
}

/* The executors (the host one always; on CUDA the device-resident one when the GPU
 * sampler serves the vocabulary: UNSUPPORTED leaves the host one alone), the round and
 * the driver. */
static specdec_status sd_engine_make_rounds(specdec_engine *e) {
    sd_errbuf eb;
    sd_err_clear(&eb);
    specdec_status st = sd_host_exec_create(e->n_vocab, e->draft != NULL, 1, &e->host_exec, &eb);
    if (st == SPECDEC_OK) st = sd_round_create(e->host_exec, NULL, e->target, e->draft, 1, &e->round, &eb);
    if (st == SPECDEC_OK) st = sd_driver_init(&e->driver, e->round, 1, &eb);
    if (st != SPECDEC_OK) return sd_fail(NULL, st, "engine: %s", eb.msg);
    e->round_kind = SD_ENGINE_ROUND_HOST;
    if (e->backend != SPECDEC_BACKEND_CUDA) return SPECDEC_OK;
    /* an EAGLE-3 head is no CUDA runner: its sequences run on the host executor (the fallback) */
    st = sd_cuda_exec_create(e->target, e->env.has_eagle3 ? NULL : e->draft, 1, &e->device_exec, &eb);
    if (st == SPECDEC_OK) {
        e->round_kind = SD_ENGINE_ROUND_DEVICE_GRAPH;
        e->device_exec_cuda = 1;
    }
    else if (st != SPECDEC_ERR_UNSUPPORTED) return sd_fail(NULL, st, "engine: device round: %s", eb.msg);
    return SPECDEC_OK;
}

specdec_status sd_engine_create_from_runners(sd_runner *target, sd_runner *draft, const sd_engine_special *special,
                                             specdec_engine **out) {
    specdec_status st;
    if (out) *out = NULL;
    if (!out || !target) {
        st = sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "engine: %s is NULL", out ? "target runner" : "out_engine");
        goto fail_runners;
    }
    if ((st = sd_engine_check_runners(target, draft, special)) != SPECDEC_OK) goto fail_runners;
    specdec_engine *e = sd_calloc(1, sizeof *e);
    if (!e) {
        st = sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "engine: allocating the engine (%zu bytes)", sizeof *e);
        goto fail_runners;
    }
    atomic_flag_clear(&e->busy);
    e->target = target;
    e->draft = draft;
    e->backend = target->backend;
    e->n_vocab = target->n_vocab;
    e->n_ctx = draft ? sd_min_i32(target->n_ctx, draft->n_ctx) : target->n_ctx;
    e->special.bos_id = special ? special->bos_id : -1;
    e->special.n_eos = special ? special->n_eos : 0;
    if (special) memcpy(e->special.eos_ids, special->eos_ids, sizeof e->special.eos_ids);
    e->env.n_ctx = e->n_ctx;
    e->env.n_vocab = e->n_vocab;
    e->env.has_draft = draft != NULL;
    e->env.has_eagle3 = sd_eagle3_runner_of(draft) != NULL;
    e->env.has_mtp = e->env.has_eagle3 && sd_eagle3_runner_of(draft)->mtp;
    e->env.tree_fit = draft ? sd_min_i32(target->max_batch - 1, draft->max_batch) : 0;
    e->env.tree_fit_solo = target->max_batch - 1;
    e->env.special = e->special;
    e->seq = sd_malloc(((size_t)e->n_ctx + 1) * sizeof(int32_t));
    e->text_win = sd_malloc(SD_GEN_TEXT_WIN);
    if (!e->seq || !e->text_win) {
        st = sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "engine: allocating buffers for n_ctx %d", (int)e->n_ctx);
    } else {
        st = sd_engine_make_rounds(e);
    }
    if (st != SPECDEC_OK) {
        sd_engine_destroy(e);
        return st;
    }
    *out = e;
    return SPECDEC_OK;

fail_runners:
    sd_runner_destroy(target);
    sd_runner_destroy(draft);
    return st;
}

specdec_engine_params specdec_engine_default_params(void) {
    specdec_engine_params p;
    memset(&p, 0, sizeof p);
    p.backend = SPECDEC_BACKEND_AUTO;
    return p;
}

static int sd_eos_sets_equal(const sd_config *a, const sd_config *b) {
    if (a->n_eos != b->n_eos) return 0;
    for (int i = 0; i < a->n_eos; i++) {
        int found = 0;
        for (int j = 0; j < b->n_eos; j++) found |= a->eos_ids[i] == b->eos_ids[j];
        if (!found) return 0;
    }
    return 1;
}

static void sd_format_eos(const sd_config *c, char *buf, size_t cap) {
    size_t o = 0;
    o += (size_t)snprintf(buf + o, cap - o, "[");
    for (int i = 0; i < c->n_eos && o < cap; i++)
        o += (size_t)snprintf(buf + o, cap - o, "%s%d", i ? "," : "", (int)c->eos_ids[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
}

static specdec_status sd_engine_check_params(const specdec_engine_params *p) {
    for (size_t i = 0; i < sizeof p->reserved_i / sizeof p->reserved_i[0]; i++)
        if (p->reserved_i[i])
            return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_create: reserved_i[%zu] = %d must be 0",
                           i, (int)p->reserved_i[i]);
    for (size_t i = 0; i < sizeof p->reserved / sizeof p->reserved[0]; i++)
        if (p->reserved[i])
            return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_create: reserved[%zu] must be 0", i);
    if (p->backend != SPECDEC_BACKEND_AUTO && p->backend != SPECDEC_BACKEND_CPU && p->backend != SPECDEC_BACKEND_CUDA)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_create: unknown backend %d", (int)p->backend);
    if (p->n_ctx < 0 || p->max_batch < 0 || p->cuda_device < 0)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT,
                       "specdec_engine_create: negative n_ctx %d / max_batch %d / cuda_device %d", (int)p->n_ctx,
                       (int)p->max_batch, (int)p->cuda_device);
    if (p->cpu_threads < 0 || p->cpu_threads > SPECDEC_MAX_CPU_THREADS)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT,
                       "specdec_engine_create: cpu_threads = %d outside [0, %d] (0 = default)", (int)p->cpu_threads,
                       SPECDEC_MAX_CPU_THREADS);
    if (p->ngram_corpus_tokens < 0 || p->ngram_corpus_tokens > SPECDEC_MAX_NGRAM_CORPUS_TOKENS)
        return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT,
                       "specdec_engine_create: ngram_corpus_tokens = %d outside [0, %d] (0 = none)",
                       (int)p->ngram_corpus_tokens, SPECDEC_MAX_NGRAM_CORPUS_TOKENS);
    return SPECDEC_OK;
}

specdec_status sd_engine_cpu_threads(int32_t requested, int32_t *out) {
    *out = 1;
    if (requested > 0) {
        *out = sd_min_i32(requested, SPECDEC_MAX_CPU_THREADS);
        return SPECDEC_OK;
    }
    const char *env = getenv("SPECDEC_CPU_THREADS");
    if (env && *env) {
        char *end = NULL;
        errno = 0;
        long v = strtol(env, &end, 10);
        if (errno || end == env || *end || v < 1 || v > SPECDEC_MAX_CPU_THREADS)
            return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT,
                           "SPECDEC_CPU_THREADS=\"%.32s\" in the environment: not an integer in [1, %d]", env,
                           SPECDEC_MAX_CPU_THREADS);
        *out = (int32_t)v;
        return SPECDEC_OK;
    }
    *out = sd_cpu_default_threads();
    return SPECDEC_OK;
}

static specdec_status sd_engine_check_pair(const specdec_model *target, const specdec_model *draft) {
    const sd_config *tc = &target->w.cfg, *dc = &draft->w.cfg;
    if (tc->vocab_size != dc->vocab_size)
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "target %s vocab_size %d != draft %s vocab_size %d",
                       target->path, (int)tc->vocab_size, draft->path, (int)dc->vocab_size);
    if (tc->bos_id != dc->bos_id)
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "target %s bos_token_id %d != draft %s bos_token_id %d",
                       target->path, (int)tc->bos_id, draft->path, (int)dc->bos_id);
    if (!sd_eos_sets_equal(tc, dc)) {
        char a[128], b[128];
        sd_format_eos(tc, a, sizeof a);
        sd_format_eos(dc, b, sizeof b);
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "target %s eos_token_id %s != draft %s eos_token_id %s",
                       target->path, a, draft->path, b);
    }
    return SPECDEC_OK;
}

/* A context beyond what a model was trained for (max_position_embeddings, which a
 * config with rope scaling states for the scaled positions) is refused: RoPE positions
 * past it were never seen in training and the output degrades without any error. Checked
 * from config.json alone, before any runner (weights converted or uploaded) exists.
 * Dynamic NTK rope is the exception: its max_position_embeddings is the original length,
 * and growing theta past it is what the rope type is for (transformers does; the runner
 * fixes the frequencies of its n_ctx, core/sd_weights.h sd_cfg_rope_params). */
static specdec_status sd_engine_check_ctx(const specdec_model *target, const specdec_model *draft, int32_t n_ctx) {
    const specdec_model *ms[2] = {target, draft};
    for (int i = 0; i < 2; i++) {
        const int32_t max_pos =
            ms[i] && ms[i]->w.cfg.rope_type != SD_ROPE_DYNAMIC ? ms[i]->w.cfg.max_position_embeddings : 0;
        if (max_pos > 0 && n_ctx > max_pos)
            return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT,
                           "n_ctx %d exceeds the %s model's max_position_embeddings %d (%s/config.json): positions "
                           "past it were never trained; use n_ctx <= %d, or a model whose config extends it",
                           (int)n_ctx, i ? "draft" : "target", (int)max_pos, ms[i]->path, (int)max_pos);
    }
    return SPECDEC_OK;
}

specdec_backend sd_engine_pick_backend(specdec_backend requested) {
    if (requested != SPECDEC_BACKEND_AUTO) return requested;
    return specdec_cuda_device_count() > 0 ? SPECDEC_BACKEND_CUDA : SPECDEC_BACKEND_CPU;
}

/* A head is no model runner: the engine and the scheduler make its runner over a target
 * runner with sd_engine_make_head. */
static specdec_status sd_engine_head_refused(const specdec_model *m, sd_errbuf *eb) {
    return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT,
                   "%s has no runner of its own (it drafts over a target runner: sd_engine_make_head)",
                   m->eagle3 ? "an EAGLE-3 head" : "an MTP layer");
}

specdec_status sd_engine_make_runner(const specdec_model *m, specdec_backend be, const specdec_engine_params *p,
                                     int32_t n_ctx, int32_t max_batch, sd_runner **out, sd_errbuf *eb) {
    if (sd_model_is_head(m)) return sd_engine_head_refused(m, eb);
    if (be == SPECDEC_BACKEND_CUDA)
        return sd_cuda_runner_create(&m->w, n_ctx, max_batch, p->cuda_device, p->cuda_keep_f32, out, eb);
    specdec_status st = sd_cpu_runner_create(&m->w, n_ctx, max_batch, out, eb);
    if (st == SPECDEC_OK) sd_cpu_group_set_threads(sd_cpu_runner_group(*out), p->cpu_threads);
    return st;
}

specdec_status sd_engine_make_group(const specdec_model *m, specdec_backend be, const specdec_engine_params *p,
                                    int32_t n_ctx, int32_t max_batch, int32_t n_blocks, int32_t block_tokens,
                                    sd_runner_group **out, sd_errbuf *eb) {
    if (sd_model_is_head(m)) return sd_engine_head_refused(m, eb);
    specdec_status st =
        be == SPECDEC_BACKEND_CUDA
            ? sd_cuda_group_create(&m->w, n_ctx, max_batch, n_blocks, block_tokens, p->cuda_device, p->cuda_keep_f32,
                                   out, eb)
            : sd_cpu_group_create(&m->w, n_ctx, max_batch, n_blocks, block_tokens, out, eb);
    if (st == SPECDEC_OK && be != SPECDEC_BACKEND_CUDA) sd_cpu_group_set_threads(*out, p->cpu_threads);
    /* all-sliding models give blocks behind the window back (core/sd_runner.h) */
    if (st == SPECDEC_OK && (st = sd_runner_group_set_window(*out, sd_cfg_release_window(&m->w.cfg, n_ctx), eb))) {
        sd_runner_group_destroy(*out); /* cannot happen: the group has no runners yet */
        *out = NULL;
    }
    return st;
}

/* An EAGLE-3 head's runner over the target runner t (its group captures the head's states) on
 * t's backend: the CPU reference, or the CUDA head (captured rows on the GPU; its draft steps
 * run through the round's host executor, docs/EAGLE3.md "CUDA"). The head borrows the
 * target's embedding when it has none (on CUDA: the target group's device copy). */
#define SD_ENGINE_HEAD_ROWS 128 /* a tree level pass and a prefill chunk */
specdec_status sd_engine_make_head_shared(const specdec_model *target, const specdec_model *head, specdec_backend be,
                                          sd_runner *t, int32_t n_ctx, sd_eagle3_shared **out, sd_errbuf *eb) {
    *out = NULL;
    if (sd_model_is_mtp(head)) return SPECDEC_OK; /* each MTP runner reads the model's weights directly */
    const sd_eagle3_weights *hw = &head->eagle3->w;
    if (be == SPECDEC_BACKEND_CUDA) return sd_cuda_eagle3_shared_create(hw, t, &target->w.cfg, n_ctx, out, eb);
    return sd_eagle3_cpu_shared_create(hw, out, eb);
}

specdec_status sd_engine_make_head(const specdec_model *target, const specdec_model *head, specdec_backend be,
                                   sd_runner *t, int32_t n_ctx, sd_eagle3_shared *shared, sd_runner **out,
                                   sd_errbuf *eb) {
    *out = NULL;
    if (sd_model_is_mtp(head)) /* the CPU backend's layers (MoE, latent attention) */
        return be == SPECDEC_BACKEND_CUDA
                   ? sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "MTP drafting runs on the CPU backend only (use --backend cpu)")
                   : sd_mtp_cpu_runner_create(&head->w, t, &target->w.cfg, n_ctx, SD_ENGINE_HEAD_ROWS, out, eb);
    sd_eagle3_shared *own = NULL;
    specdec_status st = shared ? SPECDEC_OK : sd_engine_make_head_shared(target, head, be, t, n_ctx, &own, eb);
    if (st != SPECDEC_OK) return st;
    if (!shared) shared = own;
    const sd_eagle3_weights *hw = &head->eagle3->w;
    const sd_tensor *embed = hw->embed.data ? &hw->embed : &target->w.tok_embd;
    st = be == SPECDEC_BACKEND_CUDA
             ? sd_cuda_eagle3_runner_create_shared(shared, t, &target->w.cfg, n_ctx, SD_ENGINE_HEAD_ROWS, out, eb)
             : sd_eagle3_cpu_runner_create(shared, embed, t, &target->w.cfg, n_ctx, SD_ENGINE_HEAD_ROWS, out, eb);
    sd_eagle3_shared_unref(own); /* the runner holds its own reference */
    return st;
}

/* Both runners on the chosen backend (AUTO: CUDA when usable, else the CPU). */
static specdec_status sd_engine_make_runners(const specdec_model *target, const specdec_model *draft,
                                             const specdec_engine_params *p, int32_t n_ctx, int32_t max_batch,
                                             sd_runner **rt, sd_runner **rd) {
    specdec_backend be = sd_engine_pick_backend(p->backend);
    sd_errbuf eb;
    sd_err_clear(&eb);
    specdec_status st = sd_engine_make_runner(target, be, p, n_ctx, max_batch, rt, &eb);
    if (st == SPECDEC_ERR_BACKEND_UNAVAILABLE && p->backend == SPECDEC_BACKEND_AUTO) {
        be = SPECDEC_BACKEND_CPU; /* AUTO: CUDA built in but not usable after all */
        st = sd_engine_make_runner(target, be, p, n_ctx, max_batch, rt, &eb);
    }
    if (st != SPECDEC_OK) return sd_fail(NULL, st, "target model %s: %s", target->path, eb.msg);
    if (!draft) return SPECDEC_OK;
    st = sd_model_is_head(draft) ? sd_engine_make_head(target, draft, be, *rt, n_ctx, NULL, rd, &eb)
                       : sd_engine_make_runner(draft, be, p, n_ctx, max_batch, rd, &eb);
    if (st == SPECDEC_OK) return SPECDEC_OK;
    sd_runner_destroy(*rt);
    *rt = NULL;
    return sd_fail(NULL, st, "draft model %s: %s", draft->path, eb.msg);
}

specdec_status sd_engine_plan_params(const specdec_model *target, const specdec_model *draft,
                                     const specdec_engine_params *params, sd_engine_plan *out) {
    const specdec_engine_params p = params ? *params : specdec_engine_default_params();
    specdec_status st = sd_engine_check_params(&p);
    if (st == SPECDEC_OK && sd_model_is_mtp(target))
        st = sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH,
                     "%s was loaded as its MTP layer (specdec_model_params.mtp), not as a target model", target->path);
    if (st == SPECDEC_OK && target->eagle3)
        st = sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s is an EAGLE-3 draft head, not a target model", target->path);
    if (st == SPECDEC_OK && draft && draft->eagle3) /* the head's own checks first (fc width, vocabulary, ids) */
        st = sd_eagle3_check_target(&draft->eagle3->w, &target->w.cfg, draft->path, NULL);
    if (st == SPECDEC_OK && sd_model_is_mtp(draft)) /* as the head's: before any runner is made */
        st = sd_mtp_check_target(&draft->w.cfg, &target->w.cfg, draft->path, NULL);
    if (st != SPECDEC_OK) return st;
    if (sd_model_is_head(draft)) draft = NULL; /* a head has no pair checks and no context of its own */
    if (draft) st = sd_engine_check_pair(target, draft);
    if (st != SPECDEC_OK) return st;
    const sd_config *tc = &target->w.cfg;
    int32_t n_ctx = p.n_ctx;
    if ((st = sd_engine_check_ctx(target, draft, n_ctx)) != SPECDEC_OK) return st;
    if (n_ctx == 0) {
        n_ctx = tc->max_position_embeddings > 0 ? sd_min_i32(tc->max_position_embeddings, 4096) : 4096;
        if (draft && draft->w.cfg.max_position_embeddings > 0)
            n_ctx = sd_min_i32(n_ctx, draft->w.cfg.max_position_embeddings);
    }
    /* A verify pass (γ+1 positions, or a tree's root and nodes) is one call: never go below that. */
    int32_t max_batch = p.max_batch == 0 ? n_ctx : sd_max_i32(p.max_batch, SD_RUNNER_TREE_MAX);
    int32_t threads = 1;
    if ((st = sd_engine_cpu_threads(p.cpu_threads, &threads)) != SPECDEC_OK) return st;
    memset(out, 0, sizeof *out);
    out->params = p;
    out->params.cpu_threads = threads;
    out->n_ctx = n_ctx;
    out->max_batch = sd_min_i32(max_batch, n_ctx);
    out->special.bos_id = tc->bos_id;
    out->special.n_eos = sd_min_i32(sd_max_i32(tc->n_eos, 0), SPECDEC_MAX_EOS);
    memcpy(out->special.eos_ids, tc->eos_ids, sizeof out->special.eos_ids);
    return SPECDEC_OK;
}

specdec_status specdec_engine_create(const specdec_model *target, const specdec_model *draft,
                                     const specdec_engine_params *params, specdec_engine **out_engine) {
    if (out_engine) *out_engine = NULL;
    if (!out_engine) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_create: out_engine is NULL");
    if (!target) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_create: target model is NULL");
    sd_engine_plan plan;
    specdec_status st = sd_engine_plan_params(target, draft, params, &plan);
    if (st != SPECDEC_OK) return st;
    const double t0 = sd_gen_now();
    sd_runner *rt = NULL, *rd = NULL;
    st = sd_engine_make_runners(target, draft, &plan.params, plan.n_ctx, plan.max_batch, &rt, &rd);
    if (st != SPECDEC_OK) return st;
    st = sd_engine_create_from_runners(rt, rd, &plan.special, out_engine);
    if (st == SPECDEC_OK && plan.params.ngram_corpus_tokens > 0 &&
        (st = sd_ngram_corpus_create(plan.params.ngram_corpus_tokens, &(*out_engine)->env.corpus, NULL)) != SPECDEC_OK) {
        sd_engine_destroy(*out_engine);
        *out_engine = NULL;
    }
    if (st == SPECDEC_OK) (*out_engine)->env.t_load_s = sd_engine_models_load_s(target, draft) + sd_gen_now() - t0;
    return st;
}

double sd_engine_models_load_s(const specdec_model *target, const specdec_model *draft) {
    return target->t_load_s + (draft ? draft->t_load_s : 0.0);
}

void specdec_engine_free(specdec_engine *engine) { sd_engine_destroy(engine); }

const char *specdec_engine_last_error(const specdec_engine *engine) {
    return engine ? engine->err.msg : specdec_last_error();
}

specdec_backend specdec_engine_backend(const specdec_engine *engine) {
    return engine ? engine->backend : SPECDEC_BACKEND_CPU;
}

int32_t specdec_engine_n_ctx(const specdec_engine *engine) { return engine ? engine->n_ctx : 0; }

/* ------------------------------------------------------------------------- */
/* low-level access                                                           */
/* ------------------------------------------------------------------------- */
static sd_runner *sd_engine_role(const specdec_engine *e, specdec_role role) {
    if (role == SPECDEC_ROLE_TARGET) return e->target;
    if (role == SPECDEC_ROLE_DRAFT) return e->draft;
    return NULL;
}

static specdec_status sd_engine_forward_check(specdec_engine *e, const sd_runner *r, specdec_role role,
                                              const int32_t *tokens, int32_t n_tokens, int32_t pos) {
    if (e->dead) return sd_fail(&e->err, SPECDEC_ERR_DEVICE_LOST, "engine lost its device earlier; it can only be freed");
    if (!r)
        return sd_fail(&e->err, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_forward: role %d %s", (int)role,
                       role == SPECDEC_ROLE_DRAFT ? "(the engine has no draft model)" : "is not a role");
    if (!tokens || n_tokens <= 0)
        return sd_fail(&e->err, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_forward: %s",
                       !tokens ? "tokens is NULL" : "n_tokens <= 0");
    if (pos < 0 || pos > sd_runner_kv_len(r))
        return sd_fail(&e->err, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_forward: pos %d outside [0, kv length %d]",
                       (int)pos, (int)sd_runner_kv_len(r));
    if ((int64_t)pos + n_tokens > e->n_ctx)
        return sd_fail(&e->err, SPECDEC_ERR_CONTEXT_FULL, "specdec_engine_forward: positions [%d, %lld) exceed n_ctx %d",
                       (int)pos, (long long)pos + n_tokens, (int)e->n_ctx);
    for (int32_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= e->n_vocab)
            return sd_fail(&e->err, SPECDEC_ERR_INVALID_ARGUMENT,
                           "specdec_engine_forward: tokens[%d] = %d outside [0, %d)", (int)i, (int)tokens[i],
                           (int)e->n_vocab);
    return SPECDEC_OK;
}

specdec_status specdec_engine_forward(specdec_engine *engine, specdec_role role, const int32_t *tokens,
                                      int32_t n_tokens, int32_t pos, float *logits) {
    if (!engine) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_forward: engine is NULL");
    specdec_status st = sd_engine_enter(engine);
    if (st != SPECDEC_OK) return st;
    sd_runner *r = sd_engine_role(engine, role);
    st = sd_engine_forward_check(engine, r, role, tokens, n_tokens, pos);
    if (st == SPECDEC_OK) {
        st = sd_runner_forward_chunked(r, tokens, n_tokens, pos, logits);
        if (st == SPECDEC_ERR_DEVICE_LOST) engine->dead = 1;
        if (st != SPECDEC_OK)
            sd_fail(&engine->err, st, "%s forward: %s", role == SPECDEC_ROLE_TARGET ? "target" : "draft", r->err.msg);
    }
    sd_engine_leave(engine);
    return st;
}

int32_t specdec_engine_kv_length(const specdec_engine *engine, specdec_role role) {
    if (!engine) return -1;
    const sd_runner *r = sd_engine_role(engine, role);
    return r ? sd_runner_kv_len(r) : -1;
}

specdec_status specdec_engine_kv_truncate(specdec_engine *engine, specdec_role role, int32_t length) {
    if (!engine) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_kv_truncate: engine is NULL");
    specdec_status st = sd_engine_enter(engine);
    if (st != SPECDEC_OK) return st;
    sd_runner *r = sd_engine_role(engine, role);
    if (!r)
        st = sd_fail(&engine->err, SPECDEC_ERR_INVALID_ARGUMENT, "specdec_engine_kv_truncate: role %d %s", (int)role,
                     role == SPECDEC_ROLE_DRAFT ? "(the engine has no draft model)" : "is not a role");
    else if (length < 0 || length > sd_runner_kv_len(r))
        st = sd_fail(&engine->err, SPECDEC_ERR_INVALID_ARGUMENT,
                     "specdec_engine_kv_truncate: length %d outside [0, kv length %d]", (int)length,
                     (int)sd_runner_kv_len(r));
    else if ((st = sd_runner_truncate(r, length)) != SPECDEC_OK) /* a released window (grouped runners only) */
        sd_fail(&engine->err, st, "specdec_engine_kv_truncate: %s", r->err.msg);
    sd_engine_leave(engine);
    return st;
}
