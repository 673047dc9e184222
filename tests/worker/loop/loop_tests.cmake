# The worker loop with a fake training session against an in-process coordinator (paths relative to tests/).
if(TARGET zerofit_worker_loop AND TARGET zerofit_coordinator_service)
  zerofit_unit_test(worker_loop_unit_test worker/loop/worker_loop_test.cc)
  target_link_libraries(worker_loop_unit_test PRIVATE zerofit_worker_loop zerofit_coordinator_service
                        nlohmann_json::nlohmann_json)
  target_include_directories(worker_loop_unit_test PRIVATE ${PROJECT_SOURCE_DIR})
endif()
# The progress line's ETA: the smoothed step time (issue 29).
if(TARGET zerofit_worker_loop)
  zerofit_unit_test(smoothed_step_time_test worker/loop/smoothed_step_time_test.cc)
  target_link_libraries(smoothed_step_time_test PRIVATE zerofit_worker_loop)
  target_include_directories(smoothed_step_time_test PRIVATE ${PROJECT_SOURCE_DIR})
endif()

# Test-only fault injection: the ZEROFIT_FAULTS parser, the faults at their step, the hooked communicator.
if(TARGET zerofit_fault_injection)
  zerofit_unit_test(worker_faults_unit_test worker/loop/fault_injection_test.cc)
  target_link_libraries(worker_faults_unit_test PRIVATE zerofit_fault_injection)
  target_include_directories(worker_faults_unit_test PRIVATE ${PROJECT_SOURCE_DIR})
endif()
