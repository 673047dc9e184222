// A plan as people read it (a table) and as scripts read it (JSON).
#pragma once

#include <string>

#include "planner/search.h"

namespace zerofit::planner {

std::string PlanTable(const Plan& plan);
std::string PlanJson(const Plan& plan);  // one JSON object; bytes as integers, times in seconds

}  // namespace zerofit::planner
