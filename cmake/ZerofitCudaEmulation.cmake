# CUDA emulation (issue 30's kernels and the CUDA device, run without a GPU; tests/cuda_emulation/
# runtime_api.h says what it checks and what it cannot). -DZEROFIT_CUDA_EMULATION=ON in a build without a
# CUDA toolkit (the sanitizer builds turn it on: scripts/test.sh) compiles device/cuda and kernels/cuda as
# C++ against the emulated runtime, so the CUDA device's conformance suite and the fused kernels' tests run
# on the host, under ASan+UBSan and TSan.
#
# The .cu files are rewritten at configure time into ${CMAKE_BINARY_DIR}/cuda_emulation/<same path>.cc:
#   - a launch  K<<<grid, block, shared, stream>>>(args)  becomes  K * LaunchConfig{...}(args) (kernel_launch.h);
#   - each  __shared__ T name[N];  becomes a reference to the block's own array (one declaration a statement);
#   - #line keeps the original file and lines in diagnostics and in the emulation's faults.
# The headers that fix the grids' block caps are copied there with caps of 4 blocks (kGridCaps below), so
# that the tests' small inputs already walk the grid-stride loops more than once per thread; the emulated
# targets put that folder first on their include path.

option(ZEROFIT_CUDA_EMULATION "Compile the CUDA device and kernels against the host emulation of CUDA" OFF)

# Header (relative to the source root), the text that sets its cap, and the emulation's text.
set(ZEROFIT_CUDA_EMULATION_CAPS
  "device/cuda/cuda_dtype.cuh|constexpr size_t kMaxBlocks = 4096|constexpr size_t kMaxBlocks = 4"
  "device/cuda/cuda_kernels.h|constexpr int kSumOfSquaresMaxBlocks = 1024|constexpr int kSumOfSquaresMaxBlocks = 4"
  "kernels/cuda/element.cuh|blocks < 65535 ? blocks : 65535|blocks < 4 ? blocks : 4")

function(_zerofit_write_if_changed path text)
  if(EXISTS "${path}")
    file(READ "${path}" old)
    if(old STREQUAL text)
      return()
    endif()
  endif()
  file(WRITE "${path}" "${text}")
endfunction()

# zerofit_emulated_cuda_sources(<out-var> <file.cu>...): the rewritten C++ files, for add_library.
function(zerofit_emulated_cuda_sources out_var)
  set(outs "")
  foreach(src IN LISTS ARGN)
    get_filename_component(abs "${src}" ABSOLUTE)
    file(RELATIVE_PATH rel "${PROJECT_SOURCE_DIR}" "${abs}")
    file(READ "${abs}" text)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${abs}")
    string(REGEX REPLACE "__shared__ ([A-Za-z_][A-Za-z0-9_:]*) ([A-Za-z_][A-Za-z0-9_]*)\\[([^];]*)\\];"
           "auto& \\2 = ::zerofit::cuda_emulation::Shared<\\1[\\3]>([] {});" text "${text}")
    string(REPLACE "<<<" " * ::zerofit::cuda_emulation::LaunchConfig{" text "${text}")
    string(REPLACE ">>>" "}" text "${text}")
    if(text MATCHES "__shared__")
      message(FATAL_ERROR "CUDA emulation: ${rel} declares shared memory in a form the rewrite does not know "
                          "(write one '__shared__ T name[N];' a statement, or teach cmake/ZerofitCudaEmulation.cmake)")
    endif()
    set(out "${CMAKE_BINARY_DIR}/cuda_emulation/${rel}.cc")
    _zerofit_write_if_changed("${out}"
      "#include \"tests/cuda_emulation/kernel_launch.h\"\n#line 1 \"${abs}\"\n${text}")
    list(APPEND outs "${out}")
  endforeach()
  set(${out_var} ${outs} PARENT_SCOPE)
endfunction()

# The capped headers, written once per configure (the folder zerofit_use_cuda_emulation puts first).
function(_zerofit_write_capped_headers)
  foreach(entry IN LISTS ZEROFIT_CUDA_EMULATION_CAPS)
    string(REPLACE "|" ";" parts "${entry}")
    list(GET parts 0 rel)
    list(GET parts 1 from)
    list(GET parts 2 to)
    file(READ "${PROJECT_SOURCE_DIR}/${rel}" text)
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${PROJECT_SOURCE_DIR}/${rel}")
    string(FIND "${text}" "${from}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "CUDA emulation: ${rel} no longer contains '${from}' (its grid cap); update "
                          "ZEROFIT_CUDA_EMULATION_CAPS in cmake/ZerofitCudaEmulation.cmake")
    endif()
    string(REPLACE "${from}" "${to}" text "${text}")
    _zerofit_write_if_changed("${CMAKE_BINARY_DIR}/cuda_emulation/${rel}"
      "#line 1 \"${PROJECT_SOURCE_DIR}/${rel}\"\n${text}")
  endforeach()
endfunction()

# zerofit_use_cuda_emulation(<target>): the emulated runtime and the capped headers for <target> and its
# users (first on their include path).
function(zerofit_use_cuda_emulation target)
  target_include_directories(${target} BEFORE PUBLIC "${CMAKE_BINARY_DIR}/cuda_emulation")
  target_link_libraries(${target} PUBLIC zerofit_cuda_emulation)
  # The intrinsics are plain operations (device_functions.h): nothing may fuse what CUDA rounds separately.
  target_compile_options(${target} PRIVATE -ffp-contract=off)
endfunction()

# zerofit_add_emulated_cuda_library(<name> <file.cu>...): a static library of those kernels as C++ on the
# emulated GPU, compiled from the source root as nvcc compiles them, with the emulation for it and its users.
function(zerofit_add_emulated_cuda_library name)
  zerofit_emulated_cuda_sources(sources ${ARGN})
  add_library(${name} STATIC ${sources})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR})
  zerofit_use_cuda_emulation(${name})
endfunction()

if(ZEROFIT_CUDA_EMULATION)
  _zerofit_write_capped_headers()
endif()
