#include "worker/loop/fault_plan.h"

#include <cmath>
#include <set>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/excerpt.h"
#include "core/status_macros.h"

namespace zerofit::worker {
namespace {

// One "key=value,..." entry; `where` prefixes every error ("ZEROFIT_FAULTS: fault 2 ('rank=x')").
class EntryParser {
 public:
  explicit EntryParser(std::string where) : where_(std::move(where)) {}

  absl::Status Error(const std::string& key, const std::string& why) const {
    return absl::InvalidArgumentError(absl::StrCat(where_, ": key '", key, "': ", why));
  }

  absl::StatusOr<int64_t> Int(const std::string& key, const std::string& v, int64_t lo, int64_t hi) const {
    int64_t x = 0;
    if (!absl::SimpleAtoi(v, &x) || x < lo || x > hi) {
      return Error(key,
                   absl::StrCat("expected an integer in [", lo, ", ", hi, "], got '", core::Excerpt(v), "'"));
    }
    return x;
  }

  absl::Status Apply(const std::string& key, const std::string& v, Fault* f) const {
    if (key == "rank") {
      ZF_ASSIGN_OR_RETURN(const int64_t r, Int(key, v, 0, 65535));
      f->rank = static_cast<int>(r);
    } else if (key == "step") {
      ZF_ASSIGN_OR_RETURN(f->step, Int(key, v, 0, int64_t{1} << 32));
    } else if (key == "attempt") {
      ZF_ASSIGN_OR_RETURN(const int64_t a, Int(key, v, 1, 1000));
      f->attempt = static_cast<int>(a);
    } else if (key == "code") {
      ZF_ASSIGN_OR_RETURN(const int64_t c, Int(key, v, 1, 255));
      f->code = static_cast<int>(c);
    } else if (key == "seconds") {
      double s = 0;
      if (!absl::SimpleAtod(v, &s) || !std::isfinite(s) || !(s > 0) || s > 3600) {
        return Error(key,
                     absl::StrCat("expected a number of seconds in (0, 3600], got '", core::Excerpt(v), "'"));
      }
      f->seconds = s;
    } else if (key == "fault") {
      ZF_ASSIGN_OR_RETURN(f->kind, Kind(v));
    } else {
      return Error(key, "unknown key (rank, step, fault, attempt, code, seconds)");
    }
    return absl::OkStatus();
  }

  absl::StatusOr<FaultKind> Kind(const std::string& v) const {
    for (FaultKind k : {FaultKind::kHangAllGather, FaultKind::kExit, FaultKind::kSlow,
                        FaultKind::kCorruptReport, FaultKind::kLinger}) {
      if (v == FaultKindName(k)) return k;
    }
    return Error("fault", absl::StrCat("expected hang_allgather, exit, slow, corrupt_report or linger, got '",
                                       core::Excerpt(v), "'"));
  }

  absl::StatusOr<Fault> Parse(absl::string_view text) const {
    Fault f;
    std::set<std::string> seen;
    for (absl::string_view item : absl::StrSplit(text, ',')) {
      const std::pair<std::string, std::string> kv =
          absl::StrSplit(absl::StripAsciiWhitespace(item), absl::MaxSplits('=', 1));
      const std::string key(absl::StripAsciiWhitespace(kv.first));
      if (key.empty())
        return absl::InvalidArgumentError(
            absl::StrCat(where_, ": expected key=value, got '", core::Excerpt(std::string(item)), "'"));
      if (!seen.insert(key).second) return Error(key, "given twice");
      ZF_RETURN_IF_ERROR(Apply(key, std::string(absl::StripAsciiWhitespace(kv.second)), &f));
    }
    for (const char* required : {"rank", "step", "fault"}) {
      if (!seen.count(required)) return Error(required, "required");
    }
    if (seen.count("code") && f.kind != FaultKind::kExit) return Error("code", "only with fault=exit");
    if (seen.count("seconds") && f.kind != FaultKind::kSlow && f.kind != FaultKind::kLinger) {
      return Error("seconds", "only with fault=slow or fault=linger");
    }
    return f;
  }

 private:
  std::string where_;
};

}  // namespace

const char* FaultKindName(FaultKind kind) {
  switch (kind) {
    case FaultKind::kHangAllGather:
      return "hang_allgather";
    case FaultKind::kExit:
      return "exit";
    case FaultKind::kSlow:
      return "slow";
    case FaultKind::kCorruptReport:
      return "corrupt_report";
    case FaultKind::kLinger:
      return "linger";
  }
  return "?";
}

absl::StatusOr<FaultPlan> FaultPlan::Parse(const std::string& text, const std::string& source) {
  if (text.size() > kMaxTextBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": ", text.size(), " bytes, more than the ", kMaxTextBytes, " accepted"));
  }
  FaultPlan plan;
  int index = 0;
  for (absl::string_view entry : absl::StrSplit(text, ';', absl::SkipWhitespace())) {
    ++index;
    if (plan.faults_.size() == kMaxFaults) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": more than ", kMaxFaults, " faults"));
    }
    const EntryParser parser(
        absl::StrCat(source, ": fault ", index, " ('", absl::StripAsciiWhitespace(entry), "')"));
    ZF_ASSIGN_OR_RETURN(Fault f, parser.Parse(entry));
    plan.faults_.push_back(f);
  }
  return plan;
}

const Fault* FaultPlan::Find(FaultKind kind, int rank, int attempt, int64_t step) const {
  for (const Fault& f : faults_) {
    if (f.kind != kind || f.rank != rank || f.attempt != attempt) continue;
    if (f.step == step || (kind == FaultKind::kSlow && step > f.step)) return &f;
  }
  return nullptr;
}

std::string FaultPlan::Describe() const {
  std::vector<std::string> parts;
  for (const Fault& f : faults_) {
    std::string p = absl::StrCat("rank ", f.rank, ", step ", f.step, ", attempt ", f.attempt, ": ",
                                 FaultKindName(f.kind));
    if (f.kind == FaultKind::kExit) absl::StrAppend(&p, " with code ", f.code);
    if (f.kind == FaultKind::kSlow) absl::StrAppend(&p, " by ", f.seconds, "s per step");
    if (f.kind == FaultKind::kLinger) absl::StrAppend(&p, " for ", f.seconds, "s after the step");
    parts.push_back(std::move(p));
  }
  return parts.empty() ? "no faults" : absl::StrJoin(parts, "; ");
}

}  // namespace zerofit::worker
