#include "tests/support/prometheus_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include "base/subprocess.h"

namespace stasis::testing {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

// YAML double-quoted scalar: the values here are paths, addresses and label values.
std::string Quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string Config(const PrometheusOptions& o) {
  std::string y;
  y += "global:\n";
  y += "  scrape_interval: " + o.scrape_interval + "\n";
  // A scrape must end before the next one starts.
  y += "  scrape_timeout: " + o.scrape_interval + "\n";
  y += "  evaluation_interval: " + o.evaluation_interval + "\n";
  if (!o.rule_files.empty()) {
    y += "rule_files:\n";
    for (const auto& f : o.rule_files) y += "  - " + Quote(f) + "\n";
  }
  y += "scrape_configs:\n";
  std::map<std::string, std::vector<const ScrapeTarget*>> jobs;
  for (const auto& t : o.targets) jobs[t.job].push_back(&t);
  for (const auto& [job, targets] : jobs) {
    y += "  - job_name: " + Quote(job) + "\n";
    y += "    static_configs:\n";
    for (const auto* t : targets) {
      y += "      - targets: [" + Quote(t->address) + "]\n";
      if (!t->labels.empty()) {
        y += "        labels:\n";
        for (const auto& [k, v] : t->labels) y += "          " + k + ": " + Quote(v) + "\n";
      }
    }
  }
  std::istringstream extra(o.extra_scrape_configs);
  for (std::string line; std::getline(extra, line);) y += "  " + line + "\n";
  return y;
}

bool Finite(const json& sample) {
  // [time, "value"]: Prometheus writes values as strings ("NaN", "+Inf" included).
  if (!sample.is_array() || sample.size() != 2 || !sample[1].is_string()) return false;
  const std::string v = sample[1];
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  return end != v.c_str() && std::isfinite(d);
}

}  // namespace

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    std::perror("FreeLoopbackPort");
    std::abort();
  }
  close(fd);
  return ntohs(a.sin_port);
}

double UnixNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string PrometheusServer::Binary() {
  if (const char* env = std::getenv("STASIS_PROMETHEUS"); env && *env) return env;
  return "prometheus";
}

std::unique_ptr<PrometheusServer> PrometheusServer::Start(const PrometheusOptions& o) {
  fs::create_directories(o.dir / "tsdb");
  const fs::path config = o.dir / "prometheus.yml";
  std::ofstream(config) << Config(o);
  // The port is picked free just before the start; a lost race shows as a failed start, tried
  // again on another port.
  for (int attempt = 0; attempt < 3; ++attempt) {
    const int port = FreeLoopbackPort();
    std::unique_ptr<PrometheusServer> s(new PrometheusServer());
    s->url_ = "http://127.0.0.1:" + std::to_string(port);
    s->process_ = std::make_unique<BackgroundProcess>(
        std::vector<std::string>{o.binary.empty() ? Binary() : o.binary, "--config.file=" + config.string(),
                                 "--storage.tsdb.path=" + (o.dir / "tsdb").string(),
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port),
                                 "--log.level=info"},
        (o.dir / "prometheus.log").string());
    const auto end = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < end && s->process_->Running()) {
      auto r = RunCommand({"curl", "-sf", "-m", "2", s->url_ + "/-/ready"}, 5s);
      if (r.ok() && r->success()) return s;
      std::this_thread::sleep_for(200ms);
    }
    std::cerr << "prometheus did not become ready on port " << port << ":\n"
              << s->process_->LogTail() << "\n";
    if (s->process_->Running()) break;  // up but not ready: another port will not help
  }
  return nullptr;
}

PrometheusServer::~PrometheusServer() {
  if (process_) process_->Stop(5s);
}

Result<json> PrometheusServer::Api(const std::string& endpoint,
                                   const std::vector<std::pair<std::string, std::string>>& params) const {
  std::vector<std::string> argv = {"curl", "-sS", "-m", "60", "--get"};
  for (const auto& [k, v] : params) {
    argv.push_back("--data-urlencode");
    argv.push_back(k + "=" + v);
  }
  argv.push_back(url_ + "/api/v1/" + endpoint);
  auto r = RunCommand(argv, 70s);
  if (!r.ok()) return r.status();
  if (!r->success()) return Status(Code::kUnavailable, "curl " + endpoint + ": " + r->Summary());
  json body = json::parse(r->out, nullptr, false);
  if (body.is_discarded() || !body.is_object()) {
    return Status(Code::kInternal, "not JSON from /api/v1/" + endpoint + ": " + r->out.substr(0, 200));
  }
  if (body.value("status", "") != "success") {
    return Status(Code::kInvalidArgument, body.value("errorType", "") + ": " + body.value("error", ""));
  }
  return body["data"];
}

Result<json> PrometheusServer::Query(const std::string& expr, double time) const {
  return Api("query", {{"query", expr}, {"time", std::to_string(time)}});
}

Result<json> PrometheusServer::QueryRange(const std::string& expr, double start, double end,
                                          double step_seconds) const {
  return Api("query_range", {{"query", expr},
                             {"start", std::to_string(start)},
                             {"end", std::to_string(end)},
                             {"step", std::to_string(step_seconds)}});
}

bool HasFiniteSample(const json& data) {
  const std::string type = data.value("resultType", "");
  const json& result = data.contains("result") ? data["result"] : json();
  if (type == "scalar") return Finite(result);
  if (!result.is_array()) return false;
  for (const auto& series : result) {
    if (type == "vector" && series.contains("value") && Finite(series["value"])) return true;
    if (type == "matrix" && series.contains("values")) {
      for (const auto& v : series["values"]) {
        if (Finite(v)) return true;
      }
    }
  }
  return false;
}

}  // namespace stasis::testing
