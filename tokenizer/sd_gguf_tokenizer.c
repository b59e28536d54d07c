/* sd_gguf_tokenizer.c — the tokenizer a GGUF file embeds -> specdec_tokenizer.
 *
 * A GGUF (llama.cpp's single-file checkpoint) stores its tokenizer as metadata under llama.cpp's key
 * names (tokenizer.ggml.*). This file reads those keys (the header only: tensor data is never read,
 * the file is memory-mapped and only the metadata pages are touched) and writes the tokenizer.json
 * document and tokenizer_config fields the published tokenizer of that model has, then hands them to
 * the tokenizer.json loader, so added tokens, decoding and chat templates work unchanged.
 *
 *   "gpt2"  byte-level BPE: vocabulary = the tokens, merges = tokenizer.ggml.merges ("a b"), the
 *           pre-tokenizer of the published tokenizer.json picked by tokenizer.ggml.pre.
 *   "llama" SentencePiece BPE with byte fallback (Llama 2, Mistral, TinyLlama, Phi-3): the file has
 *           no merges (unless it lists some), so they are recovered from the scores: every split of
 *           a NORMAL token into two NORMAL tokens is a merge, ranked by the merged token's score
 *           (best first). This is SentencePiece's own rule (llama.cpp's SPM tokenizer merges the
 *           adjacent pair whose concatenation scores best) and the one the `tokenizers` converter
 *           used to write those models' tokenizer.json. Normalizer Prepend("▁") + Replace(" ", "▁"),
 *           decoder Replace + ByteFallback + Fuse + Strip, as those files have them.
 *   "llama" of architecture gemma / gemma2 / gemma3: transformers' GGUF Gemma tokenizer (GemmaTokenizer,
 *           what Hugging Face checks against Google's tokenizer.model), whose rules differ: a token of
 *           white space holding a space ("  ", stored so by the converter) is respelt as that many "▁";
 *           every token (any type) is in the vocabulary and may be a merge's part or result, ranked by
 *           file position (not score; ties within a token: the longer left part first); no prefix
 *           space whatever add_space_prefix says; decoder Replace + ByteFallback + Fuse (no Strip); of
 *           tokens spelt alike the last is the token (the others: no vocabulary entry).
 *           Other "gemma*" architectures (gemma3n, gemma-embedding, ...) are refused: unverified.
 * Token types (llama.cpp's): 1 NORMAL, 2 UNKNOWN, 3 CONTROL, 4 USER_DEFINED, 5 UNUSED, 6 BYTE
 * (0 read as NORMAL). CONTROL tokens become special added tokens, USER_DEFINED ones plain added
 * tokens (both matched on the raw text, as llama.cpp does); UNUSED ones (the converter's [PADn]
 * fillers) are left out. Everything is validated: counts, types, ids, UTF-8, NUL bytes. */
#define _POSIX_C_SOURCE 200809L /* open flags, mmap under -std=c11 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "sd_alloc.h"
#include "sd_gguf.h"
#include "sd_gguf_tokenizer.h"
#include "sd_tokenizer.h"

enum { GT_UNDEFINED = 0, GT_NORMAL = 1, GT_UNKNOWN = 2, GT_CONTROL = 3, GT_USER = 4, GT_UNUSED = 5, GT_BYTE = 6 };

/* Split regexes of the published tokenizer.json files (facts about those tokenizers). */
static const char SD_GT_LLAMA3_RE[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)|\\s+";
static const char SD_GT_QWEN2_RE[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+"
    "|\\s+(?!\\S)|\\s+";

/* Mistral's tekken (Mistral Nemo, Small 3.x, Devstral, Magistral) and OpenAI's o200k (gpt-oss): split by letter
 * case, digits one at a time (tekken) or up to three (o200k). */
static const char SD_GT_TEKKEN_RE[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char SD_GT_GPT4O_RE[] =
    "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]+"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]+[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]*"
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)?"
    "|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* DeepSeek-V3 / R1 (tokenizer.json of deepseek-ai/DeepSeek-V3): digit runs of up to three, then CJK and kana
 * runs, then the main split, each an Isolated Split of its own. */
static const char SD_GT_DIGITS3_RE[] = "\\p{N}{1,3}";
static const char SD_GT_DEEPSEEK3_CJK_RE[] = "[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+";
static const char SD_GT_DEEPSEEK3_RE[] =
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+";

/* DeepSeek LLM / V2 / V2-Lite / Coder-V2 ("deepseek-llm") and DeepSeek Coder 1.x ("deepseek-coder"): line
 * breaks alone, then letters (DeepSeek LLM: a list of the cased letters, U+1F7D, U+1FBE, U+1FD3, U+1FDB,
 * U+2126 and U+212A as the tokenizer.json has them, not their NFC forms) or punctuation with one leading
 * white-space character, trailing white space, CJK runs; digits one by one (a Digits step). */
static const char SD_GT_NEWLINE_RE[] = "[\r\n]";
static const char SD_GT_DSLLM_LETTERS_RE[] =
    "\\s?[A-Za-z\xc2\xb5\xc3\x80-\xc3\x96\xc3\x98-\xc3\xb6\xc3\xb8-\xc6\xba\xc6\xbc-\xc6\xbf\xc7\x84-\xca\x93\xca\x95-\xca\xaf"
    "\xcd\xb0-\xcd\xb3\xcd\xb6\xcd\xb7\xcd\xbb-\xcd\xbd\xcd\xbf\xce\x86\xce\x88-\xce\x8a\xce\x8c\xce\x8e-\xce\xa1\xce\xa3-\xcf\xb5"
    "\xcf\xb7-\xd2\x81\xd2\x8a-\xd4\xaf\xd4\xb1-\xd5\x96\xe1\x82\xa0-\xe1\x83\x85\xe1\x8e\xa0-\xe1\x8f\xb5\xe1\x8f\xb8-\xe1\x8f\xbd"
    "\xe1\xb2\x90-\xe1\xb2\xba\xe1\xb2\xbd-\xe1\xb2\xbf\xe1\xb4\x80-\xe1\xb4\xab\xe1\xb5\xab-\xe1\xb5\xb7\xe1\xb5\xb9-\xe1\xb6\x9a"
    "\xe1\xb8\x80-\xe1\xbc\x95\xe1\xbc\x98-\xe1\xbc\x9d\xe1\xbc\xa0-\xe1\xbd\x85\xe1\xbd\x88-\xe1\xbd\x8d\xe1\xbd\x90-\xe1\xbd\x97"
    "\xe1\xbd\x99\xe1\xbd\x9b\xe1\xbd\x9d\xe1\xbd\x9f-\xe1\xbd\xbd\xe1\xbe\x80-\xe1\xbe\xb4\xe1\xbe\xb6-\xe1\xbe\xbc\xe1\xbe\xbe"
    "\xe1\xbf\x82-\xe1\xbf\x84\xe1\xbf\x86-\xe1\xbf\x8c\xe1\xbf\x90-\xe1\xbf\x93\xe1\xbf\x96-\xe1\xbf\x9b\xe1\xbf\xa0-\xe1\xbf\xac"
    "\xe1\xbf\xb2-\xe1\xbf\xb4\xe1\xbf\xb6-\xe1\xbf\xbc\xe2\x84\x82\xe2\x84\x87\xe2\x84\x8a-\xe2\x84\x93\xe2\x84\x95"
    "\xe2\x84\x99-\xe2\x84\x9d\xe2\x84\xa4\xe2\x84\xa6\xe2\x84\xa8\xe2\x84\xaa-\xe2\x84\xad\xe2\x84\xaf-\xe2\x84\xb4\xe2\x84\xb9"
    "\xe2\x84\xbc-\xe2\x84\xbf\xe2\x85\x85-\xe2\x85\x89\xe2\x85\x8e\xe2\x86\x83\xe2\x86\x84\xe2\xb0\x80-\xe2\xb1\xbb"
    "\xe2\xb1\xbe-\xe2\xb3\xa4\xe2\xb3\xab-\xe2\xb3\xae\xe2\xb3\xb2\xe2\xb3\xb3\xea\x99\x80-\xea\x99\xad\xea\x9a\x80-\xea\x9a\x9b"
    "\xea\x9c\xa2-\xea\x9d\xaf\xea\x9d\xb1-\xea\x9e\x87\xea\x9e\x8b-\xea\x9e\x8e\xea\xad\xb0-\xea\xae\xbf\xef\xac\x80-\xef\xac\x86"
    "\xef\xac\x93-\xef\xac\x97\xef\xbc\xa1-\xef\xbc\xba\xef\xbd\x81-\xef\xbd\x9a\xf0\x90\x90\x80-\xf0\x90\x91\x8f"
    "\xf0\x90\x92\xb0-\xf0\x90\x93\x93\xf0\x90\x93\x98-\xf0\x90\x93\xbb\xf0\x90\xb2\x80-\xf0\x90\xb2\xb2\xf0\x90\xb3\x80-\xf0\x90\xb3\xb2"
    "\xf0\x91\xa2\xa0-\xf0\x91\xa3\x9f\xf0\x9e\xa4\x80-\xf0\x9e\xa5\x83]+";
static const char SD_GT_DSLLM_PUNCT_RE[] =
    "\\s?[!-/:-~\xef\xbc\x81-\xef\xbc\x8f\xef\xbc\x9a-\xef\xbd\x9e\xe2\x80\x98-\xe2\x80\x9f\xe3\x80\x80-\xe3\x80\x82]+";
static const char SD_GT_TRAILING_SPACE_RE[] = "\\s+$";
static const char SD_GT_DEEPSEEK_CJK_RE[] = "[\xe4\xb8\x80-\xe9\xbe\xa5\xe0\xa0\x80-\xe4\xb8\x80\xea\xb0\x80-\xed\x9f\xbf]+";
static const char SD_GT_LETTERS_RE[] = "\\s?\\p{L}+";
static const char SD_GT_PUNCT_RE[] = "\\s?\\p{P}+";

/* One step of a published pre-tokenizer: an Isolated Split, a Split keeping only the matches (Removed,
 * inverted: the cl100k files), Digits(individual_digits), or the closing ByteLevel (with GPT-2's regex,
 * without it, or without it and trim_offsets false as Qwen2's file says; trim_offsets never changes ids). */
typedef enum { GT_STEP_END, GT_STEP_SPLIT, GT_STEP_SPLIT_KEEP, GT_STEP_DIGITS, GT_STEP_BYTELEVEL_RE, GT_STEP_BYTELEVEL,
               GT_STEP_BYTELEVEL_NOTRIM } sd_gt_step_kind;
enum { GT_NORM_NONE, GT_NORM_NFC, GT_NORM_EMPTY };
#define GT_MAX_STEPS 7

/* The normalizer, pre-tokenizer steps and model.ignore_merges of a published tokenizer.json, and whether
 * llama.cpp adds BOS when the file does not say. */
typedef struct {
    int norm, whole_first, bos_default;
    struct { sd_gt_step_kind kind; const char *re; } step[GT_MAX_STEPS];
} sd_gt_recipe;

/* ignore_merges: the tiktoken-derived vocabularies whose tokenizer.json takes a pre-token found whole in the
 * vocabulary before any merge (as transformers' tiktoken converter writes them). */
static const sd_gt_recipe SD_GT_GPT2 = {GT_NORM_NONE, 0, 0, {{GT_STEP_BYTELEVEL_RE, NULL}}};
static const sd_gt_recipe SD_GT_LLAMA3 = {GT_NORM_NONE, 1, 1, {{GT_STEP_SPLIT, SD_GT_LLAMA3_RE}, {GT_STEP_BYTELEVEL, NULL}}};
static const sd_gt_recipe SD_GT_QWEN2 = {GT_NORM_NFC, 0, 0, {{GT_STEP_SPLIT, SD_GT_QWEN2_RE}, {GT_STEP_BYTELEVEL_NOTRIM, NULL}}};
static const sd_gt_recipe SD_GT_SMOLLM = {GT_NORM_NONE, 0, 0, {{GT_STEP_DIGITS, NULL}, {GT_STEP_BYTELEVEL_RE, NULL}}};
static const sd_gt_recipe SD_GT_TEKKEN = {GT_NORM_NONE, 1, 1, {{GT_STEP_SPLIT, SD_GT_TEKKEN_RE}, {GT_STEP_BYTELEVEL, NULL}}};
static const sd_gt_recipe SD_GT_GPT4O = {GT_NORM_NONE, 1, 0, {{GT_STEP_SPLIT, SD_GT_GPT4O_RE}, {GT_STEP_BYTELEVEL, NULL}}};
static const sd_gt_recipe SD_GT_DEEPSEEK3 = {GT_NORM_EMPTY, 0, 0,
    {{GT_STEP_SPLIT, SD_GT_DIGITS3_RE}, {GT_STEP_SPLIT, SD_GT_DEEPSEEK3_CJK_RE}, {GT_STEP_SPLIT, SD_GT_DEEPSEEK3_RE},
     {GT_STEP_BYTELEVEL, NULL}}};
static const sd_gt_recipe SD_GT_DEEPSEEK_LLM = {GT_NORM_EMPTY, 0, 0,
    {{GT_STEP_SPLIT, SD_GT_NEWLINE_RE}, {GT_STEP_SPLIT, SD_GT_DSLLM_LETTERS_RE}, {GT_STEP_SPLIT, SD_GT_DSLLM_PUNCT_RE},
     {GT_STEP_SPLIT, SD_GT_TRAILING_SPACE_RE}, {GT_STEP_SPLIT, SD_GT_DEEPSEEK_CJK_RE}, {GT_STEP_DIGITS, NULL},
     {GT_STEP_BYTELEVEL, NULL}}};
static const sd_gt_recipe SD_GT_DEEPSEEK_CODER = {GT_NORM_EMPTY, 0, 0,
    {{GT_STEP_SPLIT, SD_GT_NEWLINE_RE}, {GT_STEP_SPLIT, SD_GT_LETTERS_RE}, {GT_STEP_SPLIT, SD_GT_PUNCT_RE},
     {GT_STEP_SPLIT, SD_GT_DEEPSEEK_CJK_RE}, {GT_STEP_DIGITS, NULL}, {GT_STEP_BYTELEVEL, NULL}}};
/* cl100k-derived files (OLMo 2, Phi-4, Granite 4: "dbrx"): Llama 3's regex as a Split keeping the matches */
static const sd_gt_recipe SD_GT_CL100K = {GT_NORM_NONE, 0, 0, {{GT_STEP_SPLIT_KEEP, SD_GT_LLAMA3_RE}, {GT_STEP_BYTELEVEL, NULL}}};
/* GLM-4-0414 / GLM-4.5 / 4.6 ("glm4"): Llama 3's regex, merges always applied */
static const sd_gt_recipe SD_GT_GLM4 = {GT_NORM_NONE, 0, 0, {{GT_STEP_SPLIT, SD_GT_LLAMA3_RE}, {GT_STEP_BYTELEVEL, NULL}}};
/* GPT-NeoX's vocabulary (OLMo 1.7, OLMoE: "olmo"): NFC, then GPT-2's ByteLevel */
static const sd_gt_recipe SD_GT_NEOX = {GT_NORM_NFC, 0, 0, {{GT_STEP_BYTELEVEL_RE, NULL}}};

/* tokenizer.ggml.pre -> the published pre-tokenizer. smaug-bpe and falcon3 are Llama 3's; refact and
 * starcoder (Granite 3.x, StarCoder 2) SmolLM's (StarCoder's layout, which SmolLM reuses); exaone4 GPT-2's. */
static const struct { const char *name; const sd_gt_recipe *pre; } sd_gt_pres[] = {
    {"default", &SD_GT_GPT2}, {"gpt-2", &SD_GT_GPT2}, {"gpt2", &SD_GT_GPT2}, {"exaone4", &SD_GT_GPT2},
    {"llama-bpe", &SD_GT_LLAMA3}, {"llama3", &SD_GT_LLAMA3}, {"llama-v3", &SD_GT_LLAMA3},
    {"smaug-bpe", &SD_GT_LLAMA3}, {"falcon3", &SD_GT_LLAMA3},
    {"qwen2", &SD_GT_QWEN2}, {"deepseek-r1-qwen", &SD_GT_QWEN2},
    {"smollm", &SD_GT_SMOLLM}, {"refact", &SD_GT_SMOLLM}, {"starcoder", &SD_GT_SMOLLM},
    {"tekken", &SD_GT_TEKKEN}, {"gpt-4o", &SD_GT_GPT4O},
    {"deepseek-v3", &SD_GT_DEEPSEEK3}, {"deepseek-llm", &SD_GT_DEEPSEEK_LLM}, {"deepseek-coder", &SD_GT_DEEPSEEK_CODER},
    {"dbrx", &SD_GT_CL100K}, {"glm4", &SD_GT_GLM4}, {"olmo", &SD_GT_NEOX},
};

typedef struct sd_gt {
    const sd_gguf *g;
    const char *what;
    uint64_t n;                 /* token count */
    const sd_gguf_str *tok;     /* [n] as the tokenizer spells them (Gemma: respelt) */
    const sd_gguf_str *file_tok; /* [n] as the file spells them */
    sd_gguf_str *own_tok;       /* Gemma's respelt copy of the array (tok), or NULL */
    char *own_blob;             /* the respelt tokens' bytes */
    int gemma;                  /* Gemma's rules (see the file comment) */
    int32_t *alias;             /* Gemma: [n] the last index spelt as token i (i when none later) */
    uint8_t *gflag;             /* Gemma: [n] 1 special, 2 added, from every token spelt as token i */
    uint8_t *type;              /* [n] */
    double *score;              /* [n] (llama) */
    char *buf;                  /* NUL-terminated scratch copy */
    size_t buf_cap;
} sd_gt;

#define GT_FAIL(st, ...) sd_fail(NULL, st, __VA_ARGS__)

/* s as a NUL-terminated string in gt->buf; NULL (and the error set) when it holds a NUL byte or
 * invalid UTF-8. */
static const char *sd_gt_cstr(sd_gt *gt, sd_gguf_str s, const char *key, uint64_t idx, specdec_status *st) {
    if (s.len > SD_TOK_MAX_TOKEN_BYTES && strcmp(key, "tokenizer.chat_template")) {
        *st = GT_FAIL(SPECDEC_ERR_FORMAT, "%s: %s[%llu] is %llu bytes long (max %d)", gt->what, key, (unsigned long long)idx,
                      (unsigned long long)s.len, SD_TOK_MAX_TOKEN_BYTES);
        return NULL;
    }
    if (s.len >= gt->buf_cap) {
        size_t cap = (size_t)s.len + 1 > 256 ? (size_t)s.len + 1 : 256;
        char *p = sd_realloc(gt->buf, cap);
        if (!p) { *st = GT_FAIL(SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", gt->what); return NULL; }
        gt->buf = p;
        gt->buf_cap = cap;
    }
    if (s.len && memchr(s.s, '\0', (size_t)s.len)) {
        *st = GT_FAIL(SPECDEC_ERR_UNSUPPORTED, "%s: %s[%llu] holds a NUL byte", gt->what, key, (unsigned long long)idx);
        return NULL;
    }
    if (!sd_utf8_valid((const unsigned char *)s.s, (size_t)s.len)) {
        *st = GT_FAIL(SPECDEC_ERR_FORMAT, "%s: %s[%llu] is not valid UTF-8", gt->what, key, (unsigned long long)idx);
        return NULL;
    }
    if (s.len) memcpy(gt->buf, s.s, (size_t)s.len);
    gt->buf[s.len] = '\0';
    return gt->buf;
}

/* An array entry of element type want (any integer type when want is SD_GGUF_I32, F32/F64 for
 * SD_GGUF_F32) with n elements; NULL when absent; error when mistyped. */
static specdec_status sd_gt_array(const sd_gt *gt, const char *key, sd_gguf_vtype want, int required, uint64_t n,
                                  const sd_gguf_kv **out) {
    const sd_gguf_kv *kv = sd_gguf_find(gt->g, key);
    *out = NULL;
    if (!kv) return required ? GT_FAIL(SPECDEC_ERR_FORMAT, "%s: GGUF key %s is missing", gt->what, key) : SPECDEC_OK;
    int ok = kv->type == SD_GGUF_ARRAY;
    if (ok && want == SD_GGUF_STRING) ok = kv->arr_type == SD_GGUF_STRING;
    else if (ok && want == SD_GGUF_F32) ok = kv->arr_type == SD_GGUF_F32 || kv->arr_type == SD_GGUF_F64;
    else if (ok) ok = kv->arr_type <= SD_GGUF_I32 || kv->arr_type == SD_GGUF_U64 || kv->arr_type == SD_GGUF_I64;
    if (!ok)
        return GT_FAIL(SPECDEC_ERR_FORMAT, "%s: GGUF key %s must be an array of %s", gt->what, key,
                       want == SD_GGUF_STRING ? "strings" : want == SD_GGUF_F32 ? "floats" : "integers");
    if (n != UINT64_MAX && kv->n != n)
        return GT_FAIL(SPECDEC_ERR_FORMAT, "%s: GGUF key %s has %llu elements but tokenizer.ggml.tokens has %llu",
                       gt->what, key, (unsigned long long)kv->n, (unsigned long long)n);
    *out = kv;
    return SPECDEC_OK;
}

/* Optional token id key: -1 when absent; an error when mistyped or not a token. */
static specdec_status sd_gt_id(const sd_gt *gt, const char *key, int64_t *id) {
    *id = -1;
    const sd_gguf_kv *kv = sd_gguf_find(gt->g, key);
    if (!kv) return SPECDEC_OK;
    int64_t v;
    if (!sd_gguf_get_i64(gt->g, key, &v))
        return GT_FAIL(SPECDEC_ERR_FORMAT, "%s: GGUF key %s must be an integer", gt->what, key);
    if (v < 0 || (uint64_t)v >= gt->n)
        return GT_FAIL(SPECDEC_ERR_FORMAT, "%s: GGUF key %s = %lld is not a token id (the vocabulary has %llu)", gt->what,
                       key, (long long)v, (unsigned long long)gt->n);
    *id = v;
    return SPECDEC_OK;
}

static specdec_status sd_gt_bool(const sd_gt *gt, const char *key, int def, int *out) {
    *out = def;
    if (!sd_gguf_find(gt->g, key)) return SPECDEC_OK;
    if (!sd_gguf_get_bool(gt->g, key, out)) return GT_FAIL(SPECDEC_ERR_FORMAT, "%s: GGUF key %s must be a boolean", gt->what, key);
    return SPECDEC_OK;
}

/* ---- small cJSON builders (NULL on out of memory) ------------------------------------------- */
static cJSON *sd_gt_obj(const char *type) {
    cJSON *o = cJSON_CreateObject();
    if (o && type && !cJSON_AddStringToObject(o, "type", type)) { cJSON_Delete(o); return NULL; }
    return o;
}

static int sd_gt_add(cJSON *parent, const char *key, cJSON *child) {
    if (!parent || !child) { cJSON_Delete(child); return 0; }
    if (key ? !cJSON_AddItemToObject(parent, key, child) : !cJSON_AddItemToArray(parent, child)) {
        cJSON_Delete(child);
        return 0;
    }
    return 1;
}

static cJSON *sd_gt_bytelevel(int prefix, int trim, int regex) {
    cJSON *o = sd_gt_obj("ByteLevel");
    if (o && (!cJSON_AddBoolToObject(o, "add_prefix_space", prefix) || !cJSON_AddBoolToObject(o, "trim_offsets", trim) ||
              !cJSON_AddBoolToObject(o, "use_regex", regex))) { cJSON_Delete(o); return NULL; }
    return o;
}

/* Split(Regex): Isolated, or keep_matches: Removed and inverted (only the matches are pieces) */
static cJSON *sd_gt_split(const char *regex, int keep_matches) {
    cJSON *o = sd_gt_obj("Split"), *p = cJSON_CreateObject();
    if (!sd_gt_add(p, "Regex", cJSON_CreateString(regex)) || !sd_gt_add(o, "pattern", p)) { cJSON_Delete(o); return NULL; }
    if (!cJSON_AddStringToObject(o, "behavior", keep_matches ? "Removed" : "Isolated") ||
        !cJSON_AddBoolToObject(o, "invert", keep_matches)) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

static cJSON *sd_gt_seq(const char *type, const char *key, cJSON *a, cJSON *b, cJSON *c, cJSON *d) {
    cJSON *o = sd_gt_obj(type), *arr = cJSON_CreateArray();
    cJSON *items[4] = {a, b, c, d};
    int ok = sd_gt_add(o, key, arr);
    for (int i = 0; i < 4; i++) {
        if (!items[i]) continue;
        if (ok) ok = sd_gt_add(arr, NULL, items[i]);
        else cJSON_Delete(items[i]);
    }
    if (!ok) { cJSON_Delete(o); return NULL; }
    return o;
}

static cJSON *sd_gt_replace(const char *from, const char *to) {
    cJSON *o = sd_gt_obj("Replace"), *p = cJSON_CreateObject();
    if (!sd_gt_add(p, "String", cJSON_CreateString(from)) || !sd_gt_add(o, "pattern", p) ||
        !cJSON_AddStringToObject(o, "content", to)) { cJSON_Delete(o); return NULL; }
    return o;
}

/* The pre_tokenizer of recipe r: its one step, or a Sequence of them; NULL when out of memory. */
static cJSON *sd_gt_pretokenizer(const sd_gt_recipe *r) {
    cJSON *steps = cJSON_CreateArray();
    int n = 0, ok = steps != NULL;
    for (; ok && n < GT_MAX_STEPS && r->step[n].kind != GT_STEP_END; n++) {
        cJSON *o = NULL;
        switch (r->step[n].kind) {
        case GT_STEP_SPLIT: o = sd_gt_split(r->step[n].re, 0); break;
        case GT_STEP_SPLIT_KEEP: o = sd_gt_split(r->step[n].re, 1); break;
        case GT_STEP_DIGITS:
            o = sd_gt_obj("Digits");
            if (o && !cJSON_AddBoolToObject(o, "individual_digits", 1)) { cJSON_Delete(o); o = NULL; }
            break;
        case GT_STEP_BYTELEVEL_RE: o = sd_gt_bytelevel(0, 1, 1); break;
        case GT_STEP_BYTELEVEL: o = sd_gt_bytelevel(0, 1, 0); break;
        default: o = sd_gt_bytelevel(0, 0, 0); break;
        }
        ok = sd_gt_add(steps, NULL, o);
    }
    if (ok && n == 1) { /* one step stands alone, as GPT-2's file has it */
        cJSON *only = cJSON_DetachItemFromArray(steps, 0);
        cJSON_Delete(steps);
        return only;
    }
    cJSON *seq = ok ? sd_gt_obj("Sequence") : NULL;
    if (!seq || !sd_gt_add(seq, "pretokenizers", steps)) { cJSON_Delete(seq); if (!seq) cJSON_Delete(steps); return NULL; }
    return seq;
}

/* ---- merges recovered from the scores ("llama") ----------------------------------------------- */
typedef struct { double score; int32_t id, left, right; uint64_t left_len; } sd_gt_merge;

/* string -> id of the tokens that take part in merges (open addressing) */
typedef struct { int32_t *slot; size_t mask; const sd_gt *gt; } sd_gt_map;

static uint64_t sd_gt_hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

static int32_t sd_gt_map_get(const sd_gt_map *m, const char *s, size_t n) {
    for (size_t i = sd_gt_hash(s, n) & m->mask;; i = (i + 1) & m->mask) {
        int32_t id = m->slot[i];
        if (id < 0) return -1;
        const sd_gguf_str *t = &m->gt->tok[id];
        if (t->len == n && !memcmp(t->s, s, n)) return id;
    }
}

/* An empty map with room for every token; 0 when out of memory. */
static int sd_gt_map_init(sd_gt_map *m, const sd_gt *gt) {
    size_t cap = 16;
    while (cap < gt->n * 2) cap *= 2;
    *m = (sd_gt_map){sd_malloc(cap * sizeof(int32_t)), cap - 1, gt};
    if (!m->slot) return 0;
    for (size_t i = 0; i < cap; i++) m->slot[i] = -1;
    return 1;
}

/* Token i added unless a token spelt alike is there already; returns the id the map holds. */
static int32_t sd_gt_map_put(sd_gt_map *m, uint64_t i) {
    const sd_gguf_str *t = &m->gt->tok[i];
    size_t k = sd_gt_hash(t->s, (size_t)t->len) & m->mask;
    while (m->slot[k] >= 0) {
        const sd_gguf_str *o = &m->gt->tok[m->slot[k]];
        if (o->len == t->len && !memcmp(o->s, t->s, (size_t)t->len)) return m->slot[k];
        k = (k + 1) & m->mask;
    }
    return m->slot[k] = (int32_t)i;
}

static int sd_gt_merge_cmp(const void *pa, const void *pb) {
    const sd_gt_merge *a = pa, *b = pb;
    if (a->score != b->score) return a->score > b->score ? -1 : 1;
    if (a->id != b->id) return a->id < b->id ? -1 : 1;
    if (a->left != b->left) return a->left < b->left ? -1 : 1;
    return 0;
}

/* Gemma (transformers' generate_merges with the file position as the score): by the merged token's
 * position, then the longer left part first */
static int sd_gt_merge_cmp_gemma(const void *pa, const void *pb) {
    const sd_gt_merge *a = pa, *b = pb;
    if (a->id != b->id) return a->id < b->id ? -1 : 1;
    if (a->left_len != b->left_len) return a->left_len > b->left_len ? -1 : 1;
    return 0;
}

static int sd_gt_is_normal(uint8_t t) { return t == GT_NORMAL || t == GT_UNDEFINED; }

/* a token that takes part in the recovered merges: NORMAL ones; for Gemma every one not spelt again later */
static int sd_gt_mergeable(const sd_gt *gt, uint64_t i) {
    return gt->gemma ? gt->alias[i] == (int32_t)i : sd_gt_is_normal(gt->type[i]);
}

/* Tokens longer than this never result from a recovered merge (keeps a crafted vocabulary of huge
 * tokens from costing quadratic time; SentencePiece pieces are a few dozen bytes). */
#define SD_GT_MERGE_MAX_BYTES 512

static specdec_status sd_gt_derive_merges(sd_gt *gt, cJSON *arr) {
    sd_gt_map m;
    sd_gt_merge *v = NULL;
    size_t nv = 0, vcap = 0;
    specdec_status st = SPECDEC_OK;
    if (!sd_gt_map_init(&m, gt)) return GT_FAIL(SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", gt->what);
    for (uint64_t i = 0; i < gt->n; i++)
        if (sd_gt_mergeable(gt, i)) sd_gt_map_put(&m, i); /* a duplicate stays out: the loader names it */
    for (uint64_t i = 0; i < gt->n && !st; i++) {
        const sd_gguf_str *t = &gt->tok[i];
        if (!sd_gt_mergeable(gt, i) || t->len < 2 || t->len > SD_GT_MERGE_MAX_BYTES) continue;
        size_t at = 0;
        int32_t cp;
        at += sd_utf8_next(t->s, (size_t)t->len, &cp);
        for (; at < t->len; at += sd_utf8_next(t->s + at, (size_t)t->len - at, &cp)) {
            int32_t l = sd_gt_map_get(&m, t->s, at);
            if (l < 0) continue;
            int32_t r = sd_gt_map_get(&m, t->s + at, (size_t)t->len - at);
            if (r < 0) continue;
            if (nv == vcap) {
                vcap = vcap ? vcap * 2 : 4096;
                sd_gt_merge *p = sd_realloc(v, vcap * sizeof *v);
                if (!p) { st = GT_FAIL(SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory for the merges", gt->what); break; }
                v = p;
            }
            v[nv++] = (sd_gt_merge){gt->score[i], (int32_t)i, l, r, (uint64_t)at};
        }
    }
    if (!st && nv) qsort(v, nv, sizeof *v, gt->gemma ? sd_gt_merge_cmp_gemma : sd_gt_merge_cmp);
    for (size_t i = 0; i < nv && !st; i++) {
        cJSON *pair = cJSON_CreateArray();
        const sd_gguf_str *l = &gt->tok[v[i].left], *r = &gt->tok[v[i].right];
        const char *s = sd_gt_cstr(gt, *l, "tokenizer.ggml.tokens", (uint64_t)v[i].left, &st);
        if (s && !sd_gt_add(pair, NULL, cJSON_CreateString(s))) s = NULL;
        if (s) s = sd_gt_cstr(gt, *r, "tokenizer.ggml.tokens", (uint64_t)v[i].right, &st);
        if (s && !sd_gt_add(pair, NULL, cJSON_CreateString(s))) s = NULL;
        if (!s || !sd_gt_add(arr, NULL, pair)) {
            if (s) pair = NULL;
            cJSON_Delete(pair);
            if (!st) st = GT_FAIL(SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", gt->what);
        }
    }
    sd_free(v);
    sd_free(m.slot);
    return st;
}

/* ---- Gemma's white-space tokens -------------------------------------------------------------- */
/* Python's str.isspace(), which transformers' test (`" " in t and not t.strip()`) uses */
static int sd_gt_py_space(int32_t c) {
    return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
           (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* The code points of s when s holds a space and nothing but white space, else 0 (invalid UTF-8 is
 * left for sd_gt_cstr to name). */
static uint64_t sd_gt_space_run(const sd_gguf_str *s) {
    if (!s->len || !memchr(s->s, ' ', (size_t)s->len) || !sd_utf8_valid((const unsigned char *)s->s, (size_t)s->len))
        return 0;
    uint64_t n = 0;
    int32_t cp;
    for (size_t at = 0; at < s->len; n++) {
        at += sd_utf8_next(s->s + at, (size_t)s->len - at, &cp);
        if (!sd_gt_py_space(cp)) return 0;
    }
    return n;
}

/* Gemma's GGUF files store its white-space tokens ("  ", "   ", ...) with real spaces, while the
 * model is looked up as "▁▁", "▁▁▁": gt->tok becomes a copy with each such token spelt as one "▁" per
 * code point (transformers' gemma_tokenizer). */
static specdec_status sd_gt_gemma_respell(sd_gt *gt) {
    uint64_t total = 0;
    for (uint64_t i = 0; i < gt->n; i++) {
        uint64_t c = sd_gt_space_run(&gt->tok[i]);
        if (c > SD_TOK_MAX_TOKEN_BYTES / 3)
            return GT_FAIL(SPECDEC_ERR_FORMAT, "%s: tokenizer.ggml.tokens[%llu] (%llu white-space characters) is longer than "
                           "%d bytes spelt with \"\xe2\x96\x81\"", gt->what, (unsigned long long)i, (unsigned long long)c,
                           SD_TOK_MAX_TOKEN_BYTES);
        total += 3 * c;
    }
    if (!total) return SPECDEC_OK;
    gt->own_tok = sd_malloc((size_t)gt->n * sizeof *gt->own_tok);
    gt->own_blob = sd_malloc((size_t)total);
    if (!gt->own_tok || !gt->own_blob) return GT_FAIL(SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", gt->what);
    char *p = gt->own_blob;
    for (uint64_t i = 0; i < gt->n; i++) {
        uint64_t c = sd_gt_space_run(&gt->tok[i]);
        gt->own_tok[i] = gt->tok[i];
        if (!c) continue;
        gt->own_tok[i] = (sd_gguf_str){p, 3 * c};
        for (uint64_t k = 0; k < c; k++, p += 3) memcpy(p, "\xe2\x96\x81", 3);
    }
    gt->tok = gt->own_tok;
    return SPECDEC_OK;
}

static int sd_gt_respelt(const sd_gt *gt, uint64_t i) { return gt->tok[i].s != gt->file_tok[i].s; }

/* transformers' Gemma vocabulary is a dict filled in file order, so of tokens spelt alike (after the
 * respelling: "  " and a NORMAL "▁▁", say) the last one is the token; gt->alias maps each to it. */
static specdec_status sd_gt_gemma_alias(sd_gt *gt) {
    sd_gt_map m;
    gt->alias = sd_malloc((size_t)gt->n * sizeof *gt->alias);
    if (!gt->alias || !sd_gt_map_init(&m, gt)) {
        sd_free(gt->alias);
        gt->alias = NULL;
        return GT_FAIL(SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", gt->what);
    }
    for (uint64_t i = gt->n; i-- > 0;) gt->alias[i] = sd_gt_map_put(&m, i);
    sd_free(m.slot);
    return SPECDEC_OK;
}

/* ---- the document ----------------------------------------------------------------------------- */
static int sd_gt_lower_has(const sd_gguf_str *s, const char *needle) {
    size_t nl = strlen(needle);
    for (size_t i = 0; i + nl <= s->len; i++) {
        size_t k = 0;
        while (k < nl && (s->s[i + k] >= 'A' && s->s[i + k] <= 'Z' ? s->s[i + k] + 32 : s->s[i + k]) == needle[k]) k++;
        if (k == nl) return 1;
    }
    return 0;
}

/* Phi-3's published tokenizer.json right-strips its chat tokens and </s>; a GGUF cannot say so, and
 * llama.cpp restores it by model name (general.name holding "phi-3"/"phi3", or architecture phi3). */
static int sd_gt_is_phi3(const sd_gguf *g) {
    sd_gguf_str s;
    if (sd_gguf_get_str(g, "general.architecture", &s) && s.len == 4 && !memcmp(s.s, "phi3", 4)) return 1;
    return sd_gguf_get_str(g, "general.name", &s) && (sd_gt_lower_has(&s, "phi-3") || sd_gt_lower_has(&s, "phi3"));
}

typedef struct sd_gt_out {
    cJSON *root, *cfg;
    int64_t bos, eos;
    int add_bos;
} sd_gt_out;

static specdec_status sd_gt_cfg_token(sd_gt *gt, cJSON *cfg, const char *name, int64_t id) {
    specdec_status st = SPECDEC_OK;
    if (id < 0) return cJSON_AddNullToObject(cfg, name) ? SPECDEC_OK : GT_FAIL(SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", gt->what);
    const char *s = sd_gt_cstr(gt, gt->tok[id], "tokenizer.ggml.tokens", (uint64_t)id, &st);
    if (!s) return st;
    return cJSON_AddStringToObject(cfg, name, s) ? SPECDEC_OK : GT_FAIL(SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", gt->what);
}

/* TemplateProcessing: [bos] $A [eos] (an id < 0 left out). */
static cJSON *sd_gt_template(int64_t bos, int64_t eos) {
    cJSON *o = sd_gt_obj("TemplateProcessing"), *single = cJSON_CreateArray(), *sp = cJSON_CreateObject();
    int ok = sd_gt_add(o, "single", single) && sd_gt_add(o, "special_tokens", sp);
    const int64_t ids[3] = {bos, -2, eos};
    for (int i = 0; ok && i < 3; i++) {
        cJSON *piece = cJSON_CreateObject(), *inner = cJSON_CreateObject();
        if (ids[i] == -1) { cJSON_Delete(piece); cJSON_Delete(inner); continue; }
        const char *name = ids[i] == -2 ? "A" : i == 0 ? "bos" : "eos";
        ok = sd_gt_add(single, NULL, piece) && sd_gt_add(piece, ids[i] == -2 ? "Sequence" : "SpecialToken", inner) &&
             cJSON_AddStringToObject(inner, "id", name) && cJSON_AddNumberToObject(inner, "type_id", 0);
        if (ok && ids[i] >= 0) {
            cJSON *def = cJSON_CreateObject(), *idl = cJSON_CreateArray();
            ok = sd_gt_add(sp, name, def) && cJSON_AddStringToObject(def, "id", name) && sd_gt_add(def, "ids", idl) &&
                 sd_gt_add(idl, NULL, cJSON_CreateNumber((double)ids[i]));
        }
    }
    if (!ok) { cJSON_Delete(o); return NULL; }
    return o;
}

static specdec_status sd_gt_build(sd_gt *gt, sd_gt_out *out) {
    const sd_gguf *g = gt->g;
    specdec_status st;
    sd_gguf_str model;
    if (!sd_gguf_find(g, "tokenizer.ggml.model"))
        return GT_FAIL(SPECDEC_ERR_FORMAT, "%s: GGUF key tokenizer.ggml.model is missing: the file holds no tokenizer", gt->what);
    if (!sd_gguf_get_str(g, "tokenizer.ggml.model", &model))
        return GT_FAIL(SPECDEC_ERR_FORMAT, "%s: GGUF key tokenizer.ggml.model must be a string", gt->what);
    int spm = model.len == 5 && !memcmp(model.s, "llama", 5);
    if (!spm && !(model.len == 4 && !memcmp(model.s, "gpt2", 4)))
        return GT_FAIL(SPECDEC_ERR_UNSUPPORTED, "%s: GGUF tokenizer.ggml.model \"%.*s\" is not supported (gpt2 and llama are)",
                       gt->what, (int)(model.len > 64 ? 64 : model.len), model.s);
    sd_gguf_str arch;
    /* Gemma's "llama" vocabularies follow their own rules (see the file comment), checked against
     * transformers for gemma, gemma2 and gemma3; another Gemma (gemma3n, gemma-embedding, ...) is not */
    if (spm && sd_gguf_get_str(g, "general.architecture", &arch) && arch.len >= 5 && !memcmp(arch.s, "gemma", 5)) {
        gt->gemma = (arch.len == 5) || (arch.len == 6 && (arch.s[5] == '2' || arch.s[5] == '3'));
        if (!gt->gemma)
            return GT_FAIL(SPECDEC_ERR_UNSUPPORTED, "%s: the GGUF tokenizer of architecture \"%.*s\" is not supported (of "
                           "the Gemma SentencePiece vocabularies, those of gemma, gemma2 and gemma3 are)", gt->what,
                           (int)(arch.len > 32 ? 32 : arch.len), arch.s);
    }
    const sd_gt_recipe *pre = &SD_GT_GPT2;
    if (!spm) {
        sd_gguf_str p = {"default", 7};
        if (sd_gguf_find(g, "tokenizer.ggml.pre") && !sd_gguf_get_str(g, "tokenizer.ggml.pre", &p))
            return GT_FAIL(SPECDEC_ERR_FORMAT, "%s: GGUF key tokenizer.ggml.pre must be a string", gt->what);
        size_t i = 0, np = sizeof sd_gt_pres / sizeof *sd_gt_pres;
        while (i < np && !(strlen(sd_gt_pres[i].name) == p.len && !memcmp(sd_gt_pres[i].name, p.s, (size_t)p.len))) i++;
        if (i == np) {
            char known[512];
            size_t kl = 0;
            for (size_t k = 0; k < np && kl + 32 < sizeof known; k++)
                kl += (size_t)snprintf(known + kl, sizeof known - kl, "%s%s", k ? ", " : "", sd_gt_pres[k].name);
            return GT_FAIL(SPECDEC_ERR_UNSUPPORTED, "%s: GGUF tokenizer.ggml.pre \"%.*s\" is not supported (known: %s)", gt->what,
                           (int)(p.len > 64 ? 64 : p.len), p.s, known);
        }
        pre = sd_gt_pres[i].pre;
    }
    const sd_gguf_kv *tokens, *types, *scores, *merges;
    if ((st = sd_gt_array(gt, "tokenizer.ggml.tokens", SD_GGUF_STRING, 1, UINT64_MAX, &tokens))) return st;
    gt->n = tokens->n;
    gt->tok = gt->file_tok = tokens->strs;
    if (gt->n == 0 || gt->n > SD_TOK_MAX_ID)
        return GT_FAIL(SPECDEC_ERR_FORMAT, "%s: tokenizer.ggml.tokens has %llu entries (1..%d accepted)", gt->what,
                       (unsigned long long)gt->n, SD_TOK_MAX_ID);
    if (gt->gemma && ((st = sd_gt_gemma_respell(gt)) || (st = sd_gt_gemma_alias(gt)))) return st;
    if ((st = sd_gt_array(gt, "tokenizer.ggml.token_type", SD_GGUF_I32, 0, gt->n, &types))) return st;
    if ((st = sd_gt_array(gt, "tokenizer.ggml.scores", SD_GGUF_F32, 0, gt->n, &scores))) return st;
    /* gguf-py never writes an empty array, so a byte-level vocabulary without merges has no key */
    if ((st = sd_gt_array(gt, "tokenizer.ggml.merges", SD_GGUF_STRING, 0, UINT64_MAX, &merges))) return st;
    if (spm && !merges && !scores && !gt->gemma) /* Gemma's merges follow the file order */
        return GT_FAIL(SPECDEC_ERR_FORMAT, "%s: GGUF key tokenizer.ggml.scores is missing: a \"llama\" tokenizer without "
                       "merges needs the scores to recover them", gt->what);
    if (merges && merges->n > (uint64_t)INT32_MAX)
        return GT_FAIL(SPECDEC_ERR_FORMAT, "%s: tokenizer.ggml.merges has %llu entries", gt->what, (unsigned long long)merges->n);
    gt->type = sd_malloc((size_t)gt->n);
    gt->score = sd_malloc((size_t)gt->n * sizeof *gt->score);
    if (!gt->type || !gt->score) return GT_FAIL(SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", gt->what);
    for (uint64_t i = 0; i < gt->n; i++) {
        int64_t t = GT_NORMAL;
        if (types && (!sd_gguf_arr_i64(types, i, &t) || t < 0 || t > GT_BYTE))
            return GT_FAIL(SPECDEC_ERR_FORMAT, "%s: tokenizer.ggml.token_type[%llu] = %lld is not a token type (0..6)",
                           gt->what, (unsigned long long)i, (long long)t);
        gt->type[i] = (uint8_t)t;
        double s = 0;
        if (scores && (!sd_gguf_arr_f64(scores, i, &s) || !isfinite(s)))
            return GT_FAIL(SPECDEC_ERR_FORMAT, "%s: tokenizer.ggml.scores[%llu] is not a finite number", gt->what,
                           (unsigned long long)i);
        gt->score[i] = s;
    }
    int64_t bos, eos, unk, pad;
    if ((st = sd_gt_id(gt, "tokenizer.ggml.bos_token_id", &bos)) || (st = sd_gt_id(gt, "tokenizer.ggml.eos_token_id", &eos)) ||
        (st = sd_gt_id(gt, "tokenizer.ggml.unknown_token_id", &unk)) ||
        (st = sd_gt_id(gt, "tokenizer.ggml.padding_token_id", &pad)))
        return st;
    if (spm && unk < 0)
        for (uint64_t i = 0; i < gt->n && unk < 0; i++)
            if (gt->type[i] == GT_UNKNOWN) unk = (int64_t)i;
    if (gt->gemma) { /* transformers names these tokens by their text: the last token so spelt */
        int64_t *named[4] = {&bos, &eos, &unk, &pad};
        for (int k = 0; k < 4; k++)
            if (*named[k] >= 0) *named[k] = gt->alias[*named[k]];
        if (!(gt->gflag = sd_calloc((size_t)gt->n, 1))) return GT_FAIL(SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", gt->what);
    }
    /* llama.cpp's defaults: BOS for SentencePiece and Llama 3's byte-level files, not for the others */
    int add_bos, add_eos, space_prefix;
    if ((st = sd_gt_bool(gt, "tokenizer.ggml.add_bos_token", spm || pre->bos_default, &add_bos)) ||
        (st = sd_gt_bool(gt, "tokenizer.ggml.add_eos_token", 0, &add_eos)) ||
        (st = sd_gt_bool(gt, "tokenizer.ggml.add_space_prefix", 1, &space_prefix)))
        return st;
    if (bos < 0) add_bos = 0;
    if (eos < 0) add_eos = 0;

    cJSON *root = out->root = cJSON_CreateObject(), *cfg = out->cfg = cJSON_CreateObject();
    cJSON *m = sd_gt_obj("BPE"), *vocab = cJSON_CreateObject(), *marr = cJSON_CreateArray(), *added = cJSON_CreateArray();
    int ok = cfg && sd_gt_add(root, "model", m) && sd_gt_add(m, "vocab", vocab) && sd_gt_add(m, "merges", marr) &&
             sd_gt_add(root, "added_tokens", added) && cJSON_AddBoolToObject(m, "byte_fallback", spm) &&
             cJSON_AddBoolToObject(m, "fuse_unk", spm) && cJSON_AddBoolToObject(m, "ignore_merges", pre->whole_first && !spm);
    if (!ok) return GT_FAIL(SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", gt->what);
    int phi3 = spm && sd_gt_is_phi3(g);
    for (uint64_t i = 0; i < gt->n; i++) {
        uint8_t t = gt->type[i];
        if (t == GT_UNUSED && !gt->gemma) continue;
        const char *s = sd_gt_cstr(gt, gt->tok[i], "tokenizer.ggml.tokens", i, &st);
        if (!s) return st;
        int in_vocab = t != GT_CONTROL && t != GT_USER, is_added = t == GT_CONTROL || t == GT_USER || (spm && t == GT_UNKNOWN);
        int special = t != GT_USER;
        if (gt->gemma) {
            /* transformers: every token is in the vocabulary (the last of those spelt alike); CONTROL
             * tokens and the named ones (the file's bos / eos / unk / pad, GemmaTokenizer's "<mask>") are
             * special, USER_DEFINED ones plain added tokens unless respelt (their file spelling is then
             * no vocabulary entry); a token spelt again later lends these to that one */
            int32_t last = gt->alias[i];
            int named = last == bos || last == eos || last == unk || last == pad || !strcmp(s, "<mask>");
            int sp = t == GT_CONTROL || t == GT_UNKNOWN || named;
            if (sp && sd_gt_respelt(gt, i))
                return GT_FAIL(SPECDEC_ERR_UNSUPPORTED, "%s: tokenizer.ggml.tokens[%llu], a special token, is white space only "
                               "(transformers would give its file spelling a new id)", gt->what, (unsigned long long)i);
            gt->gflag[last] |= (uint8_t)(sp ? 1 : 0) | (uint8_t)(t == GT_USER && !sd_gt_respelt(gt, i) ? 2 : 0);
            if (last != (int32_t)i) continue;
            special = gt->gflag[i] & 1;
            in_vocab = 1;
            is_added = gt->gflag[i] != 0;
        }
        if (in_vocab && !sd_gt_add(vocab, s, cJSON_CreateNumber((double)i))) ok = 0;
        if (is_added) {
            /* llama.cpp's rule: every special-cache token (CONTROL, USER_DEFINED, UNKNOWN) but three, and </s> */
            int rstrip = phi3 && (strcmp(s, "<unk>") && strcmp(s, "<s>") && strcmp(s, "<|endoftext|>"));
            cJSON *a = cJSON_CreateObject();
            ok = ok && sd_gt_add(added, NULL, a) && cJSON_AddNumberToObject(a, "id", (double)i) &&
                 cJSON_AddStringToObject(a, "content", s) && cJSON_AddBoolToObject(a, "single_word", 0) &&
                 cJSON_AddBoolToObject(a, "lstrip", 0) && cJSON_AddBoolToObject(a, "rstrip", rstrip) &&
                 cJSON_AddBoolToObject(a, "normalized", 0) && cJSON_AddBoolToObject(a, "special", special);
        }
        if (!ok) return GT_FAIL(SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", gt->what);
    }
    if (unk >= 0) {
        const char *s = sd_gt_cstr(gt, gt->tok[unk], "tokenizer.ggml.tokens", (uint64_t)unk, &st);
        if (!s) return st;
        if (spm && !cJSON_AddStringToObject(m, "unk_token", s)) return GT_FAIL(SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", gt->what);
    }
    if (merges) {
        for (uint64_t i = 0; i < merges->n; i++) {
            const char *s = sd_gt_cstr(gt, merges->strs[i], "tokenizer.ggml.merges", i, &st);
            if (!s) return st;
            if (!sd_gt_add(marr, NULL, cJSON_CreateString(s))) return GT_FAIL(SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", gt->what);
        }
    } else if (spm && (st = sd_gt_derive_merges(gt, marr))) {
        return st;
    }

    cJSON *norm = NULL, *pt = NULL, *dec = NULL;
    if (gt->gemma) {
        /* GemmaTokenizer: no prefix space; its Split(" ", MergedWithPrevious) pre-tokenizer finds no space
         * left after the normalizer, so it is left out */
        norm = sd_gt_replace(" ", "\xe2\x96\x81");
        dec = sd_gt_seq("Sequence", "decoders", sd_gt_replace("\xe2\x96\x81", " "), sd_gt_obj("ByteFallback"),
                        sd_gt_obj("Fuse"), NULL);
        ok = norm && dec;
    } else if (spm) {
        cJSON *prep = NULL, *strip = NULL;
        if (space_prefix) {
            prep = sd_gt_obj("Prepend");
            if (prep && !cJSON_AddStringToObject(prep, "prepend", "\xe2\x96\x81")) { cJSON_Delete(prep); prep = NULL; }
            strip = sd_gt_obj("Strip");
            if (strip && (!cJSON_AddStringToObject(strip, "content", " ") || !cJSON_AddNumberToObject(strip, "start", 1) ||
                          !cJSON_AddNumberToObject(strip, "stop", 0))) { cJSON_Delete(strip); strip = NULL; }
            ok = prep && strip;
        }
        norm = sd_gt_seq("Sequence", "normalizers", prep, sd_gt_replace(" ", "\xe2\x96\x81"), NULL, NULL);
        dec = sd_gt_seq("Sequence", "decoders", sd_gt_replace("\xe2\x96\x81", " "), sd_gt_obj("ByteFallback"),
                        sd_gt_obj("Fuse"), strip);
        ok = ok && norm && dec;
    } else {
        if (pre->norm == GT_NORM_NFC) ok = (norm = sd_gt_obj("NFC")) != NULL;
        else if (pre->norm == GT_NORM_EMPTY) ok = (norm = sd_gt_seq("Sequence", "normalizers", NULL, NULL, NULL, NULL)) != NULL;
        pt = sd_gt_pretokenizer(pre);
        dec = sd_gt_bytelevel(1, 1, 1);
        ok = ok && pt && dec;
    }
    /* sd_gt_add takes each child (freeing it on failure), so every one is handed over */
    if (norm && !sd_gt_add(root, "normalizer", norm)) ok = 0;
    if (pt && !sd_gt_add(root, "pre_tokenizer", pt)) ok = 0;
    if (!sd_gt_add(root, "decoder", dec)) ok = 0;
    if (ok && (add_bos || add_eos)) ok = sd_gt_add(root, "post_processor", sd_gt_template(add_bos ? bos : -1, add_eos ? eos : -1));
    if (!ok) return GT_FAIL(SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", gt->what);

    /* tokenizer_config.json's fields */
    if ((st = sd_gt_cfg_token(gt, cfg, "bos_token", bos)) || (st = sd_gt_cfg_token(gt, cfg, "eos_token", eos)) ||
        (st = sd_gt_cfg_token(gt, cfg, "unk_token", unk)) || (st = sd_gt_cfg_token(gt, cfg, "pad_token", pad)))
        return st;
    if (!cJSON_AddBoolToObject(cfg, "add_bos_token", add_bos) || !cJSON_AddBoolToObject(cfg, "add_eos_token", add_eos))
        return GT_FAIL(SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", gt->what);
    const sd_gguf_kv *tmpl = sd_gguf_find(g, "tokenizer.chat_template");
    if (tmpl) {
        sd_gguf_str ts;
        if (!sd_gguf_get_str(g, "tokenizer.chat_template", &ts))
            return GT_FAIL(SPECDEC_ERR_FORMAT, "%s: GGUF key tokenizer.chat_template must be a string", gt->what);
        const char *s = sd_gt_cstr(gt, ts, "tokenizer.chat_template", 0, &st);
        if (!s) return st;
        if (!cJSON_AddStringToObject(cfg, "chat_template", s)) return GT_FAIL(SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory", gt->what);
    }
    out->bos = bos;
    out->eos = eos;
    out->add_bos = add_bos;
    return SPECDEC_OK;
}

specdec_status sd_gguf_tokenizer_parse(const uint8_t *data, size_t size, const char *fname, specdec_tokenizer **out) {
    if (!out) return sd_fail(NULL, SPECDEC_ERR_INVALID_ARGUMENT, "tokenizer: out is NULL");
    *out = NULL;
    sd_gguf g;
    specdec_status st = sd_gguf_parse(data, size, fname, &g, NULL);
    if (st) return st;
    sd_gt gt = {.g = &g, .what = fname};
    sd_gt_out o = {NULL, NULL, -1, -1, 0};
    st = sd_gt_build(&gt, &o);
    sd_free(gt.type);
    sd_free(gt.score);
    sd_free(gt.buf);
    sd_free(gt.own_tok);
    sd_free(gt.own_blob);
    sd_free(gt.alias);
    sd_free(gt.gflag);
    sd_gguf_free(&g);
    if (!st) st = sd_tokenizer_load_doc(o.root, o.cfg, fname, out);
    cJSON_Delete(o.root);
    cJSON_Delete(o.cfg);
    if (st) return st;
    /* the file's ids, not a look-up by text (a text may name two ids) */
    specdec_tokenizer *t = *out;
    t->bos_id = o.bos >= 0 && o.bos < t->n_ids && t->id_entry[o.bos] != -1 ? (int32_t)o.bos : -1;
    t->eos_id = o.eos >= 0 && o.eos < t->n_ids && t->id_entry[o.eos] != -1 ? (int32_t)o.eos : -1;
    t->add_bos = o.add_bos && t->bos_id >= 0;
    return SPECDEC_OK;
}

int sd_gguf_tokenizer_is(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    unsigned char magic[4];
    ssize_t r = read(fd, magic, 4);
    close(fd);
    return r == 4 && sd_gguf_is(magic, 4);
}

specdec_status sd_gguf_tokenizer_load(const char *path, specdec_tokenizer **out) {
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return sd_fail(NULL, SPECDEC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size <= 0) {
        close(fd);
        return sd_fail(NULL, SPECDEC_ERR_IO, "%s: not a readable regular file", path);
    }
    /* mapped, not read: only the header's pages are touched, never the tensor data */
    void *map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (map == MAP_FAILED) return sd_fail(NULL, SPECDEC_ERR_IO, "%s: cannot map: %s", path, strerror(errno));
    specdec_status st = sd_gguf_tokenizer_parse(map, (size_t)sb.st_size, path, out);
    munmap(map, (size_t)sb.st_size);
    return st;
}
