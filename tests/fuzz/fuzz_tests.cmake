# Fuzz targets (STYLE 18): LLVMFuzzerTestOneInput functions for the text parsers, each linked with the
# portable replay-and-mutate driver (fuzz/fuzz_driver.cc) into a ctest (label unit, under 20 s) that runs
# its seed corpus (fuzz/corpus/<name>, written by fuzz/make_seeds.py) plus a fixed sequence of mutations.
# With clang and -DZEROFIT_LIBFUZZER=ON, <name>_libfuzzer executables are libFuzzer binaries as well
# (docs/text.md says how to run them). Included from tests/CMakeLists.txt: paths are relative to tests/.
# zerofit_fuzz_target(<name> <mutations> <libraries>...): mutations sized to take about 5 s on an idle core;
# --max-seconds cuts the sequence short on a loaded machine.
function(zerofit_fuzz_target name mutations)
  add_executable(${name}_fuzz fuzz/${name}_fuzz.cc fuzz/fuzz_driver.cc)
  target_link_libraries(${name}_fuzz PRIVATE ${ARGN})
  add_test(NAME ${name}_fuzz
    COMMAND ${name}_fuzz --mutations ${mutations} --max-seconds 12 --input-timeout 6
            --artifact ${CMAKE_CURRENT_BINARY_DIR}/${name}-crash.bin
            ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${name})
  set_tests_properties(${name}_fuzz PROPERTIES LABELS unit TIMEOUT 20)
  if(ZEROFIT_LIBFUZZER)
    add_executable(${name}_libfuzzer fuzz/${name}_fuzz.cc)
    target_link_libraries(${name}_libfuzzer PRIVATE ${ARGN})
    target_compile_options(${name}_libfuzzer PRIVATE -fsanitize=fuzzer,address,undefined)
    target_link_options(${name}_libfuzzer PRIVATE -fsanitize=fuzzer,address,undefined)
  endif()
endfunction()

zerofit_fuzz_target(tokenizer 40000 zerofit_text)
zerofit_fuzz_target(chat_template 100000 zerofit_text absl::time nlohmann_json::nlohmann_json)
if(TARGET zerofit_data)
  zerofit_fuzz_target(preference_jsonl 15000 zerofit_data zerofit_text nlohmann_json::nlohmann_json)
endif()
# The model and job inputs (issue 19): YAML job spec, DeepSpeed JSON, config.json, safetensors files and
# checkpoint manifests.
zerofit_fuzz_target(job_spec 6000 zerofit_jobspec)
zerofit_fuzz_target(deepspeed 30000 zerofit_jobspec)
zerofit_fuzz_target(hf_config 25000 zerofit_core)
zerofit_fuzz_target(safetensors 30000 zerofit_core)
zerofit_fuzz_target(checkpoint_manifest 2000 zerofit_sharding)
