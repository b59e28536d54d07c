/* sd_json_fsm.h — any JSON value (or, for OpenAI's response_format {"type": "json_object"}, any
 * JSON object) as a byte automaton (core/sd_fsm.h) for structured output.
 *
 * The language: the JSON texts of RFC 8259 (one value), over BYTES, restricted so that the
 * automaton is finite for a given depth and a model cannot loop on filler:
 *   - nesting depth <= max_depth (a scalar has depth 0, [] and {} depth 1, [[]] depth 2); the
 *     byte that would open a container at max_depth is SD_FSM_DEAD;
 *   - whitespace (" \t\n\r" only) comes in runs of at most SD_JSON_FSM_MAX_WS bytes between
 *     any two tokens inside the top value; NO whitespace before the top value (the output starts
 *     with it: a model left free pads with newlines) nor after it (a complete value is where the
 *     model should end, so trailing filler is refused);
 *   - numbers follow the JSON grammar -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? with each
 *     of the three digit runs (integer, fraction, exponent) at most SD_JSON_FSM_MAX_DIGITS long;
 *   - strings (values and keys): any well-formed UTF-8 (Unicode Table 3-7, as core/sd_utf8.h:
 *     no overlong forms, no encoded surrogates, nothing above U+10FFFF) except the raw bytes
 *     0x00..0x1F, '"' and '\\'; escapes \" \\ \/ \b \f \n \r \t and \uXXXX (4 hex digits, either
 *     case). Escaped surrogates are NOT paired: "\uD800" alone is accepted (RFC 8259 §8.2 allows
 *     such strings in the grammar; pairing would need more state per string). Keys are not
 *     checked for duplicates.
 *   - object_only: the top value must be an object.
 * accepting(s): the bytes so far are one complete top-level value (a number at the top level is
 * accepting as soon as it is complete, though more digits may still follow).
 *
 * States: a configuration — the lexical state (between tokens: which token may come, and the
 * length of the whitespace run; inside a string: plain, after '\', the \u hex position, the UTF-8
 * continuation bytes pending and the range of the next one; inside a number: its part and digit
 * count; inside true/false/null: which one and how far), the depth and the container stack (one
 * bit per level, object or array, in one 64-bit word) — interned into ids with a hash table. The
 * stack makes the state space exponential in the depth, so states are made on demand: step()
 * gives SD_FSM_FULL when a new configuration would pass max_states or SD_JSON_FSM_MAX_BYTES, or
 * memory runs out. Every live state can reach acceptance (a string can always close, every
 * container below max_depth can be closed, whitespace runs only up to the bound).
 *
 * Reference: RFC 8259 (the JSON grammar); the bounds are this project's. */
#ifndef SD_JSON_FSM_H
#define SD_JSON_FSM_H

#include <stdint.h>

#include "sd_error.h"
#include "sd_fsm.h"

/* Longest run of consecutive whitespace bytes (between two tokens). */
#define SD_JSON_FSM_MAX_WS 16
/* Longest digit run of a number's integer part, fraction and exponent (each). */
#define SD_JSON_FSM_MAX_DIGITS 32
/* Deepest nesting max_depth may ask for (the container stack is one 64-bit word). */
#define SD_JSON_FSM_MAX_DEPTH 64
/* Most bytes the interned configurations and their hash table may hold. */
#define SD_JSON_FSM_MAX_BYTES ((size_t)256 << 20)

/* A JSON automaton into *out (free with sd_fsm_free): object_only 0 (any value) or 1 (an
 * object), max_depth 1..SD_JSON_FSM_MAX_DEPTH, max_states >= 1 caps the interned states. On
 * failure *out is NULL and eb says why: INVALID_ARGUMENT (an argument out of range, named) or
 * OUT_OF_MEMORY. */
specdec_status sd_json_fsm_create(int object_only, int32_t max_depth, int32_t max_states, sd_fsm **out,
                                  sd_errbuf *eb);

#endif
