#include "sharding/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <optional>
#include <system_error>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/dir_owner.h"
#include "core/json_depth.h"
#include "core/safetensors.h"
#include "core/status_macros.h"
#include "core/text_file.h"
#include "nlohmann/json.hpp"
#include "optim/dynamic_map.h"
#include "sharding/checkpoint_rotation.h"

namespace zerofit::sharding {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr const char* kFormat = "zerofit-zero2-checkpoint";
constexpr int kVersion = 1;
// More ranks than any run writes; a manifest beyond it is corrupt (and would not fit in an int).
constexpr int64_t kMaxCheckpointWorldSize = int64_t{1} << 20;

// A run of consecutive elements of one parameter held by one rank file.
struct Run {
  size_t param = 0;
  size_t offset = 0;  // in the parameter
  size_t numel = 0;
  size_t file_offset = 0;  // in the rank file's tensors
};

std::vector<Run> RunsOf(const BucketPlan& plan) {
  std::vector<Run> runs;
  size_t at = 0;
  for (const ShardSegment& s : plan.segments()) {
    runs.push_back({s.param, s.offset_in_param, s.numel, at});
    at += s.numel;
  }
  return runs;
}

std::string RankFile(int rank) { return absl::StrFormat("rank-%05d.safetensors", rank); }

// 8-bit moments' block scales in a rank file: each run's blocks (optim::QuantBlocks of its elements), runs
// in file order. A run starts on a block of its parameter (the 8-bit optimizer's alignment).
constexpr const char* kScaleTensors[2] = {"exp_avg_absmax", "exp_avg_sq_absmax"};

// This rank's scales of m and v in that layout.
absl::Status RunScales(Zero2Optimizer& opt, std::vector<float> (&out)[2]) {
  std::vector<float> all[2];
  for (auto& a : all) a.resize(opt.moment_scales());
  ZF_RETURN_IF_ERROR(opt.CopyMomentScalesToHost(all[0].data(), all[1].data()));
  for (int k = 0; k < 2; ++k) {
    for (const ShardSegment& s : opt.plan().segments()) {
      const auto first = all[k].begin() + static_cast<std::ptrdiff_t>(s.shard_offset / optim::kQuantBlock);
      out[k].insert(out[k].end(), first, first + static_cast<std::ptrdiff_t>(optim::QuantBlocks(s.numel)));
    }
  }
  return absl::OkStatus();
}

absl::Status Collective(absl::StatusOr<std::unique_ptr<comm::Work>> work, absl::Duration timeout) {
  ZF_RETURN_IF_ERROR(work.status());
  return (*work)->Wait(timeout);
}

// Every rank learns whether any rank failed, so that none waits in a later collective for a dead peer's data.
absl::Status AgreeOk(const absl::Status& local, comm::Communicator& comm) {
  double failed = local.ok() ? 0.0 : 1.0;
  ZF_RETURN_IF_ERROR(
      Collective(comm.AllReduce(comm::Buffer{&failed, 1, core::DType::kFloat64}, comm::ReduceOp::kMax),
                 comm.options().timeout));
  if (!local.ok()) return local;
  if (failed > 0) return absl::AbortedError("checkpoint: another rank failed (see its log)");
  return absl::OkStatus();
}

// A manifest that is not what this code wrote: the file and the field.
absl::Status ManifestError(const std::string& path, const std::string& field, const std::string& why) {
  return absl::DataLossError(absl::StrCat(path, ": field '", field, "' ", why));
}

// `root/latest`'s checkpoint directory (or `root` itself when it is one). NotFound without either.
absl::StatusOr<std::string> CheckpointDir(const std::string& root) {
  if (fs::exists(fs::path(root) / "manifest.json")) return root;
  auto latest = core::ReadTextFile((fs::path(root) / "latest").string());
  if (!latest.ok()) return absl::NotFoundError(absl::StrCat(root, ": no checkpoint (no 'latest' file)"));
  std::string name = *latest;
  name.erase(std::remove_if(name.begin(), name.end(), [](char c) { return c == '\n' || c == '\r'; }),
             name.end());
  return (fs::path(root) / name).string();
}

struct Manifest {
  std::string path;
  Json json;
  CheckpointInfo info;
};

// Reads and checks a checkpoint's manifest (format, version, step, world size, extra).
absl::StatusOr<Manifest> ReadManifest(const std::string& dir) {
  Manifest m;
  m.path = (fs::path(dir) / "manifest.json").string();
  ZF_ASSIGN_OR_RETURN(const std::string text, core::ReadTextFile(m.path));
  if (absl::Status deep = core::CheckJsonDepth(text, core::kMaxJsonDepth, m.path); !deep.ok()) {
    return absl::DataLossError(deep.message());
  }
  m.json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string& field, const std::string& why) {
    return ManifestError(m.path, field, why);
  };
  const Json& j = m.json;
  if (j.is_discarded() || !j.is_object()) return bad("(root)", "is not a JSON object");
  // Types are checked before values are read: nlohmann's value() and get() throw on a mismatch.
  const auto format = j.find("format");
  if (format == j.end() || !format->is_string() || format->get<std::string>() != kFormat) {
    return bad("format", absl::StrCat("is not '", kFormat, "'"));
  }
  const auto version = j.find("version");
  if (version == j.end() || !version->is_number_integer() || version->get<int64_t>() != kVersion) {
    return bad("version", absl::StrCat("is not ", kVersion));
  }
  if (!j.contains("step") || !j["step"].is_number_integer()) return bad("step", "is not an integer");
  if (!j.contains("world_size") || !j["world_size"].is_number_integer()) {
    return bad("world_size", "is not an integer");
  }
  // Unsigned values past int64 read back negative: both ranges are checked on the int64 value.
  const int64_t step = j["step"].get<int64_t>(), world_size = j["world_size"].get<int64_t>();
  if (step < 0) {
    return bad("step", absl::StrCat("is ", j["step"].dump(), ", not a step number (>= 0)"));
  }
  if (world_size < 1 || world_size > kMaxCheckpointWorldSize) {
    return bad("world_size",
               absl::StrCat("is ", j["world_size"].dump(), ", not 1..", kMaxCheckpointWorldSize));
  }
  m.info.dir = dir;
  m.info.step = step;
  m.info.world_size = static_cast<int>(world_size);
  m.info.extra = j.contains("extra") ? j["extra"].dump() : "";
  return m;
}

// FailedPrecondition when `dir` exists and is not `owner`'s (the user's own folder of the same name, another
// job's): the save must neither write into it nor replace it.
absl::Status RequireAbsentOrOwned(const fs::path& dir, const core::DirOwner& owner) {
  std::error_code ec;
  if (fs::symlink_status(dir, ec).type() == fs::file_type::not_found) return absl::OkStatus();
  const auto marked = core::ReadDirOwner(dir.string());
  if (marked.ok() && *marked == owner) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(dir.string(), " exists and zerofit did not write it for this job (",
                   marked.ok() ? marked->Describe() : std::string("no owner marker"),
                   "); zerofit never replaces what it did not write: move it out of checkpoint.dir"));
}

// Rank 0, before any rank writes: removes `owner`'s stale temporary folders (into `removed`), makes sure
// neither `tmp_dir` nor `final_dir` is someone else's, marks `root` as zerofit's when it has no marker yet,
// and creates `tmp_dir` with `owner`'s marker in it first, so that even a save killed right after this is
// recognised as ours by the next one.
absl::Status StartWrite(const std::string& root, const fs::path& tmp_dir, const fs::path& final_dir,
                        const core::DirOwner& owner, std::vector<std::string>* removed) {
  ZF_ASSIGN_OR_RETURN(*removed, RemoveStaleCheckpointWrites(root, owner));
  ZF_RETURN_IF_ERROR(RequireAbsentOrOwned(tmp_dir, owner));
  ZF_RETURN_IF_ERROR(RequireAbsentOrOwned(final_dir, owner));
  std::error_code ec;
  fs::create_directories(tmp_dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat(tmp_dir.string(), ": ", ec.message()));
  // Marked when unmarked, and completed when `zerofit run --overwrite-checkpoints` marked it with the
  // request alone (before the job had an id).
  const auto root_owner = core::ReadDirOwner(root);
  if (absl::IsNotFound(root_owner.status()) ||
      (root_owner.ok() && root_owner->request == owner.request && *root_owner != owner)) {
    ZF_RETURN_IF_ERROR(core::WriteDirOwner(root, owner));
  }
  return core::WriteDirOwner(tmp_dir.string(), owner);
}

// A save that failed after StartWrite created `tmp_dir`: rank 0 removes the folder if it is still there
// (every rank has stopped writing into it by then) and returns `why`, adding any failure to remove it.
// What `latest` names is untouched.
absl::Status AbandonWrite(const absl::Status& why, int rank, const fs::path& tmp_dir) {
  if (rank != 0) return why;
  std::error_code ec;
  fs::remove_all(tmp_dir, ec);
  if (!ec) return why;
  return absl::Status(why.code(), absl::StrCat(why.message(), " (and removing ", tmp_dir.string(),
                                               " failed too: ", ec.message(), ")"));
}

// Rank 0, once every rank file is durable: the manifest (the format, the step, the loss scaler, the
// parameters and each rank file's runs), the rename of the temporary folder into the checkpoint, `latest`
// naming it, and only then the rotation of this owner's older checkpoints.
absl::Status PublishCheckpoint(Zero2Optimizer& opt, const std::string& root, const fs::path& tmp_dir,
                               const fs::path& final_dir, const Json& extra_json, const core::DirOwner& owner,
                               int keep) {
  const BucketPlan& plan = opt.plan();
  const int world = opt.communicator()->world_size();
  Json j;
  j["format"] = kFormat;
  j["version"] = kVersion;
  j["world_size"] = world;
  j["step"] = opt.step();
  const LossScalerState sc = opt.loss_scaler_state();
  j["loss_scaler"] = {{"scale", sc.scale}, {"good_steps", sc.good_steps}, {"skipped", sc.skipped}};
  j["param_dtype"] = core::DTypeName(opt.options().param_dtype);
  Json params = Json::array();
  for (const ParamSpec& p : plan.params()) params.push_back({{"name", p.name}, {"numel", p.numel}});
  j["params"] = params;
  Json files = Json::array();
  for (int r = 0; r < world; ++r) {
    BucketPlanOptions po = plan.options();
    po.rank = r;
    ZF_ASSIGN_OR_RETURN(BucketPlan other, BucketPlan::Make(plan.params(), po));
    Json runs = Json::array();
    for (const Run& run : RunsOf(other)) runs.push_back({run.param, run.offset, run.numel, run.file_offset});
    files.push_back({{"file", RankFile(r)}, {"runs", runs}});
  }
  j["files"] = files;
  j["extra"] = extra_json;
  ZF_RETURN_IF_ERROR(core::WriteTextFileAtomic((tmp_dir / "manifest.json").string(), j.dump(1)));
  std::error_code ec;
  fs::remove_all(final_dir, ec);  // this job's checkpoint of the same step from an earlier attempt
  fs::rename(tmp_dir, final_dir, ec);
  if (ec) return absl::InternalError(absl::StrCat("rename ", tmp_dir.string(), ": ", ec.message()));
  ZF_RETURN_IF_ERROR(core::FsyncPath(root, true));
  ZF_RETURN_IF_ERROR(
      core::WriteTextFileAtomic((fs::path(root) / "latest").string(), final_dir.filename().string() + "\n"));
  // Only now that `latest` names the new checkpoint may old ones go, and only this owner's.
  return RotateCheckpoints(root, owner, opt.step(), keep).status();
}

}  // namespace

absl::StatusOr<CheckpointInfo> SaveCheckpoint(Zero2Optimizer& opt, const std::string& root,
                                              const std::string& extra, int keep) {
  comm::Communicator& comm = *opt.communicator();
  const int rank = comm.rank(), world = comm.world_size();
  if (keep < 1) return absl::InvalidArgumentError("SaveCheckpoint: keep must be >= 1");
  Json extra_json = Json::object();
  if (!extra.empty()) {
    extra_json = Json::parse(extra, nullptr, /*allow_exceptions=*/false);
    if (extra_json.is_discarded() || !extra_json.is_object()) {
      return absl::InvalidArgumentError("SaveCheckpoint: extra must be a JSON object");
    }
  }
  ZF_RETURN_IF_ERROR(opt.Flush());
  CheckpointInfo info;
  info.step = opt.step();
  info.world_size = world;
  info.extra = extra;
  const std::string name = absl::StrFormat("step-%08d", info.step);
  const fs::path final_dir = fs::path(root) / name;
  const fs::path tmp_dir = fs::path(root) / (name + ".tmp");
  info.dir = final_dir.string();

  const core::DirOwner owner = core::DirOwnerFromJson(extra);
  absl::Status local;
  if (rank == 0) local = StartWrite(root, tmp_dir, final_dir, owner, &info.removed_stale);
  ZF_RETURN_IF_ERROR(AgreeOk(local, comm));
  // From here on `tmp_dir` is this save's: a failed write (a full disk, on any rank) removes it once every
  // rank has stopped writing into it (AgreeOk), so that only complete checkpoints remain.
  auto failed = [&](const absl::Status& s) { return AbandonWrite(s, rank, tmp_dir); };

  // This rank's real elements, runs concatenated in segment order.
  const BucketPlan& plan = opt.plan();
  size_t n = 0;
  for (const ShardSegment& s : plan.segments()) n += s.numel;
  // The state may live in device memory: one host copy of the shard, then the real runs.
  std::vector<float> shard[3];
  for (auto& b : shard) b.resize(plan.shard_numel());
  ZF_RETURN_IF_ERROR(opt.CopyStateToHost(shard[0].data(), shard[1].data(), shard[2].data()));
  std::vector<float> master(n), m(n), v(n);
  size_t at = 0;
  for (const ShardSegment& s : plan.segments()) {
    std::copy_n(shard[0].data() + s.shard_offset, s.numel, master.data() + at);
    std::copy_n(shard[1].data() + s.shard_offset, s.numel, m.data() + at);
    std::copy_n(shard[2].data() + s.shard_offset, s.numel, v.data() + at);
    at += s.numel;
  }
  const int64_t len = static_cast<int64_t>(n);
  std::vector<core::StTensorToWrite> tensors = {{"master", core::StDType::kF32, {len}, master.data()},
                                                {"exp_avg", core::StDType::kF32, {len}, m.data()},
                                                {"exp_avg_sq", core::StDType::kF32, {len}, v.data()}};
  // 8-bit moments: m and v above are dequantised; their block scales too, so that a restore gives back the
  // same codes (sharding/quantized_moments.h).
  std::vector<float> scales[2];
  if (opt.moment_scales() > 0) {
    ZF_RETURN_IF_ERROR(RunScales(opt, scales));
    const int64_t blocks = static_cast<int64_t>(scales[0].size());
    tensors.push_back({kScaleTensors[0], core::StDType::kF32, {blocks}, scales[0].data()});
    tensors.push_back({kScaleTensors[1], core::StDType::kF32, {blocks}, scales[1].data()});
  }
  local = core::WriteSafetensors((tmp_dir / RankFile(rank)).string(), tensors,
                                 {{"rank", std::to_string(rank)}, {"world_size", std::to_string(world)}});
  // Every rank file is durable (WriteSafetensors fsyncs), or every rank knows that one is not.
  if (absl::Status agreed = AgreeOk(local, comm); !agreed.ok()) return failed(agreed);

  if (rank == 0) local = PublishCheckpoint(opt, root, tmp_dir, final_dir, extra_json, owner, keep);
  // A failure before the rename leaves `tmp_dir` to remove; after it there is none (the checkpoint is
  // complete, whether or not `latest` names it yet).
  if (absl::Status agreed = AgreeOk(local, comm); !agreed.ok()) return failed(agreed);
  return info;
}

absl::StatusOr<CheckpointInfo> ReadLatestCheckpoint(const std::string& root) {
  ZF_ASSIGN_OR_RETURN(const std::string dir, CheckpointDir(root));
  ZF_ASSIGN_OR_RETURN(Manifest m, ReadManifest(dir));
  return m.info;
}

namespace {

// Where a parameter's elements are in the old rank files: a run of `numel` elements at `offset` in the
// parameter, at `file_offset` in file `file`.
struct Piece {
  size_t offset, numel, file, file_offset;
  size_t file_block = 0;  // the run's first block in the file's scale tensors (kScaleTensors), if any
};

// The manifest's rank files and, per parameter, the runs they hold.
struct RankFiles {
  std::vector<std::string> names;
  std::vector<std::vector<Piece>> pieces;  // per parameter of the plan
};

// The manifest's parameter list must be this model's, name for name and size for size, in any order (the
// order is the engine's placement, which a change of the model's registration order moves: the runs below
// name parameters by the manifest's index). Returns each manifest index's parameter in `plan`.
absl::StatusOr<std::vector<size_t>> PlanIndexOfManifestParams(const BucketPlan& plan, const Json& j,
                                                              const std::string& manifest_path) {
  const Json& params = j.at("params");
  if (!params.is_array() || params.size() != plan.params().size()) {
    return ManifestError(
        manifest_path, "params",
        absl::StrCat("lists ", params.size(), " parameters; this model has ", plan.params().size()));
  }
  std::map<std::string, size_t> by_name;
  for (size_t i = 0; i < plan.params().size(); ++i) by_name.emplace(plan.params()[i].name, i);
  std::vector<size_t> to_plan(params.size());
  std::vector<bool> seen(plan.params().size(), false);
  for (size_t i = 0; i < params.size(); ++i) {
    const std::string name = params[i].at("name").get<std::string>();
    const size_t numel = params[i].at("numel").get<size_t>();
    const auto it = by_name.find(name);
    if (it == by_name.end() || seen[it->second] || plan.params()[it->second].numel != numel) {
      const std::string why = it == by_name.end() ? "which this model does not have"
                              : seen[it->second]  ? "listed twice"
                                                  : absl::StrCat("where this model's has ",
                                                                 plan.params()[it->second].numel, " elements");
      return ManifestError(manifest_path, absl::StrCat("params[", i, "]"),
                           absl::StrCat("is '", name, "' with ", numel, " elements, ", why));
    }
    seen[it->second] = true;
    to_plan[i] = it->second;
  }
  return to_plan;
}

absl::StatusOr<RankFiles> ReadRankFiles(const BucketPlan& plan, const Json& j,
                                        const std::vector<size_t>& to_plan,
                                        const std::string& manifest_path) {
  RankFiles out;
  out.pieces.resize(plan.params().size());
  const Json& files = j.at("files");
  for (size_t f = 0; f < files.size(); ++f) {
    out.names.push_back(files[f].at("file").get<std::string>());
    size_t file_block = 0;
    for (const Json& r : files[f].at("runs")) {
      const size_t listed = r.at(0).get<size_t>();
      const std::string field = absl::StrCat("files[", f, "].runs");
      if (listed >= to_plan.size())
        return ManifestError(manifest_path, field, "names a parameter out of range");
      const size_t p = to_plan[listed];
      const Piece piece{r.at(1).get<size_t>(), r.at(2).get<size_t>(), f, r.at(3).get<size_t>(), file_block};
      file_block += optim::QuantBlocks(piece.numel);
      // Checked here so that the copy's bounds check below cannot wrap around (it adds these).
      const size_t param_numel = plan.params()[p].numel;
      if (piece.offset > param_numel || piece.numel > param_numel - piece.offset ||
          piece.file_offset > std::numeric_limits<size_t>::max() - piece.numel) {
        return ManifestError(manifest_path, field,
                             absl::StrCat("holds run ", r.dump(), ", outside parameter ", p, " (",
                                          param_numel, " elements) or past any file"));
      }
      out.pieces[p].push_back(piece);
    }
  }
  return out;
}

// The old rank files' state tensors (master, m, v, and, when the file has them, the scales of 8-bit moments;
// else two empty vectors), each file read once, when first needed.
class RankFileCache {
 public:
  RankFileCache(const std::string& dir, const std::vector<std::string>& names) : dir_(dir), names_(names) {}

  absl::StatusOr<const std::vector<std::vector<float>>*> Get(size_t f) {
    auto it = loaded_.find(f);
    if (it != loaded_.end()) return &it->second;
    ZF_ASSIGN_OR_RETURN(core::SafetensorsFile file,
                        core::SafetensorsFile::Open((fs::path(dir_) / names_[f]).string()));
    std::vector<std::vector<float>> t;
    for (const char* name : {"master", "exp_avg", "exp_avg_sq"}) {
      const core::StTensorInfo* ti = file.Find(name);
      if (ti == nullptr || ti->dtype != core::StDType::kF32) {
        return absl::DataLossError(absl::StrCat(file.path(), ": tensor '", name, "' missing or not F32"));
      }
      std::vector<float> data(static_cast<size_t>(ti->numel()));
      ZF_RETURN_IF_ERROR(file.Read(name, data.data(), data.size() * sizeof(float)));
      t.push_back(std::move(data));
    }
    for (const char* name : kScaleTensors) {
      const core::StTensorInfo* ti = file.Find(name);
      std::vector<float> data;
      if (ti != nullptr) {
        if (ti->dtype != core::StDType::kF32) {
          return absl::DataLossError(absl::StrCat(file.path(), ": tensor '", name, "' is not F32"));
        }
        data.resize(static_cast<size_t>(ti->numel()));
        ZF_RETURN_IF_ERROR(file.Read(name, data.data(), data.size() * sizeof(float)));
      }
      t.push_back(std::move(data));
    }
    return &loaded_.emplace(f, std::move(t)).first->second;
  }

 private:
  const std::string& dir_;
  const std::vector<std::string>& names_;
  std::map<size_t, std::vector<std::vector<float>>> loaded_;  // file -> master, m, v, m scales, v scales
};

// The 8-bit moments' scales of the overlap [lo, hi) of a file's piece and this rank's segment, when the file
// has scales and the overlap starts on a block in both (always so between two 8-bit runs; else the blocks
// keep 0 and are quantised against their own absmax).
void CopyScales(const std::vector<std::vector<float>>& t, const Piece& pc, const ShardSegment& s, size_t lo,
                size_t hi, std::vector<float> (&host_state)[5]) {
  constexpr size_t kBlock = optim::kQuantBlock;
  if (t[3].empty() || (lo - pc.offset) % kBlock != 0 ||
      (s.shard_offset + lo - s.offset_in_param) % kBlock != 0)
    return;
  const size_t from = pc.file_block + (lo - pc.offset) / kBlock, blocks = optim::QuantBlocks(hi - lo);
  const size_t to = (s.shard_offset + lo - s.offset_in_param) / kBlock;
  if (from + blocks > t[3].size() || from + blocks > t[4].size() || to + blocks > host_state[3].size())
    return;
  for (int k = 3; k < 5; ++k) std::copy_n(t[k].data() + from, blocks, host_state[k].data() + to);
}

// This rank's shard of master, m and v (host memory) from the old rank files that its segments overlap;
// every real element must be covered. With scale_blocks (8-bit moments), host_state[3] and [4] get the
// blocks' saved scales where the files have them (0 elsewhere).
absl::Status AssembleShard(const BucketPlan& plan, const RankFiles& rf, const std::string& dir,
                           const std::string& manifest_path, size_t scale_blocks,
                           std::vector<float> (&host_state)[5]) {
  RankFileCache cache(dir, rf.names);
  for (int k = 0; k < 5; ++k) host_state[k].assign(k < 3 ? plan.shard_numel() : scale_blocks, 0.0f);
  float* dst[3] = {host_state[0].data(), host_state[1].data(), host_state[2].data()};
  for (const ShardSegment& s : plan.segments()) {
    size_t covered = 0;
    for (const Piece& pc : rf.pieces[s.param]) {
      const size_t lo = std::max(s.offset_in_param, pc.offset);
      const size_t hi = std::min(s.offset_in_param + s.numel, pc.offset + pc.numel);
      if (lo >= hi) continue;
      ZF_ASSIGN_OR_RETURN(const auto* t, cache.Get(pc.file));
      const size_t src = pc.file_offset + (lo - pc.offset);
      if (src + (hi - lo) > (*t)[0].size()) {
        return absl::DataLossError(
            absl::StrCat(dir, "/", rf.names[pc.file], ": shorter than its manifest runs"));
      }
      for (int k = 0; k < 3; ++k) {
        std::copy_n((*t)[k].data() + src, hi - lo, dst[k] + s.shard_offset + (lo - s.offset_in_param));
      }
      if (scale_blocks > 0) CopyScales(*t, pc, s, lo, hi, host_state);
      covered += hi - lo;
    }
    if (covered != s.numel) {
      return absl::DataLossError(absl::StrCat(manifest_path, ": parameter '", plan.params()[s.param].name,
                                              "' is not fully covered by the rank files"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CheckpointInfo> LoadCheckpoint(Zero2Optimizer& opt, const std::string& root) {
  comm::Communicator& comm = *opt.communicator();
  ZF_ASSIGN_OR_RETURN(const std::string dir, CheckpointDir(root));
  auto manifest = ReadManifest(dir);
  ZF_RETURN_IF_ERROR(AgreeOk(manifest.status(), comm));
  const Json& j = manifest->json;
  const std::string& manifest_path = manifest->path;
  CheckpointInfo info = manifest->info;
  LossScalerState state;
  // The reading part is local; every rank then agrees before the collective rebuild, so a rank that failed
  // to read never leaves the others waiting in the all-gather.
  std::vector<float>
      host_state[5];  // master, exp_avg, exp_avg_sq of this rank's shard; 8-bit moments' scales
  absl::Status local = [&]() -> absl::Status {
    try {
      const BucketPlan& plan = opt.plan();
      ZF_ASSIGN_OR_RETURN(const std::vector<size_t> to_plan,
                          PlanIndexOfManifestParams(plan, j, manifest_path));
      ZF_ASSIGN_OR_RETURN(const RankFiles files, ReadRankFiles(plan, j, to_plan, manifest_path));
      // Assembled on the host, then copied to wherever the state lives.
      ZF_RETURN_IF_ERROR(AssembleShard(plan, files, dir, manifest_path, opt.moment_scales(), host_state));
      const Json& sc = j.at("loss_scaler");
      state = LossScalerState{sc.at("scale").get<float>(), sc.at("good_steps").get<int>(),
                              sc.at("skipped").get<int64_t>()};
    } catch (const Json::exception& e) {
      return absl::DataLossError(absl::StrCat(manifest_path, ": malformed manifest: ", e.what()));
    }
    return absl::OkStatus();
  }();
  ZF_RETURN_IF_ERROR(AgreeOk(local, comm));
  if (opt.moment_scales() > 0) {
    ZF_RETURN_IF_ERROR(opt.CopyStateFromHostWithScales(host_state[0].data(), host_state[1].data(),
                                                       host_state[2].data(), host_state[3].data(),
                                                       host_state[4].data()));
  } else {
    ZF_RETURN_IF_ERROR(
        opt.CopyStateFromHost(host_state[0].data(), host_state[1].data(), host_state[2].data()));
  }
  ZF_RETURN_IF_ERROR(opt.RestoreFromShards(info.step, state));
  return info;
}

}  // namespace zerofit::sharding
