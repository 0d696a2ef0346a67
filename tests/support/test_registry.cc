#include "tests/support/test_registry.h"

#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "base/subprocess.h"
#include "tests/support/hack_exports.h"

namespace stasis::testing {
namespace {

using namespace std::chrono_literals;

const std::string kScript = std::string(STASIS_SOURCE_DIR) + "/hack/registry.sh";

std::string Run(const std::vector<std::string>& args, std::string* out,
                const std::vector<std::string>& env = {}) {
  CommandOptions options;
  options.extra_env = env;
  options.extra_env.push_back("STASIS_REGISTRY_OWNER_PID=" + std::to_string(getpid()));
  std::vector<std::string> argv = {kScript};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = RunCommand(argv, 120s, options);
  if (!r.ok()) return "cannot run " + kScript + ": " + r.status().ToString();
  if (!r->success())
    return "hack/registry.sh " + args[0] + " failed (" + r->Summary() + ")\n" + r->err + r->out;
  if (out != nullptr) *out = r->out;
  return "";
}

}  // namespace

std::unique_ptr<TestRegistry> TestRegistry::Start(std::string* error,
                                                  const TestRegistryOptions& options) {
  char tmpl[] = "/tmp/stasis-test-registry-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    *error = "mkdtemp failed";
    return nullptr;
  }
  std::unique_ptr<TestRegistry> registry(new TestRegistry());
  registry->dir_ = tmpl;
  registry->options_ = options;
  if (const ObjectStore* store = options.store; store != nullptr) {
    const S3Endpoint& e = store->endpoint();
    registry->s3_env_ = {"AWS_ENDPOINT_URL=" + e.url, "AWS_REGION=" + e.region,
                         "AWS_ACCESS_KEY_ID=" + e.credentials.access_key_id,
                         "AWS_SECRET_ACCESS_KEY=" + e.credentials.secret_access_key,
                         "STASIS_S3_BUCKET=" + store->bucket()};
  }
  *error = registry->Up();
  if (!error->empty()) return nullptr;  // the destructor runs down and removes the directory
  return registry;
}

std::string TestRegistry::Up() {
  std::string out;
  std::vector<std::string> args = {"up", "--dir", dir_};
  if (!options_.auth) args.push_back("--no-auth");
  if (options_.token) args.push_back("--token");
  if (options_.plain_http) args.push_back("--plain-http");
  if (!s3_env_.empty()) args.push_back("--s3");
  if (std::string failed = Run(args, &out, s3_env_); !failed.empty()) return failed;
  auto vars = ParseExports(out);
  host_ = vars["STASIS_REGISTRY"];
  ca_file_ = vars["STASIS_REGISTRY_CA"];
  realm_ = vars["STASIS_REGISTRY_REALM"];
  if (options_.token && realm_.empty()) return "`up --token` printed no STASIS_REGISTRY_REALM:\n" + out;
  if (host_.empty() || ca_file_.empty())
    return "`up` printed no STASIS_REGISTRY or STASIS_REGISTRY_CA:\n" + out;
  if (options_.auth) {
    credentials_ =
        images::BasicCredentials{vars["STASIS_REGISTRY_USER"], vars["STASIS_REGISTRY_PASSWORD"]};
    if (credentials_->username.empty()) return "`up` printed no STASIS_REGISTRY_USER:\n" + out;
  }
  return "";
}

std::string TestRegistry::BlobDataPath(const std::string& digest) const {
  std::string hex = digest.substr(digest.find(':') + 1);
  return dir_ + "/data/docker/registry/v2/blobs/sha256/" + hex.substr(0, 2) + "/" + hex + "/data";
}

std::string TestRegistry::Stop() { return Run({"down", "--dir", dir_}, nullptr); }

std::string TestRegistry::Restart() { return Up(); }

std::string TestRegistry::StopTokenServer() {
  return Run({"token-server-down", "--dir", dir_}, nullptr);
}

std::string TestRegistry::RotateTokenKey() {
  if (std::string failed = Stop(); !failed.empty()) return failed;
  std::error_code ec;
  for (const char* file : {"/token/key.pem", "/token/cert.pem"}) {
    if (!std::filesystem::remove(dir_ + file, ec)) return "cannot remove " + dir_ + file;
  }
  return Up();  // hack/registry.sh makes a new key and certificate where none is
}

TestRegistry::~TestRegistry() {
  if (dir_.empty()) return;
  (void)Stop();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace stasis::testing
