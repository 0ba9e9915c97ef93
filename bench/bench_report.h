// gdr_bench's report: one Row per measured line (product against its baseline, the ratio and
// the aim it is held to) and the two ways it is printed, a table for people and one JSON document
// for scripts (bench/ab_compare.sh, the scale plot). docs/benchmarks.md explains every line.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "bench/report_text.h"

namespace gdrbench {

struct Row {
  std::string name;       // what the product number is
  std::string unit;       // "GB/s", "us", "ops/s"
  std::string baseline;   // what the baseline number is
  std::string aim;        // ">= 0.85"
  double aim_ratio = 0;
  bool higher_is_better = true;
  bool informational = false;  // no aim: the ratio is reported, not judged
  std::vector<double> product, base;  // one sample per repeat
  double product_median() const { return Median(product); }
  double base_median() const { return Median(base); }
  double ratio() const { return base_median() == 0 ? 0 : product_median() / base_median(); }
  bool met() const {
    if (informational) return true;
    return higher_is_better ? ratio() >= aim_ratio : ratio() <= aim_ratio;
  }
  const char* verdict() const { return informational ? "-" : (met() ? "yes" : "NO"); }
};

// A line with no aim of its own, printed beside the ones that have one.
inline Row InfoRow(std::string name, std::string unit, std::string baseline,
                   bool higher_is_better = true) {
  Row r;
  r.name = std::move(name);
  r.unit = std::move(unit);
  r.baseline = std::move(baseline);
  r.aim = "info";
  r.informational = true;
  r.higher_is_better = higher_is_better;
  return r;
}

// The table: the medians, ratio and verdict per row, then every sample.
void PrintTable(const std::vector<Row>& rows, int repeats, int warmup,
                const std::string& daemon_cmd);

// One JSON document on stdout. `scale`: the scale group's JSON object, or null when it did not
// run.
void PrintJson(const std::vector<Row>& rows, int repeats, int warmup,
               const std::string& daemon_cmd, const std::string* scale);

}  // namespace gdrbench
