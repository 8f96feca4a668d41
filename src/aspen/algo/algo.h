// Umbrella header for aspen::algo: advantage estimators, policy/value losses, KL
// estimators and controllers, loss aggregation and DAPO's batch tricks - pure
// tensor functions on the packed layout described in packed.h.
#pragma once

#include "aspen/algo/advantages.h"
#include "aspen/algo/aggregate.h"
#include "aspen/algo/dapo.h"
#include "aspen/algo/groups.h"
#include "aspen/algo/imports.h"
#include "aspen/algo/kl.h"
#include "aspen/algo/kl_controller.h"
#include "aspen/algo/packed.h"
#include "aspen/algo/policy_loss.h"
#include "aspen/algo/value_loss.h"
