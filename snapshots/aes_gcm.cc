#include "snapshots/aes_gcm.h"

#include <openssl/evp.h>
#include <openssl/rand.h>

#include <memory>

#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

using CipherCtx = std::unique_ptr<EVP_CIPHER_CTX, decltype(&EVP_CIPHER_CTX_free)>;

const unsigned char* Bytes(std::string_view s) { return reinterpret_cast<const unsigned char*>(s.data()); }
unsigned char* Bytes(std::string& s, size_t at) { return reinterpret_cast<unsigned char*>(s.data()) + at; }

Status OpenSslFailed(const char* what) {
  return Status(Code::kInternal, std::string("AES-256-GCM: ") + what + " failed in OpenSSL", snapshot_reason::kIoError);
}

// OpenSSL takes lengths as int; a chunk is at most 1 GiB (chunk_digest.h), far below.
int Len(size_t n) { return static_cast<int>(n); }

}  // namespace

Status GcmSeal(const EncryptionKey& key, std::string_view aad, std::string_view plain, std::string& out) {
  out.resize(kGcmNonceBytes + plain.size() + kGcmTagBytes);
  if (RAND_bytes(Bytes(out, 0), Len(kGcmNonceBytes)) != 1) return OpenSslFailed("RAND_bytes");
  CipherCtx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int n = 0, tail = 0;
  if (!ctx || EVP_EncryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), Bytes(out, 0)) != 1 ||
      EVP_EncryptUpdate(ctx.get(), nullptr, &n, Bytes(aad), Len(aad.size())) != 1 ||
      EVP_EncryptUpdate(ctx.get(), Bytes(out, kGcmNonceBytes), &n, Bytes(plain), Len(plain.size())) != 1 ||
      EVP_EncryptFinal_ex(ctx.get(), Bytes(out, kGcmNonceBytes + static_cast<size_t>(n)), &tail) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_GET_TAG, Len(kGcmTagBytes),
                          Bytes(out, kGcmNonceBytes + plain.size())) != 1) {
    return OpenSslFailed("encryption");
  }
  return OkStatus();
}

Status GcmOpen(const EncryptionKey& key, std::string_view aad, std::string_view sealed, std::string& out) {
  if (sealed.size() < kGcmOverheadBytes) {
    return Status(Code::kFailedPrecondition,
                  "encrypted object is " + std::to_string(sealed.size()) + " bytes, shorter than its nonce and tag",
                  snapshot_reason::kSnapshotCorrupt);
  }
  const std::string_view cipher = sealed.substr(kGcmNonceBytes, sealed.size() - kGcmOverheadBytes);
  std::string tag(sealed.substr(sealed.size() - kGcmTagBytes));
  out.resize(cipher.size());
  CipherCtx ctx(EVP_CIPHER_CTX_new(), EVP_CIPHER_CTX_free);
  int n = 0, tail = 0;
  if (!ctx || EVP_DecryptInit_ex(ctx.get(), EVP_aes_256_gcm(), nullptr, key.data(), Bytes(sealed)) != 1 ||
      EVP_DecryptUpdate(ctx.get(), nullptr, &n, Bytes(aad), Len(aad.size())) != 1 ||
      EVP_DecryptUpdate(ctx.get(), Bytes(out, 0), &n, Bytes(cipher), Len(cipher.size())) != 1 ||
      EVP_CIPHER_CTX_ctrl(ctx.get(), EVP_CTRL_GCM_SET_TAG, Len(kGcmTagBytes), tag.data()) != 1) {
    return OpenSslFailed("decryption");
  }
  if (EVP_DecryptFinal_ex(ctx.get(), Bytes(out, static_cast<size_t>(n)), &tail) != 1) {
    out.clear();  // never hand out bytes that did not authenticate
    return Status(Code::kFailedPrecondition,
                  "encrypted object failed authentication: modified, truncated, moved from another place, or "
                  "sealed under another key",
                  snapshot_reason::kSnapshotCorrupt);
  }
  return OkStatus();
}

}  // namespace stasis
