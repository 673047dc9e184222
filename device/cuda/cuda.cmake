# The CUDA device (included by device/CMakeLists.txt when ZEROFIT_CUDA_CODE: nvcc, or the emulation). Its kernels (*.cu) compile
# wherever nvcc is found, GPU or not: CI builds every one of them; the `gpu` ctest label runs them. The CUDA
# language is enabled in the top-level CMakeLists.txt (device/ and kernels/ both compile .cu files).

# The kernels alone: nvcc sees no absl and no LibTorch, only core/dtype.h.
set(_zf_device_kernels
  ${CMAKE_CURRENT_LIST_DIR}/accumulate.cu
  ${CMAKE_CURRENT_LIST_DIR}/adamw.cu
  ${CMAKE_CURRENT_LIST_DIR}/adamw_8bit.cu
  ${CMAKE_CURRENT_LIST_DIR}/convert.cu
  ${CMAKE_CURRENT_LIST_DIR}/sum_of_squares.cu)
if(ZEROFIT_HAVE_CUDA)
  add_library(zerofit_device_cuda STATIC ${_zf_device_kernels})
  target_link_libraries(zerofit_device_cuda PUBLIC CUDA::cudart)
  target_include_directories(zerofit_device_cuda PRIVATE ${PROJECT_SOURCE_DIR})
  # The directory's -Wall/-Wextra are host-compiler flags that nvcc rejects: hand them to it via -Xcompiler.
  # No --use_fast_math and no -ftz: the kernels' IEEE intrinsics and denormals must match the host references.
  set_property(TARGET zerofit_device_cuda PROPERTY COMPILE_OPTIONS "")
  target_compile_options(zerofit_device_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra --Werror=all-warnings>)
  target_link_libraries(zerofit_device PUBLIC CUDA::cudart)
else()
  # The same kernels as C++ on the emulated GPU (cmake/ZerofitCudaEmulation.cmake).
  zerofit_add_emulated_cuda_library(zerofit_device_cuda ${_zf_device_kernels})
  zerofit_use_cuda_emulation(zerofit_device)
endif()

target_sources(zerofit_device PRIVATE
  ${CMAKE_CURRENT_LIST_DIR}/cuda_device.cc
  ${CMAKE_CURRENT_LIST_DIR}/cuda_event.cc
  ${CMAKE_CURRENT_LIST_DIR}/cuda_stream.cc)
target_link_libraries(zerofit_device PUBLIC zerofit_device_cuda)
target_compile_definitions(zerofit_device PUBLIC ZEROFIT_HAVE_CUDA_DEVICE=1 ZEROFIT_HAVE_CUDA=1)
