# Llama / Mistral / Qwen2 decoder with LoRA and activation checkpointing (included by CMakeLists.txt).
target_sources(zerofit_worker_torch PRIVATE
  ${CMAKE_CURRENT_SOURCE_DIR}/model/activation_checkpoint.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/model/swiglu.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/model/fused_kernels.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/model/attention_kernel.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/model/chunked_log_probs.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/model/generation.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/model/kv_cache.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/model/llama_decode.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/model/llama_model.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/model/lora.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/model/reward_readout.cc
  ${CMAKE_CURRENT_SOURCE_DIR}/model/static_decode.cc)
