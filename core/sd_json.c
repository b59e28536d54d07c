/* sd_json.c — strict JSON parsing and typed lookups over cJSON for the loaders. */
#define _POSIX_C_SOURCE 200809L
#include "sd_json.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sd_alloc.h"

static int sd_is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

specdec_status sd_json_parse(const char *text, size_t len, const char *fname, cJSON **out, sd_errbuf *eb) {
    *out = NULL;
    /* A NUL-terminated copy: cJSON then never needs to look past the end. */
    char *buf = sd_malloc(len + 1);
    if (!buf) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory copying %zu bytes of JSON", fname, len);
    if (len) memcpy(buf, text, len); /* text may be NULL when len == 0 */
    buf[len] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(buf, len + 1, &end, 0);
    if (!root) {
        size_t at = (end && end >= buf && end <= buf + len) ? (size_t)(end - buf) : 0;
        sd_free(buf);
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: not valid JSON (error near byte %zu)", fname, at);
    }
    size_t pos = (size_t)(end - buf);
    while (pos < len && sd_is_ws(buf[pos])) pos++;
    sd_free(buf);
    if (pos < len) {
        cJSON_Delete(root);
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: not valid JSON: unexpected data after the value at byte %zu",
                       fname, pos);
    }
    *out = root;
    return SPECDEC_OK;
}

const cJSON *sd_json_member(const cJSON *obj, const char *key) {
    if (!cJSON_IsObject(obj)) return NULL;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    return (v && !cJSON_IsNull(v)) ? v : NULL;
}

int sd_json_is_int(const cJSON *v) {
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    return isfinite(d) && d == floor(d) && fabs(d) <= 9007199254740992.0;
}

static const char *sd_json_type_name(const cJSON *v) {
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    return "null";
}

specdec_status sd_json_get_int(const cJSON *obj, const char *key, int required, int64_t def, int64_t lo,
                               int64_t hi, int64_t *out, const char *fname, sd_errbuf *eb) {
    const cJSON *v = sd_json_member(obj, key);
    if (!v) {
        if (required) return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: missing key '%s'", fname, key);
        *out = def;
        return SPECDEC_OK;
    }
    if (!sd_json_is_int(v))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: key '%s' must be an integer, got %s", fname, key,
                       cJSON_IsNumber(v) ? "a non-integer number" : sd_json_type_name(v));
    double d = v->valuedouble;
    if (d < (double)lo || d > (double)hi)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: key '%s' = %.17g is out of range [%lld, %lld]", fname, key, d,
                       (long long)lo, (long long)hi);
    *out = (int64_t)d;
    return SPECDEC_OK;
}

specdec_status sd_json_get_num(const cJSON *obj, const char *key, int required, double def, double lo,
                               double hi, double *out, const char *fname, sd_errbuf *eb) {
    const cJSON *v = sd_json_member(obj, key);
    if (!v) {
        if (required) return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: missing key '%s'", fname, key);
        *out = def;
        return SPECDEC_OK;
    }
    if (!cJSON_IsNumber(v))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: key '%s' must be a number, got %s", fname, key,
                       sd_json_type_name(v));
    double d = v->valuedouble;
    if (!isfinite(d) || d < lo || d > hi)
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: key '%s' = %g is out of range [%g, %g]", fname, key, d, lo, hi);
    *out = d;
    return SPECDEC_OK;
}

specdec_status sd_json_get_bool(const cJSON *obj, const char *key, int required, int def, int *out,
                                const char *fname, sd_errbuf *eb) {
    const cJSON *v = sd_json_member(obj, key);
    if (!v) {
        if (required) return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: missing key '%s'", fname, key);
        *out = def;
        return SPECDEC_OK;
    }
    if (!cJSON_IsBool(v))
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: key '%s' must be true or false, got %s", fname, key,
                       sd_json_type_name(v));
    *out = cJSON_IsTrue(v) ? 1 : 0;
    return SPECDEC_OK;
}

static int sd_cmp_strptr(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

specdec_status sd_json_check_unique(const cJSON *obj, const char *what, const char *fname, sd_errbuf *eb) {
    size_t n = 0;
    for (const cJSON *c = obj ? obj->child : NULL; c; c = c->next) n++;
    if (n < 2) return SPECDEC_OK;
    const char **keys = sd_malloc(n * sizeof *keys);
    if (!keys) return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory checking the keys of %s", fname, what);
    size_t i = 0;
    for (const cJSON *c = obj->child; c; c = c->next) keys[i++] = c->string ? c->string : "";
    qsort(keys, n, sizeof *keys, sd_cmp_strptr);
    for (i = 1; i < n; i++) {
        if (!strcmp(keys[i - 1], keys[i])) {
            specdec_status st =
                sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: duplicate key '%s' in %s", fname, keys[i], what);
            sd_free(keys);
            return st;
        }
    }
    sd_free(keys);
    return SPECDEC_OK;
}

specdec_status sd_read_file(const char *path, size_t max_bytes, char **out, size_t *len, sd_errbuf *eb) {
    *out = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return sd_fail(eb, SPECDEC_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return sd_fail(eb, SPECDEC_ERR_IO, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > (uint64_t)max_bytes) {
        close(fd);
        return sd_fail(eb, SPECDEC_ERR_FORMAT, "%s: file is %lld bytes, more than the %zu accepted", path,
                       (long long)st.st_size, max_bytes);
    }
    size_t n = (size_t)st.st_size;
    char *buf = sd_malloc(n + 1);
    if (!buf) {
        close(fd);
        return sd_fail(eb, SPECDEC_ERR_OUT_OF_MEMORY, "%s: out of memory reading %zu bytes", path, n);
    }
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            int e = r < 0 ? errno : 0;
            close(fd);
            sd_free(buf);
            return sd_fail(eb, SPECDEC_ERR_IO, "%s: read failed after %zu of %zu bytes: %s", path, got, n,
                           e ? strerror(e) : "file shrank");
        }
        got += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return SPECDEC_OK;
}
