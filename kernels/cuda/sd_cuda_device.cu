/* sd_cuda_device.cu — CUDA device discovery for the public ABI. */
#include <cuda_runtime.h>

extern "C" {
#include "specdec.h"
}

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
