// `stasis node` end to end, every (resting status, desired state) pair as docs/api.md lists it:
// RUNNING, PAUSED, SUSPENDED and FAILED, each asked for Running, Paused and Suspended (or, for
// the status it already has, any other spec change: a new generation). The doc is the test's
// table: for each pair its "ends" status, the condition that says so and the `kubectl wait`
// recipe are parsed from docs/api.md, the recipe is run as written (the actor's name and
// namespace put in) with the real kubectl, and the actor is then checked against the doc: the
// status, the Ready/Progressing/Paused/Suspended conditions, every condition's
// observedGeneration equal to status.observedGeneration and metadata.generation, and the worker
// (held while RUNNING, Free otherwise). The fixture is tests/support/node_agent_fixture.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/support/node_agent_fixture.h"
#include "tests/support/sandbox.h"

namespace stasis::testing {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::chrono_literals;

struct ExpectedCondition {
  std::string type, status, reason;  // reason "" = not documented for the pair
};

// One row of docs/api.md's "Every (status, desired state) pair".
struct DocumentedPair {
  std::string status, desired, ends, recipe;
  std::vector<ExpectedCondition> conditions;
};

// The Paused and Suspended conditions docs/api.md gives a status.
struct StateConditions {
  std::string paused, suspended, reason;
};

std::vector<std::string> Cells(const std::string& row) {
  std::vector<std::string> cells;
  std::stringstream in(row);
  std::string cell;
  std::getline(in, cell, '|');  // before the leading '|'
  while (std::getline(in, cell, '|')) {
    const auto b = cell.find_first_not_of(' '), e = cell.find_last_not_of(' ');
    cells.push_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1));
  }
  if (!cells.empty() && cells.back().empty()) cells.pop_back();  // after the trailing '|'
  return cells;
}

// The `…` spans of a cell, in order.
std::vector<std::string> CodeSpans(const std::string& cell) {
  std::vector<std::string> out;
  for (size_t at = cell.find('`'); at != std::string::npos;) {
    const size_t end = cell.find('`', at + 1);
    if (end == std::string::npos) break;
    out.push_back(cell.substr(at + 1, end - at - 1));
    at = cell.find('`', end + 1);
  }
  return out;
}

std::vector<std::string> DocLines() {
  std::stringstream in(ReadFile(std::string(STASIS_SOURCE_DIR) + "/docs/api.md"));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<DocumentedPair> DocumentedPairs() {
  static const std::set<std::string> kDesired = {"Running", "Paused", "Suspended"};
  static const std::regex kCondition("`(\\w+)=(True|False)`( reason `(\\w+)`)?");
  std::vector<DocumentedPair> pairs;
  for (const auto& line : DocLines()) {
    const auto cells = Cells(line);
    if (cells.size() != 6 || !cells[0].starts_with("`STATUS_")) continue;
    const auto status = CodeSpans(cells[0]), desired = CodeSpans(cells[1]), ends = CodeSpans(cells[3]);
    const auto recipe = CodeSpans(cells[5]);
    if (status.size() != 1 || desired.size() != 1 || !kDesired.contains(desired[0])) continue;
    DocumentedPair p{status[0], desired[0], ends.empty() ? "" : ends[0], recipe.empty() ? "" : recipe[0], {}};
    for (std::sregex_iterator it(cells[4].begin(), cells[4].end(), kCondition), end; it != end; ++it) {
      p.conditions.push_back({(*it)[1], (*it)[2], (*it)[4]});
    }
    pairs.push_back(p);
  }
  return pairs;
}

// "STATUS_RUNNING" → "Running": the reason docs/api.md gives by "the status (…)".
std::string StatusReason(const std::string& status) {
  std::string word = status.substr(std::string("STATUS_").size());
  for (size_t i = 1; i < word.size(); ++i) word[i] = static_cast<char>(std::tolower(word[i]));
  return word;
}

std::map<std::string, StateConditions> DocumentedStateConditions() {
  std::map<std::string, StateConditions> out;
  for (const auto& line : DocLines()) {
    const auto cells = Cells(line);
    if (cells.size() != 4 || !cells[0].starts_with("`STATUS_")) continue;
    if ((cells[1] != "True" && cells[1] != "False") || (cells[2] != "True" && cells[2] != "False")) continue;
    const auto reasons = CodeSpans(cells[3]);
    for (const auto& status : CodeSpans(cells[0])) {
      out[status] = {cells[1], cells[2], reasons.size() == 1 ? reasons[0] : StatusReason(status)};
    }
  }
  return out;
}

// The recipe of the table "What each desired state does …", by desired state.
std::map<std::string, std::string> DocumentedDesiredStateRecipes() {
  std::map<std::string, std::string> out;
  for (const auto& line : DocLines()) {
    const auto cells = Cells(line);
    if (cells.size() != 5) continue;
    const auto desired = CodeSpans(cells[0]), recipe = CodeSpans(cells[4]);
    if (desired.size() == 1 && recipe.size() == 1 && recipe[0].starts_with("kubectl wait")) {
      out[desired[0]] = recipe[0];
    }
  }
  return out;
}

// The doc's table is complete: every resting status × desired state once, each with an end,
// a condition and a recipe; for every status but FAILED the recipe is the one docs/api.md
// gives for that desired state.
TEST(StatePairsDoc, EveryPairOnceWithAnEndAConditionAndARecipe) {
  const auto pairs = DocumentedPairs();
  const auto recipes = DocumentedDesiredStateRecipes();
  EXPECT_EQ(recipes.size(), 3u);
  std::set<std::pair<std::string, std::string>> seen;
  for (const auto& p : pairs) {
    SCOPED_TRACE(p.status + " × " + p.desired);
    EXPECT_TRUE(seen.insert({p.status, p.desired}).second) << "listed twice";
    EXPECT_TRUE(p.ends.starts_with("STATUS_"));
    EXPECT_FALSE(p.conditions.empty());
    EXPECT_TRUE(p.recipe.starts_with("kubectl wait actor/NAME --for=")) << p.recipe;
    if (p.status != "STATUS_FAILED") {
      EXPECT_EQ(p.recipe, recipes.contains(p.desired) ? recipes.at(p.desired) : "");
    }
  }
  for (const char* s : {"STATUS_RUNNING", "STATUS_PAUSED", "STATUS_SUSPENDED", "STATUS_FAILED"}) {
    for (const char* d : {"Running", "Paused", "Suspended"}) {
      EXPECT_TRUE(seen.contains({s, d})) << s << " × " << d << " is not in docs/api.md";
    }
  }
  EXPECT_EQ(DocumentedStateConditions().size(), 7u) << "every status but UNSPECIFIED";
}

class StatePairsTest : public NodeAgentTest {
 protected:
  // The pair (the actor's status now) × `desired`: sets it (with `spec`'s other fields, and a
  // new timeout when the desired state does not change, so that there is a new generation to
  // act on), runs the doc's recipe, and checks the actor against the doc. False when the pair
  // did not end as documented: the chain that follows would start from the wrong status.
  bool RunPair(const Agent& a, const std::string& name, const std::string& desired, json spec = json::object());

  // The conditions and the worker of an actor at rest in the documented status.
  void ExpectAtRest(const Agent& a, const std::string& name, const json& actor, const DocumentedPair& p);

  std::set<std::pair<std::string, std::string>> ran_;
  int bump_ = 0;
};

// The recipe as written, the actor's name and namespace put in: argv for kubectl (the shell's
// single quotes dropped, as the shell would).
std::vector<std::string> RecipeArgs(std::string recipe, const std::string& name, const std::string& ns) {
  std::vector<std::string> args;
  std::erase(recipe, '\'');
  std::stringstream in(recipe);
  for (std::string word; in >> word;) {
    if (word == "kubectl") continue;  // ControlPlane::Kubectl runs it with the test's kubeconfig
    if (word == "actor/NAME") word = "actor/" + name;
    args.push_back(word);
  }
  args.insert(args.end(), {"-n", ns, "--timeout=50s"});
  return args;
}

bool StatePairsTest::RunPair(const Agent& a, const std::string& name, const std::string& desired, json spec) {
  const json before = GetActor(name);
  const std::string from = StatusOf(before);
  const std::string pair_name = from + " × " + desired;
  SCOPED_TRACE("pair " + pair_name);
  const auto pairs = DocumentedPairs();
  const auto p = std::find_if(pairs.begin(), pairs.end(),
                              [&](const DocumentedPair& x) { return x.status == from && x.desired == desired; });
  if (p == pairs.end()) {
    ADD_FAILURE() << pair_name << " is not in docs/api.md";
    return false;
  }
  ran_.insert({from, desired});
  spec["desiredState"] = desired;
  if (before["spec"].value("desiredState", "") == desired) spec["timeouts"] = {{"restoreSeconds", 61 + bump_++}};
  Patch(name, spec);
  // Run at once, so that it also shows the recipe waits for the transition and returns once
  // the documented status is reached, not before.
  const auto wait = Kubectl(RecipeArgs(p->recipe, name, ns_));
  EXPECT_EQ(wait.exit_code, 0) << pair_name << ": `" << p->recipe << "` did not return: " << wait.Summary()
                               << "\n" << wait.err << "\n" << GetActor(name)["status"].dump(2) << "\n" << AgentLogs();
  json actor = GetActor(name);
  if (wait.exit_code == 0) {
    EXPECT_EQ(StatusOf(actor), p->ends) << pair_name << ": the recipe returned before the documented status";
  }
  // kubectl wait --for=condition waits for the condition's observedGeneration to reach the
  // object's generation; a jsonpath recipe (FAILED) does not, so the acknowledgement is awaited.
  const bool ended = WaitActor(name, [&](const json& x) {
    return StatusOf(x) == p->ends && x["status"].value("observedGeneration", -1) == x["metadata"].value("generation", 0);
  }, 60s, p->ends + " with its generation observed (" + pair_name + ")", &actor);
  if (!ended) return false;
  ExpectAtRest(a, name, actor, *p);
  return !::testing::Test::HasFailure();
}

void StatePairsTest::ExpectAtRest(const Agent& a, const std::string& name, const json& actor,
                                  const DocumentedPair& p) {
  const json& status = actor["status"];
  const json gen = actor["metadata"]["generation"];
  EXPECT_EQ(status["observedGeneration"], gen) << status.dump();
  for (const auto& c : status["conditions"]) {
    EXPECT_EQ(c["observedGeneration"], gen) << c.dump() << " in " << status.dump();
  }
  const bool running = p.ends == "STATUS_RUNNING";
  EXPECT_TRUE(CondIs(actor, "Ready", running ? "True" : "False")) << status.dump();
  EXPECT_TRUE(CondIs(actor, "Progressing", "False")) << status.dump();
  const auto state = DocumentedStateConditions()[p.ends];
  EXPECT_TRUE(CondIs(actor, "Paused", state.paused)) << status.dump();
  EXPECT_TRUE(CondIs(actor, "Suspended", state.suspended)) << status.dump();
  EXPECT_EQ(CondReason(actor, "Paused"), state.reason) << status.dump();
  EXPECT_EQ(CondReason(actor, "Suspended"), state.reason) << status.dump();
  for (const auto& c : p.conditions) {
    EXPECT_TRUE(CondIs(actor, c.type, c.status)) << c.type << "=" << c.status << " documented: " << status.dump();
    if (!c.reason.empty()) {
      EXPECT_EQ(CondReason(actor, c.type), c.reason) << status.dump();
    }
  }
  if (running) {
    ExpectHeldBy(a.node, name, actor);
  } else {
    ExpectAllWorkersFree(a.node);
    EXPECT_FALSE(StatusField(actor, "workerName").is_string()) << status.dump();
  }
}

// RUNNING, PAUSED and SUSPENDED, each asked for all three desired states, on one actor: one
// chain of transitions that visits the nine pairs (six checkpoints, commits and restores).
TEST_F(StatePairsTest, PairsFromResting) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 1);
  ASSERT_NE(a, nullptr);
  CreateActor("p", CounterSpec(a->node));
  ASSERT_TRUE(WaitStatus("p", "STATUS_RUNNING", 30s));
  for (const char* desired : {"Running", "Paused", "Paused", "Running", "Suspended", "Suspended", "Running",
                              "Paused", "Suspended", "Paused"}) {
    ASSERT_TRUE(RunPair(*a, "p", desired)) << "the chain stops here";
  }
  EXPECT_EQ(StatusOf(GetActor("p")), "STATUS_SUSPENDED");
  for (const char* s : {"STATUS_RUNNING", "STATUS_PAUSED", "STATUS_SUSPENDED"}) {
    for (const char* d : {"Running", "Paused", "Suspended"}) EXPECT_TRUE(ran_.contains({s, d})) << s << " × " << d;
  }
}

// FAILED (a bundle with nothing in it), asked for Paused and Suspended: it stays FAILED; asked
// for Running with the bundle fixed in the same patch: it runs.
TEST_F(StatePairsTest, PairsFromFailed) {
  Agent* a = StartAgent(Node("a"), PinnedRunsc(), {}, 1);
  ASSERT_NE(a, nullptr);
  const fs::path empty_bundle = BundleRoot() / "empty-bundle";
  fs::create_directories(empty_bundle);
  json spec = CounterSpec(a->node);
  spec["bundle"] = empty_bundle.string();
  CreateActor("f", spec);
  ASSERT_TRUE(WaitStatus("f", "STATUS_FAILED", 30s));
  ASSERT_TRUE(RunPair(*a, "f", "Paused"));
  ASSERT_TRUE(RunPair(*a, "f", "Suspended"));
  ASSERT_TRUE(RunPair(*a, "f", "Running", {{"bundle", bundle_->dir().string()}}));
  WaitCounter(*a, "f", 2);
}

}  // namespace
}  // namespace stasis::testing
