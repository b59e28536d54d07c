/* sd_regex.h — a regular expression as a byte automaton (core/sd_fsm.h) for structured output.
 *
 * The reference is Python's `re.fullmatch(pattern, text, re.ASCII)` on the UTF-8 text: the
 * automaton accepts exactly the UTF-8 encodings of the texts that call matches (the whole
 * output always: an implicit ^...$). It runs over BYTES; every accepted byte string is valid
 * UTF-8 ('.' and classes match whole encoded code points, built as byte-range sequences;
 * surrogates U+D800..U+DFFF are never matched). Invalid UTF-8 output bytes lead to SD_FSM_DEAD.
 *
 * Syntax (Python's, on a UTF-8 pattern; invalid UTF-8 -> SPECDEC_ERR_INVALID_ARGUMENT):
 *   literals (multi-byte too); '.' (any code point but '\n', Python without DOTALL);
 *   classes [...] [^...] with ranges (']' first is literal, '-' first or last is literal);
 *   escapes in and out of classes: \d \w \s \D \W \S — ASCII-only, as under re.ASCII
 *   (\d = [0-9], \w = [A-Za-z0-9_], \s = [ \t\n\r\f\v]; the negated ones are their complements
 *   over all code points), \n \t \r \f \v \a, \0 and octal escapes (\0, \0NN; \NNN outside a
 *   class, \N.. inside one), \xHH \uHHHH \UHHHHHHHH, \\ and escaped punctuation or non-ASCII
 *   characters (a literal), [\b] = backspace;
 *   groups ( ), (?: ), named groups (?P<name> ) and (?<name> ) (plain groups; names are not
 *   checked for duplicates), comments (?#...);
 *   alternation |; quantifiers * + ? {n} {n,} {n,m} {,m} {,} and their lazy forms (*? etc.,
 *   the same language); '{' that does not start a valid quantifier is a literal, as in Python.
 *   '^' as the pattern's first byte and '$' as its last are accepted and ignored.
 * Refused with SPECDEC_ERR_UNSUPPORTED and a message naming the construct and its byte offset:
 *   '^' / '$' anywhere else, \A \Z \b \B, backreferences (\1, (?P=name)), lookahead and
 *   lookbehind, atomic groups (?>...), conditionals (?(..)..), inline flags (?i) etc.,
 *   possessive quantifiers (*+ etc.: they change the language), \N{...}, a quantifier right
 *   after a comment, and the limits below. Syntax errors (as Python reports them: nothing to
 *   repeat, multiple repeat, bad escape, bad character range, unbalanced parentheses, min
 *   repeat greater than max, unterminated class) are SPECDEC_ERR_INVALID_ARGUMENT, and so is a
 *   pattern that matches no string at all (e.g. [^\s\S]): the automaton's start must be live.
 *
 * Construction: the pattern is parsed to an AST (recursive descent, nesting bounded by
 * SD_REGEX_MAX_DEPTH), its NFA size computed bottom-up before anything is built (so
 * (?:a{1000}){1000} is refused at once), then a Thompson NFA over byte ranges is built and the
 * NFA states that cannot reach acceptance are pruned. The DFA is LAZY: a DFA state is the
 * epsilon-closed set of live NFA states (byte-consuming ones and the final one), interned
 * with a hash table; transitions are cached per state in a table indexed by the byte's
 * equivalence class (bytes no NFA range separates share one entry), filled on demand. step()
 * gives SD_FSM_DEAD for the empty set and SD_FSM_FULL when interning a new state would pass
 * max_states or SD_REGEX_MAX_DFA_BYTES, or memory runs out. */
#ifndef SD_REGEX_H
#define SD_REGEX_H

#include <stddef.h>
#include <stdint.h>

#include "sd_error.h"
#include "sd_fsm.h"

/* Most bytes in a pattern. */
#define SD_REGEX_MAX_PATTERN ((size_t)256 << 10)
/* Most NFA states (counted repetition expands: x{n} builds n copies of x, so (?:a{1000}){1000}
 * is refused; a JSON string of at most 1000 characters, (?:[^"\\]|\\.){0,1000}, takes ~80,000). */
#define SD_REGEX_MAX_NFA 500000
/* Deepest nesting of groups. */
#define SD_REGEX_MAX_DEPTH 100
/* Largest repeat count n or m in {n}, {n,m}. */
#define SD_REGEX_MAX_REPEAT 1000
/* Most bytes the lazy DFA may hold (state sets, transition tables, hash table). */
#define SD_REGEX_MAX_DFA_BYTES ((size_t)256 << 20)

/* Compiles pattern[0..len) (not NUL-terminated necessarily) into *out (free with sd_fsm_free).
 * max_states >= 1 caps the interned DFA states. On failure *out is NULL and eb says why:
 * INVALID_ARGUMENT (bad pattern, bad argument), UNSUPPORTED (a construct or limit above),
 * OUT_OF_MEMORY. */
specdec_status sd_regex_fsm_create(const char *pattern, size_t len, int32_t max_states, sd_fsm **out,
                                   sd_errbuf *eb);

#endif
