# Sanitizer builds (issue 19): ZEROFIT_SANITIZE=address,undefined or ZEROFIT_SANITIZE=thread instruments every
# zerofit target and test. Meant for a build directory of its own (scripts/test.sh uses build-asan and
# build-tsan). Such a build is LibTorch-free by contract: the top-level CMakeLists.txt turns LibTorch, MPI,
# CUDA and the benchmarks off before their options are read, because Debian's LibTorch and Open MPI are not
# instrumented (ASan/LSan report their allocations, TSan cannot see their synchronisation) and a LibTorch
# build costs minutes per target. What remains is every library that speaks flat buffers, and its unit tests.
#
# Findings fail the test: UBSan does not recover (-fno-sanitize-recover=all), ASan halts on the first error
# with leak detection on, TSan exits non-zero (halt_on_error). Suppressions are for third-party code only,
# one reason per line, in tests/sanitizers/*.supp.

set(ZEROFIT_SANITIZE "" CACHE STRING
    "Sanitizers for a LibTorch-free build: empty, 'address,undefined' (or either alone) or 'thread'")

# zerofit_sanitize_setup(): checks ZEROFIT_SANITIZE and adds the compile and link flags to every target
# defined after the call. Call it from the top-level CMakeLists.txt before any add_subdirectory.
function(zerofit_sanitize_setup)
  if(ZEROFIT_SANITIZE STREQUAL "")
    return()
  endif()
  string(REPLACE "," ";" kinds "${ZEROFIT_SANITIZE}")
  foreach(kind IN LISTS kinds)
    if(NOT kind MATCHES "^(address|undefined|thread)$")
      message(FATAL_ERROR "ZEROFIT_SANITIZE='${ZEROFIT_SANITIZE}': unknown sanitizer '${kind}' "
                          "(use 'address,undefined' or 'thread')")
    endif()
  endforeach()
  if("thread" IN_LIST kinds AND NOT kinds STREQUAL "thread")
    message(FATAL_ERROR "ZEROFIT_SANITIZE='${ZEROFIT_SANITIZE}': 'thread' cannot be combined with other "
                        "sanitizers; use a build directory per kind")
  endif()
  if(ZEROFIT_LIBFUZZER)
    message(FATAL_ERROR "ZEROFIT_SANITIZE and ZEROFIT_LIBFUZZER are separate builds; turn one off")
  endif()
  set(flags -fsanitize=${ZEROFIT_SANITIZE} -fno-omit-frame-pointer)
  if("undefined" IN_LIST kinds)
    # -fno-sanitize=null: UBSan's null checks guard every pointer use; ASan already reports any access
    # through a null pointer (a SEGV report with its stack), and they cost about 12% of the ASan+UBSan build's
    # compile time (text/'s largest unity object at -O0: 29.6 -> 25.9 CPU-s; BENCHMARKS.md, issue 29).
    list(APPEND flags -fno-sanitize-recover=all -fno-sanitize=null)
  endif()
  add_compile_options(${flags})
  add_link_options(${flags})
  message(STATUS "zerofit: sanitizers ${ZEROFIT_SANITIZE}; LibTorch, MPI, CUDA and benchmarks are off")
endfunction()

# zerofit_sanitize_hot(<target>...): the libraries (and two tests) whose code the sanitizer builds' tests
# spend their time in (parsing tokenizer.json, config.json and JSONL; tokenizing) keep -O1 when a sanitizer
# build compiles everything else at -O0 (scripts/test.sh): -O0 compiles ASan+UBSan code in about 40% less CPU
# time, and instrumented -O0 parsing is 3x slower (BENCHMARKS.md, "A cold machine within about 15 minutes").
# A no-op outside sanitizer builds.
function(zerofit_sanitize_hot)
  if(ZEROFIT_SANITIZE STREQUAL "")
    return()
  endif()
  foreach(t IN LISTS ARGN)
    target_compile_options(${t} PRIVATE -O1)
  endforeach()
endfunction()

# zerofit_sanitize_test_code(): called at the top of tests/CMakeLists.txt. In an ASan+UBSan build the tests' own
# code (gtest assertions, fixtures, the expected values) is compiled without UBSan's alignment and vptr checks,
# which instrument every access through a pointer or reference and every use of a polymorphic object: they
# are about a third of the compile time of an instrumented test object (tests/jobspec_unit_test's unity
# object: 15.1 CPU-s with them, 10.4 without; BENCHMARKS.md, issue 29, "The test command on a Zen 4 EPYC").
# The defects they look for are the code under test's, and it keeps every check: the libraries compile with
# the whole set. ASan still instruments the tests' code, so a memory error in a test is still found.
function(zerofit_sanitize_test_code)
  if(NOT ZEROFIT_SANITIZE MATCHES "undefined")
    return()
  endif()
  add_compile_options(-fno-sanitize=alignment,vptr)
endfunction()

# zerofit_sanitize_test_environment(<directory>): gives every test registered in <directory> the sanitizer
# runtime options, so that a plain `ctest` in the build directory behaves like scripts/test.sh.
function(zerofit_sanitize_test_environment directory)
  if(ZEROFIT_SANITIZE STREQUAL "")
    return()
  endif()
  set(supp ${PROJECT_SOURCE_DIR}/tests/sanitizers)
  set(env
    "ASAN_OPTIONS=detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1:strict_init_order=1:check_initialization_order=1"
    "LSAN_OPTIONS=suppressions=${supp}/lsan.supp:print_suppressions=0"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
    "TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=${supp}/tsan.supp:print_suppressions=0")
  get_property(tests DIRECTORY ${directory} PROPERTY TESTS)
  foreach(t IN LISTS tests)
    set_property(TEST ${t} APPEND PROPERTY ENVIRONMENT ${env})
  endforeach()
endfunction()

# zerofit_leave_unit_tests_to_sanitizer_builds(<directory>): with -DZEROFIT_PLAIN_TORCH_FREE_UNIT_TESTS=OFF in a
# build without sanitizers, the unit tests that a sanitizer build also has (label `unit`, an executable of the
# same name in <directory> that does not link LibTorch) are left out of `all` and disabled in ctest.
# scripts/test.sh does so for its main build because its ASan+UBSan build compiles and runs exactly these
# tests, instrumented: compiling them a second time was about 250 CPU-seconds of a cold run
# (BENCHMARKS.md, "A cold machine within about 15 minutes"). A plain configure keeps every test.
function(zerofit_leave_unit_tests_to_sanitizer_builds directory)
  if(ZEROFIT_PLAIN_TORCH_FREE_UNIT_TESTS OR NOT ZEROFIT_SANITIZE STREQUAL "")
    return()
  endif()
  get_property(tests DIRECTORY ${directory} PROPERTY TESTS)
  set(left "")
  foreach(t IN LISTS tests)
    get_test_property(${t} LABELS labels)
    if(NOT labels STREQUAL "unit" OR NOT TARGET ${t})
      continue()
    endif()
    _zerofit_links_torch(${t} heavy "")
    if(NOT heavy)
      set_target_properties(${t} PROPERTIES EXCLUDE_FROM_ALL ON)
      set_tests_properties(${t} PROPERTIES DISABLED ON)
      list(APPEND left ${t})
    endif()
  endforeach()
  list(LENGTH left n)
  message(STATUS "zerofit: ${n} LibTorch-free unit tests left to the sanitizer builds (ZEROFIT_PLAIN_TORCH_FREE_UNIT_TESTS=OFF)")
endfunction()

# Whether <target> links LibTorch, directly or through the zerofit libraries it links.
function(_zerofit_links_torch target out seen)
  foreach(property LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
    get_target_property(libs ${target} ${property})
    if(NOT libs)
      continue()
    endif()
    foreach(lib IN LISTS libs)
      if(lib MATCHES "^(torch|zerofit_worker_torch)$")
        set(${out} ON PARENT_SCOPE)
        return()
      endif()
      if(lib MATCHES "^zerofit_" AND TARGET ${lib} AND NOT lib IN_LIST seen)
        list(APPEND seen ${lib})
        _zerofit_links_torch(${lib} heavy "${seen}")
        if(heavy)
          set(${out} ON PARENT_SCOPE)
          return()
        endif()
      endif()
    endforeach()
  endforeach()
  set(${out} OFF PARENT_SCOPE)
endfunction()
