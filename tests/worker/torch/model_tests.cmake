# Llama / Mistral / Qwen2 decoder, LoRA, activation checkpointing (included by tests/CMakeLists.txt).
if(ZEROFIT_WITH_TORCH)
  add_executable(llama_model_test worker/torch/llama_model_test.cc)
  target_link_libraries(llama_model_test PRIVATE zerofit_worker_torch GTest::gtest_main)
  add_test(NAME llama_model_test COMMAND llama_model_test)
  set_tests_properties(llama_model_test PROPERTIES LABELS unit TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1")

  # The decoder layer's recomputed pieces (RMSNorm, SwiGLU): the plain graph's gradients bit for bit, and
  # what autograd keeps for them, counted by the tracking allocator.
  add_executable(recomputed_call_test worker/torch/recomputed_call_test.cc)
  target_link_libraries(recomputed_call_test PRIVATE zerofit_memory_probe_torch GTest::gtest_main)
  zerofit_unit_and_gpu_tests(recomputed_call_test recomputed_call_gpu_test 60 120)

  # The fused RMSNorm, SwiGLU and rotary embedding (kernels/, worker/torch/model/fused_kernels.h): fp32 against
  # float64, bf16 against the plain graphs (the rotary embedding bit for bit), on the CPU through the host
  # references and on cuda:0 through the CUDA kernels.
  add_executable(fused_kernels_test worker/torch/fused_kernels_test.cc)
  target_link_libraries(fused_kernels_test PRIVATE zerofit_memory_probe_torch GTest::gtest_main)
  zerofit_unit_and_gpu_tests(fused_kernels_test fused_kernels_gpu_test 120 120)

  # Incremental decoding over a KV cache and Generate (issue 32): decode logits against the full forward,
  # greedy generation against a float64 oracle, the sampler, the cache's bytes for the sequences in flight.
  add_executable(generation_test worker/torch/generation_test.cc)
  target_link_libraries(generation_test PRIVATE zerofit_worker_torch GTest::gtest_main nlohmann_json::nlohmann_json)
  target_compile_definitions(generation_test PRIVATE
    ZEROFIT_GENERATION_GOLDEN_DIR="${CMAKE_CURRENT_SOURCE_DIR}/worker/torch/golden/generation")
  # Its Gpu* cases: the decode step recorded as a CUDA graph and replayed, on cuda:0 (skip without a device).
  zerofit_unit_and_gpu_tests(generation_test generation_gpu_test 120 300)

  # zerofit_generation_bench (the zerofit side of bench/transformers_generate_bench.py) on a tiny Mistral shape;
  # its operator count must have seen the decode steps' dispatches (a count of 0: the callback never ran).
  add_test(NAME generation_bench_smoke
           COMMAND zerofit_generation_bench --config ${CMAKE_CURRENT_SOURCE_DIR}/worker/torch/golden/configs/mistral.json
                   --batch 3 --prompt-len 5 --new-tokens 4 --reps 1 --warmup 0)
  set_tests_properties(generation_bench_smoke PROPERTIES LABELS unit TIMEOUT 60
                       PASS_REGULAR_EXPRESSION "\"tokens_per_s\".*\"aten_ops_per_token\": [1-9]")

  # The attention kernels: the manual one bit for bit as before, SDPA refused where LibTorch lacks it; the
  # Gpu* cases (SDPA against manual in bf16 on cuda:0, LibTorch 2.1+) skip without a device or SDPA.
  add_executable(attention_kernel_test worker/torch/attention_kernel_test.cc)
  target_link_libraries(attention_kernel_test PRIVATE zerofit_worker_torch GTest::gtest_main)
  zerofit_unit_and_gpu_tests(attention_kernel_test attention_kernel_gpu_test 120 300)

  # Reward read-out against a transcription of transformers' sequence-classification read-out.
  add_executable(reward_readout_test worker/torch/reward_readout_test.cc)
  target_link_libraries(reward_readout_test PRIVATE zerofit_worker_torch nlohmann_json::nlohmann_json
                                                    GTest::gtest_main)
  add_test(NAME reward_readout_test COMMAND reward_readout_test)
  set_tests_properties(reward_readout_test PROPERTIES LABELS unit TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1")

  # Token log-probs through row chunks of the head (issue 30) against float64 and the full-logits path, and
  # the backward's memory through the tracking allocator.
  add_executable(chunked_log_probs_test worker/torch/chunked_log_probs_test.cc)
  target_link_libraries(chunked_log_probs_test PRIVATE zerofit_memory_probe_torch GTest::gtest_main)
  add_test(NAME chunked_log_probs_test COMMAND chunked_log_probs_test)
  set_tests_properties(chunked_log_probs_test PROPERTIES LABELS unit TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1")

  # The same numerics under OpenBLAS kernels of other CPU generations (issue 29: tolerances must follow from
  # the computation, not from the kernels one machine picks): Sandybridge's AVX kernels without FMA and
  # Prescott's SSE3 ones, which every x86-64 CPU since 2004 runs. scripts/blas_coretypes.sh runs the whole
  # suite under every core type a CPU can run.
  foreach(core Sandybridge Prescott)
    string(TOLOWER ${core} suffix)
    foreach(t llama_model_test reward_readout_test chunked_log_probs_test generation_test)
      add_test(NAME ${t}_${suffix} COMMAND ${t} --gtest_filter=-*.Gpu*)
      set_tests_properties(${t}_${suffix} PROPERTIES LABELS unit TIMEOUT 120
                           ENVIRONMENT "OMP_NUM_THREADS=1;OPENBLAS_CORETYPE=${core}")
    endforeach()
  endforeach()
endif()
