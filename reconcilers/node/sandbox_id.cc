#include "reconcilers/node/sandbox_id.h"

#include <openssl/evp.h>

#include <cstdio>

namespace stasis {

std::string SandboxIdFor(const std::string& ns, const std::string& name) {
  const std::string key = ns + "/" + name;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(key.data(), key.size(), digest, &len, EVP_sha256(), nullptr);
  char hex[17];
  for (int i = 0; i < 8; ++i) std::snprintf(hex + 2 * i, 3, "%02x", digest[i]);
  // The name's start ends in an alphanumeric so the id never holds "-" or "." twice in a row.
  std::string prefix = name.substr(0, 12);
  while (!prefix.empty() && (prefix.back() == '-' || prefix.back() == '.')) prefix.pop_back();
  return (prefix.empty() ? std::string("a") : prefix) + "-" + hex;
}

bool IsUsableSandboxId(const std::string& id) {
  if (id.empty() || id.size() > 255 || id == "." || id == "..") return false;
  for (char c : id) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                    c == '.' || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

}  // namespace stasis
