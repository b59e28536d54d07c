/* sd_config.c — config.json -> sd_config, with every key type- and range-checked.
 *
 * The family (models/sd_family.c) says which keys matter and what an absent key means:
 * the defaults of the transformers config classes. Where transformers tells an absent
 * key from a null one (sliding_window, the soft-capping values), so does this parser:
 * absent takes the class default, null means "none". Anything transformers would run
 * differently from what the backends can do is refused with SPECDEC_ERR_UNSUPPORTED
 * naming the key (an activation, a rope type, bidirectional attention, ...), anything
 * transformers itself refuses or that cannot be a model with SPECDEC_ERR_FORMAT. Sizes
 * are bounded (core/sd_weights.h) so an absurd config fails here, before the loader
 * allocates anything from it. */
#include "sd_config.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "sd_family.h"
#include "sd_json.h"

/* Where the parser is: the file and the family being read. */
typedef struct sd_cfgp {
    const cJSON *root;
    const char *fname;
    const sd_family *fam;
    sd_config *cfg;
    sd_errbuf *eb;
} sd_cfgp;

static int sd_has(const sd_family *f, uint64_t flag) { return (f->flags & flag) != 0; }

/* The raw member, null included (sd_json_member folds null into absent). */
static const cJSON *sd_raw(const cJSON *o, const char *key) {
    return cJSON_IsObject(o) ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
}

static specdec_status sd_cfg_family(const cJSON *root, const char *fname, const sd_family **out, sd_config *cfg,
                                    sd_errbuf *eb) {
    const cJSON *archs = sd_json_member(root, "architectures");
    const char *name = NULL;
    if (archs) {
        if (!cJSON_IsArray(archs) || !archs->child || !cJSON_IsString(archs->child))
            return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: key 'architectures' must be a non-empty list of strings",
                           fname);
        name = archs->child->valuestring;
        *out = sd_family_find(name, NULL);
    } else {
        const cJSON *mt = sd_json_member(root, "model_type");
        if (!mt) return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: missing key 'architectures' (and no 'model_type')", fname);
        if (!cJSON_IsString(mt)) return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: key 'model_type' must be a string", fname);
        name = mt->valuestring;
        *out = sd_family_find(NULL, name);
    }
    if (!*out)
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "%s: architecture '%.64s' is not supported (%s)", fname, name,
                       sd_family_list());
    cfg->arch = (*out)->id;
    snprintf(cfg->architecture, sizeof cfg->architecture, "%s", (*out)->arch);
    return SPECDEC_OK;
}

static specdec_status sd_cfg_i32(const cJSON *o, const char *key, int required, int64_t def, int64_t lo, int64_t hi,
                                 int32_t *out, const char *fname, sd_errbuf *eb) {
    int64_t v;
    SD_TRY(sd_json_get_int(o, key, required, def, lo, hi, &v, fname, eb));
    *out = (int32_t)v;
    return SPECDEC_OK;
}

/* A key transformers reads as "absent: the class default, null: none" (none = 0 here). */
static specdec_status sd_cfg_opt_num(const sd_cfgp *p, const char *key, double absent, double lo, double hi,
                                     double *out) {
    const cJSON *v = sd_raw(p->root, key);
    if (!v) {
        *out = absent;
        return SPECDEC_OK;
    }
    if (cJSON_IsNull(v)) {
        *out = 0.0;
        return SPECDEC_OK;
    }
    return sd_json_get_num(p->root, key, 1, 0.0, lo, hi, out, p->fname, p->eb);
}

static specdec_status sd_cfg_sizes(const sd_cfgp *p) {
    const cJSON *root = p->root;
    const char *fname = p->fname;
    sd_config *cfg = p->cfg;
    sd_errbuf *eb = p->eb;
    SD_TRY(sd_cfg_i32(root, "vocab_size", 1, 0, 1, SD_CFG_MAX_VOCAB, &cfg->vocab_size, fname, eb));
    SD_TRY(sd_cfg_i32(root, "hidden_size", 1, 0, 1, SD_CFG_MAX_HIDDEN, &cfg->hidden_size, fname, eb));
    SD_TRY(sd_cfg_i32(root, "intermediate_size", 1, 0, 1, SD_CFG_MAX_INTERMEDIATE, &cfg->intermediate_size, fname, eb));
    SD_TRY(sd_cfg_i32(root, "num_hidden_layers", 1, 0, 1, SD_CFG_MAX_LAYERS, &cfg->n_layers, fname, eb));
    SD_TRY(sd_cfg_i32(root, "num_attention_heads", 1, 0, 1, SD_CFG_MAX_HEADS, &cfg->n_heads, fname, eb));
    SD_TRY(sd_cfg_i32(root, "num_key_value_heads", 0, cfg->n_heads, 1, cfg->n_heads, &cfg->n_kv_heads, fname, eb));
    const int divides = cfg->hidden_size % cfg->n_heads == 0;
    if (sd_has(p->fam, SD_FAM_HEADS_DIVIDE) && !divides) /* transformers' validate_architecture raises */
        return sd_fail(eb, SPECDEC_ERR_FORMAT,
                       "%s: hidden_size (%d) is not a multiple of num_attention_heads (%d), which %s requires",
                       fname, cfg->hidden_size, cfg->n_heads, p->fam->arch);
    if (sd_json_member(root, "head_dim")) {
        SD_TRY(sd_cfg_i32(root, "head_dim", 1, 0, 1, SD_CFG_MAX_HEAD_DIM, &cfg->head_dim, fname, eb));
    } else if (p->fam->head_dim) {
        cfg->head_dim = p->fam->head_dim;
    } else {
        if (!divides)
            return sd_fail(eb, SPECDEC_ERR_FORMAT,
                           "%s: hidden_size (%d) is not a multiple of num_attention_heads (%d) and there is no "
                           "'head_dim'",
                           fname, cfg->hidden_size, cfg->n_heads);
        cfg->head_dim = cfg->hidden_size / cfg->n_heads;
        if (cfg->head_dim > SD_CFG_MAX_HEAD_DIM)
            return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: head_dim = hidden_size / num_attention_heads = %d exceeds %d",
                           fname, cfg->head_dim, SD_CFG_MAX_HEAD_DIM);
    }
    SD_TRY(sd_cfg_i32(root, "max_position_embeddings", 0, p->fam->max_pos, 1, SD_CFG_MAX_POSITIONS,
                   &cfg->max_position_embeddings, fname, eb));
    double eps;
    SD_TRY(sd_json_get_num(root, "rms_norm_eps", 0, p->fam->rms_eps, 1e-30, 1.0, &eps, fname, eb));
    cfg->rms_norm_eps = (float)eps;
    return SPECDEC_OK;
}

/* ---- rotary embeddings ----------------------------------------------------------- */

/* One rope dictionary being read (rope_scaling, rope_parameters or a nested entry). */
typedef struct sd_ropep {
    const sd_cfgp *p;
    const cJSON *d;    /* the dictionary (NULL: none) */
    const char *key;   /* its name for messages */
} sd_ropep;

static specdec_status sd_rope_num(const sd_ropep *r, const char *name, int required, double def, double lo, double hi,
                                  double *out) {
    char key[96];
    snprintf(key, sizeof key, "%s.%s", r->key, name);
    const cJSON *v = sd_json_member(r->d, name);
    if (!v) {
        if (required)
            return sd_fail(r->p->eb, SPECDEC_ERR_FORMAT, "%s: missing key '%s' (rope type %s)", r->p->fname, key,
                           sd_config_rope_name(r->p->cfg));
        *out = def;
        return SPECDEC_OK;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo || v->valuedouble > hi)
        return sd_fail(r->p->eb, SPECDEC_ERR_FORMAT, "%s: key '%s' must be a number in [%g, %g]", r->p->fname, key, lo,
                       hi);
    *out = v->valuedouble;
    return SPECDEC_OK;
}

/* original_max_position_embeddings as transformers' standardize_rope_params resolves it:
 * a top-level key (Phi-3 always has one: its class default 4096) wins, then the
 * dictionary's, then max_position_embeddings. */
static specdec_status sd_rope_orig_max(const sd_ropep *r, int32_t *out) {
    const sd_cfgp *p = r->p;
    int64_t v;
    if (sd_json_member(p->root, "original_max_position_embeddings") || p->fam->id == SD_ARCH_PHI3) {
        SD_TRY(sd_json_get_int(p->root, "original_max_position_embeddings", 0, 4096, 1, SD_CFG_MAX_POSITIONS, &v,
                            p->fname, p->eb));
    } else {
        char key[96];
        snprintf(key, sizeof key, "%s.original_max_position_embeddings", r->key);
        const cJSON *e = sd_json_member(r->d, "original_max_position_embeddings");
        if (e && (!sd_json_is_int(e) || e->valuedouble < 1 || e->valuedouble > SD_CFG_MAX_POSITIONS))
            return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: key '%s' must be an integer in [1, %d]", p->fname, key,
                           SD_CFG_MAX_POSITIONS);
        v = e ? (int64_t)e->valuedouble : p->cfg->max_position_embeddings;
    }
    *out = (int32_t)v;
    return SPECDEC_OK;
}

static specdec_status sd_rope_llama3(const sd_ropep *r) {
    sd_config *c = r->p->cfg;
    double factor, lo, hi;
    SD_TRY(sd_rope_num(r, "factor", 1, 0, 1e-6, 1e6, &factor));
    SD_TRY(sd_rope_num(r, "low_freq_factor", 1, 0, 1e-6, 1e6, &lo));
    SD_TRY(sd_rope_num(r, "high_freq_factor", 1, 0, 1e-6, 1e6, &hi));
    SD_TRY(sd_rope_orig_max(r, &c->rope_original_max_pos));
    /* The llama3 ramp divides by (high - low). */
    if (!(hi > lo))
        return sd_fail(r->p->eb, SPECDEC_ERR_FORMAT, "%s: %s.high_freq_factor (%g) must exceed low_freq_factor (%g)",
                       r->p->fname, r->key, hi, lo);
    c->rope_factor = (float)factor;
    c->rope_low_freq_factor = (float)lo;
    c->rope_high_freq_factor = (float)hi;
    return SPECDEC_OK;
}

/* yarn: transformers' _compute_yarn_parameters, the attention factor resolved here. */
static double sd_yarn_mscale(double scale, double m) { return scale <= 1.0 ? 1.0 : 0.1 * m * log(scale) + 1.0; }

static specdec_status sd_rope_yarn(const sd_ropep *r) {
    sd_config *c = r->p->cfg;
    double factor, af, ms, msa, bf, bs;
    SD_TRY(sd_rope_orig_max(r, &c->rope_original_max_pos));
    SD_TRY(sd_rope_num(r, "factor", 1, 0, 1e-6, 1e6, &factor));
    SD_TRY(sd_rope_num(r, "mscale", 0, 0, -1e6, 1e6, &ms));
    SD_TRY(sd_rope_num(r, "mscale_all_dim", 0, 0, -1e6, 1e6, &msa));
    if (sd_json_member(r->d, "attention_factor")) {
        SD_TRY(sd_rope_num(r, "attention_factor", 1, 0, 1e-6, 1e6, &af));
    } else {
        af = (ms != 0.0 && msa != 0.0) ? sd_yarn_mscale(factor, ms) / sd_yarn_mscale(factor, msa)
                                        : sd_yarn_mscale(factor, 1.0);
    }
    SD_TRY(sd_rope_num(r, "beta_fast", 0, 0, 0.0, 1e6, &bf));
    SD_TRY(sd_rope_num(r, "beta_slow", 0, 0, 0.0, 1e6, &bs));
    int truncate = 1;
    SD_TRY(sd_json_get_bool(r->d, "truncate", 0, 1, &truncate, r->p->fname, r->p->eb));
    c->rope_factor = (float)factor;
    c->rope_attn_factor = (float)af;
    c->rope_beta_fast = (float)(bf != 0.0 ? bf : 32.0); /* Python's `or`: 0 means the default too */
    c->rope_beta_slow = (float)(bs != 0.0 ? bs : 1.0);
    c->rope_truncate = truncate;
    return SPECDEC_OK;
}

/* A longrope factor list of exactly rope_dim / 2 positive numbers. */
static specdec_status sd_rope_list(const sd_ropep *r, const char *name, float *out) {
    const int32_t want = sd_cfg_rope_dim(r->p->cfg) / 2;
    const cJSON *a = sd_json_member(r->d, name);
    if (!a)
        return sd_fail(r->p->eb, SPECDEC_ERR_FORMAT, "%s: missing key '%s.%s' (rope type longrope)", r->p->fname,
                       r->key, name);
    int n = cJSON_IsArray(a) ? cJSON_GetArraySize(a) : -1;
    if (n != want)
        return sd_fail(r->p->eb, SPECDEC_ERR_FORMAT,
                       "%s: key '%s.%s' must be a list of %d numbers (rotary dimensions / 2), got %s%d", r->p->fname,
                       r->key, name, (int)want, n < 0 ? "no list: " : "", n);
    int i = 0;
    for (const cJSON *e = a->child; e; e = e->next, i++) {
        if (!cJSON_IsNumber(e) || !(e->valuedouble > 0.0) || !(e->valuedouble < 1e30))
            return sd_fail(r->p->eb, SPECDEC_ERR_FORMAT, "%s: key '%s.%s'[%d] must be a positive number", r->p->fname,
                           r->key, name, i);
        out[i] = (float)e->valuedouble;
    }
    return SPECDEC_OK;
}

/* longrope: transformers' _compute_longrope_parameters; the attention factor resolved here. */
static specdec_status sd_rope_longrope(const sd_ropep *r) {
    sd_config *c = r->p->cfg;
    SD_TRY(sd_rope_orig_max(r, &c->rope_original_max_pos));
    SD_TRY(sd_rope_list(r, "short_factor", c->rope_short_factor));
    SD_TRY(sd_rope_list(r, "long_factor", c->rope_long_factor));
    double factor, af;
    SD_TRY(sd_rope_num(r, "factor", 0, (double)c->max_position_embeddings / c->rope_original_max_pos, 1e-6, 1e6, &factor));
    if (sd_json_member(r->d, "attention_factor")) {
        SD_TRY(sd_rope_num(r, "attention_factor", 1, 0, 1e-6, 1e6, &af));
    } else {
        af = factor <= 1.0 ? 1.0 : sqrt(1.0 + log(factor) / log((double)c->rope_original_max_pos));
    }
    if (!(af > 0.0) || !isfinite(af))
        return sd_fail(r->p->eb, SPECDEC_ERR_FORMAT,
                       "%s: %s (longrope): attention factor %g from original_max_position_embeddings %d", r->p->fname,
                       r->key, af, (int)c->rope_original_max_pos);
    c->rope_factor = (float)factor;
    c->rope_attn_factor = (float)af;
    return SPECDEC_OK;
}

static const struct {
    const char *name;
    sd_rope_type type;
} sd_rope_names[] = {
    {"default", SD_ROPE_DEFAULT}, {"llama3", SD_ROPE_LLAMA3}, {"linear", SD_ROPE_LINEAR},
    {"dynamic", SD_ROPE_DYNAMIC}, {"yarn", SD_ROPE_YARN},     {"longrope", SD_ROPE_LONGROPE},
};

/* The rope type named in r->d ("rope_type", else "type", else default). */
static specdec_status sd_rope_type_of(const sd_ropep *r, sd_rope_type *out) {
    *out = SD_ROPE_DEFAULT;
    const cJSON *ty = sd_json_member(r->d, "rope_type");
    if (!ty) ty = sd_json_member(r->d, "type");
    if (!ty) return SPECDEC_OK;
    if (!cJSON_IsString(ty))
        return sd_fail(r->p->eb, SPECDEC_ERR_FORMAT, "%s: key '%s.rope_type' must be a string", r->p->fname, r->key);
    const char *s = ty->valuestring;
    if (sd_has(r->p->fam, SD_FAM_YARN_IS_LONGROPE) && (!strcmp(s, "su") || !strcmp(s, "yarn"))) s = "longrope";
    for (size_t i = 0; i < sizeof sd_rope_names / sizeof sd_rope_names[0]; i++)
        if (!strcmp(s, sd_rope_names[i].name)) {
            *out = sd_rope_names[i].type;
            break;
        }
    if (*out == SD_ROPE_DEFAULT && strcmp(s, "default") != 0)
        return sd_fail(r->p->eb, SPECDEC_ERR_UNSUPPORTED,
                       "%s: %s.rope_type '%.64s' is not supported (default, linear, dynamic, yarn, longrope, llama3)",
                       r->p->fname, r->key, ty->valuestring);
    /* Phi3Config.validate_rope raises for anything else */
    if (r->p->fam->id == SD_ARCH_PHI3 && *out != SD_ROPE_DEFAULT && *out != SD_ROPE_LONGROPE)
        return sd_fail(r->p->eb, SPECDEC_ERR_FORMAT, "%s: %s.rope_type '%.64s': Phi-3 takes only default or longrope",
                       r->p->fname, r->key, ty->valuestring);
    return SPECDEC_OK;
}

/* partial_rotary_factor (the rope dictionary's, else the top-level key): rope_dim. */
static specdec_status sd_rope_partial(const sd_ropep *r) {
    const sd_cfgp *p = r->p;
    const cJSON *src = sd_json_member(r->d, "partial_rotary_factor") ? r->d : p->root;
    double prf;
    /* Glm4Config and Glm4MoeConfig set 0.5 when absent */
    const double dflt = p->fam->id == SD_ARCH_GLM4 || p->fam->id == SD_ARCH_GLM4_MOE ? 0.5 : 1.0;
    SD_TRY(sd_json_get_num(src, "partial_rotary_factor", 0, dflt, 1e-6, 1.0, &prf, p->fname, p->eb));
    p->cfg->rope_dim = (int32_t)((double)p->cfg->head_dim * prf); /* Python's int(): truncation */
    if (p->cfg->rope_dim == p->cfg->head_dim) return SPECDEC_OK;
    if (!sd_has(p->fam, SD_FAM_PARTIAL_ROPE))
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED,
                       "%s: partial_rotary_factor = %g: %s rotates the whole head (transformers cannot run it either)",
                       p->fname, prf, p->fam->arch);
    if (p->cfg->rope_dim < 2 || p->cfg->rope_dim % 2)
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT,
                       "%s: partial_rotary_factor = %g gives %d rotary dimensions of head_dim %d: must be even and >= 2",
                       p->fname, prf, (int)p->cfg->rope_dim, (int)p->cfg->head_dim);
    return SPECDEC_OK;
}

/* The full-attention rope from dictionary r (theta: its rope_theta, else the top level). */
static specdec_status sd_rope_full(const sd_ropep *r) {
    const sd_cfgp *p = r->p;
    sd_config *c = p->cfg;
    double theta;
    const cJSON *src = sd_json_member(r->d, "rope_theta") ? r->d : p->root;
    SD_TRY(sd_json_get_num(src, "rope_theta", 0, p->fam->theta, 1.0, 1e12, &theta, p->fname, p->eb));
    c->rope_theta = (float)theta;
    SD_TRY(sd_rope_partial(r));
    SD_TRY(sd_rope_type_of(r, &c->rope_type));
    if (sd_has(p->fam, SD_FAM_Q_POS_SCALE)) { /* Ministral 3: both read from the rope dictionary, as transformers does */
        double beta, orig;
        SD_TRY(sd_rope_num(r, "llama_4_scaling_beta", 1, 0, 0.0, 1e3, &beta));
        SD_TRY(sd_rope_num(r, "original_max_position_embeddings", 1, 0, 1.0, SD_CFG_MAX_POSITIONS, &orig));
        if (orig != floor(orig))
            return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: key '%s.original_max_position_embeddings' must be an integer",
                           p->fname, r->key);
        c->q_pos_beta = (float)beta;
        c->q_pos_orig = (int32_t)orig;
    }
    switch (c->rope_type) {
    case SD_ROPE_LLAMA3: return sd_rope_llama3(r);
    case SD_ROPE_YARN: return sd_rope_yarn(r);
    case SD_ROPE_LONGROPE: return sd_rope_longrope(r);
    case SD_ROPE_LINEAR:
    case SD_ROPE_DYNAMIC: {
        double factor;
        SD_TRY(sd_rope_num(r, "factor", 1, 0, 1e-6, 1e6, &factor));
        c->rope_factor = (float)factor;
        return SPECDEC_OK;
    }
    default: return SPECDEC_OK;
    }
}

/* Gemma 3's sliding layers: a plain rope of their own theta (rope_parameters.
 * sliding_attention, else rope_local_base_freq, else the class default). */
static specdec_status sd_rope_local(const sd_cfgp *p, const cJSON *nested) {
    sd_ropep r = {p, sd_json_member(nested, "sliding_attention"), "rope_parameters.sliding_attention"};
    if (r.d && !cJSON_IsObject(r.d))
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: key '%s' must be an object", p->fname, r.key);
    sd_rope_type t;
    SD_TRY(sd_rope_type_of(&r, &t));
    if (t != SD_ROPE_DEFAULT)
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: %s.rope_type '%s': the sliding layers' rope must be default",
                       p->fname, r.key, sd_rope_names[t].name);
    double theta;
    if (sd_json_member(r.d, "rope_theta"))
        SD_TRY(sd_json_get_num(r.d, "rope_theta", 1, 0, 1.0, 1e12, &theta, p->fname, p->eb));
    else
        SD_TRY(sd_json_get_num(p->root, "rope_local_base_freq", 0, p->fam->local_theta, 1.0, 1e12, &theta, p->fname,
                            p->eb));
    p->cfg->rope_local_theta = (float)theta;
    return SPECDEC_OK;
}

static int sd_rope_is_nested(const cJSON *d) {
    return sd_json_member(d, "full_attention") != NULL || sd_json_member(d, "sliding_attention") != NULL;
}

/* transformers >= 5 writes rope_parameters {rope_type, rope_theta, ...} (Gemma 3: one per
 * layer type); older configs write rope_theta at the top level and rope_scaling for a
 * scaled rope (which wins over rope_parameters, as in convert_rope_params_to_dict). */
static specdec_status sd_cfg_rope(const sd_cfgp *p) {
    const char *keys[2] = {"rope_parameters", "rope_scaling"};
    const cJSON *d[2];
    for (int i = 0; i < 2; i++) {
        d[i] = sd_json_member(p->root, keys[i]);
        if (d[i] && !cJSON_IsObject(d[i]))
            return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: key '%s' must be an object or null", p->fname, keys[i]);
    }
    const int nested = sd_rope_is_nested(d[0]);
    if ((nested || sd_rope_is_nested(d[1])) && !sd_has(p->fam, SD_FAM_LOCAL_ROPE))
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: per-layer-type rope parameters are not supported for %s",
                       p->fname, p->fam->arch);
    sd_ropep r = {p, d[1] ? d[1] : d[0], d[1] ? keys[1] : keys[0]};
    if (nested && !d[1]) {
        r.d = sd_json_member(d[0], "full_attention");
        r.key = "rope_parameters.full_attention";
        if (r.d && !cJSON_IsObject(r.d))
            return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: key '%s' must be an object", p->fname, r.key);
    }
    if (!d[0] && !d[1] && p->fam->rope_default) { /* the config class's own rope (GPT-OSS: yarn) */
        cJSON *def = NULL;
        SD_TRY(sd_json_parse(p->fam->rope_default, strlen(p->fam->rope_default), "the family's default rope", &def,
                          p->eb));
        r.d = def;
        r.key = "rope_parameters (class default)";
        specdec_status st = sd_rope_full(&r);
        cJSON_Delete(def);
        return st;
    }
    SD_TRY(sd_rope_full(&r));
    return sd_has(p->fam, SD_FAM_LOCAL_ROPE) ? sd_rope_local(p, nested ? d[0] : NULL) : SPECDEC_OK;
}

/* ---- layers: activation, biases, norms, attention variants ------------------------- */

static specdec_status sd_cfg_act(const sd_cfgp *p) {
    const char *key = p->fam->act_key;
    if (!key) { /* the family's MLP ignores the key (GPT-OSS: its clamped SwiGLU, sd_cfg_moe) */
        p->cfg->act = SD_ACT_SILU;
        return SPECDEC_OK;
    }
    const cJSON *act = sd_json_member(p->root, key);
    if (act && !cJSON_IsString(act))
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: key '%s' must be a string", p->fname, key);
    const char *s = act ? act->valuestring : p->fam->act_default;
    if (!strcmp(s, "silu") || !strcmp(s, "swish")) p->cfg->act = SD_ACT_SILU;
    else if (!strcmp(s, "gelu_pytorch_tanh") || !strcmp(s, "gelu_new")) p->cfg->act = SD_ACT_GELU_TANH;
    else if (!strcmp(s, "gelu")) p->cfg->act = sd_has(p->fam, SD_FAM_GELU_IS_TANH) ? SD_ACT_GELU_TANH : SD_ACT_GELU;
    else
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED,
                       "%s: %s '%.32s' is not supported (silu, swish, gelu, gelu_pytorch_tanh, gelu_new)", p->fname,
                       key, s);
    return SPECDEC_OK;
}

/* Granite's multipliers (GraniteConfig: each defaults to 1.0): the embeddings times
 * embedding_multiplier, every sublayer output times residual_multiplier before the residual
 * add, attention_multiplier as the softmax scale (instead of head_dim^-1/2), logits divided by
 * logits_scaling. Positive and finite (0 or a negative value is no model). */
static specdec_status sd_cfg_multipliers(const sd_cfgp *p) {
    sd_config *c = p->cfg;
    static const char *const keys[4] = {"embedding_multiplier", "residual_multiplier", "attention_multiplier",
                                        "logits_scaling"};
    float *const out[4] = {&c->embed_scale, &c->residual_scale, &c->attn_scale, &c->logits_divisor};
    for (int i = 0; i < 4; i++) {
        double v;
        SD_TRY(sd_json_get_num(p->root, keys[i], 0, 1.0, 1e-30, 1e30, &v, p->fname, p->eb));
        *out[i] = (float)v;
    }
    return SPECDEC_OK;
}

/* SmolLM3's layers without rope: no_rope_layers lists per layer 1 (rope) or 0 (none); absent
 * or null, every no_rope_layer_interval-th layer (l + 1 divisible) has none (SmolLM3Config). */
static specdec_status sd_cfg_no_rope(const sd_cfgp *p) {
    sd_config *c = p->cfg;
    const cJSON *nr = sd_json_member(p->root, "no_rope_layers");
    if (!nr) {
        int32_t every;
        SD_TRY(sd_cfg_i32(p->root, "no_rope_layer_interval", 0, 4, 1, SD_CFG_MAX_LAYERS, &every, p->fname, p->eb));
        for (int32_t l = 0; l < c->n_layers; l++) c->layer_no_rope[l] = (l + 1) % every == 0;
        return SPECDEC_OK;
    }
    if (!cJSON_IsArray(nr) || cJSON_GetArraySize(nr) != c->n_layers)
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT,
                       "%s: key 'no_rope_layers' must be a list of num_hidden_layers (%d) entries 0 or 1", p->fname,
                       (int)c->n_layers);
    int l = 0;
    for (const cJSON *e = nr->child; e; e = e->next, l++) {
        const int is01 = cJSON_IsBool(e) || (sd_json_is_int(e) && (e->valuedouble == 0 || e->valuedouble == 1));
        if (!is01)
            return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: key 'no_rope_layers'[%d] must be 0 or 1 (1: the layer uses "
                           "rope)", p->fname, l);
        c->layer_no_rope[l] = cJSON_IsBool(e) ? cJSON_IsFalse(e) : e->valuedouble == 0;
    }
    return SPECDEC_OK;
}

static specdec_status sd_cfg_layers(const sd_cfgp *p) {
    const sd_family *f = p->fam;
    sd_config *c = p->cfg;
    SD_TRY(sd_cfg_act(p));
    c->attention_bias = sd_has(f, SD_FAM_QKV_BIAS);
    if (sd_has(f, SD_FAM_ATTN_BIAS_KEY)) {
        SD_TRY(sd_json_get_bool(p->root, "attention_bias", 0, sd_has(f, SD_FAM_ATTN_BIAS_ON), &c->attention_bias,
                             p->fname, p->eb));
        c->o_bias = c->attention_bias;
    }
    if (sd_has(f, SD_FAM_MLP_BIAS_KEY)) SD_TRY(sd_json_get_bool(p->root, "mlp_bias", 0, 0, &c->mlp_bias, p->fname, p->eb));
    if (sd_has(f, SD_FAM_USE_BIAS_KEY)) { /* Ernie4_5Config: every projection biased, or none; null = false */
        if (!cJSON_IsNull(sd_json_member(p->root, "use_bias")))
            SD_TRY(sd_json_get_bool(p->root, "use_bias", 0, 0, &c->attention_bias, p->fname, p->eb));
        c->o_bias = c->mlp_bias = c->attention_bias;
    }
    if (sd_has(f, SD_FAM_ATTN_BIAS_QKV)) /* Glm4Attention: q/k/v_proj biased by attention_bias, o_proj never */
        SD_TRY(sd_json_get_bool(p->root, "attention_bias", 0, sd_has(f, SD_FAM_ATTN_BIAS_ON), &c->attention_bias,
                             p->fname, p->eb));
    c->rope_interleaved = sd_has(f, SD_FAM_ROPE_INTERLEAVED);
    if (sd_has(f, SD_FAM_QKV_BIAS_KEY))
        SD_TRY(sd_json_get_bool(p->root, "qkv_bias", 0, 1, &c->attention_bias, p->fname, p->eb));
    c->qk_norm = sd_has(f, SD_FAM_QK_NORM);
    if (sd_has(f, SD_FAM_QK_NORM_KEY)) /* Glm4MoeAttention: q_norm / k_norm per head when use_qk_norm */
        SD_TRY(sd_json_get_bool(p->root, "use_qk_norm", 0, 0, &c->qk_norm, p->fname, p->eb));
    c->qk_norm_whole = sd_has(f, SD_FAM_QK_NORM_WHOLE);
    /* OlmoeAttention sizes q_norm by hidden_size: the projection must be that wide */
    if (c->qk_norm_whole && f->id == SD_ARCH_OLMOE && (int64_t)c->n_heads * c->head_dim != c->hidden_size)
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT,
                       "%s: num_attention_heads (%d) x head_dim (%d) must equal hidden_size (%d) for %s (its q_norm "
                       "is hidden_size wide)",
                       p->fname, (int)c->n_heads, (int)c->head_dim, (int)c->hidden_size, f->arch);
    c->attn_sinks = sd_has(f, SD_FAM_SINKS);
    c->sandwich_norms = sd_has(f, SD_FAM_SANDWICH) || sd_has(f, SD_FAM_POST_NORMS);
    c->post_norms_only = sd_has(f, SD_FAM_POST_NORMS);
    c->norm_offset = sd_has(f, SD_FAM_NORM_PLUS1) ? 1.0f : 0.0f;
    c->embed_scale = sd_has(f, SD_FAM_EMBED_SCALE) ? (float)sqrt((double)c->hidden_size) : 0.0f;
    c->fused_qkv = sd_has(f, SD_FAM_FUSED);
    c->fused_gate_up = sd_has(f, SD_FAM_FUSED) || sd_has(f, SD_FAM_FUSED_MLP);
    if (sd_has(f, SD_FAM_BIDIR_KEY)) {
        int bidir = 0;
        SD_TRY(sd_json_get_bool(p->root, "use_bidirectional_attention", 0, 0, &bidir, p->fname, p->eb));
        if (bidir)
            return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED,
                           "%s: use_bidirectional_attention = true is not supported (an encoder, not a decoder)",
                           p->fname);
    }
    double v;
    if (sd_has(f, SD_FAM_QUERY_SCALAR)) {
        SD_TRY(sd_json_get_num(p->root, "query_pre_attn_scalar", 0, f->query_scalar, 1e-30, 1e30, &v, p->fname, p->eb));
        c->attn_scale = (float)(1.0 / sqrt(v));
    }
    if (sd_has(f, SD_FAM_SOFTCAP)) {
        SD_TRY(sd_cfg_opt_num(p, "attn_logit_softcapping", f->attn_softcap, 1e-30, 1e30, &v));
        c->attn_softcap = (float)v;
    }
    if (sd_has(f, SD_FAM_FINAL_SOFTCAP)) {
        SD_TRY(sd_cfg_opt_num(p, "final_logit_softcapping", f->final_softcap, 1e-30, 1e30, &v));
        c->final_softcap = (float)v;
    }
    if (sd_has(f, SD_FAM_CLIP_QKV)) { /* absent or null: no clipping */
        SD_TRY(sd_cfg_opt_num(p, "clip_qkv", 0.0, 1e-30, 1e30, &v));
        c->clip_qkv = (float)v;
    }
    if (sd_has(f, SD_FAM_MULTIPLIERS)) SD_TRY(sd_cfg_multipliers(p));
    return sd_has(f, SD_FAM_NO_ROPE_KEY) ? sd_cfg_no_rope(p) : SPECDEC_OK;
}

/* ---- sliding windows ----------------------------------------------------------------- */

/* layer_types: one "full_attention" / "sliding_attention" per layer. */
static specdec_status sd_cfg_layer_types(const sd_cfgp *p, const cJSON *lt) {
    sd_config *c = p->cfg;
    if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->n_layers)
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: key 'layer_types' must be a list of num_hidden_layers (%d) strings",
                       p->fname, (int)c->n_layers);
    int l = 0;
    for (const cJSON *e = lt->child; e; e = e->next, l++) {
        if (!cJSON_IsString(e))
            return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: key 'layer_types'[%d] must be a string", p->fname, l);
        if (!strcmp(e->valuestring, "sliding_attention")) c->layer_sliding[l] = 1;
        else if (strcmp(e->valuestring, "full_attention") != 0)
            return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED,
                           "%s: layer_types[%d] = '%.48s' is not supported (full_attention, sliding_attention)",
                           p->fname, l, e->valuestring);
    }
    return SPECDEC_OK;
}

/* Which layers slide, and the window (transformers: a "sliding_attention" layer with
 * sliding_window None raises; so does this, with FORMAT). */
static specdec_status sd_cfg_windows(const sd_cfgp *p) {
    const sd_family *f = p->fam;
    sd_config *c = p->cfg;
    if (f->window_rule == SD_WIN_NONE) return SPECDEC_OK;
    double w = 0.0;
    int use = 1;
    if (f->window_rule == SD_WIN_UPPER || f->window_rule == SD_WIN_EVEN_LOWER || f->window_rule == SD_WIN_NOPE ||
        sd_has(f, SD_FAM_USE_WINDOW_KEY))
        SD_TRY(sd_json_get_bool(p->root, "use_sliding_window", 0, 0, &use, p->fname, p->eb));
    if (use) SD_TRY(sd_cfg_opt_num(p, "sliding_window", f->window, 1.0, (double)SD_CFG_MAX_POSITIONS, &w));
    if (w != floor(w))
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: key 'sliding_window' must be an integer, got %g", p->fname, w);
    c->sliding_window = (int32_t)w;
    const cJSON *lt = sd_json_member(p->root, "layer_types");
    if (sd_has(f, SD_FAM_NOPE_GLOBAL) && c->sliding_window == 0) {
        /* Exaone4Config: sliding_window null sets the pattern to 0: no local layer (layer_types, when
         * given, must agree: a sliding layer without a window is refused below) */
        if (lt) SD_TRY(sd_cfg_layer_types(p, lt));
    } else if (lt && f->window_rule != SD_WIN_ALL) {
        SD_TRY(sd_cfg_layer_types(p, lt));
    } else if (f->window_rule == SD_WIN_ALL) {
        for (int32_t l = 0; l < c->n_layers; l++) c->layer_sliding[l] = c->sliding_window > 0;
    } else if (f->window_rule == SD_WIN_UPPER || f->window_rule == SD_WIN_EVEN_LOWER) {
        int32_t mwl;
        SD_TRY(sd_cfg_i32(p->root, "max_window_layers", 0, f->max_window_layers, 0, SD_CFG_MAX_LAYERS, &mwl, p->fname,
                       p->eb));
        /* Qwen2MoeConfig: layer i slides when i is even and below max_window_layers */
        for (int32_t l = 0; l < c->n_layers; l++)
            c->layer_sliding[l] = c->sliding_window > 0 && (f->window_rule == SD_WIN_UPPER ? l >= mwl
                                                                                           : l % 2 == 0 && l < mwl);
    } else if (f->window_rule == SD_WIN_NOPE) { /* SmolLM3Config: the layers without rope slide */
        for (int32_t l = 0; l < c->n_layers; l++) c->layer_sliding[l] = c->sliding_window > 0 && c->layer_no_rope[l];
    } else {
        int32_t pat = f->window_pattern;
        if (sd_has(f, SD_FAM_PATTERN_KEY))
            SD_TRY(sd_cfg_i32(p->root, "sliding_window_pattern", 0, f->window_pattern, 1, SD_CFG_MAX_LAYERS, &pat,
                           p->fname, p->eb));
        for (int32_t l = 0; l < c->n_layers; l++) c->layer_sliding[l] = (l + 1) % pat != 0;
    }
    for (int32_t l = 0; l < c->n_layers; l++)
        if (c->layer_sliding[l] && c->sliding_window < 1)
            return sd_fail(p->eb, SPECDEC_ERR_FORMAT,
                           "%s: layer %d is a sliding_attention layer but sliding_window is null%s", p->fname, (int)l,
                           !use ? " (use_sliding_window is false)" : "");
    /* Exaone4Attention: rope only where `sliding_window is None or is_sliding` */
    if (sd_has(f, SD_FAM_NOPE_GLOBAL) && c->sliding_window > 0)
        for (int32_t l = 0; l < c->n_layers; l++) c->layer_no_rope[l] = !c->layer_sliding[l];
    return SPECDEC_OK;
}

static specdec_status sd_cfg_special(const cJSON *root, const char *fname, sd_config *cfg, sd_errbuf *eb) {
    int64_t v;
    SD_TRY(sd_json_get_int(root, "bos_token_id", 0, -1, 0, cfg->vocab_size - 1, &v, fname, eb));
    cfg->bos_id = (int32_t)v;
    cfg->n_eos = 0;
    const cJSON *eos = sd_json_member(root, "eos_token_id");
    if (!eos) return SPECDEC_OK;
    if (cJSON_IsNumber(eos)) {
        SD_TRY(sd_json_get_int(root, "eos_token_id", 1, 0, 0, cfg->vocab_size - 1, &v, fname, eb));
        cfg->eos_ids[cfg->n_eos++] = (int32_t)v;
        return SPECDEC_OK;
    }
    if (!cJSON_IsArray(eos))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: key 'eos_token_id' must be an integer, a list of integers or null",
                       fname);
    int i = 0;
    for (const cJSON *e = eos->child; e; e = e->next, i++) {
        if (!sd_json_is_int(e) || e->valuedouble < 0 || e->valuedouble >= cfg->vocab_size)
            return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: key 'eos_token_id'[%d] must be an integer in [0, %d)", fname,
                           i, cfg->vocab_size);
        if (cfg->n_eos >= SPECDEC_MAX_EOS)
            return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "%s: key 'eos_token_id' lists more than %d ids", fname,
                           SPECDEC_MAX_EOS);
        cfg->eos_ids[cfg->n_eos++] = (int32_t)e->valuedouble;
    }
    return SPECDEC_OK;
}

/* ---- mixture of experts -------------------------------------------------------------- */

/* The expert count: "num_local_experts" (Mixtral; transformers 5 saves Qwen3-MoE's under it
 * too) or "num_experts" (Qwen-MoE checkpoints); DeepSeek-style configs (GLM-4.5) name it
 * "n_routed_experts", which num_local_experts maps to (Glm4MoeConfig.attribute_map). Both
 * names present must agree. */
static specdec_status sd_cfg_n_experts(const sd_cfgp *p, int32_t *out) {
    const int ds = sd_has(p->fam, SD_FAM_MOE_SIGMOID) || sd_has(p->fam, SD_FAM_MOE_GREEDY);
    /* DeepseekV2Config maps num_experts to n_routed_experts, the others num_local_experts */
    const char *local = sd_has(p->fam, SD_FAM_MOE_GREEDY) ? "num_experts" : "num_local_experts";
    const char *other = ds ? "n_routed_experts" : "num_experts";
    const int has_local = sd_json_member(p->root, local) != NULL;
    const int has_num = sd_json_member(p->root, other) != NULL;
    int32_t a = 0, b = 0;
    SD_TRY(sd_cfg_i32(p->root, local, 0, p->fam->experts, 1, SD_CFG_MAX_EXPERTS, &a, p->fname, p->eb));
    SD_TRY(sd_cfg_i32(p->root, other, 0, p->fam->experts, 1, SD_CFG_MAX_EXPERTS, &b, p->fname, p->eb));
    if (has_local && has_num && a != b)
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: %s (%d) and %s (%d) disagree", p->fname, local, (int)a, other,
                       (int)b);
    *out = has_local ? a : b;
    return SPECDEC_OK;
}

/* DeepSeek-V2's topk_method: "greedy" (every expert competes) or "group_limited_greedy" (n_group and
 * topk_group required); scoring_func, when given, must be its softmax, and norm_topk_prob false
 * (transformers' DeepseekV2TopkRouter never renormalises, as DeepSeek's code would with true). */
static specdec_status sd_cfg_moe_greedy(const sd_cfgp *p) {
    sd_config *c = p->cfg;
    const cJSON *m = sd_json_member(p->root, "topk_method");
    const cJSON *sf = sd_json_member(p->root, "scoring_func");
    if (m && !cJSON_IsString(m))
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: key 'topk_method' must be a string", p->fname);
    const char *method = m ? m->valuestring : "greedy";
    if (strcmp(method, "greedy") != 0 && strcmp(method, "group_limited_greedy") != 0)
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED,
                       "%s: topk_method '%.32s' is not supported for %s (greedy, group_limited_greedy)", p->fname,
                       method, p->fam->arch);
    if (sf && (!cJSON_IsString(sf) || strcmp(sf->valuestring, "softmax") != 0))
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: scoring_func other than softmax is not supported for %s",
                       p->fname, p->fam->arch);
    if (c->norm_topk_prob)
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED,
                       "%s: norm_topk_prob = true is not supported for %s (transformers' router ignores it)",
                       p->fname, p->fam->arch);
    if (!strcmp(method, "greedy")) {
        c->n_group = c->topk_group = 1;
    } else {
        SD_TRY(sd_cfg_i32(p->root, "n_group", 1, 0, 1, c->n_experts, &c->n_group, p->fname, p->eb));
        SD_TRY(sd_cfg_i32(p->root, "topk_group", 1, 0, 1, c->n_group, &c->topk_group, p->fname, p->eb));
    }
    c->moe_route = SD_ROUTE_SOFTMAX_GROUPED;
    return SPECDEC_OK;
}

/* DeepSeek's routing as Glm4MoeConfig / DeepseekV3Config / DeepseekV2Config read it: the first
 * first_k_dense_replace layers dense (intermediate_size), the others sparse; n_shared_experts
 * ungated shared experts of moe_intermediate_size each (one MLP n_shared_experts times as wide;
 * 0: none); the groups and scaling of the route (core/sd_weights.h, sd_moe_route). */
static specdec_status sd_cfg_moe_deepseek(const sd_cfgp *p) {
    sd_config *c = p->cfg;
    int32_t dense, n_shared;
    double scale;
    /* the class defaults: Glm4MoeConfig 1 dense layer, no groups, scaling 1; DeepseekV3Config 3, 8 groups
     * of which 4 compete, 2.5; DeepseekV2Config no dense layer, 2 shared experts, greedy, scaling 1 */
    const int v3 = p->fam->id == SD_ARCH_DEEPSEEK_V3, v2 = sd_has(p->fam, SD_FAM_MOE_GREEDY);
    SD_TRY(sd_cfg_i32(p->root, "moe_intermediate_size", 0, p->fam->moe_intermediate, 1, SD_CFG_MAX_INTERMEDIATE,
                   &c->moe_intermediate, p->fname, p->eb));
    SD_TRY(sd_cfg_i32(p->root, "first_k_dense_replace", 0, v3 ? 3 : v2 ? 0 : 1, 0, SD_CFG_MAX_LAYERS, &dense, p->fname,
                   p->eb));
    SD_TRY(sd_cfg_i32(p->root, "n_shared_experts", 0, v2 ? 2 : 1, 0, SD_CFG_MAX_INTERMEDIATE, &n_shared, p->fname,
                   p->eb));
    SD_TRY(sd_json_get_bool(p->root, "norm_topk_prob", 0, !v2, &c->norm_topk_prob, p->fname, p->eb));
    SD_TRY(sd_json_get_num(p->root, "routed_scaling_factor", 0, v3 ? 2.5 : 1.0, 1e-30, 1e30, &scale, p->fname, p->eb));
    if ((int64_t)n_shared * c->moe_intermediate > SD_CFG_MAX_INTERMEDIATE)
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: n_shared_experts (%d) x moe_intermediate_size (%d) exceeds %d",
                       p->fname, (int)n_shared, (int)c->moe_intermediate, SD_CFG_MAX_INTERMEDIATE);
    const int32_t min_group = v2 ? 1 : 2; /* a group's score: its maximum (V2), its top-2 sum (V3) */
    if (v2) {
        SD_TRY(sd_cfg_moe_greedy(p));
    } else {
        SD_TRY(sd_cfg_i32(p->root, "n_group", 0, v3 ? 8 : 1, 1, c->n_experts, &c->n_group, p->fname, p->eb));
        SD_TRY(sd_cfg_i32(p->root, "topk_group", 0, v3 ? 4 : 1, 1, c->n_group, &c->topk_group, p->fname, p->eb));
        c->moe_route = SD_ROUTE_SIGMOID_GROUPED;
    }
    if (c->topk_group > c->n_group) /* (the class default 4 with a smaller n_group given: transformers' topk fails) */
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: topk_group (%d) exceeds n_group (%d)", p->fname,
                       (int)c->topk_group, (int)c->n_group);
    if (c->n_experts % c->n_group || c->n_experts / c->n_group < min_group)
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT,
                       "%s: n_group (%d) must divide the %d routed experts into groups of at least %d%s", p->fname,
                       (int)c->n_group, (int)c->n_experts, (int)min_group,
                       v2 ? "" : " (a group's score is its top-2 sum)");
    if ((int64_t)c->topk_group * (c->n_experts / c->n_group) < c->n_experts_used)
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT,
                       "%s: num_experts_per_tok (%d) exceeds the %d experts of the topk_group (%d) groups that compete",
                       p->fname, (int)c->n_experts_used, (int)(c->topk_group * (c->n_experts / c->n_group)),
                       (int)c->topk_group);
    c->routed_scaling = (float)scale;
    c->shared_expert_intermediate = n_shared * c->moe_intermediate;
    c->shared_ungated = n_shared > 0;
    for (int32_t l = 0; l < c->n_layers; l++) c->layer_moe[l] = l >= dense;
    /* the MTP layers follow the decoder layers (index n_layers + i): sparse past the dense ones.
     * DeepSeek-V2 has none (its config has no such key) */
    if (!v2) SD_TRY(sd_cfg_i32(p->root, "num_nextn_predict_layers", 0, 0, 0, 16, &c->mtp_layers, p->fname, p->eb));
    c->mtp_moe = c->n_layers >= dense;
    return SPECDEC_OK;
}

/* Which layers are MoE and their sizes (transformers' Qwen3MoeDecoderLayer: layer l is sparse
 * unless listed in mlp_only_layers, when num_experts > 0 and (l + 1) % decoder_sparse_step == 0). */
static specdec_status sd_cfg_moe(const sd_cfgp *p) {
    const sd_family *f = p->fam;
    sd_config *c = p->cfg;
    if (!sd_has(f, SD_FAM_MOE)) return SPECDEC_OK;
    SD_TRY(sd_cfg_n_experts(p, &c->n_experts));
    /* DeepseekV2Config has no default (None, which its router cannot run): required there */
    SD_TRY(sd_cfg_i32(p->root, "num_experts_per_tok", sd_has(f, SD_FAM_MOE_GREEDY), f->experts_used, 1, c->n_experts,
                   &c->n_experts_used, p->fname, p->eb));
    c->moe_intermediate = c->intermediate_size;
    c->norm_topk_prob = 1;
    if (sd_has(f, SD_FAM_MOE_SIGMOID) || sd_has(f, SD_FAM_MOE_GREEDY)) return sd_cfg_moe_deepseek(p);
    if (sd_has(f, SD_FAM_TOPK_NORM_KEY))
        SD_TRY(sd_json_get_bool(p->root, "norm_topk_prob", 0, 0, &c->norm_topk_prob, p->fname, p->eb));
    int32_t step = 1;
    if (sd_has(f, SD_FAM_MOE_SPARSE_STEP)) {
        SD_TRY(sd_cfg_i32(p->root, "moe_intermediate_size", 0, f->moe_intermediate, 1, SD_CFG_MAX_INTERMEDIATE,
                       &c->moe_intermediate, p->fname, p->eb));
        SD_TRY(sd_json_get_bool(p->root, "norm_topk_prob", 0, 0, &c->norm_topk_prob, p->fname, p->eb));
        SD_TRY(sd_cfg_i32(p->root, "decoder_sparse_step", 0, 1, 1, SD_CFG_MAX_LAYERS, &step, p->fname, p->eb));
    }
    if (sd_has(f, SD_FAM_SHARED_EXPERT))
        SD_TRY(sd_cfg_i32(p->root, "shared_expert_intermediate_size", 0, f->shared_expert, 1, SD_CFG_MAX_INTERMEDIATE,
                       &c->shared_expert_intermediate, p->fname, p->eb));
    if (sd_has(f, SD_FAM_MOE_FUSED)) { /* GptOssExperts: (clamp(up) + 1) * glu(min(gate, limit)) */
        double alpha, limit;
        SD_TRY(sd_json_get_num(p->root, "swiglu_alpha", 0, 1.702, -1e6, 1e6, &alpha, p->fname, p->eb));
        SD_TRY(sd_json_get_num(p->root, "swiglu_limit", 0, 7.0, 1e-30, 1e30, &limit, p->fname, p->eb));
        c->moe_fused = 1;
        c->glu_alpha = (float)alpha;
        c->glu_limit = (float)limit;
    }
    for (int32_t l = 0; l < c->n_layers; l++) c->layer_moe[l] = (l + 1) % step == 0;
    const cJSON *only = sd_json_member(p->root, "mlp_only_layers");
    if (!only || cJSON_IsNull(only) || !sd_has(f, SD_FAM_MOE_SPARSE_STEP)) return SPECDEC_OK;
    if (!cJSON_IsArray(only))
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: key 'mlp_only_layers' must be a list of layer indices", p->fname);
    int i = 0;
    for (const cJSON *e = only->child; e; e = e->next, i++) {
        if (!sd_json_is_int(e) || e->valuedouble < 0 || e->valuedouble >= c->n_layers)
            return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: key 'mlp_only_layers'[%d] must be a layer index in [0, %d)",
                           p->fname, i, (int)c->n_layers);
        c->layer_moe[(int32_t)e->valuedouble] = 0;
    }
    return SPECDEC_OK;
}

/* quantization_config "fp8" (transformers' FineGrainedFP8Config, as DeepSeek-V3, Kimi K2, Qwen3-*-FP8
 * and GLM-4.5-FP8 ship it): float8_e4m3fn weights with a weight_scale_inv per weight_block_size block
 * (default [128, 128]), any family; loaded as SD_FP8 and dequantized by the CPU backend's linear
 * layers (weights only: activations stay fp32, where vLLM quantizes them too). */
static specdec_status sd_cfg_quant_fp8(const sd_cfgp *p, const cJSON *q) {
    const cJSON *fmt = sd_json_member(q, "fmt");
    if (fmt && !(cJSON_IsString(fmt) && !strcmp(fmt->valuestring, "e4m3")))
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED,
                       "%s: quantization_config.fmt must be \"e4m3\" (float8_e4m3fn weights); others are not supported",
                       p->fname);
    const cJSON *b = cJSON_GetObjectItemCaseSensitive(q, "weight_block_size"); /* null is not "absent" here */
    int32_t bm = 128, bn = 128;
    if (b && !cJSON_IsNull(b)) {
        const cJSON *b0 = cJSON_IsArray(b) && cJSON_GetArraySize(b) == 2 ? cJSON_GetArrayItem(b, 0) : NULL;
        const cJSON *b1 = b0 ? cJSON_GetArrayItem(b, 1) : NULL;
        if (!b0 || !sd_json_is_int(b0) || !sd_json_is_int(b1) || b0->valuedouble < 1 || b0->valuedouble > 65536 ||
            b1->valuedouble < 1 || b1->valuedouble > 65536)
            return sd_fail(p->eb, SPECDEC_ERR_FORMAT,
                           "%s: quantization_config.weight_block_size must be [rows, cols], integers in 1..65536",
                           p->fname);
        bm = (int32_t)b0->valuedouble, bn = (int32_t)b1->valuedouble;
    } else if (b) { /* null: per-tensor scales (one block) are not what the checkpoints here ship */
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED,
                       "%s: quantization_config fp8 without weight_block_size (per-tensor scales) is not supported",
                       p->fname);
    }
    p->cfg->fp8_fmt = SD_FP8_BLOCK_INV;
    p->cfg->fp8_block[0] = bm;
    p->cfg->fp8_block[1] = bn;
    return SPECDEC_OK;
}

/* quantization_config "gptq" / "awq": 4-bit integer weights with a scale and zero point per group of
 * group_size input columns (GPTQ: AutoGPTQ / GPTQModel checkpoints, v1 or checkpoint_format gptq_v2,
 * act-order included; AWQ: AutoAWQ's GEMM layout), any family; the projections stored as qweight /
 * qzeros / scales load as SD_INT4 (models/sd_int4.h), the rest as they are. */
static specdec_status sd_cfg_quant_int4(const sd_cfgp *p, const cJSON *q, int awq) {
    const char *what = awq ? "awq" : "gptq";
    const cJSON *bits = sd_json_member(q, "bits"), *gs = sd_json_member(q, "group_size");
    if (!sd_json_is_int(bits) || !(bits->valuedouble == 4 || (!awq && bits->valuedouble == 8)))
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: quantization_config.bits must be %s for %s (others are not "
                       "supported)", p->fname, awq ? "4" : "4 or 8", what);
    p->cfg->int4_bits = (int32_t)bits->valuedouble;
    if (!sd_json_is_int(gs) || !(gs->valuedouble == -1 || (gs->valuedouble >= 1 && gs->valuedouble <= 65536)) ||
        (awq && gs->valuedouble == -1))
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: quantization_config.group_size must be an integer in 1..65536%s",
                       p->fname, awq ? "" : " or -1");
    p->cfg->int4_group = gs->valuedouble == -1 ? 0 : (int32_t)gs->valuedouble;
    if (awq) {
        const cJSON *v = sd_json_member(q, "version"), *zp = sd_json_member(q, "zero_point");
        if (v && !(cJSON_IsString(v) && !strcasecmp(v->valuestring, "gemm")))
            return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: quantization_config.version must be \"gemm\" for awq "
                           "(the GEMV / Marlin / exllama layouts are not supported)", p->fname);
        if (zp && !cJSON_IsTrue(zp))
            return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: quantization_config.zero_point must be true (AWQ without zero "
                           "points is not supported)",
                           p->fname);
        p->cfg->int4_fmt = SD_INT4_AWQ;
        return SPECDEC_OK;
    }
    const cJSON *fmt = sd_json_member(q, "checkpoint_format"), *lm = sd_json_member(q, "lm_head");
    if (fmt && !(cJSON_IsString(fmt) && (!strcmp(fmt->valuestring, "gptq") || !strcmp(fmt->valuestring, "gptq_v2"))))
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: quantization_config.checkpoint_format must be \"gptq\" or "
                       "\"gptq_v2\" (Marlin / BitBLAS repacks are not supported)", p->fname);
    if (lm && !cJSON_IsFalse(lm))
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: quantization_config.lm_head true (a quantized LM head) is "
                       "not supported", p->fname);
    p->cfg->int4_fmt = fmt && !strcmp(fmt->valuestring, "gptq_v2") ? SD_INT4_GPTQ_V2 : SD_INT4_GPTQ;
    return SPECDEC_OK;
}

/* One config group's "weights" of a compressed-tensors checkpoint: 4- or 8-bit ints (*nbits), static, per
 * group or channel; the group size in *group (0: the whole input, "channel"). */
static specdec_status sd_cfg_ct_weights(const sd_cfgp *p, const cJSON *w, const char *gname, int32_t *group,
                                        int32_t *nbits) {
    const cJSON *bits = sd_json_member(w, "num_bits"), *type = sd_json_member(w, "type");
    const cJSON *strat = sd_json_member(w, "strategy"), *gs = sd_json_member(w, "group_size");
    const cJSON *dyn = sd_json_member(w, "dynamic");
    if (!sd_json_is_int(bits) || (bits->valuedouble != 4 && bits->valuedouble != 8) || !cJSON_IsString(type) ||
        strcmp(type->valuestring, "int"))
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: quantization_config.config_groups.%.32s.weights: only 4- or "
                       "8-bit \"int\" weights are supported", p->fname, gname);
    *nbits = (int32_t)bits->valuedouble;
    if (dyn && !cJSON_IsFalse(dyn))
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: quantization_config.config_groups.%.32s.weights.dynamic "
                       "must be false", p->fname, gname);
    if (cJSON_IsString(strat) && !strcmp(strat->valuestring, "channel")) {
        *group = 0;
        return SPECDEC_OK;
    }
    if (!cJSON_IsString(strat) || strcmp(strat->valuestring, "group"))
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: quantization_config.config_groups.%.32s.weights.strategy must "
                       "be \"group\" or \"channel\"", p->fname, gname);
    if (!sd_json_is_int(gs) || gs->valuedouble < 1 || gs->valuedouble > 65536)
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: quantization_config.config_groups.%.32s.weights.group_size must be "
                       "an integer in 1..65536", p->fname, gname);
    *group = (int32_t)gs->valuedouble;
    return SPECDEC_OK;
}

/* One config group's "weights" of a compressed-tensors FP8 checkpoint ("float-quantized"): 8-bit floats,
 * static, symmetric, per channel, tensor or block; k = {sd_fp8_fmt, bm, bn}. */
static specdec_status sd_cfg_ct_fp8_weights(const sd_cfgp *p, const cJSON *w, const char *gname, int32_t k[3]) {
    const cJSON *bits = sd_json_member(w, "num_bits"), *type = sd_json_member(w, "type");
    const cJSON *strat = sd_json_member(w, "strategy"), *dyn = sd_json_member(w, "dynamic");
    const cJSON *sym = sd_json_member(w, "symmetric"), *bs = sd_json_member(w, "block_structure");
    if (!sd_json_is_int(bits) || bits->valuedouble != 8 || !cJSON_IsString(type) || strcmp(type->valuestring, "float"))
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: quantization_config.config_groups.%.32s.weights: only 8-bit "
                       "\"float\" weights are supported in float-quantized", p->fname, gname);
    if ((dyn && !cJSON_IsFalse(dyn)) || (sym && !cJSON_IsTrue(sym)))
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: quantization_config.config_groups.%.32s.weights must be "
                       "static (dynamic false) and symmetric", p->fname, gname);
    const char *st = cJSON_IsString(strat) ? strat->valuestring : "";
    k[1] = k[2] = 0;
    if (!strcmp(st, "channel")) k[0] = SD_FP8_CT_CHANNEL;
    else if (!strcmp(st, "tensor")) k[0] = SD_FP8_CT_TENSOR;
    else if (!strcmp(st, "block")) k[0] = SD_FP8_CT_BLOCK;
    else
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: quantization_config.config_groups.%.32s.weights.strategy must "
                       "be \"channel\", \"tensor\" or \"block\"", p->fname, gname);
    if (k[0] != SD_FP8_CT_BLOCK) return SPECDEC_OK;
    const cJSON *b0 = cJSON_IsArray(bs) && cJSON_GetArraySize(bs) == 2 ? cJSON_GetArrayItem(bs, 0) : NULL;
    const cJSON *b1 = b0 ? cJSON_GetArrayItem(bs, 1) : NULL;
    if (!b0 || !sd_json_is_int(b0) || !sd_json_is_int(b1) || b0->valuedouble < 1 || b0->valuedouble > 65536 ||
        b1->valuedouble < 1 || b1->valuedouble > 65536)
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: quantization_config.config_groups.%.32s.weights.block_structure "
                       "must be [rows, cols], integers in 1..65536", p->fname, gname);
    k[1] = (int32_t)b0->valuedouble, k[2] = (int32_t)b1->valuedouble;
    return SPECDEC_OK;
}

/* A config group of a compressed-tensors checkpoint in format `fmt`: weights an object, no output
 * quantization, its own format (if any) the checkpoint's; activations unquantized for pack-quantized,
 * and for float-quantized unquantized or 8-bit floats (FP8-dynamic / static: the weight-only
 * dequantisation leaves them in fp32, as for quantization_config "fp8"). */
static specdec_status sd_cfg_ct_group(const sd_cfgp *p, const cJSON *g, const char *fmt, int fp8) {
    const cJSON *w = sd_json_member(g, "weights"), *in = sd_json_member(g, "input_activations");
    const cJSON *out = sd_json_member(g, "output_activations"), *gf = sd_json_member(g, "format");
    if (!cJSON_IsObject(w))
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: quantization_config.config_groups.%.32s.weights must be an object",
                       p->fname, g->string);
    const cJSON *ib = in ? sd_json_member(in, "num_bits") : NULL, *it = in ? sd_json_member(in, "type") : NULL;
    const int in_fp8 = ib && it && sd_json_is_int(ib) && ib->valuedouble == 8 && cJSON_IsString(it) &&
                       !strcmp(it->valuestring, "float");
    if ((in && !(fp8 && in_fp8)) || out)
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: quantization_config.config_groups.%.32s quantizes "
                       "activations (%s), which is not supported", p->fname, g->string,
                       out ? "output_activations" : fp8 ? "other than as 8-bit floats" : "W4A8 / W8A8");
    if (gf && !(cJSON_IsString(gf) && !strcmp(gf->valuestring, fmt)))
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: quantization_config.config_groups.%.32s.format must be "
                       "\"%s\"", p->fname, g->string, fmt);
    return SPECDEC_OK;
}

/* compressed-tensors' FP8 ("float-quantized"): every group the same scheme (sd_cfg_ct_fp8_weights). */
static specdec_status sd_cfg_quant_ct_fp8(const sd_cfgp *p, const cJSON *groups) {
    int32_t k[3] = {0, 0, 0};
    for (const cJSON *g = groups->child; g; g = g->next) {
        int32_t kg[3];
        SD_TRY(sd_cfg_ct_group(p, g, "float-quantized", 1));
        SD_TRY(sd_cfg_ct_fp8_weights(p, sd_json_member(g, "weights"), g->string, kg));
        if (k[0] && memcmp(k, kg, sizeof k))
            return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: quantization_config.config_groups: groups of different "
                           "schemes are not supported", p->fname);
        memcpy(k, kg, sizeof k);
    }
    p->cfg->fp8_fmt = k[0];
    p->cfg->fp8_block[0] = k[1];
    p->cfg->fp8_block[1] = k[2];
    return SPECDEC_OK;
}

/* quantization_config "compressed-tensors" (llm-compressor's checkpoints, RedHatAI's / neuralmagic's
 * models), format "pack-quantized" (W4A16: every config group's weights 4-bit ints of one group size,
 * no activation quantization; the projections stored as weight_packed / weight_scale load as SD_INT4,
 * models/sd_int4.h) or "float-quantized" (FP8 weights per channel, tensor or block: SD_FP8,
 * sd_cfg_quant_ct_fp8); no output or KV-cache quantization, no sparsity or transforms. */
static specdec_status sd_cfg_quant_ct(const sd_cfgp *p, const cJSON *q) {
    const cJSON *fmt = sd_json_member(q, "format"), *groups = sd_json_member(q, "config_groups");
    const int fp8 = cJSON_IsString(fmt) && !strcmp(fmt->valuestring, "float-quantized");
    if (!fp8 && (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "pack-quantized")))
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: quantization_config.format must be \"pack-quantized\" or "
                       "\"float-quantized\" for compressed-tensors (4-bit W4A16, FP8; INT8 and NVFP4 formats are not "
                       "supported)", p->fname);
    static const char *const off[] = {"kv_cache_scheme", "sparsity_config", "transform_config"};
    for (int i = 0; i < 3; i++) {
        const cJSON *v = sd_json_member(q, off[i]);
        if (v && !(cJSON_IsObject(v) && !v->child))
            return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: quantization_config.%s is not supported", p->fname,
                           off[i]);
    }
    if (!cJSON_IsObject(groups) || !groups->child)
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: quantization_config.config_groups must be a non-empty object",
                       p->fname);
    if (fp8) return sd_cfg_quant_ct_fp8(p, groups);
    int32_t group = -1, nbits = 0, n_sym = 0, n_asym = 0;
    for (const cJSON *g = groups->child; g; g = g->next) {
        SD_TRY(sd_cfg_ct_group(p, g, "pack-quantized", 0));
        const cJSON *w = sd_json_member(g, "weights");
        int32_t gs = 0, nb = 0;
        SD_TRY(sd_cfg_ct_weights(p, w, g->string, &gs, &nb));
        if ((group >= 0 && gs != group) || (nbits && nb != nbits))
            return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED, "%s: quantization_config.config_groups: groups of different "
                           "sizes or bit widths are not supported", p->fname);
        group = gs, nbits = nb;
        const cJSON *sym = sd_json_member(w, "symmetric"); /* compressed-tensors' default: true */
        if (sym && !cJSON_IsBool(sym))
            return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: quantization_config.config_groups.%.32s.weights.symmetric "
                           "must be true or false", p->fname, g->string);
        if (sym && cJSON_IsFalse(sym)) n_asym++;
        else n_sym++;
    }
    p->cfg->int4_zero_points = n_sym && n_asym ? -1 : n_asym ? 1 : 0;
    p->cfg->int4_fmt = SD_INT4_CT;
    p->cfg->int4_bits = nbits;
    p->cfg->int4_group = group;
    return SPECDEC_OK;
}

/* quantization_config: MXFP4 experts of a fused-experts family (the published gpt-oss checkpoints),
 * fine-grained FP8 weights (sd_cfg_quant_fp8) or GPTQ / AWQ 4-bit weights (sd_cfg_quant_int4); any
 * other method is refused rather than misread. */
static specdec_status sd_cfg_quant(const sd_cfgp *p) {
    const cJSON *q = sd_json_member(p->root, "quantization_config");
    if (!q) return SPECDEC_OK;
    if (!cJSON_IsObject(q))
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: key 'quantization_config' must be an object or null", p->fname);
    const cJSON *m = sd_json_member(q, "quant_method");
    if (!cJSON_IsString(m))
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: key 'quantization_config.quant_method' must be a string",
                       p->fname);
    if (!strcmp(m->valuestring, "fp8")) return sd_cfg_quant_fp8(p, q);
    if (!strcmp(m->valuestring, "gptq") || !strcmp(m->valuestring, "awq"))
        return sd_cfg_quant_int4(p, q, m->valuestring[0] == 'a');
    if (!strcmp(m->valuestring, "compressed-tensors")) return sd_cfg_quant_ct(p, q);
    if (strcmp(m->valuestring, "mxfp4") != 0 || !sd_has(p->fam, SD_FAM_MOE_FUSED))
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED,
                       "%s: quantization_config.quant_method '%.32s' is not supported for %s (only 'fp8' block-scaled "
                       "weights, 4-bit 'gptq' / 'awq' / 'compressed-tensors', and 'mxfp4' experts of GptOssForCausalLM; or load "
                       "an unquantized checkpoint)",
                       p->fname, m->valuestring, p->fam->arch);
    p->cfg->experts_mxfp4 = 1;
    return SPECDEC_OK;
}

/* ---- DeepSeek's multi-head latent attention ------------------------------------------- */

/* Its widths (DeepseekV3Config: q_lora_rank 1536, null = q_proj; kv_lora_rank 512;
 * qk_rope_head_dim 64; qk_nope_head_dim 128; v_head_dim 128). transformers sets head_dim =
 * qk_rope_head_dim for its rope, whatever config.json says: so does this, until
 * sd_cfg_mla_layout widens the head to the runners' rope + nope (core/sd_weights.h). */
static specdec_status sd_cfg_mla_widths(const sd_cfgp *p) {
    sd_config *c = p->cfg;
    if (!sd_has(p->fam, SD_FAM_MLA)) return SPECDEC_OK;
    int32_t rope;
    const cJSON *ql = sd_raw(p->root, "q_lora_rank");
    if (ql && cJSON_IsNull(ql)) c->q_lora_rank = 0;
    else SD_TRY(sd_cfg_i32(p->root, "q_lora_rank", 0, 1536, 1, SD_CFG_MAX_HIDDEN, &c->q_lora_rank, p->fname, p->eb));
    SD_TRY(sd_cfg_i32(p->root, "kv_lora_rank", 0, 512, 1, SD_CFG_MAX_HIDDEN, &c->kv_lora_rank, p->fname, p->eb));
    SD_TRY(sd_cfg_i32(p->root, "qk_rope_head_dim", 0, 64, 2, SD_CFG_MAX_HEAD_DIM, &rope, p->fname, p->eb));
    SD_TRY(sd_cfg_i32(p->root, "qk_nope_head_dim", 0, 128, 1, SD_CFG_MAX_HEAD_DIM, &c->qk_nope_dim, p->fname, p->eb));
    SD_TRY(sd_cfg_i32(p->root, "v_head_dim", 0, 128, 1, SD_CFG_MAX_HEAD_DIM, &c->v_head_dim, p->fname, p->eb));
    if (rope % 2)
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: qk_rope_head_dim (%d) must be even (rotary pairs)", p->fname,
                       (int)rope);
    if (rope + c->qk_nope_dim > SD_CFG_MAX_HEAD_DIM)
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT, "%s: qk_rope_head_dim + qk_nope_head_dim = %d exceeds %d", p->fname,
                       (int)(rope + c->qk_nope_dim), SD_CFG_MAX_HEAD_DIM);
    if (c->v_head_dim > rope + c->qk_nope_dim)
        return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED,
                       "%s: v_head_dim (%d) wider than the query/key head (%d) is not supported", p->fname,
                       (int)c->v_head_dim, (int)(rope + c->qk_nope_dim));
    if (c->n_kv_heads != c->n_heads) /* every head has its own key and value (DeepseekV3Attention) */
        return sd_fail(p->eb, SPECDEC_ERR_FORMAT,
                       "%s: num_key_value_heads (%d) must equal num_attention_heads (%d) for latent attention",
                       p->fname, (int)c->n_kv_heads, (int)c->n_heads);
    /* keys of DeepSeek's own modeling code that transformers' DeepseekV3 does not read: accepted
     * only with the values it implies (sigmoid, noaux_tc, every layer past the dense ones sparse) */
    static const char *const fixed[3][2] = {{"moe_layer_freq", NULL}, {"scoring_func", "sigmoid"},
                                            {"topk_method", "noaux_tc"}};
    const int n_fixed = sd_has(p->fam, SD_FAM_MOE_GREEDY) ? 1 : 3; /* V2's own: sd_cfg_moe_greedy */
    for (int i = 0; i < n_fixed; i++) {
        const cJSON *v = sd_json_member(p->root, fixed[i][0]);
        if (!v) continue;
        const int same = fixed[i][1] ? cJSON_IsString(v) && !strcmp(v->valuestring, fixed[i][1])
                                     : sd_json_is_int(v) && v->valuedouble == 1;
        if (!same)
            return sd_fail(p->eb, SPECDEC_ERR_UNSUPPORTED,
                           "%s: %s other than %s is not supported (%s routes and places its experts as "
                           "transformers does)",
                           p->fname, fixed[i][0], fixed[i][1] ? fixed[i][1] : "1", p->fam->arch);
    }
    c->mla = 1;
    c->head_dim = rope;
    return SPECDEC_OK;
}

/* The runners' head (rope first, then nope), rope_interleave (default true; DeepSeek-V2 always
 * rotates interleaved pairs, as complex numbers), and the softmax
 * scale: qk_head_dim^-1/2, times mscale^2 when a non-default rope has mscale_all_dim
 * (transformers' yarn_apply_mscale: mscale = 0.1 mscale_all_dim ln(factor) + 1 for factor > 1). */
static specdec_status sd_cfg_mla_layout(const sd_cfgp *p) {
    sd_config *c = p->cfg;
    if (!c->mla) return SPECDEC_OK;
    if (p->fam->id == SD_ARCH_DEEPSEEK_V2) c->rope_interleaved = 1; /* its complex rotation: pairs, no key */
    else SD_TRY(sd_json_get_bool(p->root, "rope_interleave", 0, 1, &c->rope_interleaved, p->fname, p->eb));
    const int32_t rope = c->head_dim;
    c->rope_dim = rope;
    c->head_dim = rope + c->qk_nope_dim;
    const cJSON *d = sd_json_member(p->root, "rope_scaling");
    if (!d) d = sd_json_member(p->root, "rope_parameters");
    double msa = 0.0;
    if (c->rope_type != SD_ROPE_DEFAULT && cJSON_IsObject(d))
        SD_TRY(sd_json_get_num(d, "mscale_all_dim", 0, 0.0, -1e6, 1e6, &msa, p->fname, p->eb));
    if (msa != 0.0) {
        const double m = sd_yarn_mscale((double)c->rope_factor, msa);
        c->attn_scale = (float)(m * m / sqrt((double)c->head_dim));
    }
    return SPECDEC_OK;
}

static specdec_status sd_cfg_fill(const cJSON *root, const char *fname, sd_config *cfg, sd_errbuf *eb) {
    if (!cJSON_IsObject(root)) return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: top level is not a JSON object", fname);
    SD_TRY(sd_json_check_unique(root, "the top-level object", fname, eb));
    sd_cfgp p = {root, fname, NULL, cfg, eb};
    SD_TRY(sd_cfg_family(root, fname, &p.fam, cfg, eb));
    SD_TRY(sd_cfg_sizes(&p));
    SD_TRY(sd_cfg_mla_widths(&p));
    SD_TRY(sd_cfg_rope(&p));
    SD_TRY(sd_json_get_bool(root, "tie_word_embeddings", 0, p.fam->tie, &cfg->tie_word_embeddings, fname, eb));
    SD_TRY(sd_cfg_layers(&p));
    SD_TRY(sd_cfg_mla_layout(&p)); /* after the layers' rope_interleaved */
    SD_TRY(sd_cfg_moe(&p));
    SD_TRY(sd_cfg_quant(&p));
    SD_TRY(sd_cfg_windows(&p));
    return sd_cfg_special(root, fname, cfg, eb);
}

/* Vision-language checkpoints whose language model specdec runs alone (text in, text out): the wrapper
 * class, the model_type its text_config must have, the text class that model is, and whether the wrapper
 * drops text_config's final_logit_softcapping (Gemma3ForConditionalGeneration never applies it). */
static const struct {
    const char *wrapper, *text_type, *text_arch;
    int no_final_softcap;
    int mrope; /* Qwen-VL: the multimodal rope, which on text alone (t = h = w = the position) is the plain rope;
                * the Hub's configs are flat (no text_config: the top level is the language model's) */
} sd_vlm_wrappers[] = {
    {"Gemma3ForConditionalGeneration", "gemma3_text", "Gemma3ForCausalLM", 1, 0},
    {"Mistral3ForConditionalGeneration", "mistral", "MistralForCausalLM", 0, 0},      /* Mistral Small 3.1 / 3.2 */
    {"Mistral3ForConditionalGeneration", "ministral3", "Ministral3ForCausalLM", 0, 0}, /* Ministral 3, Magistral 2512 */
    {"LlavaForConditionalGeneration", "llama", "LlamaForCausalLM", 0, 0},             /* LLaVA 1.5 */
    {"LlavaForConditionalGeneration", "mistral", "MistralForCausalLM", 0, 0},         /* Pixtral 12B */
    {"InternVLForConditionalGeneration", "qwen3", "Qwen3ForCausalLM", 0, 0},          /* InternVL 3.5 (-hf) */
    {"InternVLForConditionalGeneration", "qwen2", "Qwen2ForCausalLM", 0, 0},          /* InternVL 3 (-hf) */
    {"Qwen2VLForConditionalGeneration", "qwen2_vl_text", "Qwen2ForCausalLM", 0, 1},      /* Qwen2-VL */
    {"Qwen2_5_VLForConditionalGeneration", "qwen2_5_vl_text", "Qwen2ForCausalLM", 0, 1}, /* Qwen2.5-VL */
    {"Qwen3VLForConditionalGeneration", "qwen3_vl_text", "Qwen3ForCausalLM", 0, 1},      /* Qwen3-VL (dense) */
};

/* Qwen-VL's rope dictionary as the plain rope it is on text: rope_type "mrope" -> "default", its sections gone. */
static void sd_vlm_plain_rope(cJSON *t) {
    static const char *const keys[2] = {"rope_scaling", "rope_parameters"};
    for (int i = 0; i < 2; i++) {
        cJSON *r = cJSON_GetObjectItemCaseSensitive(t, keys[i]);
        if (!cJSON_IsObject(r)) continue;
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(r, "rope_type");
        if (!ty) ty = cJSON_GetObjectItemCaseSensitive(r, "type");
        if (cJSON_IsString(ty) && !strcmp(ty->valuestring, "mrope")) {
            cJSON_DeleteItemFromObjectCaseSensitive(r, "type");
            cJSON_DeleteItemFromObjectCaseSensitive(r, "rope_type");
            cJSON_AddStringToObject(r, "rope_type", "default");
        }
        cJSON_DeleteItemFromObjectCaseSensitive(r, "mrope_section");
        cJSON_DeleteItemFromObjectCaseSensitive(r, "mrope_interleaved");
    }
}

/* The text configuration of wrapper w (sd_vlm_wrappers) from root and its text_config tc -> *out. */
static specdec_status sd_vlm_text_of(const cJSON *root, const cJSON *tc, size_t w, const char *fname, cJSON **out,
                                     sd_errbuf *eb) {
    const cJSON *mt = sd_json_member(tc, "model_type");
    const size_t nw = sizeof sd_vlm_wrappers / sizeof sd_vlm_wrappers[0];
    char known[160] = "";
    for (size_t k = w; k < nw && !strcmp(sd_vlm_wrappers[k].wrapper, sd_vlm_wrappers[w].wrapper); k++) {
        if (cJSON_IsString(mt) && !strcmp(mt->valuestring, sd_vlm_wrappers[k].text_type)) {
            w = k;
            break;
        }
        const size_t kl = strlen(known);
        snprintf(known + kl, sizeof known - kl, "%s'%s'", kl ? " or " : "", sd_vlm_wrappers[k].text_type);
    }
    if (!cJSON_IsString(mt) || strcmp(mt->valuestring, sd_vlm_wrappers[w].text_type))
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "%s: %s whose text_config.model_type is '%.64s' is not supported "
                       "(specdec runs its language model when it is %s)", fname, sd_vlm_wrappers[w].wrapper,
                       cJSON_IsString(mt) ? mt->valuestring : "(missing)", known);
    if (sd_json_member(root, "quantization_config") || sd_json_member(tc, "quantization_config"))
        return sd_fail(eb, SPECDEC_ERR_UNSUPPORTED, "%s: a quantized %s is not supported (its language model loads "
                       "from the unquantized checkpoint)", fname, sd_vlm_wrappers[w].wrapper);
    cJSON *t = cJSON_Duplicate(tc, 1), *arch = cJSON_CreateArray();
    if (!t || !arch || !cJSON_AddItemToArray(arch, cJSON_CreateString(sd_vlm_wrappers[w].text_arch))) {
        cJSON_Delete(t), cJSON_Delete(arch);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", fname);
    }
    cJSON_DeleteItemFromObjectCaseSensitive(t, "architectures");
    cJSON_AddItemToObject(t, "architectures", arch);
    const cJSON *tie = sd_raw(root, "tie_word_embeddings"); /* absent: the wrapper class's default */
    cJSON_DeleteItemFromObjectCaseSensitive(t, "tie_word_embeddings");
    cJSON_AddItemToObject(t, "tie_word_embeddings",
                          tie ? cJSON_Duplicate(tie, 1) : cJSON_CreateBool(!sd_vlm_wrappers[w].mrope));
    static const char *const ids[] = {"bos_token_id", "eos_token_id", "pad_token_id"};
    for (size_t i = 0; i < sizeof ids / sizeof ids[0]; i++)
        if (!sd_raw(t, ids[i]) && sd_raw(root, ids[i]))
            cJSON_AddItemToObject(t, ids[i], cJSON_Duplicate(sd_raw(root, ids[i]), 1));
    if (sd_vlm_wrappers[w].no_final_softcap) {
        cJSON_DeleteItemFromObjectCaseSensitive(t, "final_logit_softcapping");
        cJSON_AddNullToObject(t, "final_logit_softcapping");
    }
    if (sd_vlm_wrappers[w].mrope) sd_vlm_plain_rope(t);
    *out = t;
    return SPECDEC_OK;
}

/* config.json of a vision-language checkpoint (architectures[0] one of sd_vlm_wrappers) -> *out, the
 * configuration of its language model as transformers' multimodal class builds it: text_config (Qwen-VL's flat
 * configs: the top level), its class from its model_type, tie_word_embeddings from the top level (the wrapper's,
 * default true but for Qwen-VL's, is what transformers ties by), the special ids from the top level when
 * text_config has none. *out NULL: not such a checkpoint. */
static specdec_status sd_cfg_vlm_text(const cJSON *root, const char *fname, cJSON **out, sd_errbuf *eb) {
    *out = NULL;
    const cJSON *archs = sd_json_member(root, "architectures");
    if (!cJSON_IsArray(archs) || !cJSON_IsString(archs->child)) return SPECDEC_OK;
    size_t w = 0, nw = sizeof sd_vlm_wrappers / sizeof sd_vlm_wrappers[0];
    while (w < nw && strcmp(archs->child->valuestring, sd_vlm_wrappers[w].wrapper)) w++;
    if (w == nw) return SPECDEC_OK;
    SD_TRY(sd_json_check_unique(root, "the top-level object", fname, eb));
    const cJSON *tc = sd_json_member(root, "text_config");
    if (!tc && sd_vlm_wrappers[w].mrope) { /* a flat Qwen-VL config: its top level, as text_config of that type */
        cJSON *flat = cJSON_Duplicate(root, 1);
        if (!flat) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", fname);
        cJSON_DeleteItemFromObjectCaseSensitive(flat, "model_type");
        cJSON_AddStringToObject(flat, "model_type", sd_vlm_wrappers[w].text_type);
        const specdec_status st = sd_vlm_text_of(root, flat, w, fname, out, eb);
        cJSON_Delete(flat);
        return st;
    }
    if (!cJSON_IsObject(tc))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: %s needs an object 'text_config' (its language model)", fname,
                       sd_vlm_wrappers[w].wrapper);
    return sd_vlm_text_of(root, tc, w, fname, out, eb);
}

specdec_status sd_config_parse(const char *json, size_t len, const char *fname, sd_config *cfg, sd_errbuf *eb) {
    if (!fname) fname = "config.json";
    memset(cfg, 0, sizeof *cfg);
    if (!json && len) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "%s: NULL text", fname);
    cJSON *root = NULL, *text = NULL;
    SD_TRY(sd_json_parse(json ? json : "", len, fname, &root, eb));
    specdec_status st = cJSON_IsObject(root) ? sd_cfg_vlm_text(root, fname, &text, eb) : SPECDEC_OK;
    if (st == SPECDEC_OK) st = sd_cfg_fill(text ? text : root, fname, cfg, eb);
    if (st == SPECDEC_OK && text) cfg->vlm_text = 1;
    cJSON_Delete(text);
    cJSON_Delete(root);
    /* value consistency (heads, head_dim, rope, windows, special ids): the one shared check */
    return st != SPECDEC_OK ? st : sd_config_validate(cfg, fname, eb);
}

const char *sd_config_rope_name(const sd_config *cfg) {
    for (size_t i = 1; i < sizeof sd_rope_names / sizeof sd_rope_names[0]; i++)
        if (sd_rope_names[i].type == cfg->rope_type) return sd_rope_names[i].name;
    return "none";
}
