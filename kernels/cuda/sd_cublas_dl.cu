/* sd_cublas_dl.cu — cuBLAS loaded on first use (sd_cublas_dl.h). */
#include "sd_cublas_dl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#ifndef SD_CUBLAS_SONAME
#define SD_CUBLAS_SONAME "libcublas.so"
#endif
#ifndef SD_CUBLAS_DIR
#define SD_CUBLAS_DIR ""
#endif

/* the header's declaration of the exported cublasGemmEx must have sd_cublas_gemm_ex_fn's type (an
 * unevaluated operand: no reference to the symbol is emitted, cuBLAS stays unlinked) */
static_assert(sizeof(static_cast<sd_cublas_gemm_ex_fn>(&cublasGemmEx)) == sizeof(void (*)(void)),
              "cublasGemmEx's exported signature changed");

static pthread_once_t sd_cublas_once = PTHREAD_ONCE_INIT;
static sd_cublas_fns sd_cublas_table;
static int sd_cublas_ok;
static char sd_cublas_err[512];

template <typename F> static bool sd_cublas_sym(void *lib, const char *name, F *out) {
    *out = reinterpret_cast<F>(dlsym(lib, name));
    if (*out) return true;
    const char *why = dlerror();
    snprintf(sd_cublas_err, sizeof sd_cublas_err, "%s: symbol %s not found (%s)", SD_CUBLAS_SONAME, name,
             why ? why : "no message");
    return false;
}

static void sd_cublas_load(void) {
    void *lib = dlopen(SD_CUBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (!lib && SD_CUBLAS_DIR[0]) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", SD_CUBLAS_DIR, SD_CUBLAS_SONAME);
        lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    }
    if (!lib) {
        const char *why = dlerror();
        snprintf(sd_cublas_err, sizeof sd_cublas_err, "cannot load %s (the CUDA toolkit's cuBLAS): %s",
                 SD_CUBLAS_SONAME, why ? why : "no message");
        return;
    }
    sd_cublas_fns t;
    if (sd_cublas_sym(lib, "cublasCreate_v2", &t.create) && sd_cublas_sym(lib, "cublasDestroy_v2", &t.destroy) &&
        sd_cublas_sym(lib, "cublasSetStream_v2", &t.set_stream) &&
        sd_cublas_sym(lib, "cublasSetWorkspace_v2", &t.set_workspace) &&
        sd_cublas_sym(lib, "cublasGemmEx", &t.gemm_ex) && sd_cublas_sym(lib, "cublasGetStatusName", &t.status_name) &&
        sd_cublas_sym(lib, "cublasGetStatusString", &t.status_string)) {
        sd_cublas_table = t;
        sd_cublas_ok = 1;
        sd_cublas_err[0] = '\0';
    }
}

const sd_cublas_fns *sd_cublas(void) {
    pthread_once(&sd_cublas_once, sd_cublas_load);
    return sd_cublas_ok ? &sd_cublas_table : nullptr;
}

const char *sd_cublas_load_error(void) {
    pthread_once(&sd_cublas_once, sd_cublas_load);
    return sd_cublas_err;
}

extern "C" int sd_cublas_loaded(void) { return sd_cublas() != nullptr; }

extern "C" const char *sd_cublas_status_name_of(int s) {
    const sd_cublas_fns *f = sd_cublas();
    return f ? f->status_name((cublasStatus_t)s) : "";
}
