# One precompiled <torch/torch.h> for every target that compiles against LibTorch (ZEROFIT_TORCH_PCH, on by
# default with GCC). Parsing LibTorch's headers is most of the compile time of a worker/torch translation unit
# (BENCHMARKS.md "Build time"), and about 30 of them build in the test command: zerofit_worker_torch compiles
# the header once, every other target that links it reuses that result (REUSE_FROM, so the flags must agree:
# they do, as every such target gets LibTorch's flags, standard and definitions through zerofit_worker_torch).
# GCC checks the precompiled header's validity itself (-Winvalid-pch): a target whose flags differ compiles
# the header as before, with a warning, never wrongly.
option(ZEROFIT_TORCH_PCH "Precompile <torch/torch.h> once for every LibTorch target (GCC)" ON)

# Call once every target exists (the top-level CMakeLists.txt, last).
function(zerofit_torch_pch_setup)
  if(NOT ZEROFIT_TORCH_PCH OR NOT TARGET zerofit_worker_torch OR NOT CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    return()
  endif()
  target_precompile_headers(zerofit_worker_torch PRIVATE <torch/torch.h>)
  _zerofit_all_targets(targets ${PROJECT_SOURCE_DIR})
  # Targets that compile against LibTorch: those that link a LibTorch library, to a fixed point (libraries
  # such as zerofit_memory_probe_torch link zerofit_worker_torch and are linked by tests in turn).
  set(torch_libs zerofit_worker_torch)
  set(users "")
  set(grew TRUE)
  while(grew)
    set(grew FALSE)
    foreach(t IN LISTS targets)
      if(t IN_LIST users OR t STREQUAL "zerofit_worker_torch")
        continue()
      endif()
      get_target_property(type ${t} TYPE)
      if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
        continue()
      endif()
      get_target_property(libs ${t} LINK_LIBRARIES)
      foreach(l IN LISTS libs)
        if(l IN_LIST torch_libs)
          list(APPEND users ${t})
          list(APPEND torch_libs ${t})
          set(grew TRUE)
          break()
        endif()
      endforeach()
    endforeach()
  endwhile()
  foreach(t IN LISTS users)
    target_precompile_headers(${t} REUSE_FROM zerofit_worker_torch)
    # The header is precompiled for a library (-fPIC); GCC refuses it in a unit compiled -fPIE. PIC code
    # links into a position-independent executable all the same.
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "EXECUTABLE")
      set_target_properties(${t} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
      target_compile_options(${t} PRIVATE -fPIC)
    endif()
  endforeach()
  list(LENGTH users n)
  message(STATUS "zerofit: <torch/torch.h> precompiled once, reused by ${n} targets (ZEROFIT_TORCH_PCH)")
endfunction()

function(_zerofit_all_targets out dir)
  get_property(ts DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(s IN LISTS subs)
    _zerofit_all_targets(sub_ts ${s})
    list(APPEND ts ${sub_ts})
  endforeach()
  set(${out} ${ts} PARENT_SCOPE)
endfunction()
