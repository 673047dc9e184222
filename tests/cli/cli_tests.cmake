# `zerofit plan` (issue 5). Paths relative to tests/.
zerofit_unit_test(plan_command_test cli/plan_command_test.cc)
target_link_libraries(plan_command_test PRIVATE zerofit_cli nlohmann_json::nlohmann_json)
# The installed binary: a table by default.
add_test(NAME zerofit_plan_cli_smoke
  COMMAND $<TARGET_FILE:zerofit> plan --model Mistral-7B --task reward --hardware 8x64GB --nodes 1
          --global-batch 64 --seq-len 2048)
set_tests_properties(zerofit_plan_cli_smoke PROPERTIES LABELS unit
  PASS_REGULAR_EXPRESSION "chosen: micro-batch [0-9]+ x accumulation [0-9]+, ZeRO-[0-2]")

# zerofit_e2e_test(NAME TIMEOUT PROCESSORS ARGS...): tests/e2e/NAME.sh run by bash with ARGS; label e2e,
# passes on the word PASS. PROCESSORS: the cores it keeps busy (its MPI ranks), so ctest -j never oversubscribes.
function(zerofit_e2e_test name timeout processors)
  add_test(NAME ${name} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/e2e/${name}.sh ${ARGN})
  set_tests_properties(${name} PROPERTIES LABELS e2e TIMEOUT ${timeout} PROCESSORS ${processors}
    PASS_REGULAR_EXPRESSION "PASS")
endfunction()

# The coordinator and the job commands end to end on loopback (issue 6).
if(TARGET zerofit_cli_jobs)
  zerofit_unit_test(subprocess_test cli/subprocess_test.cc cli/launcher_stop_test.cc cli/private_files_test.cc)
  target_link_libraries(subprocess_test PRIVATE zerofit_cli_jobs)
  zerofit_unit_test(metrics_format_test cli/metrics_format_test.cc)
  target_link_libraries(metrics_format_test PRIVATE zerofit_cli_jobs)
  # What `zerofit run` / `logs -f` print of a job's log: in place on a terminal, every log_every steps in a
  # pipe, on a fake clock (issue 29).
  zerofit_unit_test(progress_reporter_test cli/progress_reporter_test.cc)
  target_link_libraries(progress_reporter_test PRIVATE zerofit_cli_jobs)
  # `zerofit run` refuses a spec whose input files are not there, at the spec's line, before it starts
  # anything.
  zerofit_unit_test(local_job_files_test cli/local_job_files_test.cc)
  target_link_libraries(local_job_files_test PRIVATE zerofit_cli_jobs)
  zerofit_e2e_test(coordinator_cli_e2e 120 1 $<TARGET_FILE:zerofit>)
  # One coordinator per port and per state directory; FIFOs named by a spec answered at once (issue 19).
  zerofit_e2e_test(serve_identity_e2e 120 1 $<TARGET_FILE:zerofit>)
  # `zerofit logs -f` across a kill -9 and restart of the coordinator, every line once (issue 19).
  zerofit_e2e_test(logs_follow_restart_e2e 120 1 $<TARGET_FILE:zerofit>)
  # slurm-launch: SIGTERM to it ends its srun, by SIGKILL after a grace if srun ignores SIGTERM (issue 19).
  zerofit_e2e_test(slurm_launch_stop_e2e 60 1 $<TARGET_FILE:zerofit>)
endif()

# Jobs with real workers (2 MPI ranks each).
if(TARGET zerofit_cli_jobs AND TARGET zerofit_worker AND TARGET zerofit_make_arith_prefs)
  set(job_e2e_args $<TARGET_FILE:zerofit> $<TARGET_FILE:zerofit_make_arith_prefs>)
  # `zerofit run`: success, and a worker killed with -9 mid-run recovering from its checkpoint to
  # bit-identical final state (issue 6).
  zerofit_e2e_test(run_restart_e2e 300 2 ${job_e2e_args})
  # A new job continuing from the checkpoint a stopped or killed run left (zerofit run --resume, spec
  # checkpoint.resume): the same final state as an uninterrupted run.
  zerofit_e2e_test(run_resume_e2e 300 2 ${job_e2e_args})
  # The same for a GRPO job (issue 32): prompt batches from the coordinator, resume bit-identical.
  zerofit_e2e_test(grpo_restart_e2e 300 2 ${job_e2e_args})
  # `zerofit serve` + `submit` + 2 workers started with `mpiexec zerofit worker`: success, logs, metrics.
  zerofit_e2e_test(serve_workers_e2e 300 2 ${job_e2e_args})
  set_tests_properties(serve_workers_e2e PROPERTIES COST 30)  # started early: see training_tests.cmake
  # Named metrics: every step's learning rate against the schedule's closed form; csv / json / table; sinks.
  zerofit_e2e_test(metrics_e2e 300 2 ${job_e2e_args})
  # Text preference data tokenized by the workers with the model's tokenizer.json, the data report,
  # evaluation during training, and a malformed line's error (zerofit run, 2 ranks).
  zerofit_e2e_test(text_data_e2e 300 2 ${job_e2e_args})
  # The same against a coordinator that serves TLS (issue 18): a throwaway CA and server certificate from the
  # openssl CLI; the whole job succeeds through TLS, a client without the CA fails with the clear error.
  zerofit_e2e_test(serve_tls_e2e 300 2 ${job_e2e_args})
  # Issue 19: no token on any zerofit process's command line during a job, a private state directory, and
  # SIGINT / SIGTERM / SIGKILL to `zerofit run` alone ending every process of the job within 10 s.
  zerofit_e2e_test(stop_and_secrets_e2e 180 2 ${job_e2e_args})
  # Issue 29: `zerofit run` into a pipe prints a step line every log_every steps (13 of 300), on a terminal
  # (script(1)) one progress line redrawn in place with the evaluations as lines.
  zerofit_e2e_test(run_progress_e2e 300 2 ${job_e2e_args})
endif()

# One job plan from a job spec (zerofit serve) and from zerofit_train_prefs flags, byte for byte; both
# front ends train byte-identical parameters.
if(TARGET zerofit_cli_jobs AND TARGET zerofit_train_prefs)
  zerofit_e2e_test(plan_equality_e2e 300 2 $<TARGET_FILE:zerofit> $<TARGET_FILE:zerofit_train_prefs>
                   $<TARGET_FILE:zerofit_make_arith_prefs>)
  # Issue 30: an offloading rank bound to fewer CPUs than threads warns; unbound, its threads default to its
  # CPUs; `zerofit run` gives each rank its own share of the host's CPUs.
  zerofit_e2e_test(offload_affinity_e2e 300 2 $<TARGET_FILE:zerofit> $<TARGET_FILE:zerofit_train_prefs>
                   $<TARGET_FILE:zerofit_make_arith_prefs>)
endif()

# Issue 32: GRPO raises a briefly SFT-trained arithmetic policy's held-out greedy accuracy by >= 20 points on
# 2 ranks (~2 min; started early, COST, like the other long tests).
if(TARGET zerofit_train_prefs AND TARGET zerofit_make_arith_prefs)
  zerofit_e2e_test(grpo_learning_e2e 600 2 $<TARGET_FILE:zerofit_train_prefs> $<TARGET_FILE:zerofit_make_arith_prefs>)
  set_tests_properties(grpo_learning_e2e PROPERTIES COST 200)
endif()

# `zerofit tokenize`: the library function against text::TokenizerJson and the oracle's golden ids (qwen2.5;
# skips when ../shared/hf-tokenizers is missing), and the binary on stdin/stdout.
if(TARGET zerofit_cli_text)
  zerofit_unit_test(tokenize_command_test cli/tokenize_command_test.cc)
  target_link_libraries(tokenize_command_test PRIVATE zerofit_cli_text nlohmann_json::nlohmann_json)
  target_compile_definitions(tokenize_command_test PRIVATE
    ZEROFIT_HF_TOKENIZERS_DIR="${PROJECT_SOURCE_DIR}/../shared/hf-tokenizers"
    ZEROFIT_TEXT_GOLDEN_DIR="${CMAKE_CURRENT_SOURCE_DIR}/text/golden")
  # The longest test of the ASan+UBSan build: started first there (COST), so that it does not end last, and
  # compiled -O1 there, like the libraries it drives (the JSON code it shares with them is linked from it).
  set_tests_properties(tokenize_command_test PROPERTIES COST 40)
  zerofit_sanitize_hot(tokenize_command_test)
endif()

# `zerofit data check` on small inline files with qwen2.5 (skips without ../shared/hf-tokenizers).
if(TARGET zerofit_cli_data)
  zerofit_unit_test(data_check_command_test cli/data_check_command_test.cc)
  target_link_libraries(data_check_command_test PRIVATE zerofit_cli_data nlohmann_json::nlohmann_json)
  target_compile_definitions(data_check_command_test PRIVATE
    ZEROFIT_HF_TOKENIZERS_DIR="${PROJECT_SOURCE_DIR}/../shared/hf-tokenizers")
endif()

# The binary end to end: stdin to stdout (ids from the oracle's golden qwen2.5 file).
if(EXISTS ${PROJECT_SOURCE_DIR}/../shared/hf-tokenizers/qwen2.5/tokenizer.json)
  add_test(NAME zerofit_tokenize_cli_smoke
    COMMAND bash -c "echo '{\"text\": \"Hello world\"}' | \"$0\" tokenize --tokenizer \"$1\" --in - --out -"
            $<TARGET_FILE:zerofit> ${PROJECT_SOURCE_DIR}/../shared/hf-tokenizers/qwen2.5)
  set_tests_properties(zerofit_tokenize_cli_smoke PROPERTIES LABELS unit
    PASS_REGULAR_EXPRESSION "\"ids\":\\[9707,1879\\]")
endif()
# Issue 29: a conversation Mistral's template refuses is written with an "error" field and the run goes on
# (exit status 1, the count on stderr); --fail-fast stops there (exit status 2).
if(EXISTS ${PROJECT_SOURCE_DIR}/../shared/hf-tokenizers/mistral-v0.3/tokenizer.json)
  add_test(NAME zerofit_tokenize_refused_lines_cli
    COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/cli/tokenize_refused_lines.sh $<TARGET_FILE:zerofit>
            ${PROJECT_SOURCE_DIR}/../shared/hf-tokenizers/mistral-v0.3)
  set_tests_properties(zerofit_tokenize_refused_lines_cli PROPERTIES LABELS unit)
endif()
# Issue 20, hangs: a rank hung inside all-gather (test-only zerofit_worker_faults) is detected by the
# coordinator's progress watchdog and the job recovers from its checkpoint to the uninterrupted run's final
# state; a slow but progressing rank is not killed; a corrupt report is refused and the job recovers; a rank
# stuck outside any collective exits with code 86 after the abort grace. About 60 s.
if(TARGET zerofit_cli_jobs AND TARGET zerofit_worker_faults AND TARGET zerofit_make_arith_prefs)
  zerofit_e2e_test(watchdog_e2e 400 2 $<TARGET_FILE:zerofit> $<TARGET_FILE:zerofit_make_arith_prefs>
                   $<TARGET_FILE:zerofit_worker_faults>)
  set_tests_properties(watchdog_e2e PROPERTIES COST 40)  # started early: see training_tests.cmake
  # Issue 29: `zerofit cancel` ends every process of a job within 10 s (zerofit run; serve + submit +
  # `mpiexec zerofit worker`), with the cancel landing between the ranks' requests for one step, and with a
  # rank stuck in a collective. About 20 s (28 s on a loaded machine).
  zerofit_e2e_test(cancel_e2e 180 2 $<TARGET_FILE:zerofit> $<TARGET_FILE:zerofit_make_arith_prefs>
                   $<TARGET_FILE:zerofit_worker_faults>)
endif()
