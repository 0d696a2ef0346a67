#include "tests/bench/pause_overhead_direct.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "api/names.h"
#include "runtimes/gpu/cdi.h"
#include "runtimes/gpu/gpu_bundle.h"

namespace stasis::pause_bench {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

DirectSandbox::DirectSandbox(const Config& cfg)
    : cfg_(cfg), root_(fs::path(cfg.work_dir) / "direct-root"), images_(fs::path(cfg.work_dir) / "direct-images") {
  fs::create_directories(root_);
  fs::create_directories(images_);
  if (cfg.peer_object_store) {
    auto peer = PeerObjectStore::FromEnvironment("bench-peer/");
    if (!peer.ok()) Die("--peer-object-store: " + peer.status().ToString());
    peer_.emplace(std::move(*peer));
  }
}

void DirectSandbox::Start() {
  bundle_ = cfg_.bundle;
  if (!cfg_.gpu_uuid.empty()) {
    // The same devices, libraries and helper mount the agent gives its actor, by its code.
    auto cdi = CdiRegistry::Load(cfg_.cdi_spec_dirs);
    if (!cdi.ok()) Die("direct GPU bundle: " + cdi.status().ToString());
    GpuBundleRequest request;
    request.source_bundle = cfg_.bundle;
    request.out_dir = (fs::path(cfg_.work_dir) / "direct-bundle").string();
    request.gpu_uuids = {cfg_.gpu_uuid};
    request.gpu_kind = cfg_.gpu_cdi_kind;
    request.cuda_checkpoint_path = cfg_.cuda_checkpoint_path;
    request.helper_private_dir = api::kCudaCheckpointPrivateDir;
    auto written = WriteGpuBundle(*cdi, request);
    if (!written.ok()) Die("direct GPU bundle: " + written.status().ToString());
    bundle_ = *written;
  }
  auto r = Runsc({"run", "-detach", "-bundle", bundle_, kId});
  if (!r.success()) Die("direct runsc run: " + r.Summary());
  started_ = true;
}

Result<DirectSandbox::Cycle> DirectSandbox::Run() {
  Cycle c;
  const fs::path image = images_ / std::to_string(++seq_);
  fs::create_directories(image);
  auto start = SteadyClock::now();
  std::vector<std::string> ck_args = {"checkpoint", "-image-path", image.string()};
  if (!cfg_.gpu_uuid.empty()) {
    ck_args.push_back("-cuda-checkpoint-path");
    ck_args.push_back(cfg_.cuda_checkpoint_path);
  }
  ck_args.push_back(kId);
  auto ck = Runsc(ck_args);
  c.checkpoint_ms = Ms(SteadyClock::now() - start);
  if (!ck.success()) return Status(Code::kInternal, "direct runsc checkpoint: " + ck.Summary());
  // The agent's order after a checkpoint: delete, manifest (hash, fsync), drop the old image.
  start = SteadyClock::now();
  auto del = Runsc({"delete", "-force", kId});
  c.delete_ms = Ms(SteadyClock::now() - start);
  if (!del.success()) return Status(Code::kInternal, "direct runsc delete: " + del.Summary());
  const std::vector<std::string> files = ImageFiles(image, c.image_bytes);
  c.sha256_ms = TimeSha256(files);
  c.fsync_ms = TimeFsync(files);
  start = SteadyClock::now();
  std::error_code ec;
  if (!last_image_.empty()) fs::remove_all(last_image_, ec);
  c.remove_ms = Ms(SteadyClock::now() - start);
  last_image_ = image;
  if (peer_) {
    if (Status s = ThroughPeer(image, files, c); !s.ok()) return s;
  }
  // The restore of the image this side's own checkpoint just made: the resume's baseline.
  start = SteadyClock::now();
  auto rs = Runsc({"restore", "-detach", "-image-path", image.string(), "-bundle", bundle_, kId});
  c.restore_ms = Ms(SteadyClock::now() - start);
  if (!rs.success()) return Status(Code::kInternal, "direct runsc restore: " + rs.Summary());
  return c;
}

Status DirectSandbox::ThroughPeer(const fs::path& image, const std::vector<std::string>& files, Cycle& c) {
  const std::string key = std::to_string(seq_);
  auto up = peer_->Upload(image, files, key);
  if (!up.ok()) return up.status();
  c.upload_ms = *up;
  std::error_code ec;
  fs::remove_all(image, ec);  // what another node has: nothing until the download
  auto down = peer_->Download(key, image, files);
  if (!down.ok()) return down.status();
  c.download_ms = *down;
  return OkStatus();
}

void DirectSandbox::Stop() {
  if (started_) Runsc({"delete", "-force", kId});
  started_ = false;
  const fs::path netns = root_ / "null-netns";
  std::error_code ec;
  if (fs::exists(netns, ec)) {
    (void)RunCommand({"umount", "-l", netns.string()}, 30s);
  }
  fs::remove_all(images_, ec);
}

std::vector<std::string> DirectSandbox::ImageFiles(const fs::path& image, double& bytes) {
  std::error_code ec;
  std::vector<std::string> files;
  for (auto it = fs::recursive_directory_iterator(image, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    bytes += static_cast<double>(it->file_size(ec));
    files.push_back(it->path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// sha256 of every file, as the agent's manifest hashes them (OpenSSL EVP, 1 MiB reads).
double DirectSandbox::TimeSha256(const std::vector<std::string>& files) {
  const auto start = SteadyClock::now();
  std::vector<unsigned char> buf(1 << 20);
  for (const auto& f : files) {
    const int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NAN;
    EVP_MD_CTX* ctx = EVP_MD_CTX_new();
    EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
    ssize_t n;
    while ((n = read(fd, buf.data(), buf.size())) > 0) {
      EVP_DigestUpdate(ctx, buf.data(), static_cast<size_t>(n));
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_DigestFinal_ex(ctx, md, &len);
    EVP_MD_CTX_free(ctx);
    close(fd);
    if (n < 0) return NAN;
  }
  return Ms(SteadyClock::now() - start);
}

// fsync of every file, as the agent's manifest syncs them.
double DirectSandbox::TimeFsync(const std::vector<std::string>& files) {
  const auto start = SteadyClock::now();
  for (const auto& f : files) {
    const int fd = open(f.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NAN;
    const int r = fsync(fd);
    close(fd);
    if (r != 0) return NAN;
  }
  return Ms(SteadyClock::now() - start);
}

// Runs runsc exactly as the agent's driver does (runsc_driver.cc): stdout and stderr to pipes,
// except for run and restore, whose detached sandbox keeps the container's stdio (a file,
// never a pipe of ours).
CommandResult DirectSandbox::Runsc(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {cfg_.runsc, "-root", root_.string()};
  argv.insert(argv.end(), cfg_.runsc_flags.begin(), cfg_.runsc_flags.end());
  argv.insert(argv.end(), args.begin(), args.end());
  CommandOptions o;
  if (args[0] == "run" || args[0] == "restore") {
    o.output_path = (root_ / "runsc-output.log").string();
  }
  auto r = RunCommand(argv, 150s, o);
  if (!r.ok()) {
    CommandResult failed;
    failed.err = r.status().ToString();
    return failed;
  }
  return *r;
}

}  // namespace stasis::pause_bench
