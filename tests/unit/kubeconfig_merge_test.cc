// A KUBECONFIG list merged by clientcmd's rules: first file wins per name (whole entries),
// current-context from the first file that sets it, relative paths against the defining
// file's directory, missing files skipped, nothing readable an error naming every file.
#include "controller/kubeconfig_merge.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "controller/rest_config.h"
#include "tests/support/sandbox.h"

namespace stasis {
namespace {

namespace fs = std::filesystem;

const char* kPemA = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n";
const char* kPemB = "-----BEGIN CERTIFICATE-----\nBBBB\n-----END CERTIFICATE-----\n";

class KubeconfigMergeTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& content) {
    return tmp_.Write(name, content);
  }
  stasis::testing::TempDir tmp_{"stasis-kcmerge-"};
  const fs::path dir_ = tmp_.path();
};

TEST_F(KubeconfigMergeTest, SplitDropsEmptyAndRepeatedEntries) {
  EXPECT_EQ(SplitKubeconfigList("a::b:a:"), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(SplitKubeconfigList("/x/config"), (std::vector<std::string>{"/x/config"}));
  EXPECT_TRUE(SplitKubeconfigList(":").empty());
}

TEST_F(KubeconfigMergeTest, FirstFileToDefineANameWinsWhole) {
  const std::string a = Write("a", "clusters:\n- name: k\n  cluster: {server: 'https://a:1'}\n"
                                   "users:\n- name: u\n  user: {token: from-a}\n");
  const std::string b = Write("b", "clusters:\n- name: k\n  cluster: {server: 'https://b:1', tls-server-name: b}\n"
                                   "- name: only-b\n  cluster: {server: 'https://b:2'}\n"
                                   "users:\n- name: u\n  user: {token: from-b}\n"
                                   "contexts:\n- name: c\n  context: {cluster: k, user: u}\n");
  auto merged = MergeKubeconfigFiles({a, b});
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->files, (std::vector<std::string>{a, b}));
  EXPECT_EQ(merged->clusters.at("k").body["server"].as<std::string>(), "https://a:1");
  // Whole: the second file's fields of the same name are discarded, even those the first lacks.
  EXPECT_FALSE(merged->clusters.at("k").body["tls-server-name"]);
  EXPECT_EQ(merged->clusters.at("k").where, "kubeconfig " + a);
  EXPECT_EQ(merged->clusters.at("only-b").body["server"].as<std::string>(), "https://b:2");
  EXPECT_EQ(merged->users.at("u").body["token"].as<std::string>(), "from-a");
  EXPECT_EQ(merged->contexts.at("c").where, "kubeconfig " + b);
  // The other order: the other file wins.
  auto reversed = MergeKubeconfigFiles({b, a});
  ASSERT_TRUE(reversed.ok());
  EXPECT_EQ(reversed->clusters.at("k").body["server"].as<std::string>(), "https://b:1");
  EXPECT_EQ(reversed->users.at("u").body["token"].as<std::string>(), "from-b");
}

TEST_F(KubeconfigMergeTest, CurrentContextComesFromTheFirstFileThatSetsIt) {
  const std::string none = Write("none", "contexts: []\n");
  const std::string empty_value = Write("empty-value", "current-context: ''\n");
  const std::string b = Write("b", "current-context: from-b\n");
  const std::string c = Write("c", "current-context: from-c\n");
  auto merged = MergeKubeconfigFiles({none, empty_value, b, c});
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->current_context, "from-b");
}

TEST_F(KubeconfigMergeTest, MissingFilesAreSkipped) {
  const std::string a = Write("a", "current-context: x\n");
  auto merged = MergeKubeconfigFiles({(dir_ / "absent").string(), a});
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->files, (std::vector<std::string>{a}));
  EXPECT_EQ(merged->current_context, "x");
}

TEST_F(KubeconfigMergeTest, NothingReadableIsAnErrorNamingEveryFile) {
  const std::string absent = (dir_ / "absent").string();
  const std::string empty = Write("empty", "");
  auto merged = MergeKubeconfigFiles({absent, empty});
  ASSERT_FALSE(merged.ok());
  EXPECT_EQ(merged.status().code(), Code::kInvalidArgument);
  EXPECT_NE(merged.status().message().find(absent + " (missing)"), std::string::npos) << merged.status().message();
  EXPECT_NE(merged.status().message().find(empty + " (empty)"), std::string::npos) << merged.status().message();
  EXPECT_FALSE(MergeKubeconfigFiles({}).ok());
}

TEST_F(KubeconfigMergeTest, AFileThatCannotBeParsedIsAnErrorNamingIt) {
  const std::string good = Write("good", "current-context: x\n");
  const std::string dup = Write("dup", "users:\n- name: u\n  user: {}\n- name: u\n  user: {}\n");
  auto r = MergeKubeconfigFiles({good, dup});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("kubeconfig " + dup + ": 'users' names 'u' twice"), std::string::npos)
      << r.status().message();
  const std::string bad = Write("bad", "{{{");
  r = MergeKubeconfigFiles({good, bad});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("kubeconfig " + bad + ": is not valid YAML"), std::string::npos);
  const std::string unnamed = Write("unnamed", "clusters:\n- cluster: {server: 'https://h:1'}\n");
  r = MergeKubeconfigFiles({good, unnamed});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("kubeconfig " + unnamed + ": an entry of 'clusters' has no name"),
            std::string::npos) << r.status().message();
}

// Relative paths resolve against the directory of the file that defined the entry: the CA next
// to the cluster's file, the token next to the user's.
TEST_F(KubeconfigMergeTest, RelativePathsResolveAgainstTheDefiningFile) {
  Write("one/ca.crt", kPemA);
  Write("two/ca.crt", kPemB);  // a decoy: the context's file is here, the cluster's is not
  Write("two/token", "token-from-two\n");
  const std::string one = Write("one/config", "clusters:\n- name: k\n  cluster:\n"
                                              "    server: https://h:1\n    certificate-authority: ca.crt\n");
  const std::string two = Write("two/config", "current-context: c\nusers:\n- name: u\n  user: {tokenFile: token}\n"
                                              "contexts:\n- name: c\n  context: {cluster: k, user: u}\n");
  auto config = LoadKubeconfigList({one, two});
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  EXPECT_EQ(config->server, "https://h:1");
  EXPECT_EQ(config->ca_pem, kPemA);
  ASSERT_TRUE(config->bearer_token);
  EXPECT_EQ(*config->bearer_token(), "token-from-two");
}

// An error about one entry names the file that defined it; one about the whole, every file.
TEST_F(KubeconfigMergeTest, ErrorsNameTheFileThatDefinedTheEntry) {
  const std::string one = Write("one", "clusters:\n- name: k\n  cluster: {certificate-authority: ca.crt}\n");
  const std::string two = Write("two", "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k}\n");
  auto r = LoadKubeconfigList({one, two});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kInvalidArgument);
  EXPECT_NE(r.status().message().find("kubeconfig " + one + ": cluster 'k' has no server"), std::string::npos)
      << r.status().message();
  const std::string three = Write("three", "current-context: nowhere\n");
  r = LoadKubeconfigList({three, one});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("kubeconfig " + three + ":" + one + ": no context named 'nowhere'"),
            std::string::npos) << r.status().message();
}

// $KUBECONFIG is a merged list; --kubeconfig is one file, never merged (kubectl's rule).
TEST_F(KubeconfigMergeTest, EnvironmentListIsMergedAndTheFlagIsOneFile) {
  Write("ca.crt", kPemA);
  const std::string cluster = Write("cluster", "clusters:\n- name: k\n  cluster:\n"
                                               "    server: https://h:1\n    certificate-authority: ca.crt\n");
  const std::string context = Write("context", "current-context: c\ncontexts:\n- name: c\n  context: {cluster: k}\n");
  const std::string list = (dir_ / "absent").string() + ":" + context + ":" + cluster;
  ::setenv("KUBECONFIG", list.c_str(), 1);
  auto merged = LoadRestConfig("");
  auto flag = LoadRestConfig(context);
  ::unsetenv("KUBECONFIG");
  ASSERT_TRUE(merged.ok()) << merged.status().ToString();
  EXPECT_EQ(merged->server, "https://h:1");
  ASSERT_FALSE(flag.ok());
  EXPECT_NE(flag.status().message().find("no cluster named 'k'"), std::string::npos) << flag.status().message();
}

}  // namespace
}  // namespace stasis
