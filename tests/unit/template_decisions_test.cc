#include "reconcilers/cluster/template_decisions.h"

#include <gtest/gtest.h>

namespace stasis {
namespace {

using api::ActorState;
using api::DesiredState;

api::Snapshot Committed(const std::string& id) {
  api::Snapshot s;
  s.id = id;
  s.trigger = api::SnapshotTrigger::kSuspend;
  s.size_bytes = 42;
  return s;
}

GoldenActorView Golden(int64_t generation, ActorState status, DesiredState desired = DesiredState::kRunning) {
  GoldenActorView g;
  g.name = GoldenActorName("t", generation);
  g.status = status;
  g.desired = desired;
  return g;
}

TemplateObservation At(int64_t generation, std::vector<GoldenActorView> goldens, bool gate = true) {
  TemplateObservation o;
  o.generation = generation;
  o.has_gate = gate;
  o.goldens = std::move(goldens);
  return o;
}

TEST(TemplateDecisionsTest, AGoldenIsTakenStepByStep) {
  auto none = DecideTemplate("t", At(3, {}));
  EXPECT_EQ(none.create_golden, "t-golden-3");
  EXPECT_FALSE(none.ready);
  EXPECT_EQ(none.reason, api::kReasonTakingGolden);
  EXPECT_TRUE(none.recheck);

  auto gate_pending = DecideTemplate("t", At(3, {Golden(3, ActorState::kRunning)}));
  EXPECT_FALSE(gate_pending.suspend_golden);
  EXPECT_FALSE(gate_pending.create_golden);
  EXPECT_NE(gate_pending.message.find("readiness gate"), std::string::npos);

  GoldenActorView passed = Golden(3, ActorState::kRunning);
  passed.gate_passed = true;
  EXPECT_EQ(DecideTemplate("t", At(3, {passed})).suspend_golden, "t-golden-3");
  EXPECT_EQ(DecideTemplate("t", At(3, {Golden(3, ActorState::kRunning)}, /*gate=*/false)).suspend_golden,
            "t-golden-3")
      << "without a gate, as soon as it runs";

  GoldenActorView suspending = Golden(3, ActorState::kSuspending, DesiredState::kSuspended);
  EXPECT_FALSE(DecideTemplate("t", At(3, {suspending})).record);

  GoldenActorView paused = Golden(3, ActorState::kPaused, DesiredState::kSuspended);
  paused.latest = Committed("s1");
  paused.latest->node_name = "n1";  // node-local: not a golden
  EXPECT_FALSE(DecideTemplate("t", At(3, {paused})).record);

  GoldenActorView done = Golden(3, ActorState::kSuspended, DesiredState::kSuspended);
  done.latest = Committed("s1");
  TemplateObservation o = At(3, {done});
  o.pending = {{"a1", ""}, {"a2", ""}};
  auto recorded = DecideTemplate("t", o);
  ASSERT_TRUE(recorded.record);
  EXPECT_EQ(recorded.record->snapshot_id, "s1");
  EXPECT_EQ(recorded.record->actor_name, "t-golden-3");
  EXPECT_EQ(recorded.record->generation, 3);
  EXPECT_EQ(recorded.record->size_bytes, 42);
  EXPECT_TRUE(recorded.ready);
  EXPECT_EQ(recorded.pool.from_golden, (std::vector<std::string>{"a1", "a2"}));
}

TEST(TemplateDecisionsTest, ANewGenerationTakesANewGoldenAndTheOldGoesOnlyWhenNobodyNeedsIt) {
  GoldenActorView old = Golden(1, ActorState::kSuspended, DesiredState::kSuspended);
  old.latest = Committed("s-old");
  TemplateObservation o = At(2, {old});
  o.recorded = api::GoldenSnapshot{"t-golden-1", "s-old", 1};
  auto next = DecideTemplate("t", o);
  EXPECT_EQ(next.create_golden, "t-golden-2");
  EXPECT_TRUE(next.delete_goldens.empty()) << "the old golden stays until the new one is recorded";
  o.pending = {{"a1", ""}};
  next = DecideTemplate("t", o);
  EXPECT_TRUE(next.pool.from_golden.empty()) << "actors wait for the new generation's golden";

  o.goldens.push_back(Golden(2, ActorState::kSuspended, DesiredState::kSuspended));
  o.goldens.back().latest = Committed("s-new");
  o.needed_as_source = {"t-golden-1"};
  auto recorded = DecideTemplate("t", o);
  ASSERT_TRUE(recorded.record);
  EXPECT_TRUE(recorded.delete_goldens.empty()) << "an actor may still start from the old golden";
  o.needed_as_source.clear();
  EXPECT_EQ(DecideTemplate("t", o).delete_goldens, std::vector<std::string>{"t-golden-1"});
}

TEST(TemplateDecisionsTest, AGateThatNeverPassesEndsTheAttemptUntilANewGeneration) {
  GoldenActorView timed_out = Golden(4, ActorState::kRunning);
  timed_out.gate_timed_out = true;
  auto failed = DecideTemplate("t", At(4, {timed_out}));
  EXPECT_EQ(failed.reason, api::kReasonReadinessGateFailed);
  EXPECT_EQ(failed.delete_goldens, std::vector<std::string>{"t-golden-4"}) << "its worker is freed";
  EXPECT_FALSE(failed.create_golden);

  // Once reported, the same generation does not try again (no create-delete loop).
  TemplateObservation o = At(4, {});
  o.golden_ready = api::Condition{api::kConditionGoldenReady, api::ConditionStatus::kFalse, 4, {},
                                  api::kReasonReadinessGateFailed, "m"};
  auto after = DecideTemplate("t", o);
  EXPECT_FALSE(after.create_golden);
  EXPECT_EQ(after.reason, api::kReasonReadinessGateFailed);
  // A new generation does.
  o.generation = 5;
  EXPECT_EQ(DecideTemplate("t", o).create_golden, "t-golden-5");

  GoldenActorView failed_actor = Golden(4, ActorState::kFailed);
  failed_actor.failure = "bundle refused";
  auto actor_failed = DecideTemplate("t", At(4, {failed_actor}));
  EXPECT_EQ(actor_failed.reason, api::kReasonGoldenActorFailed);
  EXPECT_NE(actor_failed.message.find("bundle refused"), std::string::npos);
}

TEST(TemplateDecisionsTest, AGoldenGoneFromTheStoreIsTakenAgain) {
  GoldenActorView done = Golden(2, ActorState::kSuspended, DesiredState::kSuspended);
  done.latest = Committed("s1");
  TemplateObservation o = At(2, {done});
  o.recorded = api::GoldenSnapshot{"t-golden-2", "s1", 2};
  o.recorded_in_store = false;
  auto missing = DecideTemplate("t", o);
  EXPECT_TRUE(missing.clear_recorded);
  EXPECT_EQ(missing.reason, api::kReasonGoldenSnapshotMissing);
  EXPECT_EQ(missing.delete_goldens, std::vector<std::string>{"t-golden-2"});

  // While its actor is being deleted, wait; once it is gone, take it again.
  o.recorded.reset();
  o.goldens[0].being_deleted = true;
  EXPECT_FALSE(DecideTemplate("t", o).create_golden);
  o.goldens.clear();
  EXPECT_EQ(DecideTemplate("t", o).create_golden, "t-golden-2");
}

}  // namespace
}  // namespace stasis
