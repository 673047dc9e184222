# Planner unit tests (issue 5). Paths relative to tests/.
zerofit_unit_test(planner_unit_test planner/planner_test.cc planner/search_test.cc planner/measured_gpu_peaks_test.cc)
target_link_libraries(planner_unit_test PRIVATE zerofit_planner)
