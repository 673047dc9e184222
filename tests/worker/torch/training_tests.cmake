# Preference training tests (issue 4). Paths relative to tests/.
add_executable(objectives_test worker/torch/objectives_test.cc)
target_link_libraries(objectives_test PRIVATE zerofit_worker_torch GTest::gtest_main)
add_test(NAME objectives_test COMMAND objectives_test)
set_tests_properties(objectives_test PROPERTIES LABELS unit TIMEOUT 120)
# GRPO's loss, advantages and gradients against a float64 transcription of TRL's (issue 32).
add_executable(grpo_objective_test worker/torch/grpo_objective_test.cc)
target_link_libraries(grpo_objective_test PRIVATE zerofit_worker_torch GTest::gtest_main)
add_test(NAME grpo_objective_test COMMAND grpo_objective_test)
set_tests_properties(grpo_objective_test PROPERTIES LABELS unit TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1")
add_executable(grpo_rows_test worker/torch/grpo_rows_test.cc)
target_link_libraries(grpo_rows_test PRIVATE zerofit_worker_torch GTest::gtest_main)
add_test(NAME grpo_rows_test COMMAND grpo_rows_test)
set_tests_properties(grpo_rows_test PROPERTIES LABELS unit TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1")
add_executable(entropy_quantile_test worker/torch/entropy_quantile_test.cc)
target_link_libraries(entropy_quantile_test PRIVATE zerofit_worker_torch GTest::gtest_main)
add_test(NAME entropy_quantile_test COMMAND entropy_quantile_test)
set_tests_properties(entropy_quantile_test PROPERTIES LABELS unit TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1")
# GRPO's reward sources (issue 32): an exported reward model, and the rollout scorer that sums the sources.
add_executable(reward_model_scorer_test worker/torch/reward_model_scorer_test.cc worker/torch/rollout_scorer_test.cc)
target_link_libraries(reward_model_scorer_test PRIVATE zerofit_worker_torch GTest::gtest_main)
add_test(NAME reward_model_scorer_test COMMAND reward_model_scorer_test)
set_tests_properties(reward_model_scorer_test PROPERTIES LABELS unit TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1")

if(ZEROFIT_WITH_MPI AND TARGET zerofit_make_arith_prefs)
  add_executable(preference_training_test worker/torch/preference_training_test.cc)
  target_link_libraries(preference_training_test PRIVATE zerofit_mpi_gtest_main zerofit_worker_torch)
  target_compile_definitions(preference_training_test PRIVATE
    ZEROFIT_MAKE_ARITH_PREFS="$<TARGET_FILE:zerofit_make_arith_prefs>")
  add_dependencies(preference_training_test zerofit_make_arith_prefs)
  zerofit_mpi_test(preference_training_np2 preference_training_test 2)
  # The longest test of the unit/mpi/e2e tiers: ctest starts it first (COST, used before a build directory
  # has timings of its own), so that the short tests fill in around it instead of it running last alone.
  set_tests_properties(preference_training_np2 PROPERTIES COST 300)
endif()

# GRPO sessions on the arithmetic task's prompt files (issue 32): KV cache per pass, resume bit-identical.
if(ZEROFIT_WITH_MPI AND TARGET zerofit_make_arith_prefs)
  add_executable(grpo_session_test worker/torch/grpo_session_test.cc)
  target_link_libraries(grpo_session_test PRIVATE zerofit_mpi_gtest_main zerofit_worker_torch nlohmann_json::nlohmann_json)
  target_compile_definitions(grpo_session_test PRIVATE
    ZEROFIT_MAKE_ARITH_PREFS="$<TARGET_FILE:zerofit_make_arith_prefs>")
  add_dependencies(grpo_session_test zerofit_make_arith_prefs)
  zerofit_mpi_test(grpo_session_np2 grpo_session_test 2)
  # The trainer's --cuda-allocation-report is GRPO's (its pass boundaries): another task refuses it by name.
  add_test(NAME train_prefs_allocation_report_flag
           COMMAND $<TARGET_FILE:zerofit_train_prefs> --task reward --data /nonexistent
                   --cuda-allocation-report /nonexistent/report.txt)
  set_tests_properties(train_prefs_allocation_report_flag PROPERTIES LABELS unit TIMEOUT 60
    PASS_REGULAR_EXPRESSION "flag --cuda-allocation-report applies to --task grpo only")
  # --fused-kernels names its modes, and a wrong one is refused by the flag's name before any data is read.
  add_test(NAME train_prefs_fused_kernels_flag
           COMMAND $<TARGET_FILE:zerofit_train_prefs> --task reward --data /nonexistent --fused-kernels triton)
  set_tests_properties(train_prefs_fused_kernels_flag PROPERTIES LABELS unit TIMEOUT 60
    PASS_REGULAR_EXPRESSION "flag --fused-kernels: 'triton' is not a fused-kernels mode \\(cuda, off, everywhere\\)")
endif()

# Text and chat preference data tokenized in the trainer with a model directory's tokenizer.json (a
# character-level one written by the test), and evaluation during training (issues 17, 18).
add_executable(text_training_test worker/torch/text_training_test.cc)
target_link_libraries(text_training_test PRIVATE zerofit_worker_torch GTest::gtest_main)
add_test(NAME text_training_test COMMAND text_training_test)
set_tests_properties(text_training_test PROPERTIES LABELS unit TIMEOUT 300)

# The trainers' forward, loss, metrics and backward on the meta device under a dispatcher-level device check
# (issue 28): no op mixes host and device tensors, and the host reads per step are counted.
add_executable(device_clean_test worker/torch/device_clean_test.cc)
target_link_libraries(device_clean_test PRIVATE zerofit_worker_torch GTest::gtest_main)
add_test(NAME device_clean_test COMMAND device_clean_test)
set_tests_properties(device_clean_test PROPERTIES LABELS unit TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1")

# Each step's device peak (issue 28): the device seam's part on the test device (unit); the reset of the
# CUDA caching allocator's peak at each step's start on cuda:0 (gpu: skips without a GPU visible to a CUDA
# LibTorch).
add_executable(step_peak_memory_test worker/torch/step_peak_memory_test.cc)
target_link_libraries(step_peak_memory_test PRIVATE zerofit_worker_torch GTest::gtest_main)
add_test(NAME step_peak_memory_test COMMAND step_peak_memory_test --gtest_filter=-*.Gpu*)
set_tests_properties(step_peak_memory_test PROPERTIES LABELS unit TIMEOUT 120)
add_test(NAME step_peak_memory_gpu_test COMMAND step_peak_memory_test --gtest_filter=*.Gpu*)
set_tests_properties(step_peak_memory_gpu_test PROPERTIES LABELS gpu TIMEOUT 300)

# The CUDA allocation report (issue 32's diagnostic of the GRPO passes' peaks): its text and refusals (unit),
# the recorded stacks on cuda:0 (gpu: skips without a GPU visible to a CUDA LibTorch).
add_executable(cuda_allocations_test worker/torch/cuda_allocations_test.cc)
target_link_libraries(cuda_allocations_test PRIVATE zerofit_worker_torch GTest::gtest_main)
add_test(NAME cuda_allocations_test COMMAND cuda_allocations_test --gtest_filter=-*.Gpu*)
set_tests_properties(cuda_allocations_test PROPERTIES LABELS unit TIMEOUT 60)
add_test(NAME cuda_allocations_gpu_test COMMAND cuda_allocations_test --gtest_filter=*.Gpu*)
set_tests_properties(cuda_allocations_gpu_test PROPERTIES LABELS gpu TIMEOUT 120)

# A LibTorch program's std:: functions resolve to libstdc++, not to copies inside LibTorch (issue 28).
add_executable(std_symbols_test worker/torch/std_symbols_test.cc)
target_link_libraries(std_symbols_test PRIVATE zerofit_worker_torch GTest::gtest_main)
add_test(NAME std_symbols_test COMMAND std_symbols_test)
set_tests_properties(std_symbols_test PROPERTIES LABELS "unit;gpu" TIMEOUT 60)

# The one mapping from a resolved job plan to the trainer's options (issue 31): every spec field that trains.
add_executable(plan_options_test worker/torch/plan_options_test.cc)
target_link_libraries(plan_options_test PRIVATE zerofit_worker_torch zerofit_jobspec zerofit_resolve GTest::gtest_main)
add_test(NAME plan_options_test COMMAND plan_options_test)
set_tests_properties(plan_options_test PROPERTIES LABELS unit TIMEOUT 60)
