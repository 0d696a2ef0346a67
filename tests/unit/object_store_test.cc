// The informer's cache: upsert, remove and replace (which reports what vanished), keys of
// namespaced and cluster-scoped objects, the namespace and field indexes (an object that
// changes its index value leaves its old bucket; Replace rebuilds them), and readers running
// beside a writer.
#include "controller/object_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>
#include <vector>

namespace stasis {
namespace {

using nlohmann::json;

// An Actor-like object; node "" leaves spec.nodeName out, so it is not in the node index.
ObjectPtr Obj(const std::string& ns, const std::string& name, const std::string& node = "",
              const std::string& rv = "1") {
  json o = {{"metadata", {{"name", name}, {"resourceVersion", rv}}}, {"spec", json::object()}};
  if (!ns.empty()) o["metadata"]["namespace"] = ns;
  if (!node.empty()) o["spec"]["nodeName"] = node;
  return std::make_shared<const json>(std::move(o));
}

std::set<std::string> Names(const std::vector<ObjectPtr>& objs) {
  std::set<std::string> out;
  for (const auto& o : objs) out.insert(ObjectKey(*o));
  return out;
}

// The two indexes the node agent uses. (ObjectStore holds a mutex: not movable.)
void AddIndexes(ObjectStore& s) {
  s.AddIndex("namespace", IndexByNamespace());
  s.AddIndex("node", IndexByField("/spec/nodeName"));
}

TEST(ObjectKeyTest, NamespacedAndClusterScoped) {
  EXPECT_EQ(ObjectKey(*Obj("team-a", "counter")), "team-a/counter");
  EXPECT_EQ(ObjectKey(*Obj("", "node-a-gpu0")), "node-a-gpu0");
  EXPECT_EQ(ObjectKey("team-a", "counter"), "team-a/counter");
  EXPECT_EQ(ObjectKey("", "node-a-gpu0"), "node-a-gpu0");
  // An explicit empty namespace is cluster-scoped too.
  EXPECT_EQ(ObjectKey(json{{"metadata", {{"name", "w"}, {"namespace", ""}}}}), "w");
}

TEST(ObjectStoreTest, UpsertReturnsPreviousAndRemoveReturnsRemoved) {
  ObjectStore s;
  EXPECT_EQ(s.Upsert(Obj("a", "x", "", "1")), nullptr);
  auto v2 = Obj("a", "x", "", "2");
  auto prev = s.Upsert(v2);
  ASSERT_NE(prev, nullptr);
  EXPECT_EQ((*prev)["metadata"]["resourceVersion"], "1");
  EXPECT_EQ(s.Get("a/x"), v2);  // the same shared snapshot, not a copy
  EXPECT_EQ(s.size(), 1u);

  EXPECT_EQ(s.Remove("a/nope"), nullptr);
  auto removed = s.Remove("a/x");
  EXPECT_EQ(removed, v2);
  EXPECT_EQ(s.Get("a/x"), nullptr);
  EXPECT_EQ(s.size(), 0u);
  EXPECT_TRUE(s.Keys().empty());
}

TEST(ObjectStoreTest, ReaderKeepsItsSnapshotWhileTheObjectIsReplaced) {
  ObjectStore s;
  s.Upsert(Obj("a", "x", "n1", "1"));
  ObjectPtr held = s.Get("a/x");
  s.Upsert(Obj("a", "x", "n2", "2"));
  s.Remove("a/x");
  EXPECT_EQ((*held)["metadata"]["resourceVersion"], "1");
  EXPECT_EQ((*held)["spec"]["nodeName"], "n1");
}

TEST(ObjectStoreTest, ReplaceReturnsVanishedObjects) {
  ObjectStore s;
  s.Upsert(Obj("a", "keep"));
  s.Upsert(Obj("a", "gone1"));
  s.Upsert(Obj("", "gone2"));
  auto vanished = s.Replace({Obj("a", "keep", "", "5"), Obj("b", "new")});
  EXPECT_EQ(Names(vanished), (std::set<std::string>{"a/gone1", "gone2"}));
  EXPECT_EQ(s.size(), 2u);
  EXPECT_EQ((*s.Get("a/keep"))["metadata"]["resourceVersion"], "5");
  ASSERT_NE(s.Get("b/new"), nullptr);
  EXPECT_EQ(s.Get("a/gone1"), nullptr);
  EXPECT_EQ(s.Keys(), (std::vector<std::string>{"a/keep", "b/new"}));

  // Replacing with nothing empties the store and reports everything.
  EXPECT_EQ(Names(s.Replace({})), (std::set<std::string>{"a/keep", "b/new"}));
  EXPECT_EQ(s.size(), 0u);
}

TEST(ObjectStoreTest, IndexesByNamespaceAndField) {
  ObjectStore s;
  AddIndexes(s);
  s.Upsert(Obj("a", "x", "node-1"));
  s.Upsert(Obj("a", "y", "node-2"));
  s.Upsert(Obj("b", "z", "node-1"));
  s.Upsert(Obj("b", "unscheduled"));  // no spec.nodeName: in no node bucket
  s.Upsert(Obj("", "cluster", "node-2"));  // no namespace: in no namespace bucket

  EXPECT_EQ(Names(s.ByIndex("namespace", "a")), (std::set<std::string>{"a/x", "a/y"}));
  EXPECT_EQ(Names(s.ByIndex("namespace", "b")), (std::set<std::string>{"b/z", "b/unscheduled"}));
  EXPECT_TRUE(s.ByIndex("namespace", "").empty());
  EXPECT_EQ(Names(s.ByIndex("node", "node-1")), (std::set<std::string>{"a/x", "b/z"}));
  EXPECT_EQ(Names(s.ByIndex("node", "node-2")), (std::set<std::string>{"a/y", "cluster"}));
  EXPECT_TRUE(s.ByIndex("node", "").empty());
  EXPECT_TRUE(s.ByIndex("node", "node-9").empty());
  EXPECT_TRUE(s.ByIndex("no-such-index", "a").empty());
}

TEST(ObjectStoreTest, ObjectMovingBetweenIndexValuesLeavesTheOldBucket) {
  ObjectStore s;
  AddIndexes(s);
  s.Upsert(Obj("a", "x", "node-1"));
  s.Upsert(Obj("a", "other", "node-1"));
  s.Upsert(Obj("a", "x", "node-2", "2"));
  EXPECT_EQ(Names(s.ByIndex("node", "node-1")), std::set<std::string>{"a/other"});
  EXPECT_EQ(Names(s.ByIndex("node", "node-2")), std::set<std::string>{"a/x"});
  // The bucket returns the current object, not the one that was indexed first.
  EXPECT_EQ((*s.ByIndex("node", "node-2")[0])["metadata"]["resourceVersion"], "2");

  // Losing the field takes it out of every node bucket.
  s.Upsert(Obj("a", "x", "", "3"));
  EXPECT_TRUE(s.ByIndex("node", "node-2").empty());
  EXPECT_EQ(Names(s.ByIndex("namespace", "a")), (std::set<std::string>{"a/x", "a/other"}));

  s.Remove("a/other");
  EXPECT_TRUE(s.ByIndex("node", "node-1").empty());
  EXPECT_EQ(Names(s.ByIndex("namespace", "a")), std::set<std::string>{"a/x"});
}

TEST(ObjectStoreTest, ReplaceRebuildsIndexes) {
  ObjectStore s;
  AddIndexes(s);
  s.Upsert(Obj("a", "x", "node-1"));
  s.Upsert(Obj("a", "y", "node-1"));
  s.Upsert(Obj("b", "z", "node-2"));
  s.Replace({Obj("a", "x", "node-3", "2"), Obj("c", "w", "node-1")});
  EXPECT_EQ(Names(s.ByIndex("node", "node-1")), std::set<std::string>{"c/w"});
  EXPECT_TRUE(s.ByIndex("node", "node-2").empty());
  EXPECT_EQ(Names(s.ByIndex("node", "node-3")), std::set<std::string>{"a/x"});
  EXPECT_EQ(Names(s.ByIndex("namespace", "a")), std::set<std::string>{"a/x"});
  EXPECT_TRUE(s.ByIndex("namespace", "b").empty());
  EXPECT_EQ(Names(s.ByIndex("namespace", "c")), std::set<std::string>{"c/w"});
}

TEST(ObjectStoreTest, IndexAddedAfterObjectsIndexesThem) {
  ObjectStore s;
  s.Upsert(Obj("a", "x", "node-1"));
  s.AddIndex("node", IndexByField("/spec/nodeName"));
  EXPECT_EQ(Names(s.ByIndex("node", "node-1")), std::set<std::string>{"a/x"});
}

TEST(ObjectStoreTest, FieldIndexIgnoresNonStringAndEmptyValues) {
  ObjectStore s;
  s.AddIndex("node", IndexByField("/spec/nodeName"));
  s.Upsert(std::make_shared<const json>(json{{"metadata", {{"name", "num"}}}, {"spec", {{"nodeName", 7}}}}));
  s.Upsert(std::make_shared<const json>(json{{"metadata", {{"name", "empty"}}}, {"spec", {{"nodeName", ""}}}}));
  s.Upsert(std::make_shared<const json>(json{{"metadata", {{"name", "nospec"}}}}));
  EXPECT_EQ(s.size(), 3u);
  EXPECT_TRUE(s.ByIndex("node", "").empty());
  EXPECT_TRUE(s.ByIndex("node", "7").empty());
}

// One writer upserts (moving objects between nodes) and removes while readers list, get and
// read indexes. Every reader view must be self-consistent: a List never has more than the
// number of keys, the node buckets together never hold more objects than the store, and each
// object in a bucket really has that node.
TEST(ObjectStoreTest, ConcurrentReadersWhileAWriterUpserts) {
  ObjectStore s;
  AddIndexes(s);
  constexpr int kObjects = 200;
  constexpr int kRounds = 30;
  const std::vector<std::string> nodes = {"n0", "n1", "n2", "n3"};
  std::atomic<bool> done{false};
  std::atomic<int> bad{0};
  std::atomic<long> reads{0};

  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      while (!done.load()) {
        auto all = s.List();
        if (all.size() > kObjects) bad++;
        // Each call is one consistent snapshot; a sum over several calls is not (an object
        // may move between buckets between two calls and be counted twice), so only each
        // bucket is checked on its own.
        for (const auto& n : nodes) {
          auto bucket = s.ByIndex("node", n);
          if (bucket.size() > kObjects) bad++;
          for (const auto& o : bucket) {
            if (o->at("spec").value("nodeName", "") != n) bad++;
          }
        }
        for (const auto& o : s.ByIndex("namespace", "ns")) {
          if (o->at("metadata").value("namespace", "") != "ns") bad++;
        }
        if (auto o = s.Get("ns/obj-" + std::to_string(r * 7 % kObjects)); o) {
          if ((*o)["metadata"]["name"] != "obj-" + std::to_string(r * 7 % kObjects)) bad++;
        }
        if (s.Keys().size() > kObjects) bad++;
        reads++;
      }
    });
  }

  std::thread writer([&] {
    for (int round = 0; round < kRounds; ++round) {
      for (int i = 0; i < kObjects; ++i) {
        s.Upsert(Obj("ns", "obj-" + std::to_string(i), nodes[(i + round) % nodes.size()],
                     std::to_string(round)));
      }
      for (int i = 0; i < kObjects; i += 10) s.Remove("ns/obj-" + std::to_string(i));
    }
    // End with a full set, through Replace.
    std::vector<ObjectPtr> all;
    for (int i = 0; i < kObjects; ++i) all.push_back(Obj("ns", "obj-" + std::to_string(i), "n0"));
    s.Replace(std::move(all));
  });
  writer.join();
  done = true;
  for (auto& t : readers) t.join();

  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(s.size(), static_cast<size_t>(kObjects));
  EXPECT_EQ(s.ByIndex("node", "n0").size(), static_cast<size_t>(kObjects));
  EXPECT_EQ(s.ByIndex("namespace", "ns").size(), static_cast<size_t>(kObjects));
  for (const auto& n : {"n1", "n2", "n3"}) EXPECT_TRUE(s.ByIndex("node", n).empty()) << n;
}

}  // namespace
}  // namespace stasis
