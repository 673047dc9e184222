# Preference training tests (issue 4). Paths relative to tests/.
add_executable(objectives_test worker/torch/objectives_test.cc)
target_link_libraries(objectives_test PRIVATE zerofit_worker_torch GTest::gtest_main)
add_test(NAME objectives_test COMMAND objectives_test)
set_tests_properties(objectives_test PROPERTIES LABELS unit TIMEOUT 120)
