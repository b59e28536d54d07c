/* sd_json_schema.h — structured output (docs/STRUCTURED.md "JSON Schema"): a JSON Schema, or a
 * list of choices, turned into the TEXT of a regular expression (the syntax core/sd_regex.h
 * takes: classes, (?:...) groups, |, * + ? {n,m}, escapes) whose language is the set of JSON
 * texts, written in the form below, that are instances of the schema. The published reference
 * is outlines' json_schema.py (what vLLM's guided_json uses through outlines; xgrammar builds the
 * same language as a grammar). The regex is matched against the WHOLE output.
 *
 * The form of the text (one rule everywhere, SD_JSON_WS):
 *   - the compact JSON serialisation, plus at most ONE space after each ':' and each ',' (so
 *     both `{"a":1,"b":[1,2]}` and Python's json.dumps default `{"a": 1, "b": [1, 2]}` match);
 *     no other whitespace: none around the value, after '{' / '[' or before '}' / ']'. Bounded
 *     on purpose: unbounded whitespace lets a model loop on spaces.
 *   - object members in the schema's `properties` order; strings with raw UTF-8 (the escapes of
 *     JSON are all accepted too: \" \\ \/ \b \f \n \r \t \uXXXX; raw control characters never).
 *
 * Supported subset (anything else: SPECDEC_ERR_UNSUPPORTED naming the keyword and the JSON
 * pointer, e.g. "json schema: 'patternProperties' at /properties/a is not supported"):
 *   - true / {} (any JSON value, containers nested <= SD_JSON_SCHEMA_ANY_DEPTH), false (nothing).
 *   - type: a name or a list of names (["string", "null"]: alternation; the other keywords apply
 *     to the alternative of their type). Without type: enum/const, the composition keywords, or
 *     the type the keywords present imply (properties -> object, items -> array, minLength ->
 *     string), else any value.
 *   - object: `properties` in order, those in `required` always present, the others optional in
 *     the same relative order (other orders are not produced); `required` naming a key outside
 *     `properties` is unsupported. With `properties`, additionalProperties must be absent or
 *     false: both produce no other key (absent is read as false: a subset of the instances).
 *     Without `properties`: additionalProperties absent/true -> any object (members any value),
 *     false -> {}, a schema -> an object whose values all follow it (pydantic's dict[str, T]).
 *   - array: items, minItems, maxItems (<= SD_JSON_SCHEMA_MAX_REPEAT); prefixItems (a tuple: all
 *     its items present; more only when `items` is a schema; maxItems below the tuple's length is
 *     unsupported). No items -> any values.
 *   - string: minLength / maxLength (counted in JSON characters: one escape = one character, so a
 *     surrogate-pair escape counts 2), pattern (the whole string, as outlines: embedded as a
 *     group between the quotes; a leading '^' and trailing '$' are dropped, elsewhere refused;
 *     the pattern sees the JSON text of the string, escapes included), format: date, time,
 *     date-time (RFC 3339: time needs its offset Z or +hh:mm; seconds 00-59; the day checked
 *     against the month and leap years; year 0001-9999), uuid, email (dot-atoms: a subset of
 *     RFC 5321 addresses). Only one of pattern / format / lengths at a time.
 *   - integer: -?(0|[1-9][0-9]*) (no fraction or exponent: a subset); minimum, maximum,
 *     exclusiveMinimum, exclusiveMaximum (numbers) are supported on integers, within +-10^15.
 *   - number: the JSON number grammar; with minimum / maximum / exclusive* (within +-10^15, at most
 *     SD_JSON_SCHEMA_MAX_FRAC_DIGITS fraction digits): -?(0|[1-9][0-9]*)(\.[0-9]+)? (no exponent, no
 *     "-0": a subset) whose exact decimal value is within the bounds, each bound read as the
 *     shortest decimal that reads back as its double. multipleOf unsupported.
 *   - boolean, null.
 *   - enum / const of any JSON value: its serialisation in the form above (numbers: integers
 *     without fraction, others in the shortest form that reads back: 0.5, 1e-07), alternated;
 *     with `type` only the values of that type are kept; other keywords beside them unsupported.
 *   - anyOf / oneOf: alternation (oneOf is not checked for exclusivity: as outlines), allOf with
 *     one member, $ref to "#", "#/$defs/<name>" or "#/definitions/<name>". None of them may have
 *     sibling keywords other than annotations and $defs.
 *   - Recursion through $ref: one definition is expanded at most SD_JSON_SCHEMA_REF_REPEAT times
 *     on one path; beyond it the reference is CUT: it stands for no value, so an optional
 *     property or an anyOf branch reaching it is dropped, an array of it must be empty, and a
 *     required property reaching it removes its object (recursively); a schema left with no value
 *     at all is INVALID_ARGUMENT.
 *   - Ignored annotations: title, description, default, examples, $schema, $id, $comment,
 *     deprecated, readOnly, writeOnly, discriminator (an OpenAPI hint pydantic emits beside oneOf),
 *     and $defs / definitions (read through $ref).
 *
 * Errors: INVALID_ARGUMENT for a schema that is not JSON, not UTF-8, or has a keyword of the wrong
 * type (message names keyword and pointer); UNSUPPORTED as above and for each limit below;
 * OUT_OF_MEMORY. Time and memory are bounded by the limits (recursion included). */
#ifndef SD_JSON_SCHEMA_H
#define SD_JSON_SCHEMA_H

#include <stddef.h>
#include <stdint.h>

#include "sd_error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The whitespace allowed after ':' and ',' (and nowhere else): at most one space. */
#define SD_JSON_WS "[ ]?"

#define SD_JSON_SCHEMA_MAX_BYTES ((size_t)256 << 10) /* schema text */
#define SD_JSON_SCHEMA_MAX_DEPTH 32                  /* schema levels walked, $ref expansions included */
#define SD_JSON_SCHEMA_MAX_REGEX ((size_t)256 << 10) /* regex text produced */
#define SD_JSON_SCHEMA_MAX_WORK ((size_t)16 << 20)   /* bytes written in all, cut branches included */
#define SD_JSON_SCHEMA_ANY_DEPTH 3                   /* nested containers in a value of schema {} */
#define SD_JSON_SCHEMA_REF_REPEAT 3                  /* expansions of one definition on one path */
#define SD_JSON_SCHEMA_MAX_REPEAT 1000               /* minItems, maxItems, minLength, maxLength */
#define SD_JSON_SCHEMA_MAX_INT_BOUND 1e15            /* |minimum|, |maximum| of an integer or number */
#define SD_JSON_SCHEMA_MAX_FRAC_DIGITS 20            /* fraction digits of a number's bound */
#define SD_CHOICE_MAX_N 65536                        /* choices of one sd_choice_regex */

/* The regex of the JSON instances of schema[0..len) (UTF-8 JSON text). On success *regex is an
 * sd_malloc'd NUL-terminated string (the caller sd_free's it) of *regex_len bytes; on failure
 * *regex = NULL, *regex_len = 0 and eb says why. */
specdec_status sd_json_schema_regex(const char *schema, size_t len, char **regex, size_t *regex_len, sd_errbuf *eb);

/* The regex matching exactly one of choices[0..n) (each choices[i][0..lens[i]) UTF-8; empty
 * strings allowed; n in [1, SD_CHOICE_MAX_N]): the escaped literals alternated. Same ownership
 * and failure rules as above; the result is at most SD_JSON_SCHEMA_MAX_REGEX bytes. */
specdec_status sd_choice_regex(const char *const *choices, const size_t *lens, int32_t n, char **regex,
                               size_t *regex_len, sd_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif
