// The canonical form of a job spec's text: what a submit's request id is compared by.
#pragma once

#include <string>

namespace zerofit::jobspec {

// A canonical form of spec `yaml_text`, for telling whether two submits carry the same spec (a request id
// names one request, AIP-155): equal for texts that differ only in comments, blank lines, indentation,
// quoting, flow or block style and the order of keys; different when any value differs. Not for display.
// Text that is not YAML is its own canonical form.
std::string CanonicalJobSpec(const std::string& yaml_text);

}  // namespace zerofit::jobspec
