/* sd_utf8.h — THE UTF-8 validator of specdec (well-formed UTF-8 as Unicode Table 3-7
 * defines it: no overlong forms, no surrogates, nothing above U+10FFFF), used by the
 * safetensors header check, the tokenizer (lossy replacement, streaming hold-back) and
 * every other place that takes text. Plus the two code-point helpers the tokenizer
 * builds on. */
#ifndef SD_UTF8_H
#define SD_UTF8_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Length (1..4) of the well-formed sequence starting at s[0..n), n >= 1; 0 when the
 * bytes there are not one (invalid or truncated), with *bad_len = the length of the
 * maximal ill-formed subpart (what one U+FFFD replaces, the rule of Python's
 * errors="replace" and Rust's String::from_utf8_lossy). */
size_t sd_utf8_seq_len(const unsigned char *s, size_t n, size_t *bad_len);
/* 1 if s[0..n) is entirely well-formed UTF-8, else 0. */
int sd_utf8_valid(const unsigned char *s, size_t n);
/* Decode one code point from well-formed UTF-8 at s[0..n); returns its byte length
 * (1 for a truncated sequence, whose first byte is returned as the code point). */
size_t sd_utf8_next(const char *s, size_t n, int32_t *cp);
/* Encode cp (<= U+10FFFF) into dst[0..4); returns the byte count (1..4). */
size_t sd_utf8_put(char *dst, int32_t cp);

#ifdef __cplusplus
}
#endif

#endif
