# zerofit_data tests (included from tests/CMakeLists.txt; paths are relative to tests/).
if(TARGET zerofit_data)
  zerofit_unit_test(data_unit_test
    worker/data/generator_test.cc
    worker/data/pair_batch_test.cc
    worker/data/preference_dataset_test.cc
    worker/data/prompt_dataset_test.cc
    worker/data/sentencepiece_encode_test.cc
    worker/data/sft_example_test.cc
    worker/data/text_pairs_to_ids_test.cc
    worker/data/sentencepiece_tokenizer_test.cc
    worker/data/uniform_below_test.cc)
  target_link_libraries(data_unit_test PRIVATE zerofit_tokenizer nlohmann_json::nlohmann_json)
  # The generator test runs the real program (flags included) into a temporary directory.
  add_dependencies(data_unit_test zerofit_make_arith_prefs)
  target_compile_definitions(data_unit_test PRIVATE
    ZEROFIT_MAKE_ARITH_PREFS="$<TARGET_FILE:zerofit_make_arith_prefs>")
endif()

# HfTokenizer and text/conversational preference data with Hugging Face tokenizers (no SentencePiece); the
# model-directory tests skip when ../shared/hf-tokenizers is missing.
if(TARGET zerofit_hf_tokenizer)
  zerofit_unit_test(hf_data_unit_test
    worker/data/chat_turns_test.cc
    worker/data/companion_files_test.cc
    worker/data/hf_preference_test.cc
    worker/data/hf_prompt_test.cc
    worker/data/hf_tokenizer_test.cc
    worker/data/job_files_test.cc
    worker/data/stop_tokens_test.cc
    worker/data/training_data_test.cc)
  target_link_libraries(hf_data_unit_test PRIVATE zerofit_hf_tokenizer zerofit_training_data)
  target_compile_definitions(hf_data_unit_test PRIVATE
    ZEROFIT_HF_TOKENIZERS_DIR="${PROJECT_SOURCE_DIR}/../shared/hf-tokenizers")
  # About 40 s in the ASan+UBSan build: started first there (COST) and compiled -O1, like tokenize_command_test.
  set_tests_properties(hf_data_unit_test PROPERTIES COST 40)
  zerofit_sanitize_hot(hf_data_unit_test)
endif()
