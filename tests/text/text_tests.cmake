# zerofit::text unit tests. Paths relative to tests/. The golden tests read the shared Hugging Face
# tokenizers from ZEROFIT_HF_TOKENIZERS_DIR (chat templates: ZEROFIT_SOURCE_DIR/../shared) and skip when
# they are missing. One source per line.
zerofit_unit_test(text_unit_test
  text/tokenizer_test.cc
  text/tokenizer_errors_test.cc
  text/tokenizer_features_test.cc
  text/regex_test.cc)
target_link_libraries(text_unit_test PRIVATE zerofit_text nlohmann_json::nlohmann_json)
target_compile_definitions(text_unit_test PRIVATE
  ZEROFIT_HF_TOKENIZERS_DIR="${PROJECT_SOURCE_DIR}/../shared/hf-tokenizers"
  ZEROFIT_TEXT_GOLDEN_DIR="${CMAKE_CURRENT_SOURCE_DIR}/text/golden")

zerofit_unit_test(chat_template_test
  text/chat_template_test.cc
)
target_link_libraries(chat_template_test PRIVATE zerofit_text)
target_compile_definitions(chat_template_test PRIVATE
  ZEROFIT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
