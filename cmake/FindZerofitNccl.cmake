# Locates NCCL next to the CUDA toolkit (/usr/local/cuda here) or through hints (the nvidia-nccl pip package
# on GPU machines, whose lib/ holds only libnccl.so.2). Sets ZEROFIT_NCCL_FOUND and the target zerofit::nccl.
# Hints, in order: -DZEROFIT_NCCL_INCLUDE_DIR=<dir with nccl.h> -DZEROFIT_NCCL_LIBRARY=<libnccl.so[.2]>
# (used as given), -DNCCL_ROOT=<dir with include/ and lib/>, CMAKE_PREFIX_PATH, the CUDA toolkit.
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
  file(STRINGS "${ZEROFIT_NCCL_INCLUDE_DIR}/nccl.h" _zf_nccl_version REGEX "^#define NCCL_(MAJOR|MINOR|PATCH) ")
  string(REGEX REPLACE "[^0-9;]" "" _zf_nccl_version "${_zf_nccl_version}")
  string(REPLACE ";" "." _zf_nccl_version "${_zf_nccl_version}")
  message(STATUS "zerofit: NCCL ${_zf_nccl_version} found: ${ZEROFIT_NCCL_LIBRARY}")
else()
  set(ZEROFIT_NCCL_FOUND OFF)
  message(STATUS "zerofit: NCCL not found; the nccl backend is not built")
endif()
