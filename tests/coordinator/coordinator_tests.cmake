# Coordinator domain (issue 6). Paths relative to tests/.
# The job spec library on its own (no coordinator, no SQLite).
zerofit_unit_test(jobspec_unit_test jobspec/job_spec_test.cc jobspec/deepspeed_config_test.cc jobspec/job_plan_test.cc jobspec/resolve_test.cc
  jobspec/grpo_spec_test.cc jobspec/lora_spec_test.cc jobspec/trainer_fields_test.cc
  jobspec/step_scheduler_test.cc)
target_link_libraries(jobspec_unit_test PRIVATE zerofit_jobspec zerofit_resolve zerofit_step_scheduler)
# The example job specs must parse (lora_spec_test.cc).
target_compile_definitions(jobspec_unit_test PRIVATE ZEROFIT_EXAMPLE_JOBS_DIR="${PROJECT_SOURCE_DIR}/examples/jobs")

zerofit_unit_test(coordinator_unit_test
  coordinator/coordinator_cancel_test.cc
  coordinator/coordinator_concurrency_test.cc
  coordinator/coordinator_shrink_test.cc
  coordinator/coordinator_watchdog_test.cc
  coordinator/job_state_test.cc
  coordinator/job_state_watchdog_test.cc
  coordinator/job_store_test.cc
  coordinator/planned_peak_test.cc
  coordinator/state_dir_lock_test.cc)
find_package(SQLite3 REQUIRED)
target_link_libraries(coordinator_unit_test PRIVATE zerofit_coordinator zerofit_resolve zerofit_planner SQLite::SQLite3)
# Its Spec() and Fixture are named like coordinator_shrink_test.cc's.
set_source_files_properties(coordinator/coordinator_watchdog_test.cc PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)

if(TARGET zerofit_coordinator_service)
  zerofit_unit_test(coordinator_service_test coordinator/service_test.cc coordinator/service_submit_test.cc)
  target_link_libraries(coordinator_service_test PRIVATE zerofit_coordinator_service zerofit_kv_rendezvous)
endif()
