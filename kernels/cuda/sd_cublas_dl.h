/* sd_cublas_dl.h — cuBLAS, loaded when the CUDA backend first needs it (dlopen), not linked.
 *
 * Linked, libcublas pulls in libcublasLt (~540 MB) when the dynamic loader maps libspecdec:
 * every process that loads the library paid ~0.15-0.25 s before main, whether or not it ever
 * used a GPU (each `specdec` command, every test driver, every Python process; CI's suite
 * started thousands of them). Loaded here, only the first CUDA runner group pays it.
 *
 * sd_cublas() returns the functions the backend calls, resolved from
 * SD_CUBLAS_SONAME (libcublas.so.<CUDA major>: the ABI the headers describe) on the library
 * search path, else from the toolkit's library directory of the build (SD_CUBLAS_DIR); NULL
 * when neither loads or a symbol is missing, with the reason in sd_cublas_load_error(). The
 * pointer types are the header's own (decltype), so a signature change fails to compile.
 * Thread-safe (pthread_once); the library stays loaded for the process. */
#ifndef SD_CUBLAS_DL_H
#define SD_CUBLAS_DL_H

#include <cublas_v2.h>

/* cublasGemmEx as the library exports it (C++ also sees an inline overload taking a cudaDataType
 * compute type; sd_cublas_dl.cu binds this type to it, which fails to compile if it changes). */
typedef cublasStatus_t (*sd_cublas_gemm_ex_fn)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                               const void *, const void *, cudaDataType, int, const void *,
                                               cudaDataType, int, const void *, void *, cudaDataType, int,
                                               cublasComputeType_t, cublasGemmAlgo_t);

struct sd_cublas_fns {
    decltype(&cublasCreate_v2) create;
    decltype(&cublasDestroy_v2) destroy;
    decltype(&cublasSetStream_v2) set_stream;
    decltype(&cublasSetWorkspace_v2) set_workspace;
    sd_cublas_gemm_ex_fn gemm_ex;
    decltype(&cublasGetStatusName) status_name;
    decltype(&cublasGetStatusString) status_string;
};

const sd_cublas_fns *sd_cublas(void);
/* "" once loaded; else why it is not (the dlopen / dlsym message). */
const char *sd_cublas_load_error(void);

/* For C callers (tests/cuda/test_cublas_load.c declares them itself): 1 once cuBLAS is loaded
 * (loading it now if needed), else 0; cublasGetStatusName(s) through the loaded library, "" when
 * it is not loaded. */
extern "C" int sd_cublas_loaded(void);
extern "C" const char *sd_cublas_status_name_of(int s);

#endif
