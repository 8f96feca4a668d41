// The spellings of TrainConfig's enums, as the config file, its JSON echo and
// docs/config.md write them: one table per enum, read by the field table
// (train_config_fields.h) and by train_config.cpp. Internal to the config module.
#pragma once

#include <utility>
#include <vector>

#include "aspen/config/imports.h"
#include "aspen/config/train_config.h"

namespace aspen::config {

// Spellings of an enum: the first entry of each value is its name (name_of); later
// entries of the same value are aliases accepted on reading.
template <typename E>
using EnumNames = std::vector<std::pair<const char*, E>>;

inline const EnumNames<TaskKind> kTaskKinds = {
    {"arithmetic", TaskKind::kArithmetic}, {"countdown", TaskKind::kCountdown}, {"jsonl", TaskKind::kJsonl}};
inline const EnumNames<BuiltinModelKind> kBuiltinModelKinds = {
    {"qwen3", BuiltinModelKind::kQwen3},
    {"qwen3_moe", BuiltinModelKind::kQwen3Moe},
    {"deepseek_v3", BuiltinModelKind::kDeepseekV3}};
inline const EnumNames<AlgorithmName> kAlgorithmNames = {
    {"grpo", AlgorithmName::kGrpo},
    {"dr_grpo", AlgorithmName::kDrGrpo},
    {"dapo", AlgorithmName::kDapo},
    {"rloo", AlgorithmName::kRloo},
    {"reinforce_pp", AlgorithmName::kReinforcePp},
    {"reinforce_pp_baseline", AlgorithmName::kReinforcePpBaseline},
    {"ppo", AlgorithmName::kPpo}};
inline const EnumNames<AggMode> kAggModes = {
    {"token-mean", AggMode::kTokenMean},
    {"seq-mean-token-mean", AggMode::kSeqMeanTokenMean},
    {"seq-mean-token-sum", AggMode::kSeqMeanTokenSum},
    {"seq-mean-token-sum-norm", AggMode::kSeqMeanTokenSumNorm}};
// verl's names first; k1/k2/k3 (Schulman's) as aliases.
inline const EnumNames<KlEstimator> kKlEstimators = {
    {"kl", KlEstimator::kK1},         {"abs", KlEstimator::kAbs}, {"mse", KlEstimator::kK2},
    {"low_var_kl", KlEstimator::kK3}, {"k1", KlEstimator::kK1},   {"k2", KlEstimator::kK2},
    {"k3", KlEstimator::kK3}};
inline const EnumNames<KlControl> kKlControls = {{"fixed", KlControl::kFixed},
                                                 {"adaptive", KlControl::kAdaptive}};
// verl spells "off" as null; `none` is Aspen's spelling, `null` accepted.
inline const EnumNames<RolloutIsLevel> kRolloutIsLevels = {{"none", RolloutIsLevel::kNone},
                                                          {"token", RolloutIsLevel::kToken},
                                                          {"sequence", RolloutIsLevel::kSequence},
                                                          {"null", RolloutIsLevel::kNone}};
inline const EnumNames<RolloutRsLevel> kRolloutRsLevels = {{"none", RolloutRsLevel::kNone},
                                                          {"token", RolloutRsLevel::kToken},
                                                          {"sequence", RolloutRsLevel::kSequence},
                                                          {"geometric", RolloutRsLevel::kGeometric},
                                                          {"null", RolloutRsLevel::kNone}};
inline const EnumNames<EnvironmentKind> kEnvironmentKinds = {
    {"none", EnvironmentKind::kNone},
    {"tools", EnvironmentKind::kTools},
    {"command", EnvironmentKind::kCommand},
    {"http", EnvironmentKind::kHttp},
    {"synthetic", EnvironmentKind::kSynthetic}};
inline const EnumNames<EnvironmentErrorPolicy> kEnvironmentErrorPolicies = {
    {"zero", EnvironmentErrorPolicy::kZero}, {"drop", EnvironmentErrorPolicy::kDrop}};
inline const EnumNames<AgentPrefixBreak> kAgentPrefixBreaks = {
    {"split", AgentPrefixBreak::kSplit}, {"refuse", AgentPrefixBreak::kRefuse}};
inline const EnumNames<OffPolicy> kOffPolicies = {{"auto", OffPolicy::kAuto},
                                                  {"none", OffPolicy::kNone},
                                                  {"decoupled", OffPolicy::kDecoupled},
                                                  {"tis", OffPolicy::kTis}};
inline const EnumNames<LrScheduleKind> kLrSchedules = {{"constant", LrScheduleKind::kConstant},
                                                       {"cosine", LrScheduleKind::kCosine}};
inline const EnumNames<ComputeDtype> kComputeDtypes = {{"fp32", ComputeDtype::kFp32},
                                                       {"bf16", ComputeDtype::kBf16}};
inline const EnumNames<DispatchPolicyKind> kDispatchPolicies = {
    {"round_robin", DispatchPolicyKind::kRoundRobin},
    {"least_requests", DispatchPolicyKind::kLeastRequests},
    {"queue_aware", DispatchPolicyKind::kQueueAware}};
inline const EnumNames<PipelineMode> kPipelineModes = {{"sync", PipelineMode::kSync},
                                                       {"async", PipelineMode::kAsync}};
inline const EnumNames<InstanceFailurePolicy> kFailurePolicies = {
    {"regenerate", InstanceFailurePolicy::kRegenerate}, {"stop", InstanceFailurePolicy::kStop}};
inline const EnumNames<WeightSync> kWeightSyncs = {{"full", WeightSync::kFull},
                                                   {"delta", WeightSync::kDelta}};
inline const EnumNames<SimulateBaseline> kSimulateBaselines = {
    {"colocated", SimulateBaseline::kColocated}, {"same", SimulateBaseline::kSame}};
inline const EnumNames<PlacementMode> kPlacementModes = {
    {name_of(PlacementMode::kColocated), PlacementMode::kColocated},
    {name_of(PlacementMode::kDisaggregated), PlacementMode::kDisaggregated}};

// The name of `value` in `names` (its first spelling).
template <typename E>
const char* spelling(const EnumNames<E>& names, E value) {
  for (const auto& [name, v] : names) {
    if (v == value) return name;
  }
  return "?";
}

}  // namespace aspen::config
