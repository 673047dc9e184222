# Canaries of the sanitizer builds (cmake/ZerofitSanitize.cmake): one deliberate defect per sanitizer; each
# test passes only when the program exits non-zero AND prints its sanitizer's report, so a build that lost
# its instrumentation or its runtime options fails here. Included from tests/CMakeLists.txt.
if(NOT ZEROFIT_SANITIZE STREQUAL "")
  add_executable(sanitizer_canary ${CMAKE_CURRENT_LIST_DIR}/sanitizer_canary.cc)
  target_link_libraries(sanitizer_canary PRIVATE Threads::Threads)
  # zerofit_sanitizer_canary(<defect> <sanitizer> <report regex>)
  function(zerofit_sanitizer_canary defect sanitizer report)
    if(NOT ZEROFIT_SANITIZE MATCHES "${sanitizer}")
      return()
    endif()
    add_test(NAME sanitizer_canary_${defect}
      COMMAND bash -c "out=$(\"$0\" \"$1\" 2>&1); rc=$?; echo \"$out\"; [ $rc -ne 0 ] && grep -q -- \"$2\" <<< \"$out\""
              $<TARGET_FILE:sanitizer_canary> ${defect} "${report}")
    set_tests_properties(sanitizer_canary_${defect} PROPERTIES LABELS unit TIMEOUT 60)
  endfunction()
  zerofit_sanitizer_canary(heap-overflow address "AddressSanitizer: heap-buffer-overflow")
  zerofit_sanitizer_canary(null-write address "AddressSanitizer: SEGV on unknown address 0x000000000000")
  zerofit_sanitizer_canary(leak address "LeakSanitizer: detected memory leaks")
  zerofit_sanitizer_canary(signed-overflow undefined "runtime error: signed integer overflow")
  zerofit_sanitizer_canary(race thread "ThreadSanitizer: data race")
endif()
