/* sd_tokenizer.h — internal representation of a Hugging Face tokenizer.json (BPE model)
 * and the functions the tokenizer files share.
 *
 * The pipeline mirrors the `tokenizers` library exactly:
 *   text (bytes) -> invalid UTF-8 replaced by U+FFFD (maximal subparts, as Python's
 *   bytes.decode(errors="replace") and Rust's String::from_utf8_lossy)
 *   -> added tokens with normalized=false matched on the raw text
 *   -> normalizer on each remaining segment -> added tokens with normalized=true
 *   -> pre-tokenizer -> BPE model on each piece -> post-processor.
 * Decoding maps ids to vocabulary strings and runs the decoder chain.
 *
 * A loaded tokenizer is immutable; every encode/decode call works in its own
 * scratch memory (sd_tok_work), so one tokenizer may serve many threads. */
#ifndef SD_TOKENIZER_H
#define SD_TOKENIZER_H

#include <stddef.h>
#include <pthread.h>
#include <stdint.h>

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "sd_error.h"
#include "sd_utf8.h"
#include "specdec.h"

/* Hard limits that keep absurd files from requesting absurd memory. */
#define SD_TOK_MAX_ID (1 << 24)      /* largest token id accepted + 1 */
#define SD_TOK_MAX_TOKEN_BYTES 65536 /* longest vocabulary / added-token string */
#define SD_TOK_MAX_DEPTH 8           /* nesting of Sequence normalizers/pre-tokenizers/decoders */
/* Most a text may grow inside the pipeline: every intermediate buffer of the normalizers,
 * pre-tokenizers or decoders stays within SD_TOK_MAX_GROWTH x the input + SLACK bytes.
 * Real pipelines grow text a few times at most (ByteLevel 2x, Metaspace's U+2581 3x); a
 * fuzzed one (ByteLevel after ByteLevel ..., Replace "a" -> "aa" in a Sequence) grows
 * exponentially, so such text is refused (SPECDEC_ERR_UNSUPPORTED) instead of exhausting
 * memory. */
#define SD_TOK_MAX_GROWTH 64
#define SD_TOK_GROWTH_SLACK 4096
#define SD_TOK_GROWN (-3) /* internal code: a buffer passed the work's grow_cap */

/* ---- growable scratch buffers (sd_tok_util.c) --------------------------- */
typedef struct sd_tok_buf {
    char *p;
    size_t len, cap;
} sd_tok_buf;
int sd_tok_buf_reserve(sd_tok_buf *b, size_t extra); /* 0 ok, -1 OOM */
int sd_tok_buf_put(sd_tok_buf *b, const void *s, size_t n);
void sd_tok_buf_free(sd_tok_buf *b);
/* Bytes at off. A buffer that was never written has p == NULL (and len 0), and NULL + 0
 * is undefined behaviour in C, so empty buffers yield "" instead. */
static inline const char *sd_tok_buf_at(const sd_tok_buf *b, size_t off) { return b->p ? b->p + off : ""; }

/* A span of bytes inside some buffer plus per-span data. */
typedef struct sd_tok_span {
    size_t off, len;
    int32_t id;      /* added-token id, or -1 for text still to tokenize */
    int32_t at_start; /* begins at offset 0 of the original text (Metaspace "first") */
} sd_tok_span;

typedef struct sd_tok_spans {
    sd_tok_span *v;
    size_t n, cap;
} sd_tok_spans;
int sd_tok_spans_push(sd_tok_spans *s, size_t off, size_t len, int32_t id, int32_t at_start);
void sd_tok_spans_free(sd_tok_spans *s);

/* ---- UTF-8 ------------------------------------------------------------- */
/* Validation and code points: core/sd_utf8.h (sd_utf8_seq_len, sd_utf8_next, sd_utf8_put). */
/* Append s with invalid sequences replaced by U+FFFD. Returns -1 on OOM. */
int sd_tok_utf8_sanitize(sd_tok_buf *out, const char *s, size_t n);
/* Rust char::is_whitespace (Unicode White_Space). */
int sd_tok_is_whitespace(int32_t cp);
/* Rust char::is_alphanumeric || '_'. */
int sd_tok_is_word_char(int32_t cp);
int sd_tok_is_numeric(int32_t cp);     /* Rust char::is_numeric: Nd, Nl, No */
int sd_tok_is_punctuation(int32_t cp); /* ASCII punctuation or Unicode P* */

/* ---- hash maps --------------------------------------------------------- */
/* String -> id. Keys point into memory owned elsewhere (the tokenizer's blob). */
typedef struct sd_tok_strmap {
    uint32_t *slots; /* entry index + 1, 0 = empty */
    size_t mask;
    const char *blob;
    const size_t *key_off; /* per entry */
    const uint32_t *key_len;
    const int32_t *val;
} sd_tok_strmap;
uint64_t sd_tok_hash(const char *s, size_t n);
int32_t sd_tok_strmap_get(const sd_tok_strmap *m, const char *s, size_t n); /* -1 if absent */

/* (left id, right id) -> (rank, merged id). */
typedef struct sd_tok_merge_slot {
    uint64_t key; /* ((uint64_t)a << 32 | b) + 1; 0 = empty */
    int32_t rank, id;
} sd_tok_merge_slot;
typedef struct sd_tok_mergemap {
    sd_tok_merge_slot *slots;
    size_t mask;
} sd_tok_mergemap;
const sd_tok_merge_slot *sd_tok_merge_get(const sd_tok_mergemap *m, int32_t a, int32_t b);

/* ---- regex (PCRE2 with UTF + UCP, JIT when available) --------------------- */
typedef struct sd_tok_regex {
    pcre2_code *code;
} sd_tok_regex;

/* ---- normalizers -------------------------------------------------------- */
typedef enum sd_tok_norm_kind {
    SD_NORM_NFC, SD_NORM_NFKC, SD_NORM_NFD, SD_NORM_NFKD, SD_NORM_LOWERCASE,
    SD_NORM_PREPEND, SD_NORM_REPLACE, SD_NORM_STRIP, SD_NORM_STRIP_ACCENTS, SD_NORM_SEQUENCE
} sd_tok_norm_kind;

typedef struct sd_tok_norm {
    sd_tok_norm_kind kind;
    char *str;       /* Prepend text / Replace literal pattern (NULL when regex) */
    size_t str_len;
    char *content;   /* Replace content */
    size_t content_len;
    sd_tok_regex re; /* Replace regex */
    int left, right; /* Strip */
    struct sd_tok_norm *child;
    int n_child;
} sd_tok_norm;

/* ---- pre-tokenizers ----------------------------------------------------- */
typedef enum sd_tok_pre_kind {
    SD_PRE_BYTELEVEL, SD_PRE_SPLIT, SD_PRE_METASPACE, SD_PRE_DIGITS, SD_PRE_PUNCTUATION,
    SD_PRE_WHITESPACE, SD_PRE_WHITESPACE_SPLIT, SD_PRE_SEQUENCE
} sd_tok_pre_kind;

typedef enum sd_tok_behavior {
    SD_SPLIT_REMOVED, SD_SPLIT_ISOLATED, SD_SPLIT_MERGED_PREV, SD_SPLIT_MERGED_NEXT, SD_SPLIT_CONTIGUOUS
} sd_tok_behavior;

typedef enum sd_tok_prepend { SD_PREPEND_ALWAYS, SD_PREPEND_FIRST, SD_PREPEND_NEVER } sd_tok_prepend;

typedef struct sd_tok_pre {
    sd_tok_pre_kind kind;
    sd_tok_regex re;          /* Split / ByteLevel (use_regex) / Whitespace */
    sd_tok_behavior behavior; /* Split, Punctuation */
    int invert;               /* Split */
    int add_prefix_space;     /* ByteLevel */
    int use_regex;            /* ByteLevel */
    char rep[8];              /* Metaspace replacement, UTF-8 */
    size_t rep_len;
    sd_tok_prepend prepend;   /* Metaspace */
    int split;                /* Metaspace */
    int individual_digits;    /* Digits */
    struct sd_tok_pre *child;
    int n_child;
} sd_tok_pre;

/* ---- decoders ------------------------------------------------------------ */
typedef enum sd_tok_dec_kind {
    SD_DEC_BYTELEVEL, SD_DEC_METASPACE, SD_DEC_BYTEFALLBACK, SD_DEC_FUSE, SD_DEC_STRIP,
    SD_DEC_REPLACE, SD_DEC_BPE, SD_DEC_SEQUENCE
} sd_tok_dec_kind;

typedef struct sd_tok_dec {
    sd_tok_dec_kind kind;
    char rep[8];            /* Metaspace replacement */
    size_t rep_len;
    sd_tok_prepend prepend; /* Metaspace */
    int32_t strip_cp;       /* Strip content */
    int start, stop;        /* Strip */
    char *str;              /* Replace literal / BPE suffix */
    size_t str_len;
    char *content;          /* Replace content */
    size_t content_len;
    sd_tok_regex re;        /* Replace regex */
    struct sd_tok_dec *child;
    int n_child;
} sd_tok_dec;

/* ---- post-processor -------------------------------------------------------- */
/* Flattened to: ids before, the sequence, ids after (TemplateProcessing "single",
 * Bert/Roberta cls/sep, ByteLevel = nothing). */
typedef struct sd_tok_post {
    int32_t *pre, *post;
    int32_t n_pre, n_post;
} sd_tok_post;

/* ---- added tokens ------------------------------------------------------------ */
typedef struct sd_tok_added {
    char *content; /* NUL-terminated; for normalized tokens this is the normalized form */
    size_t len;
    int32_t id;
    uint8_t single_word, lstrip, rstrip, normalized, special;
} sd_tok_added;

/* Tokens of one trie class (normalized or not), bucketed by first byte. */
typedef struct sd_tok_matcher {
    int32_t *order;        /* indices into tok->added, grouped by first byte */
    int32_t start[257];    /* bucket b is order[start[b] .. start[b+1]) */
    size_t max_len;
} sd_tok_matcher;

struct specdec_tokenizer {
    sd_errbuf err;
    /* model vocabulary: strings in blob; entries indexed 0..n_vocab */
    char *blob;
    size_t blob_len;
    size_t *key_off;
    uint32_t *key_len;
    int32_t *key_id;
    size_t n_vocab;
    sd_tok_strmap vocab;
    sd_tok_mergemap merges;
    size_t n_merges;
    /* id -> string: index into vocab entries, or -(added index) - 2 for added tokens,
     * -1 for holes */
    int32_t *id_entry;
    int32_t n_ids; /* largest id + 1 */

    int byte_fallback, fuse_unk, ignore_merges;
    int32_t unk_id; /* -1 none */
    char *cont_prefix; size_t cont_prefix_len; /* NULL = none */
    char *eow_suffix; size_t eow_suffix_len;
    int32_t byte_ids[256]; /* byte_fallback "<0xHH>" ids, -1 absent */

    sd_tok_added *added;
    int32_t n_added;
    sd_tok_matcher match_raw, match_norm;

    sd_tok_norm *norm;  /* NULL = none */
    sd_tok_pre *pre;    /* NULL = none */
    sd_tok_dec *dec;    /* NULL = join with " " */
    sd_tok_post post;

    int32_t bos_id, eos_id, add_bos;

    /* Chat template (tokenizer/sd_chat_template.c): the template text (chat_template.jinja, or
     * tokenizer_config.json's "chat_template" / its "default" entry), NULL when there is none;
     * chat_tmpl its parsed form; chat_problem says why a template that is present cannot be used
     * (NULL otherwise); chat_special: the texts of tokenizer_config.json's bos_token, eos_token,
     * ... (sd_chat_special_names order; NULL absent). */
    char *chat_template, *chat_problem, *chat_special[7];
    struct sd_jinja_tmpl *chat_tmpl;

    /* Structured output (tokenizer/sd_tokenizer_grammar.c): every token's bytes, built by the
     * first specdec_grammar_compile under gv_lock and shared by every grammar (NULL before). */
    pthread_mutex_t gv_lock;
    struct sd_grammar_vocab *gv;
};

/* Per-call scratch: everything an encode or decode allocates lives here. */
typedef struct sd_tok_work {
    sd_tok_buf text, a, b, tmp, text2;
    sd_tok_spans s1, s2, s3, s4;
    int32_t *ids; size_t n_ids, cap_ids;
    void *bpe_sym; size_t bpe_sym_cap;
    void *bpe_heap; size_t bpe_heap_cap;
    int32_t *u32; size_t u32_cap; /* utf8proc code point buffer */
    pcre2_match_data *md;
    struct sd_tok_matches *mt; /* regex find results (allocated on first use) */
    size_t grow_cap; /* most bytes an intermediate buffer may hold (0: no limit; sd_tok_grow_cap) */
} sd_tok_work;
static inline size_t sd_tok_grow_cap(size_t n) {
    return n > (SIZE_MAX - SD_TOK_GROWTH_SLACK) / SD_TOK_MAX_GROWTH ? SIZE_MAX
                                                                     : n * SD_TOK_MAX_GROWTH + SD_TOK_GROWTH_SLACK;
}
static inline int sd_tok_grown(const sd_tok_work *w, size_t len) { return w->grow_cap && len > w->grow_cap; }
void sd_tok_work_free(sd_tok_work *w);

/* ---- shared between files ------------------------------------------------------ */
int sd_tok_regex_compile(sd_tok_regex *re, const char *pattern, size_t len, int literal, sd_errbuf *eb,
                         const char *what);
void sd_tok_regex_free(sd_tok_regex *re);
/* Appends (start,end,is_match) triples covering s[0..n) as the library's find_matches.
 * Returns 0, -1 on OOM, -2 on a regex engine error. */
typedef struct sd_tok_match { size_t start, end; int is_match; } sd_tok_match;
typedef struct sd_tok_matches { sd_tok_match *v; size_t n, cap; } sd_tok_matches;
int sd_tok_regex_find(const sd_tok_regex *re, sd_tok_work *w, const char *s, size_t n, sd_tok_matches *out);

/* Normalize s[0..n) into out (appended). 0 ok, -1 OOM, -2 engine error. */
int sd_tok_normalize(const sd_tok_norm *nm, sd_tok_work *w, const char *s, size_t n, sd_tok_buf *out);

/* Replace every occurrence of the literal lit (or, when lit is NULL, every match of
 * re) in s[0..n) by content, appending to out; an empty literal matches at every
 * character boundary, as in Rust's str::replace. 0 ok, -1 OOM, -2 engine error. */
int sd_tok_replace_all(sd_tok_work *w, const char *lit, size_t lit_len, const sd_tok_regex *re, const char *content,
                       size_t content_len, const char *s, size_t n, sd_tok_buf *out);

/* Encode sanitized UTF-8 text into w->ids (no post-processing). */
specdec_status sd_tok_encode_raw(const specdec_tokenizer *tok, sd_tok_work *w, const char *s, size_t n,
                                 sd_errbuf *eb);
/* Decode ids into out (appended, not NUL-terminated). */
specdec_status sd_tok_decode_into(const specdec_tokenizer *tok, sd_tok_work *w, const int32_t *ids, size_t n,
                                  int skip_special, sd_tok_buf *out, sd_errbuf *eb);
/* The decoders of d in order (a Sequence flattened) into leaves[0..*n): 0, or -2 past max. */
int sd_tok_dec_flatten(const sd_tok_dec *d, const sd_tok_dec **leaves, int *n, int max);
/* "<0xHH>" -> byte (u8::from_str_radix accepts a leading '+'), else -1 (ByteFallback). */
int sd_tok_byte_token(const char *s, size_t n);
/* Vocabulary string of id (model or added), or NULL. */
const char *sd_tok_id_str(const specdec_tokenizer *tok, int32_t id, size_t *len);
int sd_tok_is_special(const specdec_tokenizer *tok, int32_t id);

/* Structured output's vocabulary (core/sd_grammar.h): every token's bytes as they appear inside a
 * text (tokenizer/sd_tokenizer_grammar.c says how each decoder is read), built on first use and
 * kept with the tokenizer; *out is a new reference. */
struct sd_grammar_vocab;
specdec_status sd_tok_grammar_vocab(const specdec_tokenizer *tok, struct sd_grammar_vocab **out, sd_errbuf *eb);

/* GPT-2 byte <-> unicode table (ByteLevel). */
extern const uint16_t sd_tok_byte_to_cp[256];
int sd_tok_cp_to_byte(int32_t cp); /* -1 if cp is not in the table */

/* Parse tokenizer.json text (len bytes; need not be NUL-terminated). dir may name
 * the directory holding tokenizer_config.json (NULL: defaults only). The entry point
 * for the tokenizer.json fuzz target. On failure *out is NULL and the thread-local
 * error says why. */
specdec_status sd_tokenizer_load_json(const char *json, size_t len, const char *dir, specdec_tokenizer **out);
/* Build a tokenizer from a tokenizer.json document already parsed (root; strings hold no masked NUL)
 * and the tokenizer_config.json fields cfg (may be NULL); `what` names the source in messages. The
 * GGUF tokenizer (sd_gguf_tokenizer.c) writes both from a GGUF file's metadata. */
struct cJSON;
specdec_status sd_tokenizer_load_doc(struct cJSON *root, const struct cJSON *cfg, const char *what, specdec_tokenizer **out);

#endif
