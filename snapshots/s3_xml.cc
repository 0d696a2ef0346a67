#include "snapshots/s3_xml.h"

#include <expat.h>

#include <cstdlib>
#include <memory>
#include <utility>

#include "snapshots/snapshot_reasons.h"

namespace stasis {
namespace {

// A parsed document as a small tree: S3 bodies are a few levels deep and at most ~1000 entries,
// so a tree is simpler than streaming handlers per response type.
struct Element {
  std::string name;
  std::string text;
  std::vector<Element> children;

  const Element* Child(std::string_view child_name) const {
    for (const Element& c : children) {
      if (c.name == child_name) return &c;
    }
    return nullptr;
  }
  std::string ChildText(std::string_view child_name) const {
    const Element* c = Child(child_name);
    return c != nullptr ? c->text : "";
  }
};

struct TreeBuilder {
  Element root;
  std::vector<Element*> stack;
};

std::string_view LocalName(const char* name) {
  std::string_view n(name);
  size_t colon = n.rfind(':');
  return colon == std::string_view::npos ? n : n.substr(colon + 1);
}

void OnStart(void* data, const XML_Char* name, const XML_Char**) {
  auto* b = static_cast<TreeBuilder*>(data);
  if (b->stack.empty()) {
    b->root.name = LocalName(name);
    b->stack.push_back(&b->root);
    return;
  }
  Element& parent = *b->stack.back();
  parent.children.push_back(Element{std::string(LocalName(name)), "", {}});
  b->stack.push_back(&parent.children.back());
}

void OnEnd(void* data, const XML_Char*) { static_cast<TreeBuilder*>(data)->stack.pop_back(); }

void OnText(void* data, const XML_Char* s, int len) {
  auto* b = static_cast<TreeBuilder*>(data);
  if (!b->stack.empty()) b->stack.back()->text.append(s, static_cast<size_t>(len));
}

std::optional<Element> ParseTree(std::string_view body) {
  std::unique_ptr<XML_ParserStruct, void (*)(XML_Parser)> parser(XML_ParserCreate("UTF-8"),
                                                                  XML_ParserFree);
  if (!parser) return std::nullopt;
  TreeBuilder builder;
  XML_SetUserData(parser.get(), &builder);
  XML_SetElementHandler(parser.get(), OnStart, OnEnd);
  XML_SetCharacterDataHandler(parser.get(), OnText);
  if (XML_Parse(parser.get(), body.data(), static_cast<int>(body.size()), XML_TRUE) !=
      XML_STATUS_OK) {
    return std::nullopt;
  }
  if (builder.root.name.empty()) return std::nullopt;
  return std::move(builder.root);
}

Status Unreadable(const std::string& what) {
  return Status(Code::kInternal, "object store answered an unreadable " + what,
                snapshot_reason::kStoreRequestRejected);
}

Result<Element> ParseRoot(std::string_view body, std::string_view root_name) {
  auto tree = ParseTree(body);
  if (!tree || tree->name != root_name) return Unreadable(std::string(root_name));
  return std::move(*tree);
}

bool ParseBool(const std::string& s) { return s == "true"; }

Time ParseStoreTime(const std::string& s) {
  auto t = ParseTime(s);
  return t.ok() ? *t : Time{};
}

}  // namespace

std::optional<S3ErrorBody> ParseS3Error(std::string_view body) {
  auto tree = ParseTree(body);
  if (!tree || tree->name != "Error") return std::nullopt;
  return S3ErrorBody{tree->ChildText("Code"), tree->ChildText("Message")};
}

Result<ListObjectsPage> ParseListObjectsV2(std::string_view body) {
  auto root = ParseRoot(body, "ListBucketResult");
  if (!root.ok()) return root.status();
  ListObjectsPage page;
  for (const Element& c : root->children) {
    if (c.name != "Contents") continue;
    S3Object object{c.ChildText("Key"), 0, c.ChildText("ETag")};
    object.size = std::strtoull(c.ChildText("Size").c_str(), nullptr, 10);
    object.last_modified = ParseStoreTime(c.ChildText("LastModified"));
    page.objects.push_back(std::move(object));
  }
  page.truncated = ParseBool(root->ChildText("IsTruncated"));
  page.next_continuation_token = root->ChildText("NextContinuationToken");
  if (page.truncated && page.next_continuation_token.empty()) {
    return Unreadable("truncated ListBucketResult without NextContinuationToken");
  }
  return page;
}

Result<std::string> ParseUploadId(std::string_view body) {
  auto root = ParseRoot(body, "InitiateMultipartUploadResult");
  if (!root.ok()) return root.status();
  std::string id = root->ChildText("UploadId");
  if (id.empty()) return Unreadable("InitiateMultipartUploadResult without UploadId");
  return id;
}

Result<ListUploadsPage> ParseListMultipartUploads(std::string_view body) {
  auto root = ParseRoot(body, "ListMultipartUploadsResult");
  if (!root.ok()) return root.status();
  ListUploadsPage page;
  for (const Element& c : root->children) {
    if (c.name == "Upload") {
      page.uploads.push_back({c.ChildText("Key"), c.ChildText("UploadId"), ParseStoreTime(c.ChildText("Initiated"))});
    }
  }
  page.truncated = ParseBool(root->ChildText("IsTruncated"));
  page.next_key_marker = root->ChildText("NextKeyMarker");
  page.next_upload_id_marker = root->ChildText("NextUploadIdMarker");
  return page;
}

std::string XmlEscape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::string CompleteMultipartUploadXml(const std::vector<CompletedPart>& parts) {
  std::string xml = "<CompleteMultipartUpload>";
  for (const CompletedPart& p : parts) {
    xml += "<Part><PartNumber>" + std::to_string(p.number) + "</PartNumber><ETag>" +
           XmlEscape(p.etag) + "</ETag></Part>";
  }
  return xml + "</CompleteMultipartUpload>";
}

}  // namespace stasis
