// Emulated CUDA (tests/cuda_emulation/device_functions.h): this folder stands first on the include path of
// the -DZEROFIT_CUDA_EMULATION=ON builds.
#pragma once

#include "tests/cuda_emulation/device_functions.h"
