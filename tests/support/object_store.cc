#include "tests/support/object_store.h"

#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "base/subprocess.h"
#include "tests/support/hack_exports.h"

namespace stasis::testing {
namespace {

using namespace std::chrono_literals;

const std::string kScript = std::string(STASIS_SOURCE_DIR) + "/hack/object-store.sh";

// The first `up` on a cold machine builds weed from its Go module (minutes); later ones take
// seconds.
constexpr auto kUpDeadline = 3600s;
constexpr auto kDownDeadline = 120s;

std::string Run(const std::string& verb, const std::string& dir, std::chrono::seconds deadline,
                std::string* out) {
  CommandOptions options;
  options.extra_env = {"STASIS_OBJECT_STORE_OWNER_PID=" + std::to_string(getpid())};
  auto r = RunCommand({kScript, verb, "--dir", dir}, deadline, options);
  if (!r.ok()) return "cannot run " + kScript + ": " + r.status().ToString();
  if (!r->success()) {
    return "hack/object-store.sh " + verb + " failed (" + r->Summary() + ")\n" + r->err + r->out;
  }
  if (out != nullptr) *out = r->out;
  return "";
}

}  // namespace

std::unique_ptr<ObjectStore> ObjectStore::Start(std::string* error) {
  char tmpl[] = "/tmp/stasis-test-s3-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    *error = "mkdtemp failed";
    return nullptr;
  }
  std::unique_ptr<ObjectStore> store(new ObjectStore());
  store->dir_ = tmpl;
  *error = store->Up();
  if (!error->empty()) return nullptr;  // the destructor runs down and removes the directory
  return store;
}

std::string ObjectStore::Up() {
  std::string out;
  if (std::string failed = Run("up", dir_, kUpDeadline, &out); !failed.empty()) return failed;
  auto vars = ParseExports(out);
  SettingLookup lookup = [&vars](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
  auto endpoint = S3EndpointFromSettings(lookup);
  if (!endpoint.ok()) {
    return "the export lines of `up` are incomplete: " + endpoint.status().ToString();
  }
  endpoint_ = *endpoint;
  bucket_ = vars["STASIS_S3_BUCKET"];
  if (bucket_.empty()) return "`up` printed no STASIS_S3_BUCKET";
  return "";
}

std::string ObjectStore::Stop() { return Run("down", dir_, kDownDeadline, nullptr); }

std::string ObjectStore::Restart() { return Up(); }

ObjectStore::~ObjectStore() {
  if (dir_.empty()) return;
  (void)Stop();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

}  // namespace stasis::testing
