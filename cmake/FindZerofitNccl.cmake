# Locates NCCL next to the CUDA toolkit (/usr/local/cuda here) or through NCCL_ROOT / CMAKE_PREFIX_PATH
# (the nvidia-nccl pip package on GPU machines). Sets ZEROFIT_NCCL_FOUND and the target zerofit::nccl.
find_path(ZEROFIT_NCCL_INCLUDE_DIR nccl.h
  HINTS ${NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_ROOT}
  PATH_SUFFIXES include)
find_library(ZEROFIT_NCCL_LIBRARY NAMES nccl libnccl.so.2
  HINTS ${NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR} ${CUDAToolkit_ROOT}
  PATH_SUFFIXES lib lib64)
if(ZEROFIT_NCCL_INCLUDE_DIR AND ZEROFIT_NCCL_LIBRARY)
  set(ZEROFIT_NCCL_FOUND ON)
  add_library(zerofit::nccl UNKNOWN IMPORTED)
  set_target_properties(zerofit::nccl PROPERTIES
    IMPORTED_LOCATION "${ZEROFIT_NCCL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${ZEROFIT_NCCL_INCLUDE_DIR}")
  message(STATUS "zerofit: NCCL found: ${ZEROFIT_NCCL_LIBRARY}")
else()
  set(ZEROFIT_NCCL_FOUND OFF)
  message(STATUS "zerofit: NCCL not found; the nccl backend is not built")
endif()
