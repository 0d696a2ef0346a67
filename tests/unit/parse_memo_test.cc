// What placement reads from the cache without parsing the fleet on every bind: ParseMemo
// reuses a parse while the cache holds the same object and forgets what it no longer lists; the
// promised-actor index lists exactly the actors CountLiveNodes counts against a node.
#include "controller/parse_memo.h"

#include <gtest/gtest.h>

#include "reconcilers/cluster/cluster_reconciler.h"

namespace stasis {
namespace {

using nlohmann::json;

ObjectPtr Obj(const std::string& name, int value) {
  return std::make_shared<const json>(json{{"metadata", {{"name", name}}}, {"value", value}});
}

ParseMemo<int> ValueMemo() {
  return ParseMemo<int>([](const json& o) -> std::optional<int> {
    if (!o.contains("value")) return std::nullopt;
    return o["value"].get<int>();
  });
}

TEST(ParseMemo, ParsesEachObjectOnceWhileTheCacheHoldsIt) {
  auto memo = ValueMemo();
  const std::vector<ObjectPtr> objects = {Obj("a", 1), Obj("b", 2)};
  auto first = memo.ParseAll(objects);
  auto second = memo.ParseAll(objects);
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(*second[0], 1);
  EXPECT_EQ(*second[1], 2);
  EXPECT_EQ(memo.parses(), 2u) << "the second call found both objects already parsed";
  EXPECT_EQ(first[0], second[0]) << "the same parse is handed out";
}

TEST(ParseMemo, AReplacedObjectIsParsedAgain) {
  auto memo = ValueMemo();
  ObjectPtr a = Obj("a", 1), b = Obj("b", 2);
  (void)memo.ParseAll({a, b});
  ObjectPtr b2 = Obj("b", 3);  // the cache's update: a new pointer for the same key
  auto out = memo.ParseAll({a, b2});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(*out[1], 3);
  EXPECT_EQ(memo.parses(), 3u) << "only the replaced object was parsed again";
}

TEST(ParseMemo, ForgetsWhatIsNoLongerListedAndLeavesOutWhatDoesNotParse) {
  auto memo = ValueMemo();
  ObjectPtr a = Obj("a", 1), bad = std::make_shared<const json>(json{{"metadata", {{"name", "x"}}}});
  auto out = memo.ParseAll({a, bad});
  ASSERT_EQ(out.size(), 1u) << "an object that does not parse is left out";
  (void)memo.ParseAll({bad});
  (void)memo.ParseAll({a});
  EXPECT_EQ(memo.parses(), 3u) << "a was forgotten when it was not listed, and parsed again";
}

std::vector<std::string> Promised(const json& actor) { return IndexPromised()(actor); }

TEST(IndexPromised, ListsTheActorsBoundToANodeThatWillClaimAWorkerThere) {
  const json bound = {{"spec", {{"desiredState", "Running"}}}, {"status", {{"nodeName", "n1"}}}};
  EXPECT_EQ(Promised(bound), std::vector<std::string>{kPromised});
  json resuming = bound;
  resuming["status"]["status"] = "STATUS_SUSPENDED";
  EXPECT_EQ(Promised(resuming), std::vector<std::string>{kPromised}) << "at rest, bound, asked to run";
  json defaulted = bound;
  defaulted["spec"].erase("desiredState");
  EXPECT_EQ(Promised(defaulted), std::vector<std::string>{kPromised}) << "desiredState defaults to Running";

  json unbound = bound;
  unbound["status"].erase("nodeName");
  json holding = bound;
  holding["status"]["workerName"] = "n1-slot0";
  json running = bound;
  running["status"]["status"] = "STATUS_RUNNING";
  json at_rest = bound;
  at_rest["spec"]["desiredState"] = "Suspended";
  for (const json& o : {unbound, holding, running, at_rest}) {
    EXPECT_TRUE(Promised(o).empty()) << o.dump();
  }
}

}  // namespace
}  // namespace stasis
