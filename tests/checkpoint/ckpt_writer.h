/* ckpt_writer.h — test helper (header-only): builds small Llama-family checkpoints in
 * memory with random weights and writes them as Hugging Face directories
 * (config.json + model.safetensors or shards + model.safetensors.index.json).
 * Tests mutate the tensor list or the config text to produce bad inputs. */
#ifndef CKPT_WRITER_H
#define CKPT_WRITER_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct ck_spec {
    const char *arch;     /* "LlamaForCausalLM", ... */
    int V, H, I, L, NH, NKV;
    int head_dim;         /* written to config when > 0 (else hidden/heads) */
    int tie;
    int bias;             /* 1: write q/k/v biases (Qwen2 always; Llama writes attention_bias) */
    const char *wdtype;   /* dtype of matrices: "F32", "F16", "BF16" */
    const char *ndtype;   /* dtype of norms and biases */
    int llama3;           /* rope_scaling llama3 */
    int n_shards;         /* 0/1: single file */
    int misalign;         /* pad so the data region starts at an odd offset */
    int extra;            /* add rotary_emb.inv_freq tensors (to be ignored) */
    int lm_head_when_tied;/* store lm_head.weight even though tied */
    uint64_t seed;
} ck_spec;

typedef struct ck_tensor {
    char name[128];
    char dtype[16];
    int ndim;
    int64_t shape[4];
    uint8_t *data;
    size_t bytes;
} ck_tensor;

typedef struct ck_model {
    ck_tensor *t;
    int n, cap;
    char config[4096];
} ck_model;

static uint64_t ck_rng_next(uint64_t *s) { /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static size_t ck_dtype_size(const char *dt) {
    if (!strcmp(dt, "F32") || !strcmp(dt, "I32")) return 4;
    if (!strcmp(dt, "F16") || !strcmp(dt, "BF16") || !strcmp(dt, "I16")) return 2;
    if (!strcmp(dt, "F64") || !strcmp(dt, "I64")) return 8;
    return 1;
}

/* Random finite values of magnitude < 2 in the dtype's encoding. */
static void ck_fill(uint8_t *p, size_t n_el, const char *dt, uint64_t *rng) {
    for (size_t i = 0; i < n_el; i++) {
        uint64_t r = ck_rng_next(rng);
        float f = (float)((double)(r >> 11) / 9007199254740992.0 * 2.0 - 1.0);
        uint32_t u;
        memcpy(&u, &f, 4);
        if (!strcmp(dt, "F32")) memcpy(p + 4 * i, &f, 4);
        else if (!strcmp(dt, "BF16")) { uint16_t h = (uint16_t)(u >> 16); memcpy(p + 2 * i, &h, 2); }
        else if (!strcmp(dt, "F16")) {
            /* sign, exponent 10..15 (values 2^-5..1.x), random mantissa */
            uint16_t h = (uint16_t)(((r >> 40) & 1) << 15 | (uint16_t)(10 + (r >> 41) % 6) << 10 | (r & 0x3FF));
            memcpy(p + 2 * i, &h, 2);
        } else p[i] = (uint8_t)r;
    }
}

static ck_tensor *ck_add(ck_model *m, const char *name, const char *dt, int ndim, int64_t d0, int64_t d1,
                         uint64_t *rng) {
    if (m->n == m->cap) {
        m->cap = m->cap ? 2 * m->cap : 64;
        m->t = realloc(m->t, (size_t)m->cap * sizeof *m->t);
    }
    ck_tensor *t = &m->t[m->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->dtype, sizeof t->dtype, "%s", dt);
    t->ndim = ndim;
    t->shape[0] = d0;
    t->shape[1] = d1;
    size_t nel = (size_t)d0 * (ndim == 2 ? (size_t)d1 : 1);
    t->bytes = nel * ck_dtype_size(dt);
    t->data = malloc(t->bytes ? t->bytes : 1);
    ck_fill(t->data, nel, dt, rng);
    return t;
}

static ck_tensor *ck_find(ck_model *m, const char *name) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->t[i].name, name)) return &m->t[i];
    return NULL;
}

static void ck_remove(ck_model *m, const char *name) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->t[i].name, name)) {
            free(m->t[i].data);
            memmove(&m->t[i], &m->t[i + 1], (size_t)(m->n - i - 1) * sizeof *m->t);
            m->n--;
            return;
        }
}

static void ck_free(ck_model *m) {
    for (int i = 0; i < m->n; i++) free(m->t[i].data);
    free(m->t);
    memset(m, 0, sizeof *m);
}

static void ck_build(ck_model *m, const ck_spec *s) {
    memset(m, 0, sizeof *m);
    uint64_t rng = s->seed;
    int hd = s->head_dim > 0 ? s->head_dim : s->H / s->NH;
    int64_t Q = (int64_t)s->NH * hd, KV = (int64_t)s->NKV * hd;
    const char *w = s->wdtype, *nd = s->ndtype;
    int qwen = !strcmp(s->arch, "Qwen2ForCausalLM");
    int llama = !strcmp(s->arch, "LlamaForCausalLM");
    char nm[128];
    ck_add(m, "model.embed_tokens.weight", w, 2, s->V, s->H, &rng);
    for (int l = 0; l < s->L; l++) {
#define A(suffix, dt, nd_, a, b) (snprintf(nm, sizeof nm, "model.layers.%d.%s", l, suffix), ck_add(m, nm, dt, nd_, a, b, &rng))
        A("input_layernorm.weight", nd, 1, s->H, 0);
        A("self_attn.q_proj.weight", w, 2, Q, s->H);
        A("self_attn.k_proj.weight", w, 2, KV, s->H);
        A("self_attn.v_proj.weight", w, 2, KV, s->H);
        if (s->bias || qwen) {
            A("self_attn.q_proj.bias", nd, 1, Q, 0);
            A("self_attn.k_proj.bias", nd, 1, KV, 0);
            A("self_attn.v_proj.bias", nd, 1, KV, 0);
            if (llama) A("self_attn.o_proj.bias", nd, 1, s->H, 0);
        }
        A("self_attn.o_proj.weight", w, 2, s->H, Q);
        A("post_attention_layernorm.weight", nd, 1, s->H, 0);
        A("mlp.gate_proj.weight", w, 2, s->I, s->H);
        A("mlp.up_proj.weight", w, 2, s->I, s->H);
        A("mlp.down_proj.weight", w, 2, s->H, s->I);
        if (s->extra) A("self_attn.rotary_emb.inv_freq", "F32", 1, hd / 2, 0);
#undef A
    }
    ck_add(m, "model.norm.weight", nd, 1, s->H, 0, &rng);
    if (!s->tie || s->lm_head_when_tied) ck_add(m, "lm_head.weight", w, 2, s->V, s->H, &rng);

    char extra[512] = "";
    size_t e = 0;
    if (s->head_dim > 0) e += (size_t)snprintf(extra + e, sizeof extra - e, "  \"head_dim\": %d,\n", s->head_dim);
    if (llama && s->bias) e += (size_t)snprintf(extra + e, sizeof extra - e, "  \"attention_bias\": true,\n");
    if (s->llama3)
        e += (size_t)snprintf(extra + e, sizeof extra - e,
                              "  \"rope_scaling\": {\"factor\": 8.0, \"low_freq_factor\": 1.0, \"high_freq_factor\": "
                              "4.0, \"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"},\n");
    else
        e += (size_t)snprintf(extra + e, sizeof extra - e, "  \"rope_scaling\": null,\n");
    snprintf(m->config, sizeof m->config,
             "{\n  \"architectures\": [\"%s\"],\n  \"hidden_act\": \"silu\",\n  \"vocab_size\": %d,\n"
             "  \"hidden_size\": %d,\n  \"intermediate_size\": %d,\n  \"num_hidden_layers\": %d,\n"
             "  \"num_attention_heads\": %d,\n  \"num_key_value_heads\": %d,\n%s"
             "  \"rms_norm_eps\": 1e-05,\n  \"rope_theta\": %s,\n  \"max_position_embeddings\": 2048,\n"
             "  \"tie_word_embeddings\": %s,\n  \"bos_token_id\": 1,\n  \"eos_token_id\": %s,\n"
             "  \"torch_dtype\": \"bfloat16\"\n}\n",
             s->arch, s->V, s->H, s->I, s->L, s->NH, s->NKV, extra, s->llama3 ? "500000.0" : "10000.0",
             s->tie ? "true" : "false", s->llama3 ? "[2, 3]" : "2");
}

/* Replace the first occurrence of `from` in the config text; returns 1 if found. */
static int ck_config_replace(ck_model *m, const char *from, const char *to) {
    char *p = strstr(m->config, from);
    if (!p) return 0;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%.*s%s%s", (int)(p - m->config), m->config, to, p + strlen(from));
    snprintf(m->config, sizeof m->config, "%s", tmp);
    return 1;
}

static int ck_write_text(const char *path, const char *text, size_t len) {
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t w = fwrite(text, 1, len, f);
    fclose(f);
    return w == len ? 0 : -1;
}

/* Writes tensors idx[0..n) of m as one safetensors file. misalign: the data region
 * starts at an offset that is 1 mod 8 (so every F16/F32 tensor is misaligned). */
static int ck_write_st(const char *path, const ck_model *m, const int *idx, int n, int misalign) {
    size_t cap = 256 + (size_t)n * 256, len = 0;
    char *h = malloc(cap);
    len += (size_t)snprintf(h + len, cap - len, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t off = 0;
    for (int k = 0; k < n; k++) {
        const ck_tensor *t = &m->t[idx[k]];
        len += (size_t)snprintf(h + len, cap - len, ",\"%s\":{\"dtype\":\"%s\",\"shape\":[", t->name, t->dtype);
        for (int d = 0; d < t->ndim; d++) len += (size_t)snprintf(h + len, cap - len, "%s%lld", d ? "," : "", (long long)t->shape[d]);
        len += (size_t)snprintf(h + len, cap - len, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)off,
                                (unsigned long long)(off + t->bytes));
        off += t->bytes;
    }
    len += (size_t)snprintf(h + len, cap - len, "}");
    /* Pad with spaces as the reference writer does (to 8 bytes, or to 1 mod 8). */
    size_t target = ((8 + len + 7) / 8) * 8 + (misalign ? 1 : 0) - 8;
    while (len < target) h[len++] = ' ';
    FILE *f = fopen(path, "wb");
    if (!f) { free(h); return -1; }
    uint8_t lb[8];
    for (int i = 0; i < 8; i++) lb[i] = (uint8_t)((uint64_t)len >> (8 * i));
    fwrite(lb, 1, 8, f);
    fwrite(h, 1, len, f);
    for (int k = 0; k < n; k++) fwrite(m->t[idx[k]].data, 1, m->t[idx[k]].bytes, f);
    fclose(f);
    free(h);
    return 0;
}

/* Writes the whole directory (config.json, safetensors, index when sharded). */
static int ck_write_dir(const char *dir, const ck_model *m, const ck_spec *s) {
    char p[1024];
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (ck_write_text(p, m->config, strlen(m->config))) return -1;
    int *idx = malloc((size_t)(m->n ? m->n : 1) * sizeof *idx);
    int ns = s->n_shards > 1 ? s->n_shards : 1;
    if (ns == 1) {
        for (int i = 0; i < m->n; i++) idx[i] = i;
        snprintf(p, sizeof p, "%s/model.safetensors", dir);
        int r = ck_write_st(p, m, idx, m->n, s->misalign);
        free(idx);
        return r;
    }
    size_t cap = 512 + (size_t)m->n * 200, len = 0;
    char *ix = malloc(cap);
    len += (size_t)snprintf(ix, cap, "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {");
    for (int sh = 0; sh < ns; sh++) {
        int n = 0;
        for (int i = sh; i < m->n; i += ns) idx[n++] = i; /* round-robin */
        char fn[128];
        snprintf(fn, sizeof fn, "model-%05d-of-%05d.safetensors", sh + 1, ns);
        snprintf(p, sizeof p, "%s/%s", dir, fn);
        if (ck_write_st(p, m, idx, n, s->misalign && sh == 0)) { free(idx); free(ix); return -1; }
        for (int k = 0; k < n; k++)
            len += (size_t)snprintf(ix + len, cap - len, "%s\"%s\": \"%s\"", (sh == 0 && k == 0) ? "" : ", ",
                                    m->t[idx[k]].name, fn);
    }
    len += (size_t)snprintf(ix + len, cap - len, "}}\n");
    snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
    int r = ck_write_text(p, ix, len);
    free(idx);
    free(ix);
    return r;
}

#endif
