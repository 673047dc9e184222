#include "core/safetensors.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace zerofit::core {
namespace {

using zerofit::test_support::TempDir;

namespace fs = std::filesystem;

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << path;
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A raw safetensors file: little-endian length, `header` verbatim, `data_bytes` bytes of data.
std::string RawFile(const std::string& header, size_t data_bytes, uint64_t header_len_override = 0) {
  const uint64_t n = header_len_override ? header_len_override : header.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  out += header;
  out.append(data_bytes, '\x5a');
  return out;
}

// Writes a raw file and returns the message of the error Open gives (or "OK").
std::string OpenError(const TempDir& dir, const std::string& bytes,
                      const std::string& name = "bad.safetensors") {
  const std::string path = dir.file(name);
  WriteBytes(path, bytes);
  auto f = SafetensorsFile::Open(path);
  return f.ok() ? std::string("OK") : std::string(f.status().message());
}

std::vector<uint8_t> RandomBytes(std::mt19937_64& rng, size_t n, bool boolean = false) {
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = static_cast<uint8_t>(boolean ? rng() & 1 : rng());
  return v;
}

struct Spec {
  std::string name;
  StDType dtype;
  std::vector<int64_t> shape;
};

size_t SpecBytes(const Spec& s) {
  size_t n = StDTypeSize(s.dtype);
  for (int64_t d : s.shape) n *= static_cast<size_t>(d);
  return n;
}

TEST(SafetensorsTest, DTypeNamesAndSizes) {
  EXPECT_EQ(StDTypeSize(StDType::kF64), 8u);
  EXPECT_EQ(StDTypeSize(StDType::kBF16), 2u);
  EXPECT_EQ(StDTypeSize(StDType::kBool), 1u);
  EXPECT_STREQ(StDTypeName(StDType::kBF16), "BF16");
  EXPECT_STREQ(StDTypeName(StDType::kBool), "BOOL");
}

TEST(SafetensorsTest, RoundTripIsBitExact) {
  TempDir dir;
  std::mt19937_64 rng(42);
  const std::vector<Spec> specs = {
      {"model.embed_tokens.weight", StDType::kBF16, {7, 5}},
      {"scalar", StDType::kF16, {}},  // 0-d: one element
      {"empty", StDType::kU8, {0, 3}},
      {"f32", StDType::kF32, {3, 4}},
      {"f64", StDType::kF64, {2, 2, 2}},
      {"i64", StDType::kI64, {3}},
      {"i32", StDType::kI32, {1}},
      {"i16", StDType::kI16, {7}},
      {"i8", StDType::kI8, {9}},
      {"mask", StDType::kBool, {4}},
      {"empty_f32", StDType::kF32, {0}},
  };
  std::vector<std::vector<uint8_t>> data;
  std::vector<StTensorToWrite> to_write;
  for (const Spec& s : specs) {
    data.push_back(RandomBytes(rng, SpecBytes(s), s.dtype == StDType::kBool));
    to_write.push_back({s.name, s.dtype, s.shape, data.back().empty() ? nullptr : data.back().data()});
  }
  const std::map<std::string, std::string> metadata = {{"format", "pt"}, {"note", "ünïcode ok"}};
  const std::string path = dir.file("model.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, to_write, metadata).ok());

  // Header padded to 8 bytes, so the data section is 8-byte aligned; no temporary file left behind.
  const std::string raw = ReadBytes(path);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(raw[i]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);

  auto f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->metadata(), metadata);
  ASSERT_EQ(f->tensors().size(), specs.size());
  size_t offset = 0;
  for (size_t i = 0; i < specs.size(); ++i) {
    const StTensorInfo& t = f->tensors()[i];  // header order == write order
    EXPECT_EQ(t.name, specs[i].name);
    EXPECT_EQ(t.dtype, specs[i].dtype);
    EXPECT_EQ(t.shape, specs[i].shape);
    EXPECT_EQ(t.begin, offset);  // contiguous
    EXPECT_EQ(t.bytes(), data[i].size());
    offset = t.end;
    std::vector<uint8_t> back(t.bytes(), 0);
    ASSERT_TRUE(f->Read(t.name, back.data(), back.size()).ok()) << t.name;
    EXPECT_EQ(back, data[i]) << t.name;
  }
  EXPECT_EQ(f->Find("scalar")->numel(), 1);
  EXPECT_EQ(f->Find("empty")->numel(), 0);
  EXPECT_EQ(f->Find("f64")->numel(), 8);
  EXPECT_EQ(f->Find("absent"), nullptr);

  // Moving keeps the descriptor usable.
  SafetensorsFile moved = std::move(*f);
  std::vector<uint8_t> back(data[3].size());
  EXPECT_TRUE(moved.Read("f32", back.data(), back.size()).ok());
  EXPECT_EQ(back, data[3]);
}

TEST(SafetensorsTest, EmptyFileAndOverwrite) {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, {}).ok());
  auto f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_TRUE(f->tensors().empty());
  EXPECT_TRUE(f->metadata().empty());

  const float v[2] = {1.5f, -2.0f};
  ASSERT_TRUE(WriteSafetensors(path, {{"v", StDType::kF32, {2}, v}}).ok());  // replaces atomically
  auto g = SafetensorsFile::Open(path);
  ASSERT_TRUE(g.ok()) << g.status();
  float back[2] = {0, 0};
  ASSERT_TRUE(g->Read("v", back, sizeof(back)).ok());
  EXPECT_EQ(std::memcmp(back, v, sizeof(v)), 0);
}

TEST(SafetensorsTest, ReadChecksNameAndSize) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  const int32_t v[3] = {1, 2, 3};
  ASSERT_TRUE(WriteSafetensors(path, {{"w", StDType::kI32, {3}, v}}).ok());
  auto f = SafetensorsFile::Open(path);
  ASSERT_TRUE(f.ok());
  int32_t back[4];
  absl::Status s = f->Read("w", back, 16);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tensor 'w': destination holds 16 bytes but the tensor has 12"),
            std::string::npos)
      << s;
  s = f->Read("nope", back, 12);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("no tensor 'nope'"), std::string::npos) << s;
}

TEST(SafetensorsTest, WriterValidatesInputs) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  const float v[4] = {};
  absl::Status s = WriteSafetensors(path, {{"a", StDType::kF32, {4}, nullptr}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tensor 'a': data is null but the tensor has 16 bytes"), std::string::npos) << s;
  s = WriteSafetensors(path, {{"a", StDType::kF32, {4}, v}, {"a", StDType::kF32, {4}, v}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tensor 'a': name appears twice"), std::string::npos) << s;
  s = WriteSafetensors(path, {{"__metadata__", StDType::kF32, {4}, v}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  s = WriteSafetensors(path, {{"neg", StDType::kF32, {-1}, v}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("tensor 'neg': shape [-1]"), std::string::npos) << s;
  EXPECT_FALSE(fs::exists(path));
  EXPECT_TRUE(fs::is_empty(dir.path()));  // nothing half-written, no temporary left
  // Null data is fine for an empty tensor.
  EXPECT_TRUE(WriteSafetensors(path, {{"e", StDType::kF32, {0, 4}, nullptr}}).ok());
}

TEST(SafetensorsTest, TruncatedFilesAreRejected) {
  TempDir dir;
  std::mt19937_64 rng(7);
  const auto a = RandomBytes(rng, 64), b = RandomBytes(rng, 40);
  const std::string good = dir.file("good.safetensors");
  ASSERT_TRUE(WriteSafetensors(good,
                               {{"a", StDType::kF32, {16}, a.data()}, {"b", StDType::kBF16, {20}, b.data()}},
                               {{"k", "v"}})
                  .ok());
  const std::string raw = ReadBytes(good);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(raw[i]);
  ASSERT_EQ(raw.size(), 8 + n + 104);
  struct Cut {
    size_t at;
    const char* expect;
  };
  const Cut cuts[] = {
      {0, "too short for the 8-byte header length"},
      {5, "too short for the 8-byte header length"},
      {8, "is larger than the 0 bytes that follow it"},
      {12, "is larger than the 4 bytes that follow it"},
      {8 + n / 2, "bytes that follow it in the file"},  // inside the header
      {8 + n - 1, "bytes that follow it in the file"},
      {8 + n, "past the data section, which holds 0 bytes"},                         // header intact, no data
      {8 + n + 30, "past the data section, which holds 30 bytes"},                   // inside tensor a
      {8 + n + 64, "tensor 'b': data_offsets [64, 104] end past the data section"},  // inside tensor b
      {raw.size() - 1, "tensor 'b': data_offsets [64, 104] end past the data section, which holds 103 bytes"},
  };
  for (const Cut& c : cuts) {
    const std::string msg = OpenError(dir, raw.substr(0, c.at), "cut.safetensors");
    EXPECT_NE(msg.find(dir.file("cut.safetensors")), std::string::npos) << "cut at " << c.at << ": " << msg;
    EXPECT_NE(msg.find(c.expect), std::string::npos) << "cut at " << c.at << ": " << msg;
  }
}

TEST(SafetensorsTest, MalformedHeadersNameFileTensorAndField) {
  TempDir dir;
  const std::string p = dir.file("bad.safetensors");
  struct Case {
    std::string header;
    size_t data_bytes;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})", 8, "not valid JSON"},
      {R"([1, 2])", 0, "header must be a JSON object, got array"},
      {R"({"w": {"dtype": "F8", "shape": [2], "data_offsets": [0, 2]}})", 2,
       "tensor 'w': field 'dtype': unknown dtype \"F8\""},
      {R"({"w": {"dtype": 3, "shape": [2], "data_offsets": [0, 8]}})", 8,
       "tensor 'w': field 'dtype' must be a string"},
      {R"({"w": {"shape": [2], "data_offsets": [0, 8]}})", 8, "tensor 'w': field 'dtype' is missing"},
      {R"({"w": {"dtype": "F32", "data_offsets": [0, 8]}})", 8, "tensor 'w': field 'shape' is missing"},
      {R"({"w": {"dtype": "F32", "shape": [2]}})", 8, "tensor 'w': field 'data_offsets' is missing"},
      {R"({"w": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}})", 8,
       "tensor 'w': field 'shape': entry 0 is -2, not a non-negative integer"},
      {R"({"w": {"dtype": "F32", "shape": [2.5], "data_offsets": [0, 8]}})", 8,
       "tensor 'w': field 'shape': entry 0 is 2.5"},
      {R"({"w": {"dtype": "F32", "shape": "2", "data_offsets": [0, 8]}})", 8,
       "tensor 'w': field 'shape' must be an array"},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0]}})", 8,
       "tensor 'w': field 'data_offsets' must be [begin, end]"},
      {R"({"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, -8]}})", 8,
       "tensor 'w': field 'data_offsets' must be [begin, end]"},
      {R"({"w": {"dtype": "F32", "shape": [0], "data_offsets": [8, 0]}})", 8,
       "tensor 'w': data_offsets [8, 0]: begin is after end"},
      {R"({"model.norm.weight": {"dtype": "F32", "shape": [4], "data_offsets": [0, 10]}})", 10,
       "tensor 'model.norm.weight': data_offsets [0, 10] hold 10 bytes but shape [4] of F32 needs 16"},
      {R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]}})", 8,
       "tensor 'w': shape [4294967296, 4294967296] of F32 overflows"},
      {R"({"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}})", 8,
       "tensor 'w': data_offsets [0, 16] end past the data section, which holds 8 bytes"},
      {R"({"a": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
           "b": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
       24, "tensor 'b': data_offsets [8, 24] overlap tensor 'a' at [0, 16]"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "b": {"dtype": "F32", "shape": [2], "data_offsets": [16, 24]}})",
       24, "tensor 'b': data_offsets [16, 24] leave a hole: bytes [8, 16)"},
      {R"({"b": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})", 16,
       "tensor 'b': data_offsets [8, 16] leave a hole: bytes [0, 8)"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}})", 12,
       "4 trailing bytes belong to no tensor"},
      {R"({"__metadata__": {"format": "pt", "step": 3}})", 0,
       "field '__metadata__': value of 'step' must be a string, got number 3"},
      {R"({"__metadata__": ["pt"]})", 0, "field '__metadata__' must be an object of strings, got array"},
      {R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
           "a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 16]}})",
       16, "header has key 'a' twice"},
      {R"({"w": [1, 2]})", 0, "tensor 'w': entry must be an object"},
      // Nesting is bounded before parsing: 100,000 levels overflowed the stack when an error message
      // dumped the value.
      {R"({"__metadata__": {"k": )" + std::string(100000, '[') + std::string(100000, ']') + "}}", 0,
       "header:1: JSON nested deeper than 64 levels"},
      {R"({"w": )" + std::string(65, '[') + std::string(65, ']') + "}", 0,
       "header:1: JSON nested deeper than 64 levels"},
  };
  for (const Case& c : cases) {
    const std::string msg = OpenError(dir, RawFile(c.header, c.data_bytes));
    EXPECT_EQ(msg.rfind(p + ": ", 0), 0u) << msg;  // starts with the path
    EXPECT_NE(msg.find(c.expect), std::string::npos) << "header " << c.header << "\n got: " << msg;
  }
  // Header length past the end of the file, and past the sanity cap.
  std::string msg = OpenError(dir, RawFile("{}", 0, 1000));
  EXPECT_NE(msg.find("header length 1000 is larger than the 2 bytes that follow it"), std::string::npos)
      << msg;
  msg = OpenError(dir, RawFile("{}", 0, 200'000'000));
  EXPECT_NE(msg.find("header length 200000000 exceeds the limit"), std::string::npos) << msg;
  // A directory is not a safetensors file.
  auto f = SafetensorsFile::Open(dir.path());
  EXPECT_FALSE(f.ok());
  f = SafetensorsFile::Open(dir.file("missing.safetensors"));
  EXPECT_EQ(f.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(f.status().message().find("missing.safetensors"), std::string::npos);
  // Valid edge cases: empty tensors share offsets with their neighbours, padding spaces after the JSON.
  EXPECT_EQ(OpenError(dir, RawFile(R"({"e": {"dtype": "F32", "shape": [0], "data_offsets": [8, 8]},
                                       "a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                       "z": {"dtype": "BOOL", "shape": [0, 7], "data_offsets": [0, 0]}}   )",
                                   8)),
            "OK");
}

TEST(SafetensorsTest, RandomHeaderCorruptionNeverCrashes) {
  TempDir dir;
  std::mt19937_64 rng(1234);
  const auto a = RandomBytes(rng, 48), b = RandomBytes(rng, 6), c = RandomBytes(rng, 8);
  const std::string good = dir.file("good.safetensors");
  ASSERT_TRUE(WriteSafetensors(good,
                               {{"layers.0.weight", StDType::kF32, {3, 4}, a.data()},
                                {"layers.0.bias", StDType::kBF16, {3}, b.data()},
                                {"step", StDType::kI64, {}, c.data()},
                                {"none", StDType::kU8, {0}, nullptr}},
                               {{"format", "pt"}})
                  .ok());
  const std::string raw = ReadBytes(good);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(raw[i]);
  const std::string path = dir.file("fuzz.safetensors");
  int ok = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bad = raw;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int k = 0; k < flips; ++k) {
      const size_t pos = rng() % (8 + n);  // the length prefix or the header
      bad[pos] = static_cast<char>(iter % 2 ? rng() : (bad[pos] ^ (1u << (rng() % 8))));
    }
    WriteBytes(path, bad);
    auto f = SafetensorsFile::Open(path);
    if (!f.ok()) {
      EXPECT_FALSE(f.status().message().empty());
      continue;
    }
    ++ok;
    for (const StTensorInfo& t : f->tensors()) {  // whatever survived validation must be readable
      std::vector<char> buf(t.bytes());
      EXPECT_TRUE(f->Read(t.name, buf.data(), buf.size()).ok()) << t.name;
    }
  }
  EXPECT_LT(ok, 2000);  // most corruptions are detected
}

// Writes `tensors` split into shards plus an index, as save_pretrained does.
TEST(SafetensorsModelTest, ShardedDirectoryRoundTrip) {
  TempDir dir;
  std::mt19937_64 rng(99);
  const std::vector<Spec> specs = {{"model.embed_tokens.weight", StDType::kBF16, {16, 8}},
                                   {"model.layers.0.self_attn.q_proj.weight", StDType::kBF16, {8, 8}},
                                   {"model.layers.0.input_layernorm.weight", StDType::kF32, {8}},
                                   {"model.norm.weight", StDType::kF32, {8}},
                                   {"lm_head.weight", StDType::kBF16, {16, 8}}};
  std::map<std::string, std::vector<uint8_t>> data;
  std::vector<StTensorToWrite> shard1, shard2;
  for (size_t i = 0; i < specs.size(); ++i) {
    data[specs[i].name] = RandomBytes(rng, SpecBytes(specs[i]));
    (i < 2 ? shard1 : shard2)
        .push_back({specs[i].name, specs[i].dtype, specs[i].shape, data[specs[i].name].data()});
  }
  const std::string s1 = "model-00001-of-00002.safetensors", s2 = "model-00002-of-00002.safetensors";
  ASSERT_TRUE(WriteSafetensors(dir.file(s1), shard1, {{"format", "pt"}}).ok());
  ASSERT_TRUE(WriteSafetensors(dir.file(s2), shard2, {{"format", "pt"}}).ok());
  std::string index = R"({"metadata": {"total_size": 1000}, "weight_map": {)";
  for (size_t i = 0; i < specs.size(); ++i) {
    index += (i ? ", \"" : "\"") + specs[i].name + "\": \"" + (i < 2 ? s1 : s2) + "\"";
  }
  index += "}}";
  WriteBytes(dir.file("model.safetensors.index.json"), index);

  auto m = SafetensorsModel::Open(dir.path());
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<std::string> want;
  for (const Spec& s : specs) want.push_back(s.name);
  std::sort(want.begin(), want.end());
  EXPECT_EQ(m->names(), want);
  for (const Spec& s : specs) {
    const StTensorInfo* t = m->Find(s.name);
    ASSERT_NE(t, nullptr) << s.name;
    EXPECT_EQ(t->shape, s.shape);
    std::vector<uint8_t> back(t->bytes());
    ASSERT_TRUE(m->Read(s.name, back.data(), back.size()).ok());
    EXPECT_EQ(back, data[s.name]) << s.name;
  }
  EXPECT_EQ(m->Find("nope"), nullptr);
  EXPECT_EQ(m->Read("nope", nullptr, 0).code(), absl::StatusCode::kNotFound);

  // A tensor present in a shard but missing from weight_map is still part of the model.
  std::string partial = index;
  partial.replace(partial.find("\"model.norm.weight\""),
                  std::string("\"model.norm.weight\": \"" + s2 + "\", ").size(), "");
  WriteBytes(dir.file("model.safetensors.index.json"), partial);
  m = SafetensorsModel::Open(dir.path());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_NE(m->Find("model.norm.weight"), nullptr);

  // A single shard opened by file path.
  m = SafetensorsModel::Open(dir.file(s2));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->names().size(), 3u);
}

TEST(SafetensorsModelTest, SingleFileDirectory) {
  TempDir dir;
  const float v[2] = {3.0f, 4.0f};
  ASSERT_TRUE(WriteSafetensors(dir.file("model.safetensors"), {{"w", StDType::kF32, {2}, v}}).ok());
  auto m = SafetensorsModel::Open(dir.path());
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->names(), std::vector<std::string>{"w"});
  float back[2];
  ASSERT_TRUE(m->Read("w", back, sizeof(back)).ok());
  EXPECT_EQ(back[1], 4.0f);

  TempDir empty;
  auto e = SafetensorsModel::Open(empty.path());
  EXPECT_EQ(e.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(e.status().message().find("neither model.safetensors.index.json nor model.safetensors"),
            std::string::npos)
      << e.status();
}

TEST(SafetensorsModelTest, BadIndexesAreRejected) {
  TempDir dir;
  const float v[2] = {1, 2};
  ASSERT_TRUE(WriteSafetensors(dir.file("a.safetensors"), {{"x", StDType::kF32, {2}, v}}).ok());
  ASSERT_TRUE(WriteSafetensors(dir.file("b.safetensors"),
                               {{"y", StDType::kF32, {2}, v}, {"x", StDType::kF32, {2}, v}})
                  .ok());
  const std::string index_path = dir.file("model.safetensors.index.json");
  struct Case {
    std::string index;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {R"({"weight_map": {"x": "a.safetensors", "z": "missing.safetensors"}})",
       "weight_map['z']: shard 'missing.safetensors' cannot be opened"},
      {R"({"weight_map": {"w": "a.safetensors"}})",
       "weight_map['w']: shard 'a.safetensors' has no tensor 'w'"},
      {R"({"weight_map": {"x": "a.safetensors", "y": "b.safetensors"}})", "tensor 'x' is in both"},
      {R"({"weight_map": {"x": 3}})", "weight_map['x']: shard must be a file name string"},
      {R"({"weight_map": {"x": "../a.safetensors"}})", "is not a file name inside the model directory"},
      {R"({"weight_map": ["x"]})", "field 'weight_map' must be an object"},
      {R"({"metadata": {}})", "field 'weight_map' is missing"},
      {R"({"weight_map": {"x": "a.safetensors"})", "index is not valid JSON"},
  };
  for (const Case& c : cases) {
    WriteBytes(index_path, c.index);
    auto m = SafetensorsModel::Open(dir.path());
    ASSERT_FALSE(m.ok()) << c.index;
    const std::string msg(m.status().message());
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.index << "\n got: " << msg;
    if (c.expect.rfind("tensor 'x' is in both", 0) != 0) {
      EXPECT_EQ(msg.rfind(index_path + ": ", 0), 0u) << msg;  // names the index file
    }
  }
  // A corrupt shard: the error names the index entry and the shard's own problem.
  WriteBytes(dir.file("c.safetensors"), RawFile("{", 0));
  WriteBytes(index_path, R"({"weight_map": {"x": "c.safetensors"}})");
  auto m = SafetensorsModel::Open(dir.path());
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("weight_map['x']: shard 'c.safetensors' cannot be opened"),
            std::string::npos);
  EXPECT_NE(m.status().message().find("c.safetensors: header is not valid JSON"), std::string::npos)
      << m.status();
}

}  // namespace
}  // namespace zerofit::core
