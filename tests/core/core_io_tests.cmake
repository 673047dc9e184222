# safetensors reader/writer and Hugging Face config.json parser (core/safetensors.h, core/hf_config.h).
# Included from tests/CMakeLists.txt: paths are relative to tests/.
add_executable(core_io_test core/safetensors_test.cc core/hf_config_test.cc core/regular_file_test.cc)
target_link_libraries(core_io_test PRIVATE zerofit_core GTest::gtest_main)
add_test(NAME core_io_test COMMAND core_io_test)
set_tests_properties(core_io_test PROPERTIES LABELS unit TIMEOUT 300)

# OrderedLineMap (core/ordered_line_map.h): parallel line mapping with serial order and errors.
add_executable(ordered_line_map_test core/ordered_line_map_test.cc)
target_link_libraries(ordered_line_map_test PRIVATE zerofit_core GTest::gtest_main)
add_test(NAME ordered_line_map_test COMMAND ordered_line_map_test)
set_tests_properties(ordered_line_map_test PROPERTIES LABELS unit TIMEOUT 60)
