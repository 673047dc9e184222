# Llama / Mistral / Qwen2 decoder, LoRA, activation checkpointing (included by tests/CMakeLists.txt).
if(ZEROFIT_WITH_TORCH)
  add_executable(llama_model_test worker/torch/llama_model_test.cc)
  target_link_libraries(llama_model_test PRIVATE zerofit_worker_torch GTest::gtest_main)
  add_test(NAME llama_model_test COMMAND llama_model_test)
  set_tests_properties(llama_model_test PROPERTIES LABELS unit TIMEOUT 120 ENVIRONMENT "OMP_NUM_THREADS=1")
endif()
