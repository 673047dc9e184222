# The torch 2.x CUDA compile tier (issue 28): compiles every .cc under worker/torch, library sources and
# programs, as a CUDA build of zerofit would (ZEROFIT_TORCH_CUDA, the CUDA device, NCCL, MPI), against the
# headers of another LibTorch that need not be installed, here Debian 13's CUDA build of LibTorch 2.6
# (scripts/fetch_torch_cuda_headers.sh unpacks them; scripts/torch_cuda_compile_check.sh builds this target
# on every run of the test command). Compile only: nothing links or runs, so its libraries are not needed.
# It touches nothing of the normal build: its own target, which links no LibTorch library (so neither the
# 1.13 include folders nor the precompiled header of cmake/ZerofitTorchPch.cmake reach it).
#   -DZEROFIT_TORCH_CUDA_COMPILE_CHECK=<include root>   the folder that holds torch/, ATen/ and c10/
set(_zf_check ${ZEROFIT_TORCH_CUDA_COMPILE_CHECK})
set(_zf_check_version_h ${_zf_check}/torch/csrc/api/include/torch/version.h)
if(NOT EXISTS ${_zf_check_version_h} OR NOT EXISTS ${_zf_check}/c10/cuda/CUDACachingAllocator.h)
  message(FATAL_ERROR "ZEROFIT_TORCH_CUDA_COMPILE_CHECK=${_zf_check}: not a CUDA LibTorch include root "
                      "(no torch/csrc/api/include/torch/version.h or c10/cuda/CUDACachingAllocator.h)")
endif()
# The check must compile the code a CUDA build compiles: the CUDA device and NCCL paths too.
if(NOT ZEROFIT_HAVE_CUDA OR NOT ZEROFIT_HAVE_NCCL OR NOT ZEROFIT_WITH_MPI OR NOT TARGET zerofit_worker_loop)
  message(FATAL_ERROR "ZEROFIT_TORCH_CUDA_COMPILE_CHECK needs the CUDA toolkit, NCCL, MPI and gRPC "
                      "(found: CUDA ${ZEROFIT_HAVE_CUDA}, NCCL ${ZEROFIT_HAVE_NCCL}, MPI ${ZEROFIT_WITH_MPI})")
endif()
file(STRINGS ${_zf_check_version_h} _zf_major REGEX "define TORCH_VERSION_MAJOR ")
file(STRINGS ${_zf_check_version_h} _zf_minor REGEX "define TORCH_VERSION_MINOR ")
string(REGEX REPLACE ".* ([0-9]+)$" "\\1" _zf_major "${_zf_major}")
string(REGEX REPLACE ".* ([0-9]+)$" "\\1" _zf_minor "${_zf_minor}")
# The standard that LibTorch's own CMake package asks for (Debian 13's 2.6: CXX_STANDARD 17; pip's >= 2.10
# needs C++20), by the same rule as zerofit_worker_torch.
if("${_zf_major}.${_zf_minor}" VERSION_GREATER_EQUAL 2.10)
  set(_zf_check_std 20)
else()
  set(_zf_check_std 17)
endif()

# Every .cc under worker/torch, found at configure time (CONFIGURE_DEPENDS: a new file joins without a manual
# re-run of CMake), so that none can be left out of the check.
file(GLOB_RECURSE _zf_check_sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
file(GLOB_RECURSE _zf_check_programs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/programs/*.cc)
add_library(zerofit_worker_torch_cuda_compile OBJECT EXCLUDE_FROM_ALL ${_zf_check_sources})
# The library sources in two unity units, zerofit_worker_torch's and the rest (the memory probe's, whose
# file-local names collide with the trainer's as they never meet in the normal build): LibTorch's headers,
# most of each unit's compile time, are parsed once per unit. Each program has its own main() and file-local
# helpers, so they stay apart and reuse a precompiled <torch/torch.h> of this LibTorch instead.
get_target_property(_zf_lib_sources_listed zerofit_worker_torch SOURCES)
set(_zf_lib_sources "")
foreach(_zf_src IN LISTS _zf_lib_sources_listed)
  get_filename_component(_zf_src ${_zf_src} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
  list(APPEND _zf_lib_sources ${_zf_src})
endforeach()
set_target_properties(zerofit_worker_torch_cuda_compile PROPERTIES UNITY_BUILD ON UNITY_BUILD_MODE GROUP)
foreach(_zf_src IN LISTS _zf_check_sources)
  if(_zf_src IN_LIST _zf_check_programs)
    set_source_files_properties(${_zf_src} TARGET_DIRECTORY zerofit_worker_torch_cuda_compile
                                PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
    continue()
  elseif(_zf_src IN_LIST _zf_lib_sources)
    set(_zf_group worker_torch)
  else()
    set(_zf_group other)
  endif()
  set_source_files_properties(${_zf_src} TARGET_DIRECTORY zerofit_worker_torch_cuda_compile
                              PROPERTIES UNITY_GROUP ${_zf_group})
endforeach()
target_precompile_headers(zerofit_worker_torch_cuda_compile PRIVATE <torch/torch.h>)
# What the sources include besides LibTorch: the libraries that zerofit_worker_torch, zerofit_memory_probe_torch
# and the programs link (for their include folders and definitions: ZEROFIT_HAVE_CUDA, _CUDA_DEVICE, _NCCL and
# _MPI come from zerofit_device and zerofit_comm, _CUDA_KERNELS from zerofit_kernels, as in a CUDA build). Linking nothing, an OBJECT library only
# waits for their generated headers (coordinator.grpc.pb.h), not for them to compile.
target_link_libraries(zerofit_worker_torch_cuda_compile PRIVATE
  zerofit_sharding zerofit_offload_updater zerofit_kernels zerofit_data zerofit_training_data zerofit_jobplan zerofit_metrics
  zerofit_step_scheduler zerofit_planner zerofit_launch zerofit_worker_loop zerofit_kv_rendezvous CUDA::cudart)
target_include_directories(zerofit_worker_torch_cuda_compile SYSTEM PRIVATE
  ${_zf_check} ${_zf_check}/torch/csrc/api/include)
# LibTorch's exported usage requirements (Debian 13's Caffe2Targets.cmake: torch_cpu's USE_DISTRIBUTED,
# USE_C10D_GLOO, USE_RPC, USE_TENSORPIPE; torch_cuda's USE_C10D_NCCL; TorchConfig.cmake's TORCH_CXX_FLAGS).
target_compile_definitions(zerofit_worker_torch_cuda_compile PRIVATE
  ZEROFIT_TORCH_CUDA=1 USE_DISTRIBUTED USE_C10D_GLOO USE_RPC USE_TENSORPIPE USE_C10D_NCCL
  _GLIBCXX_USE_CXX11_ABI=1)
# -O0 -g0: the check is about what the compiler accepts; code generation at -O2 would only add time. -pthread
# as on every LibTorch target.
target_compile_options(zerofit_worker_torch_cuda_compile PRIVATE -O0 -g0 -pthread)
target_compile_features(zerofit_worker_torch_cuda_compile PRIVATE cxx_std_${_zf_check_std})
message(STATUS "zerofit: torch CUDA compile check against LibTorch ${_zf_major}.${_zf_minor} at ${_zf_check} "
               "(C++${_zf_check_std}, ${CMAKE_CURRENT_SOURCE_DIR}/**.cc)")
