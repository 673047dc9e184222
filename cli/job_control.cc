#include "cli/job_control.h"

#include "absl/strings/str_cat.h"
#include "coordinator/service.h"
#include "core/status_macros.h"

namespace zerofit::cli {
namespace {

namespace v1 = ::zerofit::v1;

class Local final : public JobControl {
 public:
  explicit Local(coordinator::Coordinator* c) : c_(c) {}
  absl::StatusOr<Submitted> Submit(const std::string& request_id, const std::string& spec,
                                   const std::string& source) override {
    ZF_ASSIGN_OR_RETURN(auto r, c_->Submit(request_id, "", spec, source));
    return Submitted{r.job.id, r.created};
  }
  absl::StatusOr<coordinator::JobRecord> Get(const std::string& id) override { return c_->Get(id); }
  absl::StatusOr<std::vector<coordinator::LogLine>> WaitLogs(const std::string& id, int64_t after,
                                                             absl::Duration wait) override {
    return c_->WaitLogs(id, after, wait);
  }
  absl::Status LauncherExited(const std::string& id, int code) override {
    return c_->LauncherExited(id, code);
  }
  absl::StatusOr<int64_t> Preempt(const std::string& id, const std::string& why) override {
    return c_->Preempt(id, why);
  }
  absl::Status Interrupt(const std::string& id, const std::string& why) override {
    return c_->Interrupt(id, why);
  }
  absl::Status Cancel(const std::string& id, const std::string& why) override {
    return c_->Cancel(id, why).status();
  }
  absl::Status SetSlurmJobId(const std::string& id, const std::string& slurm_id) override {
    return c_->SetSlurmJobId(id, slurm_id);
  }

 private:
  coordinator::Coordinator* c_;
};

class Remote final : public JobControl {
 public:
  explicit Remote(const client::ConnectionOptions& o) : client_(o) {}
  absl::StatusOr<Submitted> Submit(const std::string& request_id, const std::string& spec,
                                   const std::string& source) override {
    ZF_ASSIGN_OR_RETURN(v1::SubmitJobResponse r, client_.Submit(request_id, "", spec, source));
    return Submitted{r.job().id(), r.created()};
  }
  absl::StatusOr<coordinator::JobRecord> Get(const std::string& id) override {
    ZF_ASSIGN_OR_RETURN(v1::Job j, client_.Get(id));
    return coordinator::FromProto(j);
  }
  absl::StatusOr<std::vector<coordinator::LogLine>> WaitLogs(const std::string& id, int64_t after,
                                                             absl::Duration wait) override {
    std::vector<coordinator::LogLine> lines;
    // A read whose lines are handed on only once it succeeded: an attempt cut by a coordinator restart is
    // dropped and read again from `after`, so the launcher's progress rides out the restart.
    ZF_RETURN_IF_ERROR(client::FollowAcrossRestarts(client::ReconnectPolicy{}, [&](bool*) {
      lines.clear();
      return client_.StreamLogs(id, after, false, absl::ZeroDuration(), [&](const v1::LogLine& l) {
        lines.push_back({l.seq(), l.source(), l.text(), absl::FromUnixMicros(l.unix_us())});
      });
    }));
    if (lines.empty()) absl::SleepFor(wait);  // polled: the launcher prints what arrived since
    return lines;
  }
  absl::Status LauncherExited(const std::string& id, int code) override {
    v1::LauncherEventRequest e;
    e.set_job_id(id);
    e.set_exited(code);
    return client_.Launcher(e).status();
  }
  absl::StatusOr<int64_t> Preempt(const std::string& id, const std::string& why) override {
    v1::LauncherEventRequest e;
    e.set_job_id(id);
    e.set_preempt(why);
    ZF_ASSIGN_OR_RETURN(v1::LauncherEventResponse r, client_.Launcher(e));
    return r.stop_step();
  }
  absl::Status Interrupt(const std::string& id, const std::string& why) override {
    v1::LauncherEventRequest e;
    e.set_job_id(id);
    e.set_interrupted(why);
    return client_.Launcher(e).status();
  }
  absl::Status Cancel(const std::string& id, const std::string& why) override {
    return client_.Cancel(id, why).status();
  }
  absl::Status SetSlurmJobId(const std::string& id, const std::string& slurm_id) override {
    v1::LauncherEventRequest e;
    e.set_job_id(id);
    e.set_slurm_job_id(slurm_id);
    return client_.Launcher(e).status();
  }

 private:
  client::CoordinatorClient client_;
};

}  // namespace

std::unique_ptr<JobControl> LocalJobControl(coordinator::Coordinator* c) {
  return std::make_unique<Local>(c);
}
std::unique_ptr<JobControl> RemoteJobControl(const client::ConnectionOptions& o) {
  return std::make_unique<Remote>(o);
}

}  // namespace zerofit::cli
