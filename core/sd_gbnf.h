/* sd_gbnf.h — a context-free grammar in GBNF (llama.cpp's grammars/README.md; xgrammar's EBNF,
 * what vLLM's guided_grammar takes, is the same family) as a byte automaton (core/sd_fsm.h) for
 * structured output (docs/STRUCTURED.md).
 *
 * Syntax (the text is UTF-8; invalid UTF-8 -> SPECDEC_ERR_INVALID_ARGUMENT):
 *   rule       name ::= alternatives      names [a-zA-Z0-9_-]+; a rule may span lines: a new
 *                                         rule starts where a name is followed by '::='
 *   root       the start rule (missing -> INVALID_ARGUMENT); a name defined twice is refused
 *   alternatives  seq | seq | ...         an empty sequence is allowed (derives "")
 *   terms      name (a rule reference), "literal", [class], [^class], . , ( alternatives )
 *   repetition t*  t+  t?  t{m}  t{m,}  t{m,n}   (m <= n <= SD_GBNF_MAX_REPEAT)
 *   escapes    in literals and classes: \n \r \t \\ \" \' \[ \] \- \^ \xHH \uHHHH \UHHHHHHHH
 *   comments   '#' to the end of the line; whitespace and newlines separate terms
 * Terminals are Unicode code points (scalar values: surrogates are never matched), written to the
 * output as UTF-8; a class matches one code point; '.' matches any code point (as llama.cpp's
 * any-character element; it includes '\n'). A class with no scalar value in it (e.g. only
 * surrogates) is INVALID_ARGUMENT.
 * Refused: xgrammar's lookahead assertions (= ...) and llama.cpp's token references <[id]> /
 * <name> (SPECDEC_ERR_UNSUPPORTED); Lark syntax ("name: ...") and anything else unparsed
 * (INVALID_ARGUMENT). Every message names the byte offset or the rule, e.g.
 * "gbnf: undefined rule 'foo' at byte 37".
 *
 * Semantic checks at compile (INVALID_ARGUMENT, naming the rule): a reference to an undefined
 * rule; left recursion, direct or indirect, also through nullable prefixes ("expr ::= expr ..."
 * — as llama.cpp, which refuses it too); a rule that derives no finite string (unproductive);
 * a root whose shortest derivation needs more than SD_GBNF_MAX_DEPTH nested frames.
 *
 * The automaton. The grammar is compiled to a flat array of elements (a code-point class, a
 * rule reference, the end of an alternative); groups and repetitions become generated rules
 * (x* = R ::= x R | "", with a tail reference that does not grow the stack). A configuration is
 * the SET of parser stacks (each a list of element positions: the top is the class the next code
 * point must match, below it the continuations) plus the pending part of a UTF-8 encoded code
 * point; stacks are interned as (parent, position) nodes, configurations (the sorted node ids and
 * the pending code-point range) as state ids. A step advances every stack whose class holds the
 * code point and expands rule references to their alternatives. Within a code point's encoding,
 * only the stacks whose class meets the code points that can still follow stay; when every one
 * of them takes all of those code points, the state forgets which character it is in (its range
 * is kept relative to the block), so a vocabulary's many character prefixes share states. Each
 * state caches its 256 transitions.
 *
 * Bounds (so that every live state can still reach acceptance, and time and memory are bounded):
 *   - a stack is at most SD_GBNF_MAX_DEPTH frames deep; each position's least completion depth
 *     is computed at compile, and a stack whose frames cannot all complete within the bound is
 *     dropped as it is made (so a deeply nested construct is refused past the bound, never left
 *     half-open). Right recursion through a rule's last element does not add frames.
 *   - a configuration holds at most SD_GBNF_MAX_STACKS stacks (an ambiguous grammar passing it:
 *     step() gives SD_FSM_FULL, never a silently truncated set); one step expands at most
 *     SD_GBNF_MAX_WORK distinct (stack, position) items and pushes 16 x SD_GBNF_MAX_WORK, and the
 *     interned nodes, states and their cached transitions stay within SD_GBNF_MAX_NODES /
 *     max_states / SD_GBNF_MAX_BYTES (else FULL).
 *   - grammar text: SD_GBNF_MAX_TEXT bytes, SD_GBNF_MAX_RULES rules (generated ones included),
 *     SD_GBNF_MAX_ELEMENTS elements, groups nested SD_GBNF_MAX_NESTING deep (else UNSUPPORTED).
 * accepting(s): some stack is empty (root is complete) and no code point is half-written.
 *
 * References: llama.cpp grammars/README.md and llama-grammar.cpp (the syntax and the stack-set
 * design); xgrammar's EBNF documentation. The code is this project's. */
#ifndef SD_GBNF_H
#define SD_GBNF_H

#include <stddef.h>
#include <stdint.h>

#include "sd_error.h"
#include "sd_fsm.h"

#define SD_GBNF_MAX_TEXT ((size_t)1 << 20)
#define SD_GBNF_MAX_RULES 10000
#define SD_GBNF_MAX_ELEMENTS 200000
#define SD_GBNF_MAX_REPEAT 1000
#define SD_GBNF_MAX_NESTING 100
#define SD_GBNF_MAX_DEPTH 64
#define SD_GBNF_MAX_STACKS 4096 /* a rule of 1000 literal alternatives starts 1000 stacks */
#define SD_GBNF_MAX_WORK 65536
#define SD_GBNF_MAX_NODES (1 << 21)
#define SD_GBNF_MAX_BYTES ((size_t)256 << 20)

/* Compiles GBNF text (len bytes, not NUL-terminated) into *out (sd_fsm_free it). max_states caps
 * the interned configurations (>= 1). Errors: INVALID_ARGUMENT / UNSUPPORTED with a message in
 * eb, OUT_OF_MEMORY; *out is NULL then. */
specdec_status sd_gbnf_fsm_create(const char *text, size_t len, int32_t max_states, sd_fsm **out, sd_errbuf *eb);

#endif
