// The planner tests' hand-countable model (planner_test.cc, search_test.cc).
#pragma once

#include "planner/model_shape.h"

namespace zerofit::planner::testmodels {

// hidden 8, intermediate 16, 2 layers, 2 heads of 4, 1 kv head, vocabulary 10, untied.
inline ModelShape Small() {
  ModelShape m;
  m.name = "small";
  m.vocab_size = 10;
  m.hidden_size = 8;
  m.intermediate_size = 16;
  m.num_layers = 2;
  m.num_heads = 2;
  m.num_kv_heads = 1;
  m.head_dim = 4;
  m.parameter_count = 1352;
  return m;
}

}  // namespace zerofit::planner::testmodels
