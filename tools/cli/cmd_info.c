/* cmd_info.c — `specdec info -m DIR`: load a model directory and print its
 * architecture, sizes, RoPE settings, dtype, parameter count and special ids. */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "specdec.h"

static const char *info_dtype_name(specdec_dtype d, int32_t file_format) {
    if (file_format == SPECDEC_FILE_GGUF && d == SPECDEC_DTYPE_INT4)
        return "INT4 (GGUF Q4_0 / Q4_1 / Q2_K / Q3_K / Q4_K blocks; CPU backend)";
    if (file_format == SPECDEC_FILE_GGUF && d == SPECDEC_DTYPE_INT8)
        return "INT8 (GGUF Q5_0 / Q5_1 / Q8_0 / Q5_K / Q6_K / IQ1-IQ4 blocks; CPU backend)";
    switch (d) {
    case SPECDEC_DTYPE_F32: return "F32";
    case SPECDEC_DTYPE_F16: return "F16";
    case SPECDEC_DTYPE_BF16: return "BF16";
    case SPECDEC_DTYPE_FP8_E4M3: return "FP8_E4M3 (scaled per block, channel or tensor; CPU backend)";
    case SPECDEC_DTYPE_INT4: return "INT4 (GPTQ / AWQ / compressed-tensors, group-quantized; CPU backend)";
    case SPECDEC_DTYPE_INT8: return "INT8 (GPTQ / compressed-tensors, group-quantized; CPU backend)";
    }
    return "?";
}

/* 1234567 -> "1.23M" */
static void info_human(char *buf, size_t cap, long long n) {
    const char *unit[] = {"", "K", "M", "B", "T"};
    double v = (double)n;
    int u = 0;
    while (v >= 1000.0 && u < 4) {
        v /= 1000.0;
        u++;
    }
    if (u == 0) snprintf(buf, cap, "%lld", n);
    else snprintf(buf, cap, "%.2f%s", v, unit[u]);
}

/* What an EAGLE-3 head fits: the target shape it reads and the states it captures. */
static void info_eagle3(const specdec_model_info *in) {
    printf("kind:                    EAGLE-3 draft head (one decoder layer over captured target states)\n");
    printf("for target:              hidden_size %d, vocab_size %d (fc reads 3 x %d)\n", in->eagle3_target_hidden,
           in->vocab_size, in->eagle3_target_hidden);
    if (in->eagle3_aux_layers[0] < 0)
        printf("captures:                default rule hs[2], hs[L/2], hs[L-3] of the target's L layers\n");
    else
        printf("captures:                hs[%d], hs[%d], hs[%d] (hs[i]: residual stream entering target layer i)\n",
               in->eagle3_aux_layers[0], in->eagle3_aux_layers[1], in->eagle3_aux_layers[2]);
    printf("draft_vocab_size:        %d of %d\n", in->eagle3_draft_vocab, in->vocab_size);
    printf("embed_tokens:            %s\n", in->eagle3_own_embedding ? "its own" : "the target's");
}

static void info_usage(FILE *f) {
    fprintf(f, "usage: specdec info -m DIR [--no-mmap]\n"
               "  -m, --model DIR   Hugging Face model directory (config.json + safetensors) or GGUF file\n"
               "  --no-mmap         read the weights into memory instead of mapping them\n");
}

int cli_cmd_info(int argc, char **argv) {
    cli_info_opts o;
    cli_parse_err err;
    cli_parse_rc prc = cli_info_parse(argc, argv, &o, &err);
    if (prc == CLI_PARSE_HELP) {
        info_usage(stdout);
        return 0;
    }
    if (prc != CLI_PARSE_OK) {
        cli_parse_err_print(stderr, "info", &err);
        info_usage(stderr);
        return 2;
    }
    const char *dir = o.dir;
    const int use_mmap = o.use_mmap;
    specdec_model_params p = specdec_model_default_params();
    p.use_mmap = use_mmap;
    specdec_model *m = NULL;
    specdec_status st = specdec_model_load(dir, &p, &m);
    if (st != SPECDEC_OK) {
        fprintf(stderr, "specdec info: %s\n  %s\n", specdec_status_string(st), specdec_last_error());
        return 1;
    }
    specdec_model_info in;
    st = specdec_model_get_info(m, &in);
    if (st != SPECDEC_OK) {
        fprintf(stderr, "specdec info: %s\n  %s\n", specdec_status_string(st), specdec_last_error());
        specdec_model_free(m);
        return 1;
    }
    char human[32];
    info_human(human, sizeof human, (long long)in.n_params);
    printf("model:                   %s\n", dir);
    printf("architecture:            %s\n", in.architecture);
    if (in.file_format == SPECDEC_FILE_GGUF)
        printf("format:                  GGUF (llama.cpp; configuration from its metadata, Hugging Face names)\n");
    if (in.model_kind == SPECDEC_DRAFT_EAGLE3) info_eagle3(&in);
    if (in.mtp_layers > 0)
        printf("mtp_layers:              %d (drafts for itself: --drafter mtp, CPU backend)\n", in.mtp_layers);
    printf("vocab_size:              %d\n", in.vocab_size);
    printf("hidden_size:             %d\n", in.hidden_size);
    printf("intermediate_size:       %d\n", in.intermediate_size);
    printf("layers:                  %d\n", in.n_layers);
    printf("heads:                   %d\n", in.n_heads);
    printf("kv_heads:                %d\n", in.n_kv_heads);
    printf("head_dim:                %d\n", in.head_dim);
    printf("max_position_embeddings: %d\n", in.max_position_embeddings);
    printf("rms_norm_eps:            %g\n", (double)in.rms_norm_eps);
    printf("rope_theta:              %g\n", (double)in.rope_theta);
    static const char *const rope_names[] = {"none", "llama3", "linear", "dynamic", "yarn", "longrope"};
    printf("rope_scaling:            %s\n",
           in.rope_type >= 0 && in.rope_type <= SPECDEC_ROPE_LONGROPE ? rope_names[in.rope_type] : "?");
    printf("tie_word_embeddings:     %s\n", in.tie_word_embeddings ? "true" : "false");
    printf("attention_bias:          %s\n", in.attention_bias ? "true" : "false");
    printf("dtype:                   %s\n", info_dtype_name(in.dtype, in.file_format));
    printf("parameters:              %s (%lld)\n", human, (long long)in.n_params);
    if (in.bos_id >= 0) printf("bos_id:                  %d\n", in.bos_id);
    else printf("bos_id:                  none\n");
    printf("eos_ids:                ");
    if (in.n_eos == 0) printf(" none");
    for (int i = 0; i < in.n_eos; i++) printf(" %d", in.eos_ids[i]);
    printf("\n");
    specdec_model_free(m);
    return 0;
}
