# Preference training: objectives, reference models, trainers (issue 4); GRPO (issue 32).
target_sources(zerofit_worker_torch PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/train/grpo_objective.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/grpo_session.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/micro_batch_loss.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/named_step_metrics.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/objectives.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/pair_tensors.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/plan_options.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/preference_trainer.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/reference_model.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/reward_model_scorer.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/rollout_scorer.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/session_setup.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/torch_training_session.cc)
target_link_libraries(zerofit_worker_torch PUBLIC zerofit_data zerofit_training_data zerofit_hf_tokenizer zerofit_rewards
                      zerofit_jobplan zerofit_metrics zerofit_step_scheduler)

if(ZEROFIT_WITH_MPI)
  add_executable(zerofit_train_prefs ${CMAKE_CURRENT_SOURCE_DIR}/programs/train_prefs_main.cc
                 ${CMAKE_CURRENT_SOURCE_DIR}/programs/grpo_cli.cc)
  target_link_libraries(zerofit_train_prefs PRIVATE zerofit_memory_probe_torch zerofit_planner zerofit_resolve zerofit_launch)
endif()

# Greedy generation speed (issue 32): the zerofit side of bench/transformers_generate_bench.py.
add_executable(zerofit_generation_bench ${CMAKE_CURRENT_SOURCE_DIR}/programs/generation_bench_main.cc)
target_link_libraries(zerofit_generation_bench PRIVATE zerofit_worker_torch)

# The planner's measurement harness (issue 5): tracking allocator and a probe that runs real training steps.
# Its own library, so that training processes (zerofit_worker) do not link the planner.
add_library(zerofit_memory_probe_torch
  ${CMAKE_CURRENT_SOURCE_DIR}/train/memory_probe.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/tracking_allocator.cc)
target_link_libraries(zerofit_memory_probe_torch PUBLIC zerofit_worker_torch zerofit_planner)
if(ZEROFIT_WITH_MPI)
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
