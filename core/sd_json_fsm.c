/* sd_json_fsm.c — JSON as a pushdown byte automaton whose configurations are interned as state
 * ids (core/sd_json_fsm.h). A step unpacks the configuration of a state, applies the byte to a
 * copy (jf_next and the per-lexical-state helpers below) and interns the result. */
#include "sd_json_fsm.h"

#include <string.h>

#include "sd_alloc.h"

/* Lexical states. Between tokens, cnt is the length of the current whitespace run. */
enum {
    JF_VALUE,       /* a value must come: the start, after ':', after ',' in an array */
    JF_VALUE_CLOSE, /* after '[': a value or ']' */
    JF_KEY,         /* after ',' in an object: a key */
    JF_KEY_CLOSE,   /* after '{': a key or '}' */
    JF_COLON,       /* after a key: ':' */
    JF_AFTER,       /* after a value inside a container: ',' or the container's closing bracket */
    JF_END,         /* the top value is complete: nothing may follow */
    JF_STR,         /* inside a string (key = 1 for an object key): sub = JS_* */
    JF_NUM_MINUS,   /* "-" */
    JF_NUM_ZERO,    /* integer part "0" */
    JF_NUM_INT,     /* integer part [1-9][0-9]*, cnt digits */
    JF_NUM_DOT,     /* "." (a digit must come) */
    JF_NUM_FRAC,    /* fraction digits, cnt of them */
    JF_NUM_E,       /* "e" or "E" */
    JF_NUM_ESIGN,   /* the exponent's sign */
    JF_NUM_EXP,     /* exponent digits, cnt of them */
    JF_LIT          /* inside true / false / null (sub = which), cnt bytes matched */
};

/* String sub-states: plain, after '\', \u with sub - JS_HEX hex digits read, or a UTF-8 encoding
 * with 1, 2 or 3 continuation bytes pending (the variants restrict the next byte's range). */
enum { JS_PLAIN, JS_ESC, JS_HEX, JS_U1 = JS_HEX + 4, JS_U2, JS_U2_E0, JS_U2_ED, JS_U3, JS_U3_F0, JS_U3_F4 };

/* Per continuation sub-state (index sub - JS_U1): the next byte's range and the sub-state after. */
static const uint8_t JS_LO[7] = {0x80, 0x80, 0xA0, 0x80, 0x80, 0x90, 0x80};
static const uint8_t JS_HI[7] = {0xBF, 0xBF, 0xBF, 0x9F, 0xBF, 0xBF, 0x8F};
static const uint8_t JS_NEXT[7] = {JS_PLAIN, JS_U1, JS_U1, JS_U1, JS_U2, JS_U2, JS_U2};

static const char *const JF_LITS[3] = {"true", "false", "null"};

typedef struct jf_cfg {
    uint64_t stack; /* bit i: level i (0 = outermost) is an object (1) or an array (0) */
    uint8_t lex, depth, cnt, sub, key;
} jf_cfg;

typedef struct jf_fsm {
    sd_fsm base;
    int object_only;
    int32_t max_depth, max_states, n_states, cap_states;
    uint64_t *words;     /* [2 * cap_states]: per state its stack and its packed other fields */
    int32_t *slots;      /* [cap_slots] open-addressing hash table of state ids, -1 = empty */
    uint32_t cap_slots;  /* a power of two, > 2 * n_states */
} jf_fsm;

static uint64_t jf_pack(const jf_cfg *c) {
    return (uint64_t)c->lex | (uint64_t)c->depth << 8 | (uint64_t)c->cnt << 16 | (uint64_t)c->sub << 24 |
           (uint64_t)c->key << 32;
}

static void jf_unpack(const jf_fsm *f, int32_t s, jf_cfg *c) {
    const uint64_t w = f->words[2 * (size_t)s + 1];
    c->stack = f->words[2 * (size_t)s];
    c->lex = (uint8_t)w;
    c->depth = (uint8_t)(w >> 8);
    c->cnt = (uint8_t)(w >> 16);
    c->sub = (uint8_t)(w >> 24);
    c->key = (uint8_t)(w >> 32);
}

static uint32_t jf_hash(uint64_t a, uint64_t b) {
    uint64_t x = a * 0x9E3779B97F4A7C15ull ^ (b + 0x632BE59BD9B4E019ull);
    x ^= x >> 31;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 29;
    return (uint32_t)x;
}

/* ------------------------------------------------------------------ the transition function */

static int jf_is_ws(uint8_t b) { return b == ' ' || b == '\t' || b == '\n' || b == '\r'; }
static int jf_is_digit(uint8_t b) { return b >= '0' && b <= '9'; }
static int jf_is_hex(uint8_t b) { return jf_is_digit(b) || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F'); }

static void jf_set(jf_cfg *c, int lex, int cnt, int sub, int key) {
    c->lex = (uint8_t)lex;
    c->cnt = (uint8_t)cnt;
    c->sub = (uint8_t)sub;
    c->key = (uint8_t)key;
}

/* A value just ended: at the top level the text is complete. */
static int jf_value_done(jf_cfg *c) {
    jf_set(c, c->depth == 0 ? JF_END : JF_AFTER, 0, 0, 0);
    return 1;
}

static int jf_top_is_object(const jf_cfg *c) { return (int)(c->stack >> (c->depth - 1) & 1u); }

static int jf_close(jf_cfg *c) {
    c->depth--;
    c->stack &= ~((uint64_t)1 << c->depth);
    return jf_value_done(c);
}

static int jf_open(const jf_fsm *f, jf_cfg *c, int object) {
    if (c->depth >= f->max_depth) return 0;
    if (object) c->stack |= (uint64_t)1 << c->depth;
    c->depth++;
    jf_set(c, object ? JF_KEY_CLOSE : JF_VALUE_CLOSE, 0, 0, 0);
    return 1;
}

/* The first byte of a value. */
static int jf_value_start(const jf_fsm *f, jf_cfg *c, uint8_t b) {
    if (f->object_only && c->depth == 0 && b != '{') return 0;
    switch (b) {
    case '{': return jf_open(f, c, 1);
    case '[': return jf_open(f, c, 0);
    case '"': jf_set(c, JF_STR, 0, JS_PLAIN, 0); return 1;
    case '-': jf_set(c, JF_NUM_MINUS, 0, 0, 0); return 1;
    case '0': jf_set(c, JF_NUM_ZERO, 0, 0, 0); return 1;
    case 't': jf_set(c, JF_LIT, 1, 0, 0); return 1;
    case 'f': jf_set(c, JF_LIT, 1, 1, 0); return 1;
    case 'n': jf_set(c, JF_LIT, 1, 2, 0); return 1;
    default:
        if (b < '1' || b > '9') return 0;
        jf_set(c, JF_NUM_INT, 1, 0, 0);
        return 1;
    }
}

/* Between tokens (and after the top value). */
static int jf_between(const jf_fsm *f, jf_cfg *c, uint8_t b) {
    if (jf_is_ws(b)) {
        /* none after the top value, none before it (the output starts with the value) */
        if (c->lex == JF_END || (c->lex == JF_VALUE && c->depth == 0) || c->cnt >= SD_JSON_FSM_MAX_WS) return 0;
        c->cnt++;
        return 1;
    }
    switch (c->lex) {
    case JF_VALUE_CLOSE:
        if (b == ']') return jf_close(c);
        return jf_value_start(f, c, b);
    case JF_VALUE: return jf_value_start(f, c, b);
    case JF_KEY_CLOSE:
        if (b == '}') return jf_close(c);
        /* fall through */
    case JF_KEY:
        if (b != '"') return 0;
        jf_set(c, JF_STR, 0, JS_PLAIN, 1);
        return 1;
    case JF_COLON:
        if (b != ':') return 0;
        jf_set(c, JF_VALUE, 0, 0, 0);
        return 1;
    case JF_AFTER:
        if (b == ',') {
            jf_set(c, jf_top_is_object(c) ? JF_KEY : JF_VALUE, 0, 0, 0);
            return 1;
        }
        if (b == (jf_top_is_object(c) ? '}' : ']')) return jf_close(c);
        return 0;
    default: return 0; /* JF_END */
    }
}

/* The byte after a plain string byte: the lead of a UTF-8 encoding, or ASCII. */
static int jf_string_plain(jf_cfg *c, uint8_t b) {
    if (b == '"') {
        if (!c->key) return jf_value_done(c);
        jf_set(c, JF_COLON, 0, 0, 0);
        return 1;
    }
    if (b == '\\') c->sub = JS_ESC;
    else if (b < 0x20) return 0;
    else if (b < 0x80) return 1;
    else if (b >= 0xC2 && b <= 0xDF) c->sub = JS_U1;
    else if (b == 0xE0) c->sub = JS_U2_E0;
    else if (b == 0xED) c->sub = JS_U2_ED;
    else if (b >= 0xE1 && b <= 0xEF) c->sub = JS_U2;
    else if (b == 0xF0) c->sub = JS_U3_F0;
    else if (b == 0xF4) c->sub = JS_U3_F4;
    else if (b >= 0xF1 && b <= 0xF3) c->sub = JS_U3;
    else return 0; /* a continuation byte without a lead, C0, C1, F5..FF */
    return 1;
}

static int jf_string(jf_cfg *c, uint8_t b) {
    if (c->sub == JS_PLAIN) return jf_string_plain(c, b);
    if (c->sub == JS_ESC) {
        if (b == 'u') c->sub = JS_HEX;
        else if (b && strchr("\"\\/bfnrt", b)) c->sub = JS_PLAIN;
        else return 0;
        return 1;
    }
    if (c->sub < JS_U1) { /* \u: sub - JS_HEX digits read */
        if (!jf_is_hex(b)) return 0;
        c->sub = c->sub == JS_HEX + 3 ? JS_PLAIN : (uint8_t)(c->sub + 1);
        return 1;
    }
    const int k = c->sub - JS_U1;
    if (b < JS_LO[k] || b > JS_HI[k]) return 0;
    c->sub = JS_NEXT[k];
    return 1;
}

/* One more digit of a run of cnt digits. */
static int jf_digit(jf_cfg *c, int lex) {
    if (c->lex == lex) {
        if (c->cnt >= SD_JSON_FSM_MAX_DIGITS) return 0;
        c->cnt++;
    } else {
        jf_set(c, lex, 1, 0, 0);
    }
    return 1;
}

static int jf_number(const jf_fsm *f, jf_cfg *c, uint8_t b) {
    const int digit = jf_is_digit(b), e = b == 'e' || b == 'E';
    switch (c->lex) {
    case JF_NUM_MINUS:
        if (b == '0') return jf_set(c, JF_NUM_ZERO, 0, 0, 0), 1;
        return digit ? jf_digit(c, JF_NUM_INT) : 0;
    case JF_NUM_DOT: return digit ? jf_digit(c, JF_NUM_FRAC) : 0;
    case JF_NUM_E:
        if (b == '+' || b == '-') return jf_set(c, JF_NUM_ESIGN, 0, 0, 0), 1;
        /* fall through */
    case JF_NUM_ESIGN: return digit ? jf_digit(c, JF_NUM_EXP) : 0;
    default: break;
    }
    /* a complete number: ZERO, INT, FRAC or EXP */
    if (digit && c->lex != JF_NUM_ZERO) return jf_digit(c, c->lex);
    if (b == '.' && (c->lex == JF_NUM_ZERO || c->lex == JF_NUM_INT)) return jf_set(c, JF_NUM_DOT, 0, 0, 0), 1;
    if (e && c->lex != JF_NUM_EXP) return jf_set(c, JF_NUM_E, 0, 0, 0), 1;
    if (digit || c->depth == 0) return 0; /* "01"; nothing follows a top-level number */
    jf_value_done(c);
    return jf_between(f, c, b);
}

static int jf_literal(jf_cfg *c, uint8_t b) {
    const char *lit = JF_LITS[c->sub];
    if (b != (uint8_t)lit[c->cnt]) return 0;
    c->cnt++;
    if (lit[c->cnt] == '\0') return jf_value_done(c);
    return 1;
}

/* Applies byte b to configuration c: 1 if it leads to a live configuration (now in c), 0 if dead. */
static int jf_next(const jf_fsm *f, jf_cfg *c, uint8_t b) {
    if (c->lex == JF_STR) return jf_string(c, b);
    if (c->lex == JF_LIT) return jf_literal(c, b);
    if (c->lex >= JF_NUM_MINUS) return jf_number(f, c, b);
    return jf_between(f, c, b);
}

/* ------------------------------------------------------------------ interning */

static size_t jf_bytes(int64_t cap_states, uint64_t cap_slots) {
    return (size_t)cap_states * 2 * sizeof(uint64_t) + (size_t)cap_slots * sizeof(int32_t);
}

/* Rebuilds the hash table with cap slots (a power of two). 0 on out of memory. */
static int jf_rehash(jf_fsm *f, uint32_t cap) {
    int32_t *slots = sd_malloc((size_t)cap * sizeof(int32_t));
    if (!slots) return 0;
    memset(slots, 0xFF, (size_t)cap * sizeof(int32_t));
    for (int32_t s = 0; s < f->n_states; s++) {
        uint32_t h = jf_hash(f->words[2 * (size_t)s], f->words[2 * (size_t)s + 1]) & (cap - 1);
        while (slots[h] >= 0) h = (h + 1) & (cap - 1);
        slots[h] = s;
    }
    sd_free(f->slots);
    f->slots = slots;
    f->cap_slots = cap;
    return 1;
}

/* Room for one more state within max_states and SD_JSON_FSM_MAX_BYTES. 0 if none. */
static int jf_reserve(jf_fsm *f) {
    if (f->n_states >= f->max_states) return 0;
    if (f->n_states == f->cap_states) {
        int64_t cap = f->cap_states ? 2 * (int64_t)f->cap_states : 64;
        if (cap > f->max_states) cap = f->max_states;
        if (jf_bytes(cap, f->cap_slots) > SD_JSON_FSM_MAX_BYTES) return 0;
        uint64_t *w = sd_realloc(f->words, (size_t)cap * 2 * sizeof(uint64_t));
        if (!w) return 0;
        f->words = w;
        f->cap_states = (int32_t)cap;
    }
    if ((uint64_t)f->n_states + 1 > f->cap_slots / 2) {
        const uint64_t cap = f->cap_slots ? 2 * (uint64_t)f->cap_slots : 128;
        if (cap > ((uint64_t)1 << 31) || jf_bytes(f->cap_states, cap) > SD_JSON_FSM_MAX_BYTES) return 0;
        if (!jf_rehash(f, (uint32_t)cap)) return 0;
    }
    return 1;
}

/* The id of configuration c, interned if new; SD_FSM_FULL past the limits or out of memory. */
static int32_t jf_intern(jf_fsm *f, const jf_cfg *c) {
    const uint64_t a = c->stack, b = jf_pack(c);
    if (f->cap_slots) {
        uint32_t h = jf_hash(a, b) & (f->cap_slots - 1);
        for (int32_t s; (s = f->slots[h]) >= 0; h = (h + 1) & (f->cap_slots - 1))
            if (f->words[2 * (size_t)s] == a && f->words[2 * (size_t)s + 1] == b) return s;
    }
    if (!jf_reserve(f)) return SD_FSM_FULL;
    const int32_t s = f->n_states++;
    f->words[2 * (size_t)s] = a;
    f->words[2 * (size_t)s + 1] = b;
    uint32_t h = jf_hash(a, b) & (f->cap_slots - 1);
    while (f->slots[h] >= 0) h = (h + 1) & (f->cap_slots - 1);
    f->slots[h] = s;
    return s;
}

/* ------------------------------------------------------------------ the sd_fsm interface */

static int32_t jf_step(sd_fsm *base, int32_t s, uint8_t b) {
    jf_fsm *f = (jf_fsm *)base;
    if (s < 0 || s >= f->n_states) return SD_FSM_DEAD;
    jf_cfg c;
    jf_unpack(f, s, &c);
    if (!jf_next(f, &c, b)) return SD_FSM_DEAD;
    return jf_intern(f, &c);
}

static int jf_accepting(const sd_fsm *base, int32_t s) {
    const jf_fsm *f = (const jf_fsm *)base;
    if (s < 0 || s >= f->n_states) return 0;
    jf_cfg c;
    jf_unpack(f, s, &c);
    if (c.depth != 0) return 0;
    return c.lex == JF_END || c.lex == JF_NUM_ZERO || c.lex == JF_NUM_INT || c.lex == JF_NUM_FRAC ||
           c.lex == JF_NUM_EXP;
}

static int32_t jf_n_states(const sd_fsm *base) { return ((const jf_fsm *)base)->n_states; }

static void jf_destroy(sd_fsm *base) {
    jf_fsm *f = (jf_fsm *)base;
    sd_free(f->words);
    sd_free(f->slots);
    sd_free(f);
}

static const sd_fsm_vtable JF_VT = {jf_step, jf_accepting, jf_n_states, jf_destroy};

specdec_status sd_json_fsm_create(int object_only, int32_t max_depth, int32_t max_states, sd_fsm **out,
                                  sd_errbuf *eb) {
    if (!out) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_json_fsm_create: out is NULL");
    *out = NULL;
    if (object_only != 0 && object_only != 1)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_json_fsm_create: object_only %d (0 or 1)", object_only);
    if (max_depth < 1 || max_depth > SD_JSON_FSM_MAX_DEPTH)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_json_fsm_create: max_depth %d (1..%d)", (int)max_depth,
                       SD_JSON_FSM_MAX_DEPTH);
    if (max_states < 1)
        return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_json_fsm_create: max_states %d (at least 1)",
                       (int)max_states);
    jf_fsm *f = sd_calloc(1, sizeof *f);
    if (!f) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "sd_json_fsm_create: out of memory");
    f->base.vt = &JF_VT;
    f->object_only = object_only;
    f->max_depth = max_depth;
    f->max_states = max_states;
    jf_cfg start;
    memset(&start, 0, sizeof start);
    start.lex = JF_VALUE;
    f->base.start = jf_intern(f, &start);
    if (f->base.start != 0) {
        jf_destroy(&f->base);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "sd_json_fsm_create: out of memory for the start state");
    }
    *out = &f->base;
    return SPECDEC_OK;
}
