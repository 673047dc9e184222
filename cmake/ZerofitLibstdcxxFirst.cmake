# zerofit_libstdcxx_first(<target> <INTERFACE|PUBLIC|PRIVATE>): the shared libstdc++ becomes the first shared
# library the target's programs link (issue 28). pip's libtorch.so (2.11) exports its own copies of
# std::filesystem functions (pytorch#133437), and its remove_all calls a null pointer. The static linker binds
# each reference to the first shared library that defines it, and the loader searches the program's
# DT_NEEDED libraries in order, so libstdc++ must come before libtorch.so in both.
#
# The library is named by its full path, not as -lstdc++: a toolchain that ships only libstdc++.a in its own
# search path (the H200 machine's /opt/gcc g++ 13.3) turns an early -lstdc++ into an archive read before any
# object, which adds nothing, and every std::filesystem call then bound to libtorch.so
# (tests/build/libstdcxx_first_test.cmake reproduces that toolchain with a folder holding only the archive).
function(zerofit_find_shared_libstdcxx out)
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.so.6
                  OUTPUT_VARIABLE _zf_from_compiler OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(IS_ABSOLUTE "${_zf_from_compiler}" AND EXISTS "${_zf_from_compiler}")
    get_filename_component(_zf_path "${_zf_from_compiler}" REALPATH)
  else()
    # The compiler's own folders hold no shared copy: take the one the loader finds.
    find_file(ZEROFIT_LIBSTDCXX_SHARED libstdc++.so.6
              PATHS ${CMAKE_CXX_IMPLICIT_LINK_DIRECTORIES} /usr/lib/x86_64-linux-gnu /lib/x86_64-linux-gnu
                    /usr/lib64 /lib64 /usr/lib /lib
              NO_DEFAULT_PATH)
    set(_zf_path "${ZEROFIT_LIBSTDCXX_SHARED}")
  endif()
  if(NOT _zf_path OR NOT EXISTS "${_zf_path}")
    message(FATAL_ERROR "zerofit: no shared libstdc++.so.6 found (asked ${CMAKE_CXX_COMPILER} "
                        "-print-file-name and the system library folders); LibTorch programs need it first")
  endif()
  set(${out} "${_zf_path}" PARENT_SCOPE)
endfunction()

function(zerofit_libstdcxx_first target scope)
  zerofit_find_shared_libstdcxx(_zf_libstdcxx)
  # Before the objects (link options come first on the link line); --no-as-needed keeps it although the
  # program may need nothing from it yet when the linker reads it.
  target_link_options(${target} ${scope} "LINKER:--push-state,--no-as-needed,${_zf_libstdcxx},--pop-state")
endfunction()
