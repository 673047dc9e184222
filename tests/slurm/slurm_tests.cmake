# PROCESSORS 1: both tests mostly wait on Slurm (scripts/test.sh runs the tier beside the others, and the two
# tests at the same time, each with a cluster of its own).
# Slurm end to end (issue 7): a real one-node Slurm cluster started by the test itself (root only).
# Part 6 (zerofit cancel, issue 29) uses the test-only fault worker.
if(TARGET zerofit AND TARGET zerofit_worker AND TARGET zerofit_make_arith_prefs AND TARGET zerofit_worker_faults)
  add_test(NAME slurm_e2e
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/slurm/slurm_e2e.sh $<TARGET_FILE:zerofit>
            $<TARGET_FILE:zerofit_make_arith_prefs> $<TARGET_FILE:zerofit_worker> ${PROJECT_SOURCE_DIR}
            $<TARGET_FILE:zerofit_worker_faults>)
  set_tests_properties(slurm_e2e PROPERTIES LABELS slurm TIMEOUT 900 PROCESSORS 1 PASS_REGULAR_EXPRESSION "PASS"
    SKIP_RETURN_CODE 77)
endif()
# Across nodes (issue 20): a 3-node Slurm cluster in network namespaces started by the test itself (root only).
# Part e (shrink) uses the test-only fault worker.
if(TARGET zerofit AND TARGET zerofit_worker AND TARGET zerofit_make_arith_prefs AND TARGET zerofit_worker_faults)
  add_test(NAME multinode_e2e
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/slurm/multinode_e2e.sh $<TARGET_FILE:zerofit>
            $<TARGET_FILE:zerofit_make_arith_prefs> $<TARGET_FILE:zerofit_worker> ${PROJECT_SOURCE_DIR} abcde
            $<TARGET_FILE:zerofit_worker_faults>)
  set_tests_properties(multinode_e2e PROPERTIES LABELS slurm TIMEOUT 600 PROCESSORS 1 PASS_REGULAR_EXPRESSION "PASS"
    SKIP_RETURN_CODE 77)
endif()
