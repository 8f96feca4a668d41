// The MoE load-balancing loss across pipeline stages: what a stage tells the next about
// the routing of a micro-batch's forward, and what comes back with its gradient.
//
// The loss (model/moe_routing.h) is not a sum over layers: with A the top-k slot counts
// and P the probability sums over ALL sparse layers of the forward and N their routed
// rows, loss = E / N^2 * sum_e A_e * P_e. Its gradient reaches stage s's routers through
// P_s (its own layers' probability sums) only: d loss / d P_s = E / N^2 * A, which needs
// the whole forward's A and N. So:
//   - forward: each stage sends the next, after the activations, the routing of every
//     sparse layer before it (RoutingMessage: per-layer probability sums - detached -,
//     slot counts and chosen experts); the last stage prepends them to its own layers'
//     log, so load_balancing_loss, the router load and the top-k mismatch metrics see
//     every layer, exactly as one process, and the last stage's own routers get their
//     gradient from it;
//   - backward: the last stage sends back, after the activations' gradient, the
//     feedback {A [E], N, scale} (scale: the factor the aux term had in its loss, the
//     coefficient times the micro-batch's share, 0 when it has none); every other stage
//     backs up stage_aux_loss = scale * E / N^2 * sum_e A_e * P_s,e with its output's
//     gradient and passes the feedback on. The stages' gradients then sum to one
//     process's (each stage backs its OWN term; the value is the last stage's).
// Messages use pipeline_p2p's tags (activations forward, gradients back), so they keep
// their order behind the tensors they follow. Dense stages (no sparse layer) still relay.
//
// Shapes: S = sparse layers so far, T = the micro-batch's tokens, E experts, k per token.
// Errors: aspen::Error for a message that does not fit the micro-batch.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "aspen/model/moe_routing.h"
#include "aspen/parallel/process_group.h"
#include "aspen/train/imports.h"

namespace aspen::train {

// Sends `log`'s layers (the earlier stages' and this one's) to rank `dst`: three messages
// (prob sums [S, E] detached, slot counts [S, E], experts [S, T, k]).
std::vector<PendingWork> send_routing(ProcessGroupHandle& group, const MoeRoutingLog& log,
                                      int64_t experts, int64_t top_k, int64_t tokens, int dst);
// The earlier stages' layers as a log (no gradient), to prepend to this stage's.
MoeRoutingLog recv_routing(ProcessGroupHandle& group, int src, int64_t tokens,
                           torch::Device device);

// The last stage's feedback for a forward whose whole routing is `log`: {A [E], N, scale}
// as one fp64 CPU tensor [E + 2].
torch::Tensor routing_feedback(const MoeRoutingLog& log, double scale);
// scale * E / N^2 * sum_e A_e * P_e over `own` (this stage's layers): a 0-dim tensor with
// the gradient to their routers; undefined when there is nothing to back up (no sparse
// layer here, or scale 0).
torch::Tensor stage_aux_loss(const MoeRoutingLog& own, const torch::Tensor& feedback);

}  // namespace aspen::train
