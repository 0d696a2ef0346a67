#include "reconcilers/node/readiness_gate.h"

#include <gtest/gtest.h>

namespace stasis {
namespace {

using namespace std::chrono_literals;

const Time kStart = std::chrono::floor<std::chrono::seconds>(std::chrono::system_clock::now());

api::Actor Gated(const char* gate_reason, bool ready = true) {
  api::Actor a;
  a.spec.readiness_gate = api::ReadinessGate{{"test", "-e", "/ready"}, 60, 1};
  a.status.conditions.push_back(api::Condition{api::kConditionReady,
                                               ready ? api::ConditionStatus::kTrue : api::ConditionStatus::kFalse,
                                               1, kStart, api::kReasonRunning, ""});
  a.status.conditions.push_back(api::Condition{api::kConditionReadinessGate, api::ConditionStatus::kFalse, 1, kStart,
                                               gate_reason, ""});
  return a;
}

TEST(ReadinessGateTest, APendingGateIsProbedUntilItsTimeoutFromTheStartOfTheRun) {
  EXPECT_EQ(DecideGate(Gated(api::kReasonReadinessGatePending), kStart + 1s), GateStep::kProbe);
  EXPECT_EQ(DecideGate(Gated(api::kReasonReadinessGatePending), kStart + 59s), GateStep::kProbe);
  EXPECT_EQ(DecideGate(Gated(api::kReasonReadinessGatePending), kStart + 60s), GateStep::kTimedOut);
}

TEST(ReadinessGateTest, NothingToDoWithoutAGateOnceDecidedOrWhileNotRunning) {
  api::Actor none = Gated(api::kReasonReadinessGatePending);
  none.spec.readiness_gate.reset();
  EXPECT_EQ(DecideGate(none, kStart + 1s), GateStep::kNone);
  EXPECT_EQ(DecideGate(Gated(api::kReasonReadinessGatePassed), kStart + 1s), GateStep::kNone);
  EXPECT_EQ(DecideGate(Gated(api::kReasonReadinessGateTimedOut), kStart + 100s), GateStep::kNone);
  EXPECT_EQ(DecideGate(Gated(api::kReasonReadinessGatePending, /*ready=*/false), kStart + 100s), GateStep::kNone);
}

}  // namespace
}  // namespace stasis
