#include "client/connection_flags.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/text_file.h"

namespace zerofit::client {

ConnectionSettings SettingsFromEnvironment(const std::function<const char*(const char*)>& getenv) {
  ConnectionSettings s;
  auto get = [&](const char* name) {
    const char* v = getenv(name);
    return std::string(v ? v : "");
  };
  s.token = get(kTokenEnv);
  s.tls_ca_file = get(kTlsCaEnv);
  s.tls_server_name = get(kTlsServerNameEnv);
  return s;
}

bool ParseConnectionFlag(std::string_view flag, const std::string& value, ConnectionSettings* s) {
  if (flag == "--coordinator") {
    s->address = value;
  } else if (flag == "--token") {
    s->token = value;
    s->token_file.clear();
  } else if (flag == "--token-file") {
    s->token_file = value;
    s->token.clear();
  } else if (flag == "--tls-ca") {
    s->tls_ca_file = value;
  } else if (flag == "--tls-server-name") {
    s->tls_server_name = value;
  } else {
    return false;
  }
  return true;
}

absl::StatusOr<ConnectionOptions> Resolve(const ConnectionSettings& s) {
  ConnectionOptions o;
  o.address = s.address;
  o.token = s.token;
  if (o.token.empty() && !s.token_file.empty()) {
    auto text = core::ReadTextFile(s.token_file);
    if (!text.ok())
      return absl::NotFoundError(absl::StrCat("--token-file: cannot read '", s.token_file, "'"));
    o.token = std::string(absl::StripAsciiWhitespace(*text));
  }
  if (!s.tls_ca_file.empty()) {
    auto pem = core::ReadTextFile(s.tls_ca_file);
    if (!pem.ok()) {
      return absl::NotFoundError(
          absl::StrCat("--tls-ca (or ", kTlsCaEnv, "): cannot read '", s.tls_ca_file, "'"));
    }
    if (pem->find("-----BEGIN CERTIFICATE-----") == std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--tls-ca '", s.tls_ca_file, "' holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
    }
    o.tls_ca_pem = *std::move(pem);
    o.tls_ca_source = s.tls_ca_file;
  }
  o.tls_server_name = s.tls_server_name;
  return o;
}

std::vector<std::string> TlsFlags(const std::string& tls_ca_file, const std::string& tls_server_name) {
  std::vector<std::string> out;
  if (!tls_ca_file.empty()) out.insert(out.end(), {"--tls-ca", tls_ca_file});
  if (!tls_server_name.empty()) out.insert(out.end(), {"--tls-server-name", tls_server_name});
  return out;
}

}  // namespace zerofit::client
