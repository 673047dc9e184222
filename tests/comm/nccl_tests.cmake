# comm/nccl on real GPUs (label gpu; every test skips without one). Compiled wherever NCCL is found.
if(ZEROFIT_HAVE_NCCL)
  add_executable(comm_nccl_gpu_test ${CMAKE_CURRENT_LIST_DIR}/nccl_gpu_test.cc)
  target_link_libraries(comm_nccl_gpu_test PRIVATE zerofit_comm GTest::gtest_main)
  add_test(NAME comm_nccl_gpu_test COMMAND comm_nccl_gpu_test)
  set_tests_properties(comm_nccl_gpu_test PROPERTIES LABELS gpu TIMEOUT 600)
endif()
