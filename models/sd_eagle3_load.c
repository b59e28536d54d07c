/* sd_eagle3_load.c — an EAGLE-3 head directory into a specdec_model (models/sd_eagle3_load.h).
 *
 * Config: the decoder layer's Llama keys come from the top level (flat layout) or from
 * `transformer_layer_config` (speculators); they are parsed by the Llama config parser
 * (sd_config_parse: one validation of sizes, heads, RoPE) on a copy whose `architectures` is
 * LlamaForCausalLM. The EAGLE-3 keys (draft_vocab_size, target_hidden_size, capture ids,
 * norm flags) are read from the top level. Capture ids, docs/EAGLE3.md: the top-level
 * `eagle_aux_hidden_state_layer_ids` (vLLM / speculators) are hs indices; the ids in
 * `eagle_config` (SpecForge / sglang) get +1 when the first id is 1 (sglang's current rule),
 * else are hs indices; none: the default rule. */
#define _POSIX_C_SOURCE 200809L
#include "sd_eagle3_load.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "sd_alloc.h"
#include "sd_config.h"
#include "sd_json.h"
#include "sd_safetensors.h"

#define E3_CONFIG_MAX_BYTES (16u << 20)

typedef struct e3_loader {
    specdec_model *m;
    sd_eagle3_head *h;
    const sd_st_file *f;
    const char *pfx;       /* "midlayer." or "layers.0." */
    const cJSON *cfg_root; /* config.json */
    char cfg_path[4200];
} e3_loader;

/* ------------------------------------------------------------------ tensors */
static specdec_status e3_get(e3_loader *E, const char *name, int64_t rows, int64_t cols, int required,
                             sd_tensor *out) {
    memset(out, 0, sizeof *out);
    const sd_st_tensor *t = sd_st_find(&E->f->hdr, name);
    if (!t) {
        if (!required) return SPECDEC_OK;
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: EAGLE-3 head: missing tensor '%s'", E->f->path, name);
    }
    sd_dtype dt;
    specdec_status st = sd_st_weight_dtype(t, E->f->path, name, &dt);
    if (st != SPECDEC_OK) return st;
    const int nd = cols ? 2 : 1;
    if (t->ndim != nd || t->shape[0] != rows || (cols && t->shape[1] != cols))
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH,
                       "%s: tensor '%s': shape [%lld%s%lld], but config.json implies [%lld%s%lld] (%d-D)",
                       E->f->path, name, (long long)(t->ndim ? t->shape[0] : 0), t->ndim > 1 ? ", " : "",
                       (long long)(t->ndim > 1 ? t->shape[1] : 0), (long long)rows, cols ? ", " : "",
                       (long long)cols, nd);
    const uint8_t *p = sd_st_data(E->f, t);
    const size_t bytes = (size_t)(t->end - t->begin), esz = sd_dtype_size(dt);
    if ((uintptr_t)p % esz) { /* safetensors does not promise alignment */
        if (E->h->n_owned >= E->h->cap_owned)
            return sd_fail(NULL, SPECDEC_ERR_INTERNAL, "%s: tensor '%s': owned-copy table full", E->f->path, name);
        void *copy = sd_malloc(bytes);
        if (!copy) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: tensor '%s': out of memory", E->f->path, name);
        memcpy(copy, p, bytes);
        E->h->owned[E->h->n_owned++] = copy;
        p = copy;
    }
    out->data = p;
    out->dtype = dt;
    out->ndim = nd;
    out->shape[0] = rows;
    out->shape[1] = cols ? cols : 1;
    E->m->n_params += (int64_t)t->n_elements;
    return SPECDEC_OK;
}

static specdec_status e3_layer_tensors(e3_loader *E) {
    sd_eagle3_weights *w = &E->h->w;
    const sd_config *c = &w->cfg.layer;
    const int64_t H = c->hidden_size, F = c->intermediate_size;
    const int64_t Q = (int64_t)c->n_heads * c->head_dim, KV = (int64_t)c->n_kv_heads * c->head_dim;
    static const struct {
        const char *suffix;
        size_t off;
        int kind; /* rows, cols: 0 H, 1 F, 2 Q, 3 KV, 4 2H, 5 none */
        int cols;
    } tab[] = {
        {"input_layernorm.weight", offsetof(sd_eagle3_weights, in_norm), 0, 5},
        {"hidden_norm.weight", offsetof(sd_eagle3_weights, hidden_norm), 0, 5},
        {"self_attn.q_proj.weight", offsetof(sd_eagle3_weights, wq), 2, 4},
        {"self_attn.k_proj.weight", offsetof(sd_eagle3_weights, wk), 3, 4},
        {"self_attn.v_proj.weight", offsetof(sd_eagle3_weights, wv), 3, 4},
        {"self_attn.o_proj.weight", offsetof(sd_eagle3_weights, wo), 0, 2},
        {"post_attention_layernorm.weight", offsetof(sd_eagle3_weights, post_norm), 0, 5},
        {"mlp.gate_proj.weight", offsetof(sd_eagle3_weights, w_gate), 1, 0},
        {"mlp.up_proj.weight", offsetof(sd_eagle3_weights, w_up), 1, 0},
        {"mlp.down_proj.weight", offsetof(sd_eagle3_weights, w_down), 0, 1},
    };
    const int64_t dim[6] = {H, F, Q, KV, 2 * H, 0};
    char nm[160];
    for (size_t i = 0; i < sizeof tab / sizeof tab[0]; i++) {
        snprintf(nm, sizeof nm, "%s%s", E->pfx, tab[i].suffix);
        SD_TRY(e3_get(E, nm, dim[tab[i].kind], dim[tab[i].cols], 1, (sd_tensor *)((char *)w + tab[i].off)));
    }
    return SPECDEC_OK;
}

/* d2t (I64 [Vd], target = d2t[i] + i) and/or t2d (BOOL [V]) into h->d2t: every target id in
 * [0, V), all distinct, t2d consistent with d2t. Neither: Vd must equal V (identity). */
static specdec_status e3_vocab_map(e3_loader *E) {
    sd_eagle3_head *h = E->h;
    const int32_t Vd = h->w.cfg.draft_vocab, V = h->w.cfg.layer.vocab_size;
    const char *fp = E->f->path;
    const sd_st_tensor *d2t = sd_st_find(&E->f->hdr, "d2t"), *t2d = sd_st_find(&E->f->hdr, "t2d");
    if (d2t && (d2t->dtype != SD_ST_I64 || d2t->ndim != 1 || d2t->shape[0] != Vd))
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: tensor 'd2t' must be I64 [%d] (draft_vocab_size), is %s %d-D",
                       fp, (int)Vd, sd_st_dtype_name(d2t->dtype), (int)d2t->ndim);
    if (t2d && (t2d->dtype != SD_ST_BOOL || t2d->ndim != 1 || t2d->shape[0] != V))
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: tensor 't2d' must be BOOL [%d] (vocab_size), is %s %d-D",
                       fp, (int)V, sd_st_dtype_name(t2d->dtype), (int)t2d->ndim);
    if (!d2t && !t2d && Vd != V)
        return sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH,
                       "%s: draft_vocab_size %d < vocab_size %d but neither 'd2t' nor 't2d' maps draft ids to target ids",
                       fp, (int)Vd, (int)V);
    h->d2t = sd_malloc((size_t)Vd * sizeof *h->d2t);
    uint8_t *seen = sd_calloc((size_t)V, 1);
    specdec_status st = SPECDEC_OK;
    if (!h->d2t || !seen) st = sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory for d2t", fp);
    const uint8_t *tb = t2d ? sd_st_data(E->f, t2d) : NULL;
    int32_t n = 0; /* t2d without d2t: the draft ids are the set target ids in ascending order */
    for (int32_t t = 0; !st && tb && !d2t && t < V; t++)
        if (tb[t] && n < Vd) h->d2t[n++] = t;
        else if (tb[t]) n++;
    if (!st && tb && !d2t && n != Vd)
        st = sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: t2d marks %d target ids, draft_vocab_size is %d", fp, (int)n,
                     (int)Vd);
    for (int32_t i = 0; !st && i < Vd; i++) {
        int64_t t = i, off = 0;
        if (d2t) {
            memcpy(&off, sd_st_data(E->f, d2t) + 8 * (size_t)i, 8); /* may be misaligned */
            /* target id off + i, range-checked before the sum: off is any int64 of the file */
            t = off >= -(int64_t)i && off < (int64_t)V - i ? off + i : -1;
        } else if (tb) {
            t = h->d2t[i];
        }
        if (t < 0 || t >= V)
            st = sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: d2t[%d] = %lld maps draft id %d to a target id outside [0, %d)",
                         fp, (int)i, (long long)off, (int)i, (int)V);
        else if (seen[t])
            st = sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: d2t maps two draft ids to target id %lld (draft id %d)", fp,
                         (long long)t, (int)i);
        else if (tb && !tb[t])
            st = sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: d2t maps draft id %d to target id %lld, which t2d does not mark",
                         fp, (int)i, (long long)t);
        else {
            seen[t] = 1;
            h->d2t[i] = (int32_t)t;
        }
    }
    sd_free(seen);
    h->w.d2t = h->d2t;
    return st;
}

static specdec_status e3_tensors(e3_loader *E) {
    sd_eagle3_weights *w = &E->h->w;
    const sd_eagle3_config *c = &w->cfg;
    const int64_t H = c->layer.hidden_size, V = c->layer.vocab_size, tH = c->target_hidden;
    E->h->cap_owned = 24;
    E->h->owned = sd_calloc((size_t)E->h->cap_owned, sizeof *E->h->owned);
    if (!E->h->owned) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", E->f->path);
    SD_TRY(e3_get(E, "fc.weight", H, 3 * tH, 1, &w->fc));
    SD_TRY(e3_get(E, "fc.bias", H, 0, 0, &w->fc_bias));
    char nm[64];
    for (int i = 0; c->fc_norm && i < SD_EAGLE3_N_AUX; i++) {
        snprintf(nm, sizeof nm, "fc_norm.%d.weight", i);
        SD_TRY(e3_get(E, nm, tH, 0, 1, &w->fc_norm[i]));
    }
    if (c->norm_before_fc) SD_TRY(e3_get(E, "input_norm.weight", 3 * tH, 0, 1, &w->input_norm));
    SD_TRY(e3_get(E, "embed_tokens.weight", V, H, 0, &w->embed));
    SD_TRY(e3_layer_tensors(E));
    SD_TRY(e3_get(E, "norm.weight", H, 0, 1, &w->norm));
    SD_TRY(e3_get(E, "lm_head.weight", c->draft_vocab, H, 1, &w->lm_head));
    SD_TRY(e3_vocab_map(E));
    w->dtype = w->wq.dtype;
    return sd_eagle3_validate(w, E->f->path, NULL);
}

/* ------------------------------------------------------------------ config */
/* The decoder layer's Llama keys (root or the nested transformer_layer_config), parsed by
 * sd_config_parse on a copy that says LlamaForCausalLM and has no special ids. */
static specdec_status e3_layer_config(e3_loader *E, const cJSON *lc) {
    sd_config *cfg = &E->h->w.cfg.layer;
    const char *fn = E->cfg_path;
    const cJSON *mt = sd_json_member(lc, "model_type");
    if (mt && (!cJSON_IsString(mt) || strcmp(mt->valuestring, "llama") != 0))
        return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED,
                       "%s: EAGLE-3 head with a '%.32s' decoder layer: only Llama layers are supported", fn,
                       cJSON_IsString(mt) ? mt->valuestring : "?");
    cJSON *dup = cJSON_Duplicate(lc, 1);
    if (!dup) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    static const char *const drop[] = {"architectures", "bos_token_id", "eos_token_id", "pad_token_id"};
    for (size_t i = 0; i < sizeof drop / sizeof drop[0]; i++) cJSON_DeleteItemFromObjectCaseSensitive(dup, drop[i]);
    cJSON *arch = cJSON_CreateStringArray((const char *const[]){"LlamaForCausalLM"}, 1);
    char *text = NULL;
    if (arch && cJSON_AddItemToObject(dup, "architectures", arch)) text = cJSON_PrintUnformatted(dup);
    else cJSON_Delete(arch);
    cJSON_Delete(dup);
    if (!text) return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    specdec_status st = sd_config_parse(text, strlen(text), fn, cfg, NULL);
    cJSON_free(text);
    if (st) return st;
    if (cfg->n_layers != 1)
        return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED,
                       "%s: EAGLE-3 head with num_hidden_layers %d: only one decoder layer is supported", fn,
                       (int)cfg->n_layers);
    if (cfg->attention_bias)
        return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: EAGLE-3 head with attention_bias = true is not supported",
                       fn);
    /* the head's forward is a plain SwiGLU MLP without biases (backends/cpu/sd_eagle3_cpu.h) */
    if (cfg->mlp_bias)
        return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED, "%s: EAGLE-3 head with mlp_bias = true is not supported", fn);
    if (cfg->act != SD_ACT_SILU) {
        const cJSON *act = sd_json_member(lc, "hidden_act");
        return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED,
                       "%s: EAGLE-3 head with hidden_act '%.32s': only silu (SwiGLU) is supported", fn,
                       cJSON_IsString(act) ? act->valuestring : "?");
    }
    const cJSON *a = sd_json_member(E->cfg_root, "architectures");
    snprintf(cfg->architecture, sizeof cfg->architecture, "%.63s",
             cJSON_IsArray(a) && cJSON_IsString(a->child) ? a->child->valuestring : "Eagle3 head");
    return SPECDEC_OK;
}

/* A list of three non-negative integer capture ids into ids[]. */
static specdec_status e3_id_list(const cJSON *v, const char *key, const char *fn, int32_t ids[SD_EAGLE3_N_AUX]) {
    int n = cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
    if (n != SD_EAGLE3_N_AUX)
        return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: key '%s' must be a list of %d layer ids (or null)", fn, key,
                       SD_EAGLE3_N_AUX);
    int i = 0;
    for (const cJSON *e = v->child; e; e = e->next, i++) {
        if (!sd_json_is_int(e) || e->valuedouble < 0 || e->valuedouble > SD_CFG_MAX_LAYERS)
            return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: key '%s'[%d] must be an integer in [0, %d]", fn, key, i,
                           SD_CFG_MAX_LAYERS);
        ids[i] = (int32_t)e->valuedouble;
    }
    return SPECDEC_OK;
}

static specdec_status e3_aux_config(e3_loader *E) {
    sd_eagle3_config *c = &E->h->w.cfg;
    const char *fn = E->cfg_path;
    const cJSON *root = E->cfg_root;
    for (int i = 0; i < SD_EAGLE3_N_AUX; i++) c->aux_ids[i] = -1;
    const cJSON *ec = sd_json_member(root, "eagle_config");
    if (ec && !cJSON_IsObject(ec)) return sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: key 'eagle_config' must be an object", fn);
    if (ec) {
        int use_aux = 1;
        SD_TRY(sd_json_get_bool(ec, "use_aux_hidden_state", 0, 1, &use_aux, fn, NULL));
        if (!use_aux)
            return sd_fail(NULL, SPECDEC_ERR_UNSUPPORTED,
                           "%s: eagle_config.use_aux_hidden_state = false (an EAGLE-1 style head) is not supported", fn);
    }
    const cJSON *top = sd_json_member(root, "eagle_aux_hidden_state_layer_ids");
    const cJSON *nested = ec ? sd_json_member(ec, "eagle_aux_hidden_state_layer_ids") : NULL;
    if (top) return e3_id_list(top, "eagle_aux_hidden_state_layer_ids", fn, c->aux_ids); /* hs indices */
    if (nested) {
        SD_TRY(e3_id_list(nested, "eagle_config.eagle_aux_hidden_state_layer_ids", fn, c->aux_ids));
        if (c->aux_ids[0] == 1) /* SpecForge's output-of-layer numbering, as sglang reads it */
            for (int i = 0; i < SD_EAGLE3_N_AUX; i++) c->aux_ids[i]++;
    }
    return SPECDEC_OK;
}

static specdec_status e3_flags(e3_loader *E, int nested) {
    sd_eagle3_config *c = &E->h->w.cfg;
    const cJSON *root = E->cfg_root;
    const char *fn = E->cfg_path;
    int64_t v;
    SD_TRY(sd_json_get_int(root, "target_hidden_size", 0, c->layer.hidden_size, 1, SD_CFG_MAX_HIDDEN, &v, fn, NULL));
    c->target_hidden = (int32_t)v;
    SD_TRY(sd_json_get_int(root, "draft_vocab_size", 0, c->layer.vocab_size, 1, c->layer.vocab_size, &v, fn, NULL));
    c->draft_vocab = (int32_t)v;
    /* vLLM's speculators adapter defaults norm_before_residual to true, flat configs to false */
    SD_TRY(sd_json_get_bool(root, "norm_before_residual", 0, nested, &c->norm_before_residual, fn, NULL));
    SD_TRY(sd_json_get_bool(root, "norm_output", 0, 0, &c->norm_output, fn, NULL));
    SD_TRY(sd_json_get_bool(root, "norm_before_fc", 0, 0, &c->norm_before_fc, fn, NULL));
    SD_TRY(sd_json_get_bool(root, "fc_norm", 0, 0, &c->fc_norm, fn, NULL));
    return e3_aux_config(E);
}

static specdec_status e3_config(e3_loader *E) {
    specdec_model *m = E->m;
    snprintf(E->cfg_path, sizeof E->cfg_path, "%s/config.json", m->path);
    char *text = NULL;
    size_t len = 0;
    SD_TRY(sd_read_file(E->cfg_path, E3_CONFIG_MAX_BYTES, &text, &len, NULL));
    cJSON *root = NULL;
    specdec_status st = sd_json_parse(text, len, E->cfg_path, &root, NULL);
    sd_free(text);
    if (st) return st;
    E->cfg_root = root;
    if (!cJSON_IsObject(root)) st = sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: not a JSON object", E->cfg_path);
    if (!st) st = sd_json_check_unique(root, "the top-level object", E->cfg_path, NULL);
    const cJSON *lc = st ? NULL : sd_json_member(root, "transformer_layer_config");
    if (lc && !cJSON_IsObject(lc))
        st = sd_fail(NULL, SPECDEC_ERR_FORMAT, "%s: key 'transformer_layer_config' must be an object", E->cfg_path);
    E->h->w.cfg.layout = E->pfx[0] == 'l' ? SD_EAGLE3_SPECULATORS : SD_EAGLE3_FLAT;
    if (!st) st = e3_layer_config(E, lc ? lc : root);
    if (!st) st = e3_flags(E, lc != NULL);
    int bias = 0;
    if (!st) st = sd_json_get_bool(root, "bias", 0, 0, &bias, E->cfg_path, NULL);
    if (!st && bias && !sd_st_find(&E->f->hdr, "fc.bias"))
        st = sd_fail(NULL, SPECDEC_ERR_MODEL_MISMATCH, "%s: 'bias' is true but there is no tensor 'fc.bias'", E->cfg_path);
    cJSON_Delete(root);
    E->cfg_root = NULL;
    return st;
}

/* ------------------------------------------------------------------ entry points */
static const char *e3_prefix(const sd_st_header *hdr) {
    if (!sd_st_find(hdr, "fc.weight")) return NULL;
    if (sd_st_find(hdr, "midlayer.hidden_norm.weight")) return "midlayer.";
    if (sd_st_find(hdr, "layers.0.hidden_norm.weight")) return "layers.0.";
    return NULL;
}

specdec_status sd_eagle3_model_load(specdec_model *m, int use_mmap, int *is_head) {
    *is_head = 0;
    char p[4400];
    struct stat sb;
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", m->path);
    if (stat(p, &sb) == 0) return SPECDEC_OK; /* sharded: a full model, never a head */
    snprintf(p, sizeof p, "%s/model.safetensors", m->path);
    if (stat(p, &sb) != 0 || !S_ISREG(sb.st_mode)) return SPECDEC_OK; /* the model loader says what is missing */
    sd_st_file *f = NULL;
    SD_TRY(sd_st_open(p, use_mmap, &f, NULL));
    const char *pfx = e3_prefix(&f->hdr);
    if (!pfx) {
        sd_st_close(f);
        return SPECDEC_OK;
    }
    *is_head = 1;
    m->files = sd_calloc(1, sizeof *m->files);
    m->eagle3 = sd_calloc(1, sizeof *m->eagle3);
    if (!m->files || !m->eagle3) {
        sd_st_close(f);
        return sd_fail(NULL, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", p);
    }
    m->files[0] = f;
    m->n_files = 1;
    e3_loader E = {.m = m, .h = m->eagle3, .f = f, .pfx = pfx};
    SD_TRY(e3_config(&E));
    SD_TRY(e3_tensors(&E));
    m->w.cfg = m->eagle3->w.cfg.layer;
    m->w.dtype = m->eagle3->w.dtype;
    return SPECDEC_OK;
}

void sd_eagle3_model_free(specdec_model *m) {
    sd_eagle3_head *h = m ? m->eagle3 : NULL;
    if (!h) return;
    for (int32_t i = 0; i < h->n_owned; i++) sd_free(h->owned[i]);
    sd_free(h->owned);
    sd_free(h->d2t);
    sd_free(h);
    m->eagle3 = NULL;
}

void sd_eagle3_model_info(const specdec_model *m, specdec_model_info *info) {
    const sd_eagle3_head *h = m->eagle3;
    info->model_kind = h ? SPECDEC_DRAFT_EAGLE3 : 0;
    info->eagle3_target_hidden = h ? h->w.cfg.target_hidden : 0;
    info->eagle3_draft_vocab = h ? h->w.cfg.draft_vocab : 0;
    info->eagle3_own_embedding = h && h->w.embed.data ? 1 : 0;
    for (int i = 0; i < SD_EAGLE3_N_AUX; i++) info->eagle3_aux_layers[i] = h ? h->w.cfg.aux_ids[i] : 0;
}
