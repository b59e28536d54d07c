// A C++ program using specdec through its installed CMake package (the header as C++).
#include <specdec.h>

#include <cstdio>
#include <cstring>

int main() {
    if (specdec_version_number() != SPECDEC_VERSION_NUMBER) return 1;
    specdec_model_params mp = specdec_model_default_params();
    specdec_model *model = nullptr;
    specdec_status st = specdec_model_load("/nonexistent-dir", &mp, &model);
    if (st == SPECDEC_OK || model != nullptr) return 1;
    if (std::strlen(specdec_status_string(st)) == 0) return 1;
    specdec_engine_params ep = specdec_engine_default_params();
    specdec_engine *engine = nullptr;
    if (specdec_engine_create(nullptr, nullptr, &ep, &engine) != SPECDEC_ERR_INVALID_ARGUMENT) return 1;
    specdec_engine_free(nullptr);
    specdec_model_free(nullptr);
    std::printf("C++ consumer: specdec %s, load error: %s\n", specdec_version_string(), specdec_last_error());
    return 0;
}
