// Reading samples out of a prometheus-cpp registry in a test.
#pragma once

#include <prometheus/registry.h>

#include <map>
#include <string>

namespace stasis::testing {

// The value of the counter or gauge of `family` whose label `label` is `value`; -1 when the
// registry holds no such series.
inline double SampleValue(prometheus::Registry& registry, const std::string& family,
                          const std::string& label, const std::string& value) {
  for (const auto& f : registry.Collect()) {
    if (f.name != family) continue;
    for (const auto& m : f.metric) {
      for (const auto& l : m.label) {
        if (l.name != label || l.value != value) continue;
        return f.type == prometheus::MetricType::Gauge ? m.gauge.value : m.counter.value;
      }
    }
  }
  return -1;
}

// The sum over the series of `family` that carry every label of `want`: a counter's or gauge's
// value, a histogram's observation count.
inline double SampleSum(prometheus::Registry& registry, const std::string& family,
                        const std::map<std::string, std::string>& want) {
  double sum = 0;
  for (const auto& f : registry.Collect()) {
    if (f.name != family) continue;
    for (const auto& m : f.metric) {
      size_t matched = 0;
      for (const auto& l : m.label) matched += want.count(l.name) && want.at(l.name) == l.value;
      if (matched != want.size()) continue;
      sum += f.type == prometheus::MetricType::Histogram ? static_cast<double>(m.histogram.sample_count)
             : f.type == prometheus::MetricType::Gauge   ? m.gauge.value
                                                          : m.counter.value;
    }
  }
  return sum;
}

}  // namespace stasis::testing
