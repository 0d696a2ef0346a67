#include "images/registry_client.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/sha256.h"
#include "images/oci_manifest.h"
#include "images/registry_auth.h"
#include "images/registry_http.h"

namespace stasis::images {
namespace {

constexpr int kMaxRedirects = 5;

Status Unavailable(const std::string& what) {
  return Status(Code::kUnavailable, what, pull_reason::kRegistryUnavailable);
}
Status Mismatch(const std::string& what) {
  return Status(Code::kFailedPrecondition, what, pull_reason::kDigestMismatch);
}

// [\w][\w.-]{0,127}: safe in a URL path as it is.
bool IsTag(const std::string& tag) {
  auto word = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; };
  if (tag.empty() || tag.size() > 128 || !word(tag[0])) return false;
  return std::all_of(tag.begin(), tag.end(),
                     [&](char c) { return word(c) || c == '.' || c == '-'; });
}

// The registry's answer as a Status, by what the caller can do about it.
Status ReplyStatus(const HttpReply& r, const std::string& what, bool manifest) {
  if (r.transport_error) return Unavailable(what + ": " + r.error);
  if (r.status == 401 || r.status == 403) {
    return Status(Code::kUnauthenticated, what + ": HTTP " + std::to_string(r.status),
                  pull_reason::kUnauthorized);
  }
  if (r.status == 404) {
    return Status(Code::kNotFound, what + ": not found (HTTP 404) " + r.body.substr(0, 200),
                  pull_reason::kImageNotFound);
  }
  if (r.status == 429 || r.status >= 500 || r.status == 0) {
    return Unavailable(what + ": HTTP " + std::to_string(r.status));
  }
  if (manifest) {
    return Status(Code::kInvalidArgument,
                  what + ": HTTP " + std::to_string(r.status) + " " + r.body.substr(0, 200),
                  pull_reason::kBadManifest);
  }
  return Unavailable(what + ": HTTP " + std::to_string(r.status));
}

std::string MediaTypeOf(const HttpReply& r, const std::string& body) {
  std::string type = r.Header("content-type");
  if (size_t semi = type.find(';'); semi != std::string::npos) type.resize(semi);
  while (!type.empty() && type.back() == ' ') type.pop_back();
  for (const char* known : {media_type::kOciIndex, media_type::kOciManifest,
                            media_type::kDockerManifestList, media_type::kDockerManifest}) {
    if (type == known) return type;
  }
  // A registry that serves every manifest as application/json: the body names its type.
  nlohmann::json doc = nlohmann::json::parse(body, nullptr, false);
  if (doc.is_object() && doc.contains("mediaType") && doc["mediaType"].is_string()) {
    return doc["mediaType"].get<std::string>();
  }
  return type;
}

// The blob file and its running hash, fed by the transfer as it streams.
struct BlobSink {
  int fd = -1;
  Sha256* sha = nullptr;
  int64_t have = 0;  // bytes in the file, all hashed
  int64_t size = 0;  // what the descriptor promises
  int64_t* fetched;  // bytes from the network in this FetchBlob call
  const ProgressFn* progress;
  bool too_long = false;
  bool started = false;  // this response's first bytes have come
  int write_errno = 0;

  void Restart() {
    (void)ftruncate(fd, 0);
    *sha = Sha256();
    have = 0;
  }
  bool Write(long status, const char* data, size_t n) {
    // A 200 to a Range request: the registry sends the whole blob again.
    if (!started && status == 200 && have > 0) Restart();
    started = true;
    if (have + static_cast<int64_t>(n) > size) {
      too_long = true;
      return false;
    }
    for (size_t done = 0; done < n;) {
      ssize_t put =
          pwrite(fd, data + done, n - done, static_cast<off_t>(have + static_cast<int64_t>(done)));
      if (put < 0 && errno == EINTR) continue;
      if (put <= 0) {
        write_errno = errno == 0 ? EIO : errno;
        return false;
      }
      done += static_cast<size_t>(put);
    }
    sha->Update(data, n);
    have += static_cast<int64_t>(n);
    *fetched += static_cast<int64_t>(n);
    if (*progress) (*progress)(*fetched);
    return true;
  }
};

// Hashes what a broken transfer left in the file, so the resumed bytes continue its digest.
Result<int64_t> HashExisting(int fd, Sha256& sha) {
  std::string buf(1 << 20, '\0');
  int64_t total = 0;
  while (true) {
    ssize_t got = pread(fd, buf.data(), buf.size(), static_cast<off_t>(total));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0)
      return Status(Code::kInternal,
                    std::string("reading the partial blob: ") + std::strerror(errno));
    if (got == 0) return total;
    sha.Update(buf.data(), static_cast<size_t>(got));
    total += got;
  }
}

}  // namespace

struct RegistryClient::Impl {
  RegistryClientOptions options;
  RegistryHttp http;
  RegistryAuthCache auth;

  explicit Impl(RegistryClientOptions o) : options(std::move(o)), http(options), auth(http) {}

  std::string RepoUrl(const ImageReference& image) const {
    std::string host = image.ApiHost();
    bool insecure = std::find(options.insecure_hosts.begin(), options.insecure_hosts.end(), host) !=
                        options.insecure_hosts.end() ||
                    std::find(options.insecure_hosts.begin(), options.insecure_hosts.end(),
                              image.registry) != options.insecure_hosts.end();
    return std::string(insecure ? "http://" : "https://") + host + "/v2/" + image.repository;
  }

  // One request, following redirects itself: the Authorization header goes only to the
  // registry's own origin, never to the storage a blob GET is redirected to.
  HttpReply Follow(HttpCall call, const std::string& authorization) {
    const std::string origin = call.url;
    const std::vector<std::string> base_headers = call.headers;
    for (int hop = 0;; ++hop) {
      call.headers = base_headers;
      if (!authorization.empty() && RegistryHttp::SameOrigin(call.url, origin)) {
        call.headers.push_back(authorization);
      }
      HttpReply r = http.Perform(call);
      bool redirect = r.status == 301 || r.status == 302 || r.status == 303 || r.status == 307 ||
                      r.status == 308;
      if (!redirect || r.redirect_url.empty() || r.transport_error) return r;
      if (hop == kMaxRedirects) {
        r.transport_error = true;
        r.error = "more than " + std::to_string(kMaxRedirects) + " redirects";
        return r;
      }
      call.url = r.redirect_url;
    }
  }

  // A request with the repository's pull authorization: the cached one, else none; a 401
  // answers with a challenge, which is met once (Basic or a token) and the request sent again.
  Result<HttpReply> Send(const ImageReference& image, HttpCall call,
                         const std::optional<BasicCredentials>& credentials) {
    const std::string scope = "repository:" + image.repository + ":pull";
    const std::string key = RegistryAuthCache::Key(image.ApiHost(), scope, credentials);
    HttpReply r = Follow(call, auth.Cached(key));
    if (r.transport_error || r.status != 401) return r;
    auto header = auth.Answer(r.Header("www-authenticate"), scope, key, credentials);
    if (!header.ok()) return header.status();
    r = Follow(call, *header);
    return r;
  }

  Status FetchBlobOnce(const ImageReference& image, const std::string& digest, int64_t size,
                       const std::string& path, const std::optional<BasicCredentials>& credentials,
                       const ProgressFn& progress, int64_t* fetched);
};

RegistryClient::RegistryClient(RegistryClientOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}

RegistryClient::~RegistryClient() = default;

Result<FetchedManifest> RegistryClient::GetManifest(
    const ImageReference& image, const std::string& reference_or_digest,
    const std::optional<BasicCredentials>& credentials) {
  bool by_digest = IsSha256Digest(reference_or_digest);
  const std::string what =
      "manifest " + image.registry + "/" + image.repository + ":" + reference_or_digest;
  if (!by_digest && !IsTag(reference_or_digest)) {
    return Status(Code::kInvalidArgument, what + ": neither a tag nor a sha256 digest",
                  pull_reason::kInvalidReference);
  }
  HttpCall call;
  call.url = impl_->RepoUrl(image) + "/manifests/" + reference_or_digest;
  call.headers = {"Accept: " + ManifestAcceptHeader()};
  auto reply = impl_->Send(image, call, credentials);
  if (!reply.ok()) return reply.status();
  if (reply->body_too_large) {
    return Status(Code::kInvalidArgument, what + ": larger than 4 MiB", pull_reason::kBadManifest);
  }
  if (reply->status != 200) return ReplyStatus(*reply, what, /*manifest=*/true);
  FetchedManifest m;
  m.body = std::move(reply->body);
  m.digest = "sha256:" + Sha256Hex(m.body);
  if (by_digest && m.digest != reference_or_digest) {
    return Mismatch(what + ": the body hashes to " + m.digest);
  }
  if (std::string claimed = reply->Header("docker-content-digest");
      !claimed.empty() && claimed != m.digest) {
    return Mismatch(what + ": the registry says " + claimed + ", the body hashes to " + m.digest);
  }
  m.media_type = MediaTypeOf(*reply, m.body);
  return m;
}

namespace {

struct BlobFile {
  int fd = -1;
  Sha256 sha;
  ~BlobFile() {
    if (fd >= 0) close(fd);
  }
};

}  // namespace

// One attempt: hash what the file holds, ask for the rest, verify when complete. kUnavailable
// (the file kept) is the only outcome worth another attempt.
Status RegistryClient::Impl::FetchBlobOnce(const ImageReference& image, const std::string& digest,
                                           int64_t size, const std::string& path,
                                           const std::optional<BasicCredentials>& credentials,
                                           const ProgressFn& progress, int64_t* fetched) {
  const std::string what = "blob " + digest + " of " + image.registry + "/" + image.repository;
  BlobFile file;
  file.fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (file.fd < 0) return Status(Code::kInternal, "opening " + path + ": " + std::strerror(errno));
  auto have = HashExisting(file.fd, file.sha);
  if (!have.ok()) return have.status();
  BlobSink sink{file.fd, &file.sha, *have, size, fetched, &progress};
  if (sink.have > size) sink.Restart();  // not this blob's bytes: start over
  auto mismatch = [&](const std::string& why) {
    unlink(path.c_str());
    return Mismatch(what + ": " + why);
  };
  if (sink.have < size) {
    HttpCall call;
    call.url = RepoUrl(image) + "/blobs/" + digest;
    if (sink.have > 0) call.headers.push_back("Range: bytes=" + std::to_string(sink.have) + "-");
    call.on_body = [&sink](long status, const char* data, size_t n) {
      return sink.Write(status, data, n);
    };
    auto reply = Send(image, call, credentials);
    if (!reply.ok()) return reply.status();
    if (sink.write_errno != 0) {
      return Status(Code::kInternal, "writing " + path + ": " + std::strerror(sink.write_errno));
    }
    if (sink.too_long)
      return mismatch("more than the " + std::to_string(size) + " bytes its descriptor says");
    // 416: the registry's blob ends before the bytes already here.
    if (reply->status == 416)
      return mismatch("shorter than the " + std::to_string(size) + " bytes its descriptor says");
    if (reply->transport_error || (reply->status != 200 && reply->status != 206)) {
      return ReplyStatus(*reply, what, /*manifest=*/false);
    }
    if (sink.have != size) {
      return mismatch(std::to_string(sink.have) + " bytes, its descriptor says " +
                      std::to_string(size));
    }
  }
  std::string got = "sha256:" + file.sha.FinishHex();
  if (got != digest) return mismatch("the content hashes to " + got);
  if (fsync(file.fd) != 0)
    return Status(Code::kInternal, "fsync " + path + ": " + std::strerror(errno));
  return OkStatus();
}

Status RegistryClient::FetchBlob(const ImageReference& image, const std::string& digest,
                                 int64_t size, const std::string& path,
                                 const std::optional<BasicCredentials>& credentials,
                                 const ProgressFn& progress) {
  if (!IsSha256Digest(digest) || size < 0) {
    return Status(Code::kInvalidArgument, "blob " + digest + ": not a sha256 digest or a size",
                  pull_reason::kBadManifest);
  }
  int64_t fetched = 0;
  for (int attempt = 0;; ++attempt) {
    Status s = impl_->FetchBlobOnce(image, digest, size, path, credentials, progress, &fetched);
    if (s.ok() || s.code() != Code::kUnavailable || attempt >= impl_->options.max_resumes) return s;
    // A short pause before the resume: a registry restarting, a proxy flapping.
    std::this_thread::sleep_for(std::chrono::milliseconds(100) * (1 << std::min(attempt, 4)));
  }
}

}  // namespace stasis::images
