#include "images/auth_challenge.h"

#include <curl/curl.h>

#include <cctype>

namespace stasis::images {
namespace {

constexpr char kBadChallenge[] = "bad_auth_challenge";

Status Bad(const std::string& header, const std::string& why) {
  return Status(Code::kInvalidArgument, "WWW-Authenticate \"" + header + "\": " + why,
                kBadChallenge);
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// RFC 7230 token characters.
bool IsTokenChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

void SkipSpace(const std::string& s, size_t& i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
}

// A quoted-string starting at s[i] == '"'; backslash escapes the next character.
bool ReadQuoted(const std::string& s, size_t& i, std::string& out) {
  for (++i; i < s.size(); ++i) {
    if (s[i] == '"') {
      ++i;
      return true;
    }
    if (s[i] == '\\' && i + 1 < s.size()) ++i;
    out += s[i];
  }
  return false;  // unterminated
}

std::string Escape(const std::string& s) {
  // curl_easy_escape needs no handle since 7.82 and percent-encodes all but RFC 3986 unreserved.
  char* e = curl_easy_escape(nullptr, s.c_str(), static_cast<int>(s.size()));
  if (e == nullptr) return s;
  std::string out(e);
  curl_free(e);
  return out;
}

}  // namespace

std::string AuthChallenge::Param(const std::string& key) const {
  auto it = params.find(key);
  return it == params.end() ? "" : it->second;
}

Result<AuthChallenge> ParseAuthChallenge(const std::string& header) {
  AuthChallenge c;
  size_t i = 0;
  SkipSpace(header, i);
  size_t start = i;
  while (i < header.size() && IsTokenChar(header[i])) ++i;
  if (i == start) return Bad(header, "no scheme");
  c.scheme = Lower(header.substr(start, i - start));
  while (true) {
    SkipSpace(header, i);
    while (i < header.size() && header[i] == ',') {  // empty list elements are allowed
      ++i;
      SkipSpace(header, i);
    }
    if (i >= header.size()) break;
    start = i;
    while (i < header.size() && IsTokenChar(header[i])) ++i;
    if (i == start)
      return Bad(header, "expected a parameter name at offset " + std::to_string(start));
    std::string key = Lower(header.substr(start, i - start));
    SkipSpace(header, i);
    if (i >= header.size() || header[i] != '=')
      return Bad(header, "parameter \"" + key + "\" has no value");
    ++i;
    SkipSpace(header, i);
    std::string value;
    if (i < header.size() && header[i] == '"') {
      if (!ReadQuoted(header, i, value))
        return Bad(header, "unterminated quoted value of \"" + key + "\"");
    } else {
      start = i;
      while (i < header.size() && IsTokenChar(header[i])) ++i;
      if (i == start) return Bad(header, "parameter \"" + key + "\" has an empty value");
      value = header.substr(start, i - start);
    }
    c.params[key] = value;
    SkipSpace(header, i);
    if (i < header.size() && header[i] != ',')
      return Bad(header, "expected ',' after \"" + key + "\"");
  }
  return c;
}

std::string TokenRequestUrl(const AuthChallenge& challenge, const std::string& scope) {
  std::string url = challenge.Param("realm");
  char sep = url.find('?') == std::string::npos ? '?' : '&';
  if (std::string service = challenge.Param("service"); !service.empty()) {
    url += sep + std::string("service=") + Escape(service);
    sep = '&';
  }
  std::string asked = challenge.Param("scope");
  if (asked.empty()) asked = scope;
  if (!asked.empty()) url += sep + std::string("scope=") + Escape(asked);
  return url;
}

}  // namespace stasis::images
