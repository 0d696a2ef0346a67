// Reading one sample out of a prometheus-cpp registry in a test: the value of the counter or
// gauge of `family` whose label `label` is `value`.
#pragma once

#include <prometheus/registry.h>

#include <string>

namespace stasis::testing {

// -1 when the registry holds no such series.
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

}  // namespace stasis::testing
