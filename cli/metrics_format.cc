#include "cli/metrics_format.h"

#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace zerofit::cli {
namespace {

// The named values of a row; for a row without any, its fixed fields.
std::vector<std::pair<std::string, double>> Values(const zerofit::v1::Metric& m) {
  std::vector<std::pair<std::string, double>> out;
  for (const auto& v : m.values()) out.emplace_back(v.name(), v.value());
  if (out.empty()) {
    out = {{"loss", m.loss()},
           {"accuracy", m.accuracy()},
           {"tokens_per_s", m.tokens_per_s()},
           {"host_peak_rss_bytes", static_cast<double>(m.peak_bytes())}};
  }
  return out;
}

std::string Number(double v) { return std::isfinite(v) ? absl::StrFormat("%.9g", v) : std::string(); }

}  // namespace

absl::StatusOr<MetricsFormat> ParseMetricsFormat(const std::string& name) {
  if (name == "table") return MetricsFormat::kTable;
  if (name == "json") return MetricsFormat::kJson;
  if (name == "csv") return MetricsFormat::kCsv;
  return absl::InvalidArgumentError(absl::StrCat("--format '", name, "': expected table, json or csv"));
}

std::string MetricsPrinter::Row(const zerofit::v1::Metric& m) {
  std::string out;
  if (format_ == MetricsFormat::kTable) {
    out = TableRow(m);
  } else if (format_ == MetricsFormat::kCsv) {
    out = CsvRow(m);
  } else {
    out = absl::StrFormat("{\"step\": %d, \"rank\": %d, \"unix_us\": %d", m.step(), m.rank(), m.unix_us());
    for (const auto& [name, value] : Values(m)) {
      // Names were checked by the coordinator ([A-Za-z0-9_./-]): nothing to escape.
      absl::StrAppend(&out, ", \"", name, "\": ", std::isfinite(value) ? Number(value) : "null");
    }
    out += "}\n";
  }
  ++rows_;
  return out;
}

std::string MetricsPrinter::TableRow(const zerofit::v1::Metric& m) {
  std::string out;
  if (rows_ % 40 == 0) {
    out = absl::StrFormat("%6s %5s %9s %7s %10s %10s %4s %10s %10s %10s\n", "step", "rank", "loss", "acc",
                          "lr", "grad-norm", "clip", "margin", "samples/s", "peak MiB");
  }
  std::map<std::string, double> v;
  for (const auto& [name, value] : Values(m)) v.emplace(name, value);
  auto get = [&](const char* name) { return v.count(name) ? v[name] : NAN; };
  double margin = get("reward/margin");
  if (std::isnan(margin)) margin = get("dpo/margin");
  if (std::isnan(margin)) margin = get("sft/perplexity");  // SFT: the perplexity takes the column
  const double clipped = get("clipped");
  double accuracy = get("accuracy");
  if (std::isnan(accuracy)) accuracy = get("sft/mean_token_accuracy");  // SFT: its token accuracy
  absl::StrAppendFormat(&out, "%6d %5d %9.4f %7s %10.3e %10.4f %4s %10.4f %10.1f %10.1f\n", m.step(),
                        m.rank(), get("loss"), std::isnan(accuracy) ? "-" : absl::StrFormat("%.3f", accuracy),
                        get("lr"), get("grad_norm"), std::isnan(clipped) ? "-" : (clipped > 0 ? "yes" : "no"),
                        margin, get("samples_per_s"), get("host_peak_rss_bytes") / 1048576.0);
  return out;
}

std::string MetricsPrinter::CsvRow(const zerofit::v1::Metric& m) {
  const auto values = Values(m);
  std::string out;
  if (rows_ == 0) {
    out = "step,rank,unix_us";
    for (const auto& [name, value] : values) {
      csv_columns_.push_back(name);
      absl::StrAppend(&out, ",", name);
    }
    out += "\n";
  }
  std::map<std::string, double> v(values.begin(), values.end());
  absl::StrAppendFormat(&out, "%d,%d,%d", m.step(), m.rank(), m.unix_us());
  for (const std::string& name : csv_columns_) {
    auto it = v.find(name);
    absl::StrAppend(&out, ",", it == v.end() ? "" : Number(it->second));
  }
  out += "\n";
  return out;
}

}  // namespace zerofit::cli
