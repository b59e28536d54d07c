/* sd_json.h — small helpers over cJSON for the loaders: strict parsing of a byte
 * buffer (trailing garbage rejected, position of the error reported), UTF-8
 * validation, and typed key lookups whose errors name the file and the key. */
#ifndef SD_JSON_H
#define SD_JSON_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#include "sd_error.h"

#ifdef __cplusplus
extern "C" {
#endif


/* Parse text[0..len) (not necessarily NUL-terminated) as one JSON value followed only
 * by whitespace. On failure returns SPECDEC_ERR_FORMAT ("<fname>: not valid JSON at
 * byte N") or OUT_OF_MEMORY; *out = NULL. Free the result with cJSON_Delete. */
specdec_status sd_json_parse(const char *text, size_t len, const char *fname, cJSON **out, sd_errbuf *eb);

/* The member `key` of object `obj`, or NULL when absent or JSON null. */
const cJSON *sd_json_member(const cJSON *obj, const char *key);

/* 1 if the number is an integer that a double holds exactly (|v| <= 2^53). */
int sd_json_is_int(const cJSON *v);

/* Integer member `key` of obj within [lo, hi]. Absent or null: *out = def when
 * !required, else FORMAT "missing key". Wrong type or out of range: FORMAT. */
specdec_status sd_json_get_int(const cJSON *obj, const char *key, int required, int64_t def, int64_t lo,
                               int64_t hi, int64_t *out, const char *fname, sd_errbuf *eb);
/* Number member (finite) within [lo, hi]; same rules. */
specdec_status sd_json_get_num(const cJSON *obj, const char *key, int required, double def, double lo,
                               double hi, double *out, const char *fname, sd_errbuf *eb);
/* Boolean member; same rules. */
specdec_status sd_json_get_bool(const cJSON *obj, const char *key, int required, int def, int *out,
                                const char *fname, sd_errbuf *eb);

/* FORMAT "<fname>: duplicate key '<k>' in <what>" when a key occurs twice among obj's
 * members (cJSON keeps duplicates; Python keeps the last, cJSON lookups the first). */
specdec_status sd_json_check_unique(const cJSON *obj, const char *what, const char *fname, sd_errbuf *eb);

/* Read a whole file into a NUL-terminated sd_malloc buffer (*len excludes the NUL). Files
 * larger than max_bytes are refused (FORMAT). IO / OUT_OF_MEMORY on failure. */
specdec_status sd_read_file(const char *path, size_t max_bytes, char **out, size_t *len, sd_errbuf *eb);

#ifdef __cplusplus
}
#endif

#endif
