/* e3_test.h — what the EAGLE-3 C tests share (header-only): loading a fixture directory. */
#ifndef E3_TEST_H
#define E3_TEST_H

#include <stdio.h>

#include "sd_test.h"
#include "specdec.h"

/* DIR/SUB through specdec_model_load; a failure is a test failure (NULL). */
static inline specdec_model *e3_load(const char *dir, const char *sub) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, sub);
    specdec_model *m = NULL;
    const specdec_status st = specdec_model_load(p, NULL, &m);
    SD_CHECK(st == SPECDEC_OK, "load %s: %s", p, specdec_last_error());
    return m;
}

#endif
