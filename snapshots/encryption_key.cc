#include "snapshots/encryption_key.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "snapshots/file_io.h"
#include "base/sha256.h"
#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

// Changing it changes every key's id: a new version of the id, never an edit.
constexpr std::string_view kKeyIdDomain{"stasis snapshot-store encryption key id v1\0", 43};
// A key file larger than this is no key (the hex form with whitespace is ~65 bytes).
constexpr size_t kMaxKeyFileBytes = 4096;

Status Invalid(const std::string& message) {
  return Status(Code::kInvalidArgument, message, snapshot_reason::kStoreConfigInvalid);
}

std::string Describe(const std::string& path) { return "--snapshot-store-encryption-key " + path; }

// The key's bytes from a file's content, or why the content is no key.
Result<std::string> KeyBytesOf(std::string_view content, const std::string& path) {
  if (content.size() == kEncryptionKeyBytes) return std::string(content);
  while (!content.empty() && (content.back() == '\n' || content.back() == '\r' || content.back() == ' ' ||
                              content.back() == '\t')) {
    content.remove_suffix(1);
  }
  if (content.size() == 2 * kEncryptionKeyBytes) {
    if (auto raw = HexDecode(content)) return *raw;
  }
  return Invalid(Describe(path) + " holds " + std::to_string(content.size()) +
                 " bytes: want exactly 32 raw bytes or 64 hex digits (e.g. `openssl rand -hex 32`)");
}

}  // namespace

EncryptionKey::~EncryptionKey() { OPENSSL_cleanse(bytes_.data(), bytes_.size()); }

std::string EncryptionKeyId(std::string_view raw) {
  Sha256 h;
  h.Update(kKeyIdDomain.data(), kKeyIdDomain.size());
  h.Update(raw.data(), raw.size());
  return h.FinishHex().substr(0, 16);
}

Result<EncryptionKey> EncryptionKey::FromBytes(std::string_view raw) {
  if (raw.size() != kEncryptionKeyBytes) {
    return Invalid("an encryption key is 32 bytes, not " + std::to_string(raw.size()));
  }
  if (std::all_of(raw.begin(), raw.end(), [](char c) { return c == 0; })) {
    return Invalid("the encryption key is all zero bytes: a placeholder, not a key");
  }
  EncryptionKey key;
  std::copy(raw.begin(), raw.end(), key.bytes_.begin());
  key.id_ = EncryptionKeyId(raw);
  return key;
}

Result<EncryptionKey> LoadEncryptionKeyFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Invalid(Errno("open " + Describe(path)));
  struct stat st {};
  std::string content;
  Status status;
  if (fstat(fd, &st) != 0) {
    status = Invalid(Errno("stat " + Describe(path)));
  } else if (!S_ISREG(st.st_mode)) {
    status = Invalid(Describe(path) + " is not a regular file");
  } else if ((st.st_mode & 077) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    status = Invalid(Describe(path) + " has mode " + mode +
                     ": its group or others may access it; make it 0400 or 0600 (a Secret volume: defaultMode: 0400)");
  } else if (static_cast<size_t>(st.st_size) > kMaxKeyFileBytes) {
    status = Invalid(Describe(path) + " is " + std::to_string(st.st_size) + " bytes: no key file is that large");
  } else {
    content.resize(kMaxKeyFileBytes + 1);
    const ssize_t n = read(fd, content.data(), content.size());
    if (n < 0) status = Invalid(Errno("read " + Describe(path)));
    content.resize(n < 0 ? 0 : static_cast<size_t>(n));
  }
  close(fd);
  if (!status.ok()) return status;
  auto raw = KeyBytesOf(content, path);
  OPENSSL_cleanse(content.data(), content.size());
  if (!raw.ok()) return raw.status();
  auto key = EncryptionKey::FromBytes(*raw);
  OPENSSL_cleanse(raw->data(), raw->size());
  if (!key.ok()) return Invalid(Describe(path) + ": " + key.status().message());
  return key;
}

}  // namespace stasis
