// `zerofit serve | submit | status | list | logs | cancel`: the coordinator and the commands that talk to it.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "cli/client_options.h"
#include "client/coordinator_client.h"

namespace CLI {
class App;
}

namespace zerofit::cli {

struct ServeFlags {
  std::string listen = "127.0.0.1:7070";
  std::string state_dir;  // default ~/.zerofit: token (0600), address, jobs.db
  std::string db;         // default <state_dir>/jobs.db
  std::string tls_cert, tls_key;
  double heartbeat_timeout_s = 10;
};

struct JobsFlags {
  std::string state_dir;
  std::string coordinator;      // host:port (default: <state_dir>/address)
  std::string token;            // --token or ZEROFIT_TOKEN; default: <state_dir>/token
  std::string tls_ca;           // --tls-ca or ZEROFIT_TLS_CA: connect with TLS, verify against this CA
  std::string tls_server_name;  // --tls-server-name or ZEROFIT_TLS_SERVER_NAME
  // submit
  std::string spec_path;
  std::string request_id;
  std::string name;
  // status / logs / cancel
  std::string job;
  bool follow = false;
  double follow_timeout_s = 86400;
  double reconnect_timeout_s = 180;  // logs/metrics -f: how long to wait for a restarted coordinator
  std::string reason;
  bool json = false;
  bool plan = false;             // status: print the resolved job plan (JSON) instead of the summary
  std::string format = "table";  // metrics: table | json | csv
  std::string worker_binary;     // worker: zerofit_worker (default: the one built with this zerofit)
};

struct JobsCommands {
  CLI::App* serve = nullptr;
  CLI::App* submit = nullptr;
  CLI::App* status = nullptr;
  CLI::App* list = nullptr;
  CLI::App* logs = nullptr;
  CLI::App* cancel = nullptr;
  CLI::App* metrics = nullptr;
  CLI::App* worker = nullptr;
};

// A fresh bearer token: 32 random bytes (std::random_device, /dev/urandom), hex.
std::string NewToken();
// Reads the token file, or creates it (NewToken, mode 0600) if it does not exist. A token file others can
// read is refused.
absl::StatusOr<std::string> LoadOrCreateToken(const std::string& path);
// Writes `token` into a new file of mode 0600 (an existing file is an error), with fsync.
absl::Status CreateTokenFile(const std::string& path, const std::string& token);

JobsCommands AddJobsCommands(CLI::App& app, ServeFlags* serve, JobsFlags* jobs);

// Runs until SIGINT/SIGTERM.
absl::Status RunServe(const ServeFlags& flags);
absl::Status RunSubmit(const JobsFlags& flags);
absl::Status RunStatus(const JobsFlags& flags);
absl::Status RunList(const JobsFlags& flags);
absl::Status RunLogs(const JobsFlags& flags);
absl::Status RunCancel(const JobsFlags& flags);
absl::Status RunMetrics(const JobsFlags& flags);
// Replaces this process with zerofit_worker (run it under mpiexec/srun: one process per rank), connected the
// way this command is: address and TLS flags on its command line, the token in its environment
// (ZEROFIT_TOKEN), never on a command line.
absl::Status RunWorker(const JobsFlags& flags);

}  // namespace zerofit::cli
