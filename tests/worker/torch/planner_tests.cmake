# The planner's measurement harness (issue 5): predicted vs measured peak memory at 1, 2 and 4 ranks.
if(ZEROFIT_WITH_MPI)
  add_executable(planner_validation_test worker/torch/planner_validation_test.cc)
  target_link_libraries(planner_validation_test PRIVATE zerofit_mpi_gtest_main zerofit_worker_torch zerofit_planner)
  foreach(n 1 2 4)
    zerofit_mpi_test(planner_validation_np${n} planner_validation_test ${n})
  endforeach()
endif()
