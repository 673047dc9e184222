# text/ unit tests. Paths relative to tests/. One source per line.
zerofit_unit_test(chat_template_test
  text/chat_template_test.cc
)
target_link_libraries(chat_template_test PRIVATE zerofit_text)
target_compile_definitions(chat_template_test PRIVATE
  ZEROFIT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
