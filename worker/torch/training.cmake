# Preference training: objectives, reference models, trainers (issue 4).
target_sources(zerofit_worker_torch PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/objectives.cc)
