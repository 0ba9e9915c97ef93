// The scale group's plot: GB/s against clients, product beside the raw TCP baseline, Write and
// Read. gdr_bench writes the scale JSON beside the PNG and hands both to bench/plot_scale.py,
// run with /usr/bin/python3 (Debian's python3-matplotlib). Without that python or matplotlib
// the JSON stays, so the plot can be made elsewhere with the same script.
#pragma once

#include <string>

namespace gdrbench {

// "scale.png" -> "scale.json"; a name without ".png" gets ".json" appended.
std::string PlotDataPath(const std::string& png);

struct PlotResult {
  bool plotted = false;
  std::string note;  // one line for the report: where the plot is, or why not and what to do
};

// Writes `json` to PlotDataPath(png) and runs plot_scale.py on it. Never fails the run: what
// went wrong is in the note.
PlotResult WriteScalePlot(const std::string& json, const std::string& png);

}  // namespace gdrbench
