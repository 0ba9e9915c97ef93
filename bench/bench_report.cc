// gdr_bench's report printed as a table or as JSON (bench/bench_report.h).
#include "bench/bench_report.h"

#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/base/json.h"

namespace gdrbench {
namespace {

std::string FormatValue(double v, const std::string& unit) {
  if (unit == "GB/s") return absl::StrFormat("%.3f", v);
  if (unit == "us" || unit == "%") return absl::StrFormat("%.1f", v);
  return absl::StrFormat("%.0f", v);
}

std::string Samples(const std::vector<double>& v, const std::string& unit) {
  std::vector<std::string> parts;
  for (double x : v) parts.push_back(FormatValue(x, unit));
  return absl::StrJoin(parts, ",");
}

}  // namespace

void PrintTable(const std::vector<Row>& rows, int repeats, int warmup,
                const std::string& daemon_cmd) {
  std::printf("gdr_bench: %d repeats (median shown) after %d warm-up, nproc %u, CPU %s\n",
              repeats, warmup, std::thread::hardware_concurrency(), MachineCpu().c_str());
  std::printf("daemon: %s\n\n", daemon_cmd.c_str());
  std::printf("%-46s %12s   %-34s %12s %7s  %-7s %s\n", "measurement", "product", "baseline",
              "baseline", "ratio", "aim", "met");
  for (const Row& r : rows) {
    std::printf("%-46s %12s   %-34s %12s %7.2f  %-7s %s\n",
                absl::StrCat(r.name, " [", r.unit, "]").c_str(),
                FormatValue(r.product_median(), r.unit).c_str(), r.baseline.c_str(),
                FormatValue(r.base_median(), r.unit).c_str(), r.ratio(), r.aim.c_str(),
                r.verdict());
  }
  std::printf("\nsamples (product | baseline):\n");
  for (const Row& r : rows) {
    std::printf("  %-46s %s | %s\n", r.name.c_str(), Samples(r.product, r.unit).c_str(),
                Samples(r.base, r.unit).c_str());
  }
}

void PrintJson(const std::vector<Row>& rows, int repeats, int warmup,
               const std::string& daemon_cmd, const std::string* scale) {
  using gdr::json::Fixed;
  using gdr::json::Json;
  Json rows_json = Json::array();
  for (const Row& r : rows) {
    rows_json.push_back({{"name", r.name},
                         {"unit", r.unit},
                         {"product", Fixed(r.product_median(), 4)},
                         {"baseline_name", r.baseline},
                         {"baseline", Fixed(r.base_median(), 4)},
                         {"ratio", Fixed(r.ratio(), 4)},
                         {"aim", r.aim},
                         {"met", r.met()},
                         {"product_samples", r.product},
                         {"baseline_samples", r.base}});
  }
  Json doc = {{"repeats", repeats},
              {"warmup", warmup},
              {"nproc", std::thread::hardware_concurrency()},
              {"cpu", MachineCpu()},
              {"daemon", daemon_cmd},
              {"rows", std::move(rows_json)}};
  if (scale) doc["scale"] = Json::parse(*scale);
  std::fputs((gdr::json::Dump(doc) + "\n").c_str(), stdout);
}

}  // namespace gdrbench
