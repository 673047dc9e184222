# Preference training: objectives, reference models, trainers (issue 4); GRPO (issue 32).
target_sources(zerofit_worker_torch PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/train/cuda_allocations.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/entropy_quantile.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/grpo_objective.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/grpo_rows.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/grpo_session.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/host_to_device.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/micro_batch_loss.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/named_step_metrics.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/objectives.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/pair_tensors.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/peak_live_set.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/plan_options.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/preference_session.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/reference_model.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/reward_model_scorer.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/rollout_scorer.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/session_setup.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/torch_training_session.cc)
target_link_libraries(zerofit_worker_torch PUBLIC zerofit_data zerofit_training_data zerofit_hf_tokenizer zerofit_rewards
                      zerofit_jobplan zerofit_metrics zerofit_step_scheduler)

# The planner's measurement harness (issue 5): tracking allocator and a probe that runs real training steps.
# Its own library, so that training processes (zerofit_worker) do not link the planner.
add_library(zerofit_memory_probe_torch
  ${CMAKE_CURRENT_SOURCE_DIR}/train/memory_probe.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/train/tracking_allocator.cc)
target_link_libraries(zerofit_memory_probe_torch PUBLIC zerofit_worker_torch zerofit_planner)
