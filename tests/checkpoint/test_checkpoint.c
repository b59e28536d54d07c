/* test_checkpoint.c — specdec_model_load on checkpoints this test writes itself:
 * valid ones (all three dtypes, single file and sharded, tied/untied, Qwen2 biases,
 * GQA, llama3 rope_scaling, misaligned data, mmap and read) checked field by field and
 * byte by byte; one case per malformed input (status + message naming the file and
 * the tensor or key); and allocation-failure injection at every allocation.
 *
 *   test_checkpoint              run all checks
 *   test_checkpoint --write DIR  only write the fixture used by the CLI test
 *   test_checkpoint --dump DIR [use_mmap]  print the loaded weights' hashes */
#define _XOPEN_SOURCE 700
#include <ftw.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt_writer.h"
#include "sd_alloc.h"
#include "sd_model.h"
#include "sd_test.h"
#include "specdec.h"

static char g_root[512];
static int g_case = 0;

static void new_dir(char *out, size_t cap) {
    snprintf(out, cap, "%s/c%03d", g_root, g_case++);
    mkdir(out, 0755);
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb; (void)flag; (void)ftw;
    return remove(p);
}

static const ck_spec base_spec = {
    .arch = "LlamaForCausalLM", .V = 48, .H = 32, .I = 40, .L = 2, .NH = 4, .NKV = 4,
    .wdtype = "F32", .ndtype = "F32", .seed = 1};

static int specdec_dtype_of(const char *s) { return !strcmp(s, "F32") ? 0 : !strcmp(s, "F16") ? 1 : 2; }

/* Checks a loaded tensor against what was written: shape, dtype, alignment, bytes. */
static void check_tensor(const sd_tensor *t, ck_model *ck, const char *name) {
    ck_tensor *w = ck_find(ck, name);
    SD_CHECK(w != NULL, "writer lacks %s", name);
    SD_CHECK(t->data != NULL, "%s absent", name);
    if (!w || !t->data) return;
    SD_CHECK(t->ndim == w->ndim, "%s ndim %d vs %d", name, t->ndim, w->ndim);
    SD_CHECK(t->shape[0] == w->shape[0] && (w->ndim == 1 || t->shape[1] == w->shape[1]), "%s shape", name);
    SD_CHECK((int)t->dtype == specdec_dtype_of(w->dtype), "%s dtype %d vs %s", name, (int)t->dtype, w->dtype);
    SD_CHECK((uintptr_t)t->data % sd_dtype_size(t->dtype) == 0, "%s misaligned pointer %p", name, t->data);
    SD_CHECK(memcmp(t->data, w->data, w->bytes) == 0, "%s contents differ", name);
}

static void check_valid(const char *label, ck_spec s) {
    for (int mm = 0; mm <= 1; mm++) {
        char dir[600];
        new_dir(dir, sizeof dir);
        ck_model ck;
        ck_build(&ck, &s);
        SD_CHECK(ck_write_dir(dir, &ck, &s) == 0, "%s: write", label);
        specdec_model_params p = specdec_model_default_params();
        SD_CHECK(p.use_mmap == 1, "default use_mmap");
        p.use_mmap = mm;
        specdec_model *m = NULL;
        specdec_status st = specdec_model_load(dir, &p, &m);
        SD_CHECK(st == SPECDEC_OK, "%s (mmap=%d): load failed: %s: %s", label, mm, specdec_status_string(st),
                 specdec_last_error());
        if (st) { ck_free(&ck); continue; }
        specdec_model_info info;
        SD_CHECK(specdec_model_get_info(m, &info) == SPECDEC_OK, "get_info");
        int hd = s.head_dim > 0 ? s.head_dim : s.H / s.NH;
        int qwen = !strcmp(s.arch, "Qwen2ForCausalLM");
        SD_CHECK(!strcmp(info.architecture, s.arch), "%s: arch %s", label, info.architecture);
        SD_CHECK(info.vocab_size == s.V && info.hidden_size == s.H && info.intermediate_size == s.I, "%s sizes", label);
        SD_CHECK(info.n_layers == s.L && info.n_heads == s.NH && info.n_kv_heads == s.NKV, "%s heads", label);
        SD_CHECK(info.head_dim == hd, "%s head_dim %d", label, info.head_dim);
        SD_CHECK(info.max_position_embeddings == 2048, "%s max pos", label);
        SD_CHECK(info.rms_norm_eps == 1e-5f, "%s eps", label);
        SD_CHECK(info.rope_theta == (s.llama3 ? 500000.0f : 10000.0f), "%s theta", label);
        SD_CHECK(info.rope_scaling_llama3 == s.llama3, "%s llama3 flag", label);
        SD_CHECK(info.rope_type == (s.llama3 ? SPECDEC_ROPE_LLAMA3 : SPECDEC_ROPE_DEFAULT), "%s rope_type %d", label,
                 (int)info.rope_type);
        SD_CHECK(info.tie_word_embeddings == s.tie, "%s tie", label);
        SD_CHECK(info.attention_bias == (s.bias || qwen), "%s bias", label);
        SD_CHECK((int)info.dtype == specdec_dtype_of(s.wdtype), "%s dtype", label);
        SD_CHECK(info.bos_id == 1, "%s bos", label);
        if (s.llama3) SD_CHECK(info.n_eos == 2 && info.eos_ids[0] == 2 && info.eos_ids[1] == 3, "%s eos list", label);
        else SD_CHECK(info.n_eos == 1 && info.eos_ids[0] == 2, "%s eos", label);
        if (s.llama3)
            SD_CHECK(m->w.cfg.rope_factor == 8.0f && m->w.cfg.rope_low_freq_factor == 1.0f &&
                         m->w.cfg.rope_high_freq_factor == 4.0f && m->w.cfg.rope_original_max_pos == 8192,
                     "%s llama3 params", label);
        /* Expected parameter count: every tensor written except ignored extras and a
         * stored lm_head of a tied model. */
        int64_t np = 0;
        for (int i = 0; i < ck.n; i++) {
            if (strstr(ck.t[i].name, "inv_freq")) continue;
            if (s.tie && !strcmp(ck.t[i].name, "lm_head.weight")) continue;
            np += ck.t[i].shape[0] * (ck.t[i].ndim == 2 ? ck.t[i].shape[1] : 1);
        }
        SD_CHECK(info.n_params == np, "%s n_params %lld vs %lld", label, (long long)info.n_params, (long long)np);
        /* Every tensor, byte for byte. */
        check_tensor(&m->w.tok_embd, &ck, "model.embed_tokens.weight");
        check_tensor(&m->w.out_norm, &ck, "model.norm.weight");
        if (s.tie) SD_CHECK(m->w.lm_head.data == m->w.tok_embd.data, "%s tied lm_head", label);
        else check_tensor(&m->w.lm_head, &ck, "lm_head.weight");
        char nm[128];
        for (int l = 0; l < s.L; l++) {
            const sd_layer *ly = &m->w.layers[l];
#define CT(field, suffix) (snprintf(nm, sizeof nm, "model.layers.%d.%s", l, suffix), check_tensor(&ly->field, &ck, nm))
            CT(attn_norm, "input_layernorm.weight");
            CT(wq, "self_attn.q_proj.weight");
            CT(wk, "self_attn.k_proj.weight");
            CT(wv, "self_attn.v_proj.weight");
            CT(wo, "self_attn.o_proj.weight");
            CT(ffn_norm, "post_attention_layernorm.weight");
            CT(w_gate, "mlp.gate_proj.weight");
            CT(w_up, "mlp.up_proj.weight");
            CT(w_down, "mlp.down_proj.weight");
            if (s.bias || qwen) {
                CT(bq, "self_attn.q_proj.bias");
                CT(bk, "self_attn.k_proj.bias");
                CT(bv, "self_attn.v_proj.bias");
            } else {
                SD_CHECK(!ly->bq.data && !ly->bk.data && !ly->bv.data, "%s unexpected bias", label);
            }
            if (s.bias && !qwen) CT(bo, "self_attn.o_proj.bias");
            else SD_CHECK(!ly->bo.data, "%s unexpected o bias", label);
#undef CT
        }
        if (s.misalign) SD_CHECK(m->n_owned > 0, "%s: misaligned data was not copied", label);
        else SD_CHECK(m->n_owned == 0, "%s: %d aligned tensors copied", label, m->n_owned);
        SD_CHECK(m->n_files == (s.n_shards > 1 ? s.n_shards : 1), "%s n_files", label);
        specdec_model_free(m);
        ck_free(&ck);
    }
}

/* ---------------------------------------------------------------------------- */

static void expect_fail_dir(const char *label, const char *dir, specdec_status want, const char *s1, const char *s2) {
    specdec_model *m = (specdec_model *)&m; /* must be reset to NULL */
    specdec_status st = specdec_model_load(dir, NULL, &m);
    const char *msg = specdec_last_error();
    SD_CHECK(st == want, "%s: status %s, expected %s (%s)", label, specdec_status_string(st),
             specdec_status_string(want), msg);
    SD_CHECK(m == NULL, "%s: out_model not NULL on failure", label);
    if (s1) SD_CHECK(strstr(msg, s1) != NULL, "%s: message lacks '%s': %s", label, s1, msg);
    if (s2) SD_CHECK(strstr(msg, s2) != NULL, "%s: message lacks '%s': %s", label, s2, msg);
    if (st == SPECDEC_OK) specdec_model_free(m);
}

/* Config-text mutation of the base model. */
static void bad_config(const char *label, const char *from, const char *to, specdec_status want, const char *key) {
    char dir[600];
    new_dir(dir, sizeof dir);
    ck_spec s = base_spec;
    ck_model ck;
    ck_build(&ck, &s);
    int found = ck_config_replace(&ck, from, to);
    SD_CHECK(found, "%s: pattern '%s' not in config", label, from);
    ck_write_dir(dir, &ck, &s);
    expect_fail_dir(label, dir, want, "config.json", key);
    ck_free(&ck);
}

/* A directory with the base config and a hand-written model.safetensors:
 * 8-byte length field `hlen`, then `hdr` (hdr_len bytes), then data_len zero bytes. */
static void bad_st_raw(const char *label, uint64_t hlen, const char *hdr, size_t hdr_len, size_t data_len,
                       specdec_status want, const char *key);
/* Writes the base spec's config.json to path. */
static void write_base_config(const char *path) {
    ck_spec s = base_spec;
    ck_model ck;
    ck_build(&ck, &s);
    ck_write_text(path, ck.config, strlen(ck.config));
    ck_free(&ck);
}
/* A new directory holding only the base config.json; p gets its model.safetensors path. */
static void new_dir_base_config(char *dir, size_t dir_cap, char *p, size_t p_cap) {
    new_dir(dir, dir_cap);
    snprintf(p, p_cap, "%s/config.json", dir);
    write_base_config(p);
    snprintf(p, p_cap, "%s/model.safetensors", dir);
}
/* model.safetensors is exactly bytes[0..n). */
static void bad_st_bytes(const char *label, const char *bytes, size_t n, specdec_status want, const char *key) {
    char dir[600], p[700];
    new_dir_base_config(dir, sizeof dir, p, sizeof p);
    ck_write_text(p, bytes, n);
    expect_fail_dir(label, dir, want, "model.safetensors", key);
}

static void bad_st_raw(const char *label, uint64_t hlen, const char *hdr, size_t hdr_len, size_t data_len,
                       specdec_status want, const char *key) {
    char dir[600], p[700];
    new_dir_base_config(dir, sizeof dir, p, sizeof p);
    FILE *f = fopen(p, "wb");
    uint8_t lb[8];
    for (int i = 0; i < 8; i++) lb[i] = (uint8_t)(hlen >> (8 * i));
    fwrite(lb, 1, 8, f);
    fwrite(hdr, 1, hdr_len, f);
    for (size_t i = 0; i < data_len; i++) fputc(0, f);
    fclose(f);
    expect_fail_dir(label, dir, want, "model.safetensors", key);
}

static void bad_st(const char *label, const char *hdr, size_t data_len, specdec_status want, const char *key) {
    bad_st_raw(label, strlen(hdr), hdr, strlen(hdr), data_len, want, key);
}

/* Tensor-list mutation of a (possibly sharded) model. */
typedef void (*mutate_fn)(ck_model *ck);
static void bad_model(const char *label, ck_spec s, mutate_fn fn, specdec_status want, const char *s1,
                      const char *s2) {
    char dir[600];
    new_dir(dir, sizeof dir);
    ck_model ck;
    ck_build(&ck, &s);
    if (fn) fn(&ck);
    ck_write_dir(dir, &ck, &s);
    expect_fail_dir(label, dir, want, s1, s2);
    ck_free(&ck);
}

static void mut_drop_up(ck_model *ck) { ck_remove(ck, "model.layers.1.mlp.up_proj.weight"); }
static void mut_drop_lm_head(ck_model *ck) { ck_remove(ck, "lm_head.weight"); }
static void mut_drop_qbias(ck_model *ck) { ck_remove(ck, "model.layers.0.self_attn.q_proj.bias"); }
static void mut_shape(ck_model *ck) {
    ck_tensor *t = ck_find(ck, "model.layers.0.mlp.down_proj.weight");
    if (!t) return;
    int64_t a = t->shape[0];
    t->shape[0] = t->shape[1];
    t->shape[1] = a; /* same byte size, transposed shape */
}
static void mut_ndim(ck_model *ck) {
    ck_tensor *t = ck_find(ck, "model.norm.weight");
    if (!t) return;
    t->ndim = 2;
    t->shape[1] = 1;
}
static void mut_i8(ck_model *ck) {
    ck_tensor *t = ck_find(ck, "model.layers.0.self_attn.k_proj.weight");
    if (!t) return;
    snprintf(t->dtype, sizeof t->dtype, "I8");
    t->bytes /= 4;
}
static void mut_f8(ck_model *ck) {
    ck_tensor *t = ck_find(ck, "model.layers.1.mlp.gate_proj.weight");
    if (!t) return;
    snprintf(t->dtype, sizeof t->dtype, "F8_E4M3");
    t->bytes /= 4;
}

static void bad_inputs(void) {
    /* --- config.json --- */
    bad_config("arch", "LlamaForCausalLM", "GPT2LMHeadModel", SPECDEC_ERR_UNSUPPORTED, "GPT2LMHeadModel");
    bad_config("layers 1e9", "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 1000000000", SPECDEC_ERR_FORMAT,
               "num_hidden_layers");
    bad_config("layers negative", "\"num_hidden_layers\": 2", "\"num_hidden_layers\": -3", SPECDEC_ERR_FORMAT,
               "num_hidden_layers");
    bad_config("layers zero", "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 0", SPECDEC_ERR_FORMAT,
               "num_hidden_layers");
    bad_config("layers fractional", "\"num_hidden_layers\": 2", "\"num_hidden_layers\": 2.5", SPECDEC_ERR_FORMAT,
               "num_hidden_layers");
    bad_config("vocab huge", "\"vocab_size\": 48", "\"vocab_size\": 4000000000000", SPECDEC_ERR_FORMAT, "vocab_size");
    bad_config("hidden string", "\"hidden_size\": 32", "\"hidden_size\": \"32\"", SPECDEC_ERR_FORMAT, "hidden_size");
    bad_config("hidden missing", "\"hidden_size\": 32,", "", SPECDEC_ERR_FORMAT, "hidden_size");
    bad_config("intermediate missing", "\"intermediate_size\": 40,", "", SPECDEC_ERR_FORMAT, "intermediate_size");
    bad_config("vocab missing", "\"vocab_size\": 48,", "", SPECDEC_ERR_FORMAT, "vocab_size");
    bad_config("heads missing", "\"num_attention_heads\": 4,", "", SPECDEC_ERR_FORMAT, "num_attention_heads");
    bad_config("head_dim inconsistent", "\"num_attention_heads\": 4,\n  \"num_key_value_heads\": 4",
               "\"num_attention_heads\": 3,\n  \"num_key_value_heads\": 3",
               SPECDEC_ERR_FORMAT, "num_attention_heads");
    bad_config("kv heads", "\"num_key_value_heads\": 4", "\"num_key_value_heads\": 3", SPECDEC_ERR_FORMAT,
               "num_key_value_heads");
    bad_config("kv heads > heads", "\"num_key_value_heads\": 4", "\"num_key_value_heads\": 8", SPECDEC_ERR_FORMAT,
               "num_key_value_heads");
    bad_config("rope unknown", "\"rope_scaling\": null",
               "\"rope_scaling\": {\"rope_type\": \"mrope\", \"factor\": 4.0}", SPECDEC_ERR_UNSUPPORTED, "mrope");
    bad_config("rope linear no factor (type key)", "\"rope_scaling\": null",
               "\"rope_scaling\": {\"type\": \"linear\"}", SPECDEC_ERR_FORMAT, "factor");
    bad_config("rope llama3 no factor", "\"rope_scaling\": null",
               "\"rope_scaling\": {\"rope_type\": \"llama3\", \"low_freq_factor\": 1, \"high_freq_factor\": 4, "
               "\"original_max_position_embeddings\": 8192}",
               SPECDEC_ERR_FORMAT, "factor");
    bad_config("rope_scaling string", "\"rope_scaling\": null", "\"rope_scaling\": \"llama3\"", SPECDEC_ERR_FORMAT,
               "rope_scaling");
    bad_config("rope_theta string", "\"rope_theta\": 10000.0", "\"rope_theta\": \"1e4\"", SPECDEC_ERR_FORMAT,
               "rope_theta");
    bad_config("eps negative", "\"rms_norm_eps\": 1e-05", "\"rms_norm_eps\": -1", SPECDEC_ERR_FORMAT, "rms_norm_eps");
    bad_config("tie string", "\"tie_word_embeddings\": false", "\"tie_word_embeddings\": \"no\"", SPECDEC_ERR_FORMAT,
               "tie_word_embeddings");
    bad_config("eos out of vocab", "\"eos_token_id\": 2", "\"eos_token_id\": 48", SPECDEC_ERR_FORMAT, "eos_token_id");
    bad_config("eos list bad", "\"eos_token_id\": 2", "\"eos_token_id\": [2, \"x\"]", SPECDEC_ERR_FORMAT,
               "eos_token_id");
    bad_config("eos object", "\"eos_token_id\": 2", "\"eos_token_id\": {}", SPECDEC_ERR_FORMAT, "eos_token_id");
    bad_config("eos too many", "\"eos_token_id\": 2", "\"eos_token_id\": [1,2,3,4,5,6,7,8,9]",
               SPECDEC_ERR_UNSUPPORTED, "eos_token_id");
    bad_config("bos negative", "\"bos_token_id\": 1", "\"bos_token_id\": -1", SPECDEC_ERR_FORMAT, "bos_token_id");
    bad_config("duplicate key", "\"vocab_size\": 48,", "\"vocab_size\": 48, \"vocab_size\": 64,", SPECDEC_ERR_FORMAT,
               "vocab_size");
    bad_config("hidden_act", "\"silu\"", "\"relu\"", SPECDEC_ERR_UNSUPPORTED, "hidden_act");
    bad_config("architectures type", "[\"LlamaForCausalLM\"]", "\"LlamaForCausalLM\"", SPECDEC_ERR_FORMAT,
               "architectures");
    bad_config("not JSON", "\"vocab_size\": 48,", "\"vocab_size\": 48,,", SPECDEC_ERR_FORMAT, "JSON");
    bad_config("trailing garbage", "\"bfloat16\"\n}", "\"bfloat16\"\n} x", SPECDEC_ERR_FORMAT, "JSON");
    {
        char dir[600], p[700];
        new_dir(dir, sizeof dir);
        expect_fail_dir("config missing", dir, SPECDEC_ERR_IO, "config.json", NULL);
        snprintf(p, sizeof p, "%s/config.json", dir);
        ck_write_text(p, "[1, 2]", 6);
        expect_fail_dir("config array", dir, SPECDEC_ERR_FORMAT, "config.json", "object");
        ck_write_text(p, "", 0);
        expect_fail_dir("config empty", dir, SPECDEC_ERR_FORMAT, "config.json", "JSON");
        /* valid config, no weights at all */
        write_base_config(p);
        expect_fail_dir("no safetensors", dir, SPECDEC_ERR_IO, "model.safetensors", NULL);
        expect_fail_dir("not a directory", "/nonexistent/specdec", SPECDEC_ERR_IO, "config.json", NULL);
    }

    /* --- safetensors header --- */
    const char *E = "model.embed_tokens.weight";
    bad_st_bytes("short file", "\x05\0\0\0\0", 5, SPECDEC_ERR_FORMAT, "too short");
    bad_st_bytes("empty file", "", 0, SPECDEC_ERR_FORMAT, "too short");
    bad_st_raw("header length 0", 0, "", 0, 0, SPECDEC_ERR_FORMAT, "'{'");
    bad_st_raw("header > 1e8", 100000001ull, "{}", 2, 0, SPECDEC_ERR_FORMAT, "100000000");
    bad_st_raw("header huge", UINT64_MAX, "{}", 2, 0, SPECDEC_ERR_FORMAT, "header length");
    bad_st_raw("header past EOF", 100, "{}", 2, 0, SPECDEC_ERR_FORMAT, "past the end");
    bad_st("header not '{'", " {}", 0, SPECDEC_ERR_FORMAT, "'{'");
    bad_st("header array", "[1]", 0, SPECDEC_ERR_FORMAT, "'{'");
    bad_st("header bad UTF-8", "{\"\xC0\xAF\":1}", 0, SPECDEC_ERR_FORMAT, "UTF-8");
    bad_st("header surrogate", "{\"\xED\xA0\x80\":1}", 0, SPECDEC_ERR_FORMAT, "UTF-8");
    bad_st("header not JSON", "{\"a\": }", 0, SPECDEC_ERR_FORMAT, "JSON");
    bad_st("header trailing", "{} {}", 0, SPECDEC_ERR_FORMAT, "JSON");
    bad_st_raw("header NUL byte", 4, "{\"\0\"", 4, 0, SPECDEC_ERR_FORMAT, "NUL");
    bad_st("name with \\u0000",
           "{\"model.norm\\u0000.weight\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4,
           SPECDEC_ERR_FORMAT, "model.norm");
    bad_st("unknown dtype", "{\"model.embed_tokens.weight\":{\"dtype\":\"F12\",\"shape\":[2],\"data_offsets\":[0,4]}}",
           4, SPECDEC_ERR_FORMAT, E);
    bad_st("dtype not string", "{\"model.embed_tokens.weight\":{\"dtype\":4,\"shape\":[2],\"data_offsets\":[0,4]}}",
           4, SPECDEC_ERR_FORMAT, E);
    bad_st("missing dtype", "{\"model.embed_tokens.weight\":{\"shape\":[2],\"data_offsets\":[0,4]}}", 4,
           SPECDEC_ERR_FORMAT, E);
    bad_st("missing data_offsets", "{\"model.embed_tokens.weight\":{\"dtype\":\"F16\",\"shape\":[2]}}", 4,
           SPECDEC_ERR_FORMAT, E);
    bad_st("entry not object", "{\"model.embed_tokens.weight\":[1,2]}", 0, SPECDEC_ERR_FORMAT, E);
    bad_st("shape negative", "{\"model.embed_tokens.weight\":{\"dtype\":\"F16\",\"shape\":[-2],\"data_offsets\":[0,4]}}",
           4, SPECDEC_ERR_FORMAT, E);
    bad_st("shape fractional",
           "{\"model.embed_tokens.weight\":{\"dtype\":\"F16\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4,
           SPECDEC_ERR_FORMAT, E);
    bad_st("shape not array", "{\"model.embed_tokens.weight\":{\"dtype\":\"F16\",\"shape\":2,\"data_offsets\":[0,4]}}",
           4, SPECDEC_ERR_FORMAT, E);
    bad_st("shape overflow",
           "{\"model.embed_tokens.weight\":{\"dtype\":\"F16\",\"shape\":[4294967296,4294967296,4294967296],"
           "\"data_offsets\":[0,4]}}",
           4, SPECDEC_ERR_FORMAT, E);
    bad_st("byte size overflow",
           "{\"model.embed_tokens.weight\":{\"dtype\":\"F64\",\"shape\":[1125899906842624,4096],"
           "\"data_offsets\":[0,4]}}",
           4, SPECDEC_ERR_FORMAT, E);
    bad_st("too many dims",
           "{\"model.embed_tokens.weight\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}",
           1, SPECDEC_ERR_UNSUPPORTED, E);
    bad_st("sub-byte size", "{\"model.embed_tokens.weight\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}",
           2, SPECDEC_ERR_FORMAT, E);
    bad_st("end < begin", "{\"model.embed_tokens.weight\":{\"dtype\":\"F16\",\"shape\":[0],\"data_offsets\":[4,0]}}",
           4, SPECDEC_ERR_FORMAT, E);
    bad_st("size mismatch", "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}",
           4, SPECDEC_ERR_FORMAT, E);
    bad_st("offsets 3 entries",
           "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 4,
           SPECDEC_ERR_FORMAT, E);
    bad_st("overlap",
           "{\"a.w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
           "\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
           12, SPECDEC_ERR_FORMAT, "overlaps");
    bad_st("hole",
           "{\"a.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
           12, SPECDEC_ERR_FORMAT, "hole");
    bad_st("hole names tensor",
           "{\"a.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
           12, SPECDEC_ERR_FORMAT, E);
    bad_st("data region too long", "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
           8, SPECDEC_ERR_FORMAT, "data region");
    bad_st("data region too short",
           "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4,
           SPECDEC_ERR_FORMAT, "data region");
    bad_st("duplicate name",
           "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
           "\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
           8, SPECDEC_ERR_FORMAT, E);
    bad_st("metadata not object", "{\"__metadata__\":[\"x\"]}", 0, SPECDEC_ERR_FORMAT, "__metadata__");
    bad_st("metadata value not string", "{\"__metadata__\":{\"format\":1}}", 0, SPECDEC_ERR_FORMAT, "format");
    bad_st("metadata twice", "{\"__metadata__\":{},\"__metadata__\":{}}", 0, SPECDEC_ERR_FORMAT, "__metadata__");

    /* --- model level --- */
    ck_spec s = base_spec;
    bad_model("missing tensor", s, mut_drop_up, SPECDEC_ERR_MODEL_MISMATCH, "model.safetensors",
              "model.layers.1.mlp.up_proj.weight");
    bad_model("wrong shape", s, mut_shape, SPECDEC_ERR_MODEL_MISMATCH, "model.safetensors",
              "model.layers.0.mlp.down_proj.weight");
    bad_model("wrong ndim", s, mut_ndim, SPECDEC_ERR_MODEL_MISMATCH, "model.safetensors", "model.norm.weight");
    bad_model("dtype I8", s, mut_i8, SPECDEC_ERR_UNSUPPORTED, "model.layers.0.self_attn.k_proj.weight", "I8");
    bad_model("dtype F8_E4M3", s, mut_f8, SPECDEC_ERR_UNSUPPORTED, "model.safetensors", "F8_E4M3");
    bad_model("untied without lm_head", s, mut_drop_lm_head, SPECDEC_ERR_MODEL_MISMATCH, "lm_head.weight",
              "tie_word_embeddings");
    ck_spec q = base_spec;
    q.arch = "Qwen2ForCausalLM";
    bad_model("qwen2 missing bias", q, mut_drop_qbias, SPECDEC_ERR_MODEL_MISMATCH, "model.safetensors",
              "model.layers.0.self_attn.q_proj.bias");

    /* --- sharded --- */
    ck_spec sh = base_spec;
    sh.n_shards = 3;
    bad_model("sharded missing tensor", sh, mut_drop_up, SPECDEC_ERR_MODEL_MISMATCH, "model.safetensors.index.json",
              "model.layers.1.mlp.up_proj.weight");
    {
        char dir[600], p[700];
        ck_model ck;
        /* a shard named in the index is missing */
        new_dir(dir, sizeof dir);
        ck_build(&ck, &sh);
        ck_write_dir(dir, &ck, &sh);
        snprintf(p, sizeof p, "%s/model-00002-of-00003.safetensors", dir);
        remove(p);
        expect_fail_dir("missing shard", dir, SPECDEC_ERR_IO, "model.safetensors.index.json",
                        "model-00002-of-00003.safetensors");
        ck_free(&ck);

        /* the same tensor stored in two shards: shard 1 gets an extra copy of a tensor of shard 2 */
        new_dir(dir, sizeof dir);
        ck_build(&ck, &sh);
        ck_write_dir(dir, &ck, &sh);
        int idx[64], n = 0;
        for (int i = 0; i < ck.n; i += 3) idx[n++] = i;
        idx[n++] = 1; /* tensor 1 lives in shard 2 */
        snprintf(p, sizeof p, "%s/model-00001-of-00003.safetensors", dir);
        ck_write_st(p, &ck, idx, n, 0);
        expect_fail_dir("tensor in two shards", dir, SPECDEC_ERR_FORMAT, ck.t[1].name, "two shards");
        ck_free(&ck);

        /* index maps a tensor to a shard that does not hold it */
        new_dir(dir, sizeof dir);
        ck_build(&ck, &sh);
        ck_write_dir(dir, &ck, &sh);
        char ix[8192];
        snprintf(p, sizeof p, "%s/model.safetensors.index.json", dir);
        snprintf(ix, sizeof ix, "{\"weight_map\": {\"%s\": \"model-00002-of-00003.safetensors\"}}", ck.t[0].name);
        ck_write_text(p, ix, strlen(ix));
        expect_fail_dir("index names wrong shard", dir, SPECDEC_ERR_FORMAT, "model.safetensors.index.json",
                        ck.t[0].name);
        snprintf(ix, sizeof ix, "{\"weight_map\": {\"%s\": \"model-00001-of-00003.safetensors\", \"%s\": "
                                "\"model-00001-of-00003.safetensors\"}}", ck.t[0].name, ck.t[0].name);
        ck_write_text(p, ix, strlen(ix));
        expect_fail_dir("index duplicate key", dir, SPECDEC_ERR_FORMAT, "model.safetensors.index.json", ck.t[0].name);
        snprintf(ix, sizeof ix, "{\"weight_map\": {\"%s\": \"../model-00001-of-00003.safetensors\"}}", ck.t[0].name);
        ck_write_text(p, ix, strlen(ix));
        expect_fail_dir("index path traversal", dir, SPECDEC_ERR_FORMAT, "model.safetensors.index.json", ck.t[0].name);
        ck_write_text(p, "{\"metadata\": {}}", 16);
        expect_fail_dir("index without weight_map", dir, SPECDEC_ERR_FORMAT, "model.safetensors.index.json",
                        "weight_map");
        ck_write_text(p, "{\"weight_map\": ", 15);
        expect_fail_dir("index not JSON", dir, SPECDEC_ERR_FORMAT, "model.safetensors.index.json", "JSON");
        snprintf(ix, sizeof ix, "{\"weight_map\": {\"%s\": 7}}", ck.t[0].name);
        ck_write_text(p, ix, strlen(ix));
        expect_fail_dir("index value type", dir, SPECDEC_ERR_FORMAT, "model.safetensors.index.json", ck.t[0].name);
        ck_free(&ck);
    }

    /* --- arguments --- */
    specdec_model *m = NULL;
    SD_CHECK(specdec_model_load(NULL, NULL, &m) == SPECDEC_ERR_INVALID_ARGUMENT && m == NULL, "NULL path");
    SD_CHECK(specdec_model_load(g_root, NULL, NULL) == SPECDEC_ERR_INVALID_ARGUMENT, "NULL out");
    SD_CHECK(specdec_model_load("", NULL, &m) == SPECDEC_ERR_INVALID_ARGUMENT, "empty path");
    specdec_model_info info;
    SD_CHECK(specdec_model_get_info(NULL, &info) == SPECDEC_ERR_INVALID_ARGUMENT, "get_info NULL");
    specdec_model_free(NULL);
}

/* Fail the k-th allocation for k = 0, 1, ... until the load succeeds: each failure
 * must be OUT_OF_MEMORY with *out NULL; LeakSanitizer (ASan build) checks for leaks. */
static void alloc_failures(const char *label, ck_spec s, int use_mmap) {
    char dir[600];
    new_dir(dir, sizeof dir);
    ck_model ck;
    ck_build(&ck, &s);
    ck_write_dir(dir, &ck, &s);
    ck_free(&ck);
    specdec_model_params p = specdec_model_default_params();
    p.use_mmap = use_mmap;
    int n_fail = 0, ok = 0, bad = 0;
    for (long k = 0; k < 100000; k++) {
        specdec_model *m = NULL;
        sd_alloc_fail_after(k);
        specdec_status st = specdec_model_load(dir, &p, &m);
        long used = sd_alloc_count();
        sd_alloc_fail_after(-1);
        if (st == SPECDEC_OK) {
            SD_CHECK(used <= k, "%s: succeeded although allocation %ld of %ld failed", label, k, used);
            specdec_model_free(m);
            ok = 1;
            break;
        }
        n_fail++;
        if (st != SPECDEC_ERR_OUT_OF_MEMORY || m != NULL) {
            bad++;
            SD_CHECK(0, "%s: k=%ld: %s: %s", label, k, specdec_status_string(st), specdec_last_error());
        }
    }
    SD_CHECK(ok, "%s: never succeeded", label);
    SD_CHECK(n_fail > 5, "%s: only %d allocation points", label, n_fail);
    printf("alloc-failure %s: %d failing points, %d bad\n", label, n_fail, bad);
}

static uint64_t fnv1a(const void *p, size_t n) {
    const uint8_t *b = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

static void dump_tensor(const char *name, const sd_tensor *t) {
    static const char *dn[] = {"F32", "F16", "BF16"};
    if (!t->data) return;
    size_t n = (size_t)t->shape[0] * (size_t)t->shape[1];
    int aligned = (uintptr_t)t->data % sd_dtype_size(t->dtype) == 0;
    printf("%s %s %lld %lld %016llx%s\n", name, dn[t->dtype], (long long)t->shape[0],
           (long long)(t->ndim == 2 ? t->shape[1] : 0), (unsigned long long)fnv1a(t->data, n * sd_dtype_size(t->dtype)),
           aligned ? "" : " MISALIGNED");
}

/* --dump DIR [0|1]: load DIR and print every weight's name, dtype, shape and FNV-1a
 * hash of its bytes (for tests/checkpoint/test_reference_writer.py). */
static int dump_model(const char *dir, int use_mmap) {
    specdec_model_params p = specdec_model_default_params();
    p.use_mmap = use_mmap;
    specdec_model *m = NULL;
    specdec_status st = specdec_model_load(dir, &p, &m);
    if (st) {
        printf("error %s %s\n", specdec_status_string(st), specdec_last_error());
        return 1;
    }
    specdec_model_info in;
    specdec_model_get_info(m, &in);
    printf("info %s %d %d %d %d %d %d %d %d %lld %d %d %d\n", in.architecture, in.vocab_size, in.hidden_size,
           in.intermediate_size, in.n_layers, in.n_heads, in.n_kv_heads, in.head_dim, in.tie_word_embeddings,
           (long long)in.n_params, in.attention_bias, in.rope_scaling_llama3, (int)in.dtype);
    dump_tensor("model.embed_tokens.weight", &m->w.tok_embd);
    char nm[128];
    for (int l = 0; l < in.n_layers; l++) {
        const sd_layer *ly = &m->w.layers[l];
        const struct { const char *n; const sd_tensor *t; } f[] = {
            {"input_layernorm.weight", &ly->attn_norm}, {"self_attn.q_proj.weight", &ly->wq},
            {"self_attn.k_proj.weight", &ly->wk},       {"self_attn.v_proj.weight", &ly->wv},
            {"self_attn.q_proj.bias", &ly->bq},         {"self_attn.k_proj.bias", &ly->bk},
            {"self_attn.v_proj.bias", &ly->bv},         {"self_attn.o_proj.weight", &ly->wo},
            {"self_attn.o_proj.bias", &ly->bo},         {"post_attention_layernorm.weight", &ly->ffn_norm},
            {"mlp.gate_proj.weight", &ly->w_gate},      {"mlp.up_proj.weight", &ly->w_up},
            {"mlp.down_proj.weight", &ly->w_down}};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
            snprintf(nm, sizeof nm, "model.layers.%d.%s", l, f[i].n);
            dump_tensor(nm, f[i].t);
        }
    }
    dump_tensor("model.norm.weight", &m->w.out_norm);
    if (!in.tie_word_embeddings) dump_tensor("lm_head.weight", &m->w.lm_head);
    specdec_model_free(m);
    return 0;
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "--dump")) return dump_model(argv[2], argc >= 4 ? atoi(argv[3]) : 1);
    if (argc == 3 && !strcmp(argv[1], "--write")) {
        /* Fixture for the CLI test: Qwen2, GQA, BF16 matrices + F32 norms, tied. */
        ck_spec s = base_spec;
        s.arch = "Qwen2ForCausalLM";
        s.NKV = 2;
        s.wdtype = "BF16";
        s.tie = 1;
        mkdir(argv[2], 0755);
        ck_model ck;
        ck_build(&ck, &s);
        int r = ck_write_dir(argv[2], &ck, &s);
        ck_free(&ck);
        return r ? 1 : 0;
    }
    snprintf(g_root, sizeof g_root, "/tmp/specdec_ckpt_XXXXXX");
    if (!mkdtemp(g_root)) {
        perror("mkdtemp");
        return 1;
    }

    ck_spec s = base_spec;
    check_valid("llama f32", s);
    s = base_spec; s.wdtype = "F16"; s.ndtype = "F32"; s.NKV = 2; s.seed = 2;
    check_valid("llama f16 gqa mixed", s);
    s = base_spec; s.wdtype = "BF16"; s.ndtype = "BF16"; s.tie = 1; s.llama3 = 1; s.seed = 3;
    check_valid("llama bf16 tied llama3", s);
    s = base_spec; s.wdtype = "BF16"; s.tie = 1; s.lm_head_when_tied = 1; s.extra = 1; s.seed = 4;
    check_valid("llama tied with stored lm_head + inv_freq", s);
    s = base_spec; s.arch = "Qwen2ForCausalLM"; s.NKV = 1; s.wdtype = "BF16"; s.tie = 1; s.seed = 5;
    check_valid("qwen2 bias bf16 mqa", s);
    s = base_spec; s.arch = "MistralForCausalLM"; s.NKV = 2; s.wdtype = "F16"; s.ndtype = "F16"; s.seed = 6;
    check_valid("mistral f16", s);
    s = base_spec; s.bias = 1; s.seed = 7;
    check_valid("llama attention_bias", s);
    s = base_spec; s.head_dim = 16; s.H = 24; s.NH = 4; s.NKV = 2; s.seed = 8;
    check_valid("explicit head_dim", s);
    s = base_spec; s.n_shards = 3; s.wdtype = "BF16"; s.seed = 9;
    check_valid("sharded", s);
    s = base_spec; s.misalign = 1; s.wdtype = "F16"; s.seed = 10;
    check_valid("misaligned f16+f32", s);
    s = base_spec; s.misalign = 1; s.n_shards = 2; s.arch = "Qwen2ForCausalLM"; s.seed = 11;
    check_valid("misaligned sharded qwen2", s);

    bad_inputs();

    s = base_spec; s.n_shards = 2; s.misalign = 1; s.arch = "Qwen2ForCausalLM"; s.llama3 = 1;
    alloc_failures("sharded misaligned mmap", s, 1);
    alloc_failures("sharded misaligned read", s, 0);
    s = base_spec; s.tie = 1;
    alloc_failures("single read", s, 0);

    nftw(g_root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
    return sd_test_done();
}
