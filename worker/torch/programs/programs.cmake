# The executables of worker/torch/ (their libraries: model/model.cmake and train/training.cmake).

# Greedy generation speed (issue 32): the zerofit side of bench/transformers_generate_bench.py.
add_executable(zerofit_generation_bench ${CMAKE_CURRENT_SOURCE_DIR}/programs/generation_bench_main.cc)
target_link_libraries(zerofit_generation_bench PRIVATE zerofit_worker_torch)

if(ZEROFIT_WITH_MPI)
  # A small training example with the per-step time breakdown (README).
  add_executable(zerofit_train_tiny ${CMAKE_CURRENT_SOURCE_DIR}/programs/train_tiny_main.cc)
  target_link_libraries(zerofit_train_tiny PRIVATE zerofit_worker_torch)
  # Reward, DPO, SFT and GRPO training without a coordinator (docs/training.md).
  add_executable(zerofit_train_prefs ${CMAKE_CURRENT_SOURCE_DIR}/programs/train_prefs_main.cc
                 ${CMAKE_CURRENT_SOURCE_DIR}/programs/grpo_cli.cc)
  target_link_libraries(zerofit_train_prefs PRIVATE zerofit_memory_probe_torch zerofit_planner zerofit_resolve
                        zerofit_launch)
  # The planner's measurement harness (issue 5): one job's measured peak per rank (docs/planning.md).
  add_executable(zerofit_memory_probe ${CMAKE_CURRENT_SOURCE_DIR}/programs/memory_probe_main.cc)
  target_link_libraries(zerofit_memory_probe PRIVATE zerofit_memory_probe_torch)
endif()

# The coordinator's worker (issue 6): one process per rank of a job.
if(ZEROFIT_WITH_MPI AND TARGET zerofit_coordinator_service)
  add_executable(zerofit_worker ${CMAKE_CURRENT_SOURCE_DIR}/programs/worker_main.cc)
  target_link_libraries(zerofit_worker PRIVATE zerofit_worker_torch zerofit_worker_loop zerofit_launch)
  # The same program with test-only fault injection (worker/loop/fault_plan.h: ZEROFIT_FAULTS). Tests only;
  # zerofit_worker never contains it.
  add_executable(zerofit_worker_faults ${CMAKE_CURRENT_SOURCE_DIR}/programs/worker_main.cc)
  target_link_libraries(zerofit_worker_faults PRIVATE zerofit_worker_torch zerofit_worker_loop
                        zerofit_fault_injection zerofit_launch)
  target_compile_definitions(zerofit_worker_faults PRIVATE ZEROFIT_FAULT_INJECTION=1)
endif()
