# zerofit_libstdcxx_first (cmake/ZerofitLibstdcxxFirst.cmake) against the toolchain that defeated its first
# form on the H200 (issue 28): a library search folder holding only libstdc++.a, ahead of the compiler's own,
# and a shared library exporting its own std::filesystem::remove_all (pip's libtorch.so). The control program,
# linked the old way (an early -lstdc++), must reach the fake's copy: that proves the reproduction.
execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.a
                OUTPUT_VARIABLE _zf_libstdcxx_a OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
if(IS_ABSOLUTE "${_zf_libstdcxx_a}" AND EXISTS "${_zf_libstdcxx_a}")
  set(_zf_static_only ${CMAKE_CURRENT_BINARY_DIR}/libstdcxx-static-only)
  file(MAKE_DIRECTORY ${_zf_static_only})
  file(CREATE_LINK ${_zf_libstdcxx_a} ${_zf_static_only}/libstdc++.a SYMBOLIC)

  add_library(std_exporter_fake SHARED build/std_exporter_fake.cc)
  foreach(_zf_variant probe control)
    add_executable(libstdcxx_first_${_zf_variant} build/libstdcxx_first_probe.cc)
    target_link_options(libstdcxx_first_${_zf_variant} PRIVATE -L${_zf_static_only})
    target_link_libraries(libstdcxx_first_${_zf_variant} PRIVATE std_exporter_fake)
  endforeach()
  zerofit_libstdcxx_first(libstdcxx_first_probe PRIVATE)
  target_link_options(libstdcxx_first_control PRIVATE "LINKER:--push-state,--no-as-needed,-lstdc++,--pop-state")

  add_test(NAME libstdcxx_first_test COMMAND libstdcxx_first_probe libstdc++)
  add_test(NAME libstdcxx_first_control_test COMMAND libstdcxx_first_control fake)
  set_tests_properties(libstdcxx_first_test libstdcxx_first_control_test PROPERTIES LABELS unit TIMEOUT 30)
else()
  message(STATUS "zerofit: ${CMAKE_CXX_COMPILER} has no libstdc++.a: libstdcxx_first_test not built")
endif()
