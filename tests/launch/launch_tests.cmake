# Launch environment, host lists, sbatch scripts (issue 7), a rank dying with its launcher (issue 19) and its
# crash report. Paths relative to tests/.
zerofit_unit_test(launch_unit_test
  launch/hostlist_test.cc
  launch/launch_env_test.cc
  launch/mpiexec_command_test.cc
  launch/sbatch_script_test.cc
  launch/parent_watch_test.cc
  launch/crash_report_test.cc)
target_link_libraries(launch_unit_test PRIVATE zerofit_launch zerofit_sbatch)
