/* fuzz_config.c — fuzz target: config.json text through sd_config_parse(). A
 * successful parse must give sizes within the documented bounds and consistent heads. */
#include "fuzz_common.h"
#include "sd_config.h"

int sd_fuzz_one(const uint8_t *data, size_t size) {
    sd_config c;
    sd_errbuf eb;
    specdec_status st = sd_config_parse((const char *)data, size, "config.json", &c, &eb);
    if (st != SPECDEC_OK) {
        sd_fuzz_require(eb.msg[0] != '\0');
        return (int)st;
    }
    sd_fuzz_require(c.vocab_size >= 1 && c.vocab_size <= SD_CFG_MAX_VOCAB);
    sd_fuzz_require(c.hidden_size >= 1 && c.hidden_size <= SD_CFG_MAX_HIDDEN);
    sd_fuzz_require(c.n_layers >= 1 && c.n_layers <= SD_CFG_MAX_LAYERS);
    sd_fuzz_require(c.n_kv_heads >= 1 && c.n_heads % c.n_kv_heads == 0);
    sd_fuzz_require(c.head_dim >= 2 && c.head_dim % 2 == 0 && c.head_dim <= SD_CFG_MAX_HEAD_DIM);
    sd_fuzz_require(c.n_eos >= 0 && c.n_eos <= SPECDEC_MAX_EOS);
    for (int i = 0; i < c.n_eos; i++) sd_fuzz_require(c.eos_ids[i] >= 0 && c.eos_ids[i] < c.vocab_size);
    sd_fuzz_require(c.bos_id >= -1 && c.bos_id < c.vocab_size);
    sd_fuzz_require(c.rms_norm_eps > 0 && c.rope_theta >= 1);
    if (c.rope_type == SD_ROPE_LLAMA3) sd_fuzz_require(c.rope_high_freq_factor > c.rope_low_freq_factor);
    return 0;
}

SD_FUZZ_DEFINE_ENTRY
