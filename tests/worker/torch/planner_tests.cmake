# The planner's measurement harness (issue 5): predicted vs measured peak memory at 1, 2 and 4 ranks.
if(ZEROFIT_WITH_MPI)
  add_executable(planner_validation_test worker/torch/planner_validation_test.cc)
  target_link_libraries(planner_validation_test PRIVATE zerofit_mpi_gtest_main zerofit_memory_probe_torch)
  foreach(n 1 2 4)
    zerofit_mpi_test(planner_validation_np${n} planner_validation_test ${n})
  endforeach()
endif()

# A job launched without explicit sizes is sized by the planner (accumulation, checkpointing) and trains.
if(ZEROFIT_WITH_MPI AND TARGET zerofit_make_arith_prefs)
  add_test(NAME train_prefs_sized_by_planner_np2
    COMMAND sh -c "d=$(mktemp -d) && $<TARGET_FILE:zerofit_make_arith_prefs> --out $d --train 400 --test 40 --ids --pad > /dev/null && ${MPIEXEC_EXECUTABLE} --oversubscribe --allow-run-as-root -n 2 $<TARGET_FILE:zerofit_train_prefs> --task dpo --data $d --steps 2 --global-batch 32 --memory-gb 0.025; s=$?; rm -rf $d; exit $s")
  set_tests_properties(train_prefs_sized_by_planner_np2 PROPERTIES LABELS mpi TIMEOUT 120 PROCESSORS 2
    PASS_REGULAR_EXPRESSION "plan \\(0.0 GB per rank\\): sized by the planner for [^:]*: micro-batch 8 x accumulation 2, ZeRO-2.*held-out implicit-reward accuracy")
endif()
