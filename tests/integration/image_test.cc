// The stasis image as hack/image.sh builds it here (hack/test.sh builds it before the tests):
// an OCI layout whose configuration carries the Dockerfile's labels and entrypoint, whose root
// holds the one list of packages and files, and which runs, under tini, in a real runsc
// container, as root (the node agent) and as the controller's non-root user.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "base/subprocess.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

const fs::path kSource = STASIS_SOURCE_DIR;
constexpr uid_t kControllerUid = 65532;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The layout hack/image.sh wrote, or $STASIS_IMAGE_LAYOUT.
fs::path Layout() {
  const char* env = std::getenv("STASIS_IMAGE_LAYOUT");
  return env ? fs::path(env) : kSource / "build-image" / "image" / "oci";
}

fs::path Blob(const std::string& digest) {
  const auto colon = digest.find(':');
  return Layout() / "blobs" / digest.substr(0, colon) / digest.substr(colon + 1);
}

// Every name:value of `key="value"` in the Dockerfile's LABEL instruction.
std::map<std::string, std::string> DockerfileLabels() {
  std::map<std::string, std::string> out;
  const std::string text = ReadFile(kSource / "Dockerfile");
  const std::regex label(R"re((org\.opencontainers\.image\.[a-z]+)="([^"]*)")re");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), label); it != std::sregex_iterator(); ++it) {
    out[(*it)[1]] = (*it)[2];
  }
  return out;
}

// The project's version (CMakeLists.txt), which hack/image.sh stamps by default.
std::string ProjectVersion() {
  std::smatch m;
  const std::string text = ReadFile(kSource / "CMakeLists.txt");
  return std::regex_search(text, m, std::regex(R"(project\(stasis VERSION ([0-9.]+))")) ? m[1].str() : "";
}

// The package names of hack/image-packages.txt.
std::vector<std::string> ListedPackages() {
  std::vector<std::string> out;
  std::istringstream in(ReadFile(kSource / "hack" / "image-packages.txt"));
  for (std::string line; std::getline(in, line);) {
    line = line.substr(0, line.find('#'));
    line.erase(0, line.find_first_not_of(" \t"));
    line.erase(line.find_last_not_of(" \t") + 1);
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

class ImageTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(fs::exists(Layout() / "index.json"))
        << "no image at " << Layout() << ": build it with hack/image.sh (hack/test.sh does)";
    const json index = json::parse(ReadFile(Layout() / "index.json"));
    ASSERT_EQ(index.at("manifests").size(), 1u) << index.dump();
    manifest_ = new json(index["manifests"][0]);
    const json image = json::parse(ReadFile(Blob(manifest_->at("digest"))));
    config_ = new json(json::parse(ReadFile(Blob(image.at("config").at("digest")))));
    unpacked_ = new TempDir("stasis-image-test-");
    const fs::path bundle = unpacked_->path() / "bundle";
    const std::string tag = manifest_->at("annotations").at("org.opencontainers.image.ref.name");
    auto r = RunCommand({"umoci", "unpack", "--image", Layout().string() + ":" + tag, bundle.string()}, 300s);
    ASSERT_TRUE(r.ok() && r->success()) << (r.ok() ? r->Summary() + r->err : r.status().ToString());
  }
  static void TearDownTestSuite() {
    delete unpacked_;
    delete config_;
    delete manifest_;
  }

  static fs::path Bundle() { return unpacked_->path() / "bundle"; }
  static fs::path Rootfs() { return Bundle() / "rootfs"; }

  // `args` run in the image under real runsc as `uid`, with the image's own entrypoint (tini)
  // in front; returns what the container printed.
  std::string RunInImage(const std::vector<std::string>& args, uid_t uid) {
    json spec = json::parse(ReadFile(Bundle() / "config.json"));
    json argv = config_->at("config").at("Entrypoint");
    for (const auto& a : args) argv.push_back(a);
    spec["process"]["args"] = argv;
    spec["process"]["terminal"] = false;
    spec["process"]["user"] = {{"uid", uid}, {"gid", uid}};
    std::ofstream(Bundle() / "config.json") << spec.dump();
    RunscRoot root;
    const std::string id = "stasis-image-test-" + std::to_string(++runs_);
    auto r = root.Run({"run", "-bundle", Bundle().string(), id});
    const std::string output = ReadFile(root.dir() / "runsc-output.log");
    EXPECT_TRUE(r.success()) << r.Summary() << "\n" << r.err << "\n" << output;
    (void)root.Run({"delete", "-force", id});
    return output;
  }

  static inline json* manifest_ = nullptr;
  static inline json* config_ = nullptr;
  static inline TempDir* unpacked_ = nullptr;
  static inline int runs_ = 0;
};

TEST_F(ImageTest, CarriesTheDockerfilesLabelsAndEntrypoint) {
  const auto dockerfile = DockerfileLabels();
  ASSERT_GE(dockerfile.size(), 5u) << "the Dockerfile's LABEL instruction changed shape";
  const json labels = config_->at("config").at("Labels");
  for (const auto& [name, value] : dockerfile) {
    ASSERT_TRUE(labels.contains(name)) << name << " is missing from the image";
    if (name == "org.opencontainers.image.revision") {
      EXPECT_TRUE(std::regex_match(labels[name].get<std::string>(), std::regex("[0-9a-f]{12}")))
          << "the revision label is not the checkout's commit: " << labels[name];
    } else if (name == "org.opencontainers.image.version") {
      EXPECT_EQ(labels[name], ProjectVersion()) << name;
    } else {
      EXPECT_EQ(labels[name], value) << name;
    }
  }
  EXPECT_EQ(config_->at("config").at("Entrypoint"), json({"/usr/bin/tini", "--"}));
  EXPECT_EQ(config_->at("config").at("Cmd"), json({"stasis", "--help"}));
  EXPECT_EQ(manifest_->at("annotations").at("org.opencontainers.image.ref.name"),
            labels.at("org.opencontainers.image.version"));
  EXPECT_TRUE(fs::exists(Layout().parent_path() /
                         ("stasis-" + labels.at("org.opencontainers.image.version").get<std::string>() + ".oci.tar")))
      << "no archive of the layout beside it";
}

TEST_F(ImageTest, HoldsTheOneListOfPackagesAndFiles) {
  const std::string status = ReadFile(Rootfs() / "var/lib/dpkg/status");
  for (const auto& p : ListedPackages()) {
    EXPECT_TRUE(std::regex_search(status, std::regex("Package: " + p + "\n(.+\n)*Status: install ok installed")))
        << p << " (hack/image-packages.txt) is not installed in the image";
  }
  for (const char* f : {"usr/local/bin/stasis", "usr/local/bin/runsc", "usr/bin/tini",
                        "usr/lib/stasis/cuda-checkpoint/stasis-cuda-checkpoint"}) {
    EXPECT_TRUE(fs::exists(Rootfs() / f)) << f;
  }
  EXPECT_NE(ReadFile(Rootfs() / "etc/passwd").find(":" + std::to_string(kControllerUid) + ":"), std::string::npos)
      << "no user for the controller's uid";
  // The Dockerfile installs the same list and the same files, by the same two files.
  const std::string dockerfile = ReadFile(kSource / "Dockerfile");
  EXPECT_NE(dockerfile.find("hack/image-packages.txt"), std::string::npos);
  EXPECT_NE(dockerfile.find("image-install.sh /"), std::string::npos);
}

TEST_F(ImageTest, RunsStasisUnderTiniAsRootAndAsTheControllersUser) {
  const json labels = config_->at("config").at("Labels");
  const std::string version = "stasis " + labels.at("org.opencontainers.image.version").get<std::string>() +
                              " (revision " + labels.at("org.opencontainers.image.revision").get<std::string>() +
                              ")";
  EXPECT_NE(RunInImage({"stasis", "--version"}, 0).find(version), std::string::npos) << "as root";
  EXPECT_NE(RunInImage({"stasis", "--version"}, kControllerUid).find(version), std::string::npos)
      << "as the controller's user";
  EXPECT_NE(RunInImage({"runsc", "--version"}, 0).find("runsc version"), std::string::npos);
}

}  // namespace
}  // namespace stasis::testing
