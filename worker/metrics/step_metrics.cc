#include "worker/metrics/step_metrics.h"

namespace zerofit::worker::metrics {

void StepMetrics::Set(const std::string& name, double value) {
  for (NamedValue& v : values) {
    if (v.name == name) {
      v.value = value;
      return;
    }
  }
  values.push_back(NamedValue{name, value});
}

std::optional<double> StepMetrics::Get(const std::string& name) const {
  for (const NamedValue& v : values) {
    if (v.name == name) return v.value;
  }
  return std::nullopt;
}

bool IsValidMetricName(const std::string& name) {
  if (name.empty() || name.size() > 128) return false;
  for (char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '.' || c == '/' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace zerofit::worker::metrics
