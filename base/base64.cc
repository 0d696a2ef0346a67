#include "base/base64.h"

#include <openssl/evp.h>

namespace stasis {

std::optional<std::string> DecodeBase64(std::string_view text) {
  std::string in;
  in.reserve(text.size());
  for (char c : text) {
    if (c != '\n' && c != '\r' && c != ' ' && c != '\t') in.push_back(c);
  }
  if (in.size() % 4 != 0) return std::nullopt;
  if (in.empty()) return std::string();
  std::string out(in.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(in.data()), static_cast<int>(in.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts the padding's zero bytes in its result: drop them.
  size_t len = static_cast<size_t>(n);
  for (size_t i = in.size(); i > 0 && in[i - 1] == '='; --i) --len;
  out.resize(len);
  return out;
}

std::string EncodeBase64(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');  // and EVP_EncodeBlock's NUL
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()), static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

}  // namespace stasis
