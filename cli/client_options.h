// Where the CLI finds its coordinator: the state directory `zerofit serve` writes (address, token). The calls
// themselves go through client::CoordinatorClient (client/coordinator_client.h), as the workers' do.
#pragma once

#include <string>

#include "absl/status/statusor.h"
#include "client/connection.h"

namespace zerofit::cli {

// The state directory `zerofit serve` writes: token (0600), address, jobs.db.
std::string DefaultStateDir();
// Fills empty address/token from files in `state_dir`. Errors name the file to create or the flag to pass.
absl::Status ResolveClientOptions(const std::string& state_dir, client::ConnectionOptions* options);

}  // namespace zerofit::cli
