// `zerofit metrics --format`: table, JSON lines and CSV from the same rows; rows from workers without named
// metrics fall back to their fixed fields.
#include "cli/metrics_format.h"

#include <cmath>
#include <string>

#include "gtest/gtest.h"

namespace zerofit::cli {
namespace {

zerofit::v1::Metric Row(int64_t step, int rank, double lr) {
  zerofit::v1::Metric m;
  m.set_step(step);
  m.set_rank(rank);
  m.set_unix_us(1000 + step);
  for (const auto& [name, value] : {std::pair<const char*, double>{"loss", 0.5},
                                    {"lr", lr},
                                    {"clipped", 1.0},
                                    {"reward/margin", 0.25},
                                    {"grad_norm", NAN}}) {
    auto* v = m.add_values();
    v->set_name(name);
    v->set_value(value);
  }
  return m;
}

TEST(MetricsFormatTest, ParsesTheThreeFormats) {
  EXPECT_EQ(*ParseMetricsFormat("csv"), MetricsFormat::kCsv);
  EXPECT_EQ(*ParseMetricsFormat("json"), MetricsFormat::kJson);
  EXPECT_EQ(*ParseMetricsFormat("table"), MetricsFormat::kTable);
  EXPECT_FALSE(ParseMetricsFormat("yaml").ok());
}

TEST(MetricsFormatTest, CsvHasAHeaderAndEmptyCellsForNonFinite) {
  MetricsPrinter p(MetricsFormat::kCsv);
  EXPECT_EQ(p.Row(Row(0, 0, 2.5e-4)),
            "step,rank,unix_us,loss,lr,clipped,reward/margin,grad_norm\n0,0,1000,0.5,0.00025,1,0.25,\n");
  EXPECT_EQ(p.Row(Row(1, 1, 5e-4)), "1,1,1001,0.5,0.0005,1,0.25,\n");
}

TEST(MetricsFormatTest, JsonIsOneObjectPerLineWithNullForNonFinite) {
  MetricsPrinter p(MetricsFormat::kJson);
  EXPECT_EQ(p.Row(Row(3, 1, 1e-3)),
            "{\"step\": 3, \"rank\": 1, \"unix_us\": 1003, \"loss\": 0.5, \"lr\": 0.001, \"clipped\": 1, "
            "\"reward/margin\": 0.25, \"grad_norm\": null}\n");
}

TEST(MetricsFormatTest, TableShowsWhatPeopleWatchAndOldRowsTheirFixedFields) {
  MetricsPrinter p(MetricsFormat::kTable);
  const std::string first = p.Row(Row(0, 0, 2.5e-4));
  EXPECT_NE(first.find("grad-norm"), std::string::npos) << first;
  EXPECT_NE(first.find("2.500e-04"), std::string::npos) << first;
  EXPECT_NE(first.find(" yes "), std::string::npos) << first;
  EXPECT_NE(first.find("0.5000       - "), std::string::npos) << "a row without an accuracy: " << first;
  zerofit::v1::Metric sft;  // SFT: its token accuracy takes the column, its perplexity the margin's
  for (const auto& [name, value] : {std::pair<const char*, double>{"loss", 0.25},
                                    {"sft/mean_token_accuracy", 0.875},
                                    {"sft/perplexity", 1.284}}) {
    auto* v = sft.add_values();
    v->set_name(name);
    v->set_value(value);
  }
  const std::string sft_row = p.Row(sft);
  EXPECT_NE(sft_row.find("0.2500   0.875"), std::string::npos) << sft_row;
  EXPECT_NE(sft_row.find("1.2840"), std::string::npos) << sft_row;
  zerofit::v1::Metric old;
  old.set_step(7);
  old.set_loss(0.125);
  old.set_peak_bytes(int64_t{3} << 20);
  const std::string row = p.Row(old);
  EXPECT_NE(row.find("0.1250"), std::string::npos) << row;
  EXPECT_NE(row.find("3.0"), std::string::npos) << row;
}

}  // namespace
}  // namespace zerofit::cli
