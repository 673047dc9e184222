# device/: the conformance suite on the host and test devices (unit) and on CUDA (gpu: skips cleanly
# without a GPU), plus the test device's own reordering test (unit).
# OBJECT, not STATIC: nothing references the TEST_P registrations, so a static library would drop them.
add_library(zerofit_device_conformance OBJECT ${CMAKE_CURRENT_LIST_DIR}/device_conformance.cc)
target_link_libraries(zerofit_device_conformance PUBLIC zerofit_device GTest::gtest)

zerofit_unit_test(device_unit_test
  ${CMAKE_CURRENT_LIST_DIR}/device_conformance_host_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/device_factory_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/host_memory_test.cc
  ${CMAKE_CURRENT_LIST_DIR}/test_device_test.cc)
target_link_libraries(device_unit_test PRIVATE zerofit_device_conformance)

add_executable(device_gpu_test ${CMAKE_CURRENT_LIST_DIR}/device_conformance_cuda_test.cc)
target_link_libraries(device_gpu_test PRIVATE zerofit_device_conformance GTest::gtest_main)
add_test(NAME device_gpu_test COMMAND device_gpu_test)
set_tests_properties(device_gpu_test PROPERTIES LABELS gpu TIMEOUT 600)

# On the emulated GPU (-DZEROFIT_CUDA_EMULATION=ON: the sanitizer builds) the CUDA suite runs everywhere: the
# CUDA device, its streams and events and every kernel, against the host references (label unit).
if(ZEROFIT_CUDA_EMULATION)
  add_test(NAME device_emulated_cuda_test COMMAND device_gpu_test)
  set_tests_properties(device_emulated_cuda_test PROPERTIES LABELS unit TIMEOUT 300)
endif()
# Under TSan the emulated 1024-thread sum-of-squares blocks are slow (every barrier wakes 1024 host threads: the
# half-type test's 12 launches took 18 s of the suite's 50 s on a 2-core Zen 5, 2026-11-29);
# SumOfSquaresMatchesHostReference keeps the kernel under TSan, the half-type variant runs under ASan.
if(ZEROFIT_CUDA_EMULATION AND ZEROFIT_SANITIZE STREQUAL "thread")
  set_tests_properties(device_gpu_test PROPERTIES ENVIRONMENT "GTEST_FILTER=-*SumOfSquaresOfHalfTypes*")
endif()
