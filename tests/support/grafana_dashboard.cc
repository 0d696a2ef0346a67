#include "tests/support/grafana_dashboard.h"

#include <cctype>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

namespace stasis::testing {
namespace {

using json = nlohmann::json;

std::string DatasourceUid(const json& j) {
  if (!j.contains("datasource")) return "";
  const json& d = j["datasource"];
  if (d.is_string()) return d.get<std::string>();
  if (d.is_object()) return d.value("uid", "");
  return "";
}

Status AddPanels(const json& panels, Dashboard& out) {
  if (!panels.is_array()) return OkStatus();
  for (const auto& p : panels) {
    const std::string type = p.value("type", "");
    if (type == "row") {
      if (Status s = AddPanels(p.value("panels", json::array()), out); !s.ok()) return s;
      continue;
    }
    const std::string title = p.value("title", "");
    out.panel_titles.push_back(title);
    out.datasource_uids.push_back(DatasourceUid(p));
    for (const auto& t : p.value("targets", json::array())) {
      if (!t.contains("expr") || !t["expr"].is_string() || t["expr"].get<std::string>().empty()) {
        return Status(Code::kInvalidArgument,
                      "panel \"" + title + "\" target " + t.value("refId", "?") + " has no expr");
      }
      out.queries.push_back(DashboardQuery{title, type, t.value("refId", ""), t["expr"].get<std::string>(),
                                           t.value("instant", false)});
      out.datasource_uids.push_back(DatasourceUid(t));
    }
  }
  return OkStatus();
}

bool IdentChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

}  // namespace

Result<Dashboard> LoadDashboard(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return Status(Code::kNotFound, "cannot read " + path.string());
  std::stringstream ss;
  ss << in.rdbuf();
  json j = json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object()) {
    return Status(Code::kInvalidArgument, path.string() + " is not a JSON object");
  }
  Dashboard d;
  d.title = j.value("title", "");
  d.uid = j.value("uid", "");
  if (Status s = AddPanels(j.value("panels", json::array()), d); !s.ok()) return s;
  if (j.contains("templating")) {
    for (const auto& v : j["templating"].value("list", json::array())) {
      std::string query;
      if (v.contains("query")) {
        if (v["query"].is_string()) query = v["query"];
        else if (v["query"].is_object()) query = v["query"].value("query", "");
      }
      d.variables.push_back(DashboardVariable{v.value("name", ""), v.value("type", ""), query});
    }
  }
  return d;
}

Result<std::string> ExpandVariables(const std::string& expr,
                                    const std::map<std::string, std::string>& values) {
  std::string out;
  for (size_t i = 0; i < expr.size();) {
    std::string name;
    size_t next = i;
    if (expr.compare(i, 2, "${") == 0) {
      const size_t close = expr.find('}', i);
      if (close == std::string::npos) return Status(Code::kInvalidArgument, "unclosed ${ in: " + expr);
      name = expr.substr(i + 2, close - i - 2);
      // ${var:format}: the formats are not used by stasis' dashboard.
      if (name.find(':') != std::string::npos) {
        return Status(Code::kInvalidArgument, "variable format not supported: ${" + name + "}");
      }
      next = close + 1;
    } else if (expr.compare(i, 2, "[[") == 0 && expr.find("]]", i) != std::string::npos) {
      const size_t close = expr.find("]]", i);
      const std::string inner = expr.substr(i + 2, close - i - 2);
      // [[ is also PromQL-legal inside a string; only a bare identifier is a variable.
      bool ident = !inner.empty();
      for (char c : inner) ident = ident && IdentChar(c);
      if (ident) {
        name = inner;
        next = close + 2;
      }
    } else if (expr[i] == '$' && i + 1 < expr.size() && IdentChar(expr[i + 1])) {
      size_t j = i + 1;
      while (j < expr.size() && IdentChar(expr[j])) ++j;
      name = expr.substr(i + 1, j - i - 1);
      next = j;
    }
    if (name.empty()) {
      out += expr[i++];
      continue;
    }
    auto it = values.find(name);
    if (it == values.end()) {
      return Status(Code::kInvalidArgument, "no value for Grafana variable $" + name + " in: " + expr);
    }
    out += it->second;
    i = next;
  }
  return out;
}

}  // namespace stasis::testing
