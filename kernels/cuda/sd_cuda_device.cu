/* sd_cuda_device.cu — CUDA device discovery for the public ABI, the mapping of CUDA /
 * cuBLAS errors to specdec_status, stream ordering by events, and test hooks (a fault
 * injector for the DEVICE_LOST test, a delayed store for the stream-ordering test). */
#include <cuda_runtime.h>
#include <cublas_v2.h>

#include "sd_cublas_dl.h"

#include "sd_cuda_common.cuh"

extern "C" int specdec_has_cuda(void) { return 1; }

extern "C" int specdec_cuda_device_count(void) {
    int n = 0;
    /* Without a driver or a device this returns an error; that is "0 devices", never fatal. */
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

extern "C" specdec_status sd_cuda_status_of(cudaError_t e) {
    switch (e) {
    case cudaSuccess: return SPECDEC_OK;
    case cudaErrorMemoryAllocation: return SPECDEC_ERR_OUT_OF_MEMORY;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable:
        return SPECDEC_ERR_BACKEND_UNAVAILABLE;
    /* Sticky errors: the context is corrupted and every later call fails. */
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
    case cudaErrorNvlinkUncorrectable:
    case cudaErrorContextIsDestroyed:
    case cudaErrorCudartUnloading:
    case cudaErrorUnknown:
        return SPECDEC_ERR_DEVICE_LOST;
    default: return SPECDEC_ERR_INTERNAL;
    }
}

extern "C" specdec_status sd_cuda_fail(sd_errbuf *eb, cudaError_t e, const char *stmt, const char *file,
                                       int line) {
    specdec_status st = sd_cuda_status_of(e);
    if (st == SPECDEC_OK) st = SPECDEC_ERR_INTERNAL;
    return sd_fail(eb, st, "%s:%d: %s: %s (%s)", file, line, stmt, cudaGetErrorName(e), cudaGetErrorString(e));
}

extern "C" specdec_status sd_cublas_fail(sd_errbuf *eb, cublasStatus_t s, const char *stmt, const char *file,
                                         int line) {
    specdec_status st = SPECDEC_ERR_INTERNAL;
    if (s == CUBLAS_STATUS_ALLOC_FAILED) st = SPECDEC_ERR_OUT_OF_MEMORY;
    if (s == CUBLAS_STATUS_EXECUTION_FAILED) {
        /* The kernel failed: a sticky CUDA error behind it means the device is lost. */
        specdec_status cst = sd_cuda_status_of(cudaPeekAtLastError());
        if (cst == SPECDEC_ERR_DEVICE_LOST) st = cst;
    }
    const sd_cublas_fns *f = sd_cublas();
    if (!f) return sd_fail(eb, SPECDEC_ERR_BACKEND_UNAVAILABLE, "%s:%d: %s: %s", file, line, stmt, sd_cublas_load_error());
    return sd_fail(eb, st, "%s:%d: %s: cuBLAS %s (%s)", file, line, stmt, f->status_name(s), f->status_string(s));
}

static __global__ void sd_fault_kernel(int *p) { p[threadIdx.x] = 1; }

extern "C" specdec_status sd_cuda_inject_fault(cudaStream_t stream, sd_errbuf *eb) {
    sd_fault_kernel<<<1, 1, 0, stream>>>(nullptr);
    SD_CUDA_LAUNCHED(eb, "sd_fault_kernel");
    return SPECDEC_OK;
}

extern "C" specdec_status sd_cuda_stream_after(cudaStream_t waiter, cudaStream_t producer, cudaEvent_t ev,
                                               sd_errbuf *eb) {
    if (waiter == producer) return SPECDEC_OK;
    SD_CUDA_TRY(eb, cudaEventRecord(ev, producer));
    SD_CUDA_TRY(eb, cudaStreamWaitEvent(waiter, ev, 0));
    return SPECDEC_OK;
}

static __device__ __forceinline__ unsigned long long sd_globaltimer() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

static __global__ void sd_delayed_store_kernel(int32_t *dst, int32_t value, unsigned long long ns) {
    const unsigned long long t0 = sd_globaltimer();
    while (sd_globaltimer() - t0 < ns) __nanosleep(1000);
    *(volatile int32_t *)dst = value;
}

extern "C" specdec_status sd_cuda_delayed_store(int32_t *dst, int32_t value, uint64_t ns, cudaStream_t stream,
                                                sd_errbuf *eb) {
    if (!dst) return sd_fail(eb, SPECDEC_ERR_INVALID_ARGUMENT, "sd_cuda_delayed_store: NULL destination");
    sd_delayed_store_kernel<<<1, 1, 0, stream>>>(dst, value, (unsigned long long)ns);
    SD_CUDA_LAUNCHED(eb, "sd_delayed_store_kernel");
    return SPECDEC_OK;
}
