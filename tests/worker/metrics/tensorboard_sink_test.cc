// TensorBoard event files, checked by a reader written here from the format's specification alone (TFRecord
// framing, protobuf wire format, CRC-32C), sharing no code with the writer: its own bitwise CRC-32C, its own
// varint and field parsing.
#include "worker/metrics/tensorboard_sink.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace zerofit::worker::metrics {
namespace {

// --- the independent reader --------------------------------------------------------------------------------

uint32_t BitwiseCrc32c(const std::string& bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char b : bytes) {
    crc ^= b;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1u)));
  }
  return ~crc;
}
uint32_t Masked(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

uint64_t ReadLe(const std::string& s, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(s.at(at + i));
  return v;
}

struct Field {
  int number = 0;
  int wire_type = 0;
  uint64_t varint = 0;  // wire types 0, 1 (raw bits), 5 (raw bits)
  std::string bytes;    // wire type 2
};

// Parses one protobuf message into its fields; fails the test on malformed input.
std::vector<Field> ParseMessage(const std::string& msg) {
  std::vector<Field> fields;
  size_t i = 0;
  auto varint = [&]() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      const auto b = static_cast<unsigned char>(msg.at(i++));
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
    ADD_FAILURE() << "varint too long";
    return v;
  };
  while (i < msg.size()) {
    const uint64_t key = varint();
    Field f;
    f.number = static_cast<int>(key >> 3);
    f.wire_type = static_cast<int>(key & 7);
    if (f.wire_type == 0) {
      f.varint = varint();
    } else if (f.wire_type == 1) {
      f.varint = ReadLe(msg, i, 8);
      i += 8;
    } else if (f.wire_type == 5) {
      f.varint = ReadLe(msg, i, 4);
      i += 4;
    } else if (f.wire_type == 2) {
      const uint64_t n = varint();
      f.bytes = msg.substr(i, n);
      EXPECT_EQ(f.bytes.size(), n) << "truncated field";
      i += n;
    } else {
      ADD_FAILURE() << "unexpected wire type " << f.wire_type;
      return fields;
    }
    fields.push_back(f);
  }
  return fields;
}

struct Event {
  double wall_time = -1;
  int64_t step = -1;
  std::string file_version;
  std::vector<std::pair<std::string, float>> values;
};

Event DecodeEvent(const std::string& data) {
  Event e;
  for (const Field& f : ParseMessage(data)) {
    if (f.number == 1 && f.wire_type == 1) {
      std::memcpy(&e.wall_time, &f.varint, 8);
    } else if (f.number == 2 && f.wire_type == 0) {
      e.step = static_cast<int64_t>(f.varint);
    } else if (f.number == 3 && f.wire_type == 2) {
      e.file_version = f.bytes;
    } else if (f.number == 5 && f.wire_type == 2) {
      for (const Field& value : ParseMessage(f.bytes)) {
        EXPECT_EQ(value.number, 1);
        std::string tag;
        float simple = NAN;
        for (const Field& vf : ParseMessage(value.bytes)) {
          if (vf.number == 1 && vf.wire_type == 2) tag = vf.bytes;
          if (vf.number == 2 && vf.wire_type == 5) {
            const auto bits = static_cast<uint32_t>(vf.varint);
            std::memcpy(&simple, &bits, 4);
          }
        }
        e.values.emplace_back(tag, simple);
      }
    } else {
      ADD_FAILURE() << "unexpected Event field " << f.number;
    }
  }
  return e;
}

// Every record of a TFRecord file, both CRCs checked.
std::vector<Event> ReadEventFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string file = ss.str();
  std::vector<Event> events;
  size_t at = 0;
  while (at < file.size()) {
    EXPECT_LE(at + 12, file.size()) << "truncated header";
    if (at + 12 > file.size()) break;
    const uint64_t length = ReadLe(file, at, 8);
    EXPECT_EQ(ReadLe(file, at + 8, 4), Masked(BitwiseCrc32c(file.substr(at, 8))))
        << "length CRC, record " << events.size();
    EXPECT_LE(at + 12 + length + 4, file.size()) << "truncated record";
    if (at + 12 + length + 4 > file.size()) break;
    const std::string data = file.substr(at + 12, length);
    EXPECT_EQ(ReadLe(file, at + 12 + length, 4), Masked(BitwiseCrc32c(data)))
        << "data CRC, record " << events.size();
    events.push_back(DecodeEvent(data));
    at += 12 + length + 4;
  }
  return events;
}

// --- the tests
// ----------------------------------------------------------------------------------------------

TEST(TensorBoardSinkTest, TheReadersCrcMatchesTheStandardCheckValue) {
  EXPECT_EQ(BitwiseCrc32c("123456789"), 0xE3069283u);  // CRC-32C's published check value
}

TEST(TensorBoardSinkTest, AnIndependentReaderDecodesEveryValueAndStep) {
  const std::string dir = ::testing::TempDir() + "/zerofit_tb_test";
  std::filesystem::remove_all(dir);
  auto sink = TensorBoardSink::Create(dir, "node7", 1700000000.5);
  ASSERT_TRUE(sink.ok()) << sink.status();
  EXPECT_EQ((*sink)->path(), dir + "/events.out.tfevents.1700000000.node7");
  std::vector<StepMetrics> written;
  for (int64_t step :
       {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{300}, int64_t{1} << 40}) {  // a 6-byte varint step too
    StepMetrics m;
    m.step = step;
    m.wall_time = 1700000001.25 + static_cast<double>(step % 1000);
    m.Set("loss", 0.6931 - 0.01 * static_cast<double>(step % 7));
    m.Set("lr", 1e-4 * static_cast<double>(step % 11 + 1));
    m.Set("reward/margin", -3.5);
    m.Set("time/cpu_adamw_ms", 12.75);
    ASSERT_TRUE((*sink)->Write(m).ok());
    written.push_back(m);
  }
  ASSERT_TRUE((*sink)->Flush().ok());

  const std::vector<Event> events = ReadEventFile((*sink)->path());
  ASSERT_EQ(events.size(), written.size() + 1);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_EQ(events[0].wall_time, 1700000000.5);
  for (size_t i = 0; i < written.size(); ++i) {
    const Event& e = events[i + 1];
    EXPECT_EQ(e.step, written[i].step);
    EXPECT_EQ(e.wall_time, written[i].wall_time);
    ASSERT_EQ(e.values.size(), written[i].values.size());
    for (size_t k = 0; k < e.values.size(); ++k) {
      EXPECT_EQ(e.values[k].first, written[i].values[k].name);
      EXPECT_EQ(e.values[k].second, static_cast<float>(written[i].values[k].value)) << e.values[k].first;
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(TensorBoardSinkTest, AFlippedByteFailsTheDataCrc) {
  StepMetrics m;
  m.step = 5;
  m.Set("loss", 1.0);
  std::string record = TensorBoardSink::FrameRecord(TensorBoardSink::EncodeStepEvent(m));
  const uint64_t length = ReadLe(record, 0, 8);
  EXPECT_EQ(ReadLe(record, 12 + length, 4), Masked(BitwiseCrc32c(record.substr(12, length))));
  record[14] ^= 1;
  EXPECT_NE(ReadLe(record, 12 + length, 4), Masked(BitwiseCrc32c(record.substr(12, length))));
}

}  // namespace
}  // namespace zerofit::worker::metrics
