#include "tests/support/metrics_reference.h"

#include <cstdlib>
#include <fstream>
#include <sstream>

namespace stasis::testing {
namespace {

std::string Trim(std::string s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

std::string Unquote(std::string s) {
  s = Trim(s);
  std::string out;
  for (char c : s) {
    if (c != '`') out += c;
  }
  return Trim(out);
}

std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> cells;
  std::string t = Trim(line);
  if (t.size() < 2 || t.front() != '|' || t.back() != '|') return cells;
  std::string cur;
  for (size_t i = 1; i + 1 < t.size(); ++i) {
    if (t[i] == '|') {
      cells.push_back(Trim(cur));
      cur.clear();
    } else {
      cur += t[i];
    }
  }
  cells.push_back(Trim(cur));
  return cells;
}

std::vector<std::string> List(const std::string& cell) {
  std::vector<std::string> out;
  std::stringstream ss(cell);
  for (std::string item; std::getline(ss, item, ',');) {
    item = Unquote(item);
    if (!item.empty() && item != "—" && item != "-") out.push_back(item);
  }
  return out;
}

Result<double> Bound(const std::string& text) {
  std::string s = Trim(text);
  double mult = 1;
  for (const auto& [suffix, m] : {std::pair<const char*, double>{"Ki", 1024.0}, {"Mi", 1024.0 * 1024},
                                  {"Gi", 1024.0 * 1024 * 1024}}) {
    const std::string suf = suffix;
    if (s.size() > suf.size() && s.compare(s.size() - suf.size(), suf.size(), suf) == 0) {
      mult = m;
      s.resize(s.size() - suf.size());
      break;
    }
  }
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) return Status(Code::kInvalidArgument, "not a bound: " + text);
  return v * mult;
}

}  // namespace

Result<MetricsReference> LoadMetricsReference(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return Status(Code::kNotFound, "cannot read " + path.string());
  MetricsReference ref;
  enum { kNone, kFamilies, kBuckets } table = kNone;
  bool saw_families = false, saw_buckets = false;
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    ++n;
    auto cells = Cells(line);
    if (cells.empty()) {
      table = kNone;
      continue;
    }
    const std::string where = path.filename().string() + ":" + std::to_string(n) + ": ";
    if (cells[0] == "metric") {
      table = kFamilies;
      saw_families = true;
      continue;
    }
    if (cells[0] == "bucket set") {
      table = kBuckets;
      saw_buckets = true;
      continue;
    }
    if (cells[0].find_first_not_of("-: ") == std::string::npos) continue;  // |---|---|
    if (table == kFamilies) {
      if (cells.size() != 6) return Status(Code::kInvalidArgument, where + "a family row has 6 cells");
      DocumentedFamily f;
      f.name = Unquote(cells[0]);
      f.type = Unquote(cells[1]);
      for (auto& l : List(cells[2])) f.labels.insert(l);
      f.buckets = Unquote(cells[3]);
      if (f.buckets == "—" || f.buckets == "-") f.buckets.clear();
      for (auto& p : List(cells[4])) f.from.insert(p);
      if (f.name.empty() || (f.type != "counter" && f.type != "gauge" && f.type != "histogram")) {
        return Status(Code::kInvalidArgument, where + "bad name or type");
      }
      if ((f.type == "histogram") != !f.buckets.empty()) {
        return Status(Code::kInvalidArgument, where + "histograms, and only they, name a bucket set");
      }
      if (ref.families.count(f.name)) return Status(Code::kInvalidArgument, where + "duplicate " + f.name);
      ref.families[f.name] = f;
    } else if (table == kBuckets) {
      if (cells.size() != 2) return Status(Code::kInvalidArgument, where + "a bucket-set row has 2 cells");
      std::vector<double> bounds;
      for (auto& b : List(cells[1])) {
        auto v = Bound(b);
        if (!v.ok()) return Status(Code::kInvalidArgument, where + v.status().message());
        bounds.push_back(*v);
      }
      ref.bucket_sets[Unquote(cells[0])] = bounds;
    }
  }
  if (!saw_families || !saw_buckets) {
    return Status(Code::kInvalidArgument, path.string() + ": no \"| metric |\" or \"| bucket set |\" table");
  }
  for (const auto& [name, f] : ref.families) {
    if (!f.buckets.empty() && !ref.bucket_sets.count(f.buckets)) {
      return Status(Code::kInvalidArgument, name + " names an unknown bucket set " + f.buckets);
    }
  }
  return ref;
}

}  // namespace stasis::testing
