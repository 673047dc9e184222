// A connection's settings from outside the program: flags and environment variables, read once into
// ConnectionSettings (paths, not contents), then Resolve reads the files into ConnectionOptions. The worker
// parses its flags with these; launchers pass TLS on with TlsFlags and the token by file or environment
// (never on a command line, where `ps` shows it).
//   flag               environment                meaning
//   --coordinator      -                          HOST:PORT
//   --token            ZEROFIT_TOKEN              bearer token (prefer the file or the environment)
//   --token-file       -                          a file holding the token (mode 0600)
//   --tls-ca           ZEROFIT_TLS_CA             PEM CA file: connect with TLS, verify against it
//   --tls-server-name  ZEROFIT_TLS_SERVER_NAME    name the server's certificate must carry
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "client/connection.h"

namespace zerofit::client {

inline constexpr const char* kTokenEnv = "ZEROFIT_TOKEN";
inline constexpr const char* kTlsCaEnv = "ZEROFIT_TLS_CA";
inline constexpr const char* kTlsServerNameEnv = "ZEROFIT_TLS_SERVER_NAME";

struct ConnectionSettings {
  std::string address;
  std::string token;       // given directly (flag or environment)
  std::string token_file;  // read by Resolve when `token` is empty
  std::string tls_ca_file;
  std::string tls_server_name;
};

// The environment's part (the variables above); `getenv` is std::getenv outside tests.
ConnectionSettings SettingsFromEnvironment(const std::function<const char*(const char*)>& getenv);

// If `flag` is one of the connection flags above, stores `value` into `settings` and returns true; a later
// flag overrides the environment (and --token / --token-file override each other, last one wins).
bool ParseConnectionFlag(std::string_view flag, const std::string& value, ConnectionSettings* settings);

// Reads the token file and the CA file. Errors name the flag (or variable) and the path.
absl::StatusOr<ConnectionOptions> Resolve(const ConnectionSettings& settings);

// The flags that make a zerofit_worker connect with the same TLS settings (empty for plaintext).
std::vector<std::string> TlsFlags(const std::string& tls_ca_file, const std::string& tls_server_name);

}  // namespace zerofit::client
