#include "worker/metrics/jsonl_sink.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace zerofit::worker::metrics {
namespace {

TEST(JsonlSinkTest, OneObjectPerStepWithNullForNonFinite) {
  StepMetrics m;
  m.step = 3;
  m.rank = 0;
  m.wall_time = 12.5;
  m.Set("loss", 0.25);
  m.Set("grad_norm", NAN);
  m.Set("lr", 1e-3);
  EXPECT_EQ(JsonlSink::FormatLine(m),
            "{\"step\": 3, \"rank\": 0, \"wall_time\": 12.500000, \"loss\": 0.25, \"grad_norm\": null, "
            "\"lr\": 0.001}");
}

TEST(JsonlSinkTest, AppendsLinesToAFileInANewDirectory) {
  const std::string dir = ::testing::TempDir() + "/zerofit_jsonl_test";
  std::filesystem::remove_all(dir);
  {
    auto sink = JsonlSink::Create(dir + "/sub/metrics.jsonl");
    ASSERT_TRUE(sink.ok()) << sink.status();
    for (int64_t s = 0; s < 3; ++s) {
      StepMetrics m;
      m.step = s;
      m.Set("loss", 1.0 / static_cast<double>(s + 1));
      ASSERT_TRUE((*sink)->Write(m).ok());
    }
    ASSERT_TRUE((*sink)->Flush().ok());
  }
  std::ifstream in(dir + "/sub/metrics.jsonl");
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    EXPECT_EQ(line.rfind("{\"step\": " + std::to_string(n) + ",", 0), 0u) << line;
    ++n;
  }
  EXPECT_EQ(n, 3);
  std::filesystem::remove_all(dir);
}

TEST(StepMetricsTest, SetReplacesAndKeepsOrder) {
  StepMetrics m;
  m.Set("b", 1);
  m.Set("a", 2);
  m.Set("b", 3);
  ASSERT_EQ(m.values.size(), 2u);
  EXPECT_EQ(m.values[0].name, "b");
  EXPECT_EQ(*m.Get("b"), 3);
  EXPECT_FALSE(m.Get("c").has_value());
  EXPECT_TRUE(IsValidMetricName("time/cpu_adamw_ms"));
  EXPECT_FALSE(IsValidMetricName("a b"));
  EXPECT_FALSE(IsValidMetricName(""));
  EXPECT_FALSE(IsValidMetricName(std::string(129, 'a')));
}

}  // namespace
}  // namespace zerofit::worker::metrics
