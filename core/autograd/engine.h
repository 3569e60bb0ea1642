// The backward engine.
//
// backward(roots, grads) runs every node reachable from the roots exactly
// once, after all gradients flowing into it have been summed, most recently
// created node first among those ready. Leaves that require grad receive their
// gradient through AccumulateGrad, whose post-accumulate hooks therefore fire
// once per parameter per backward, with the gradient complete.
#pragma once

#include <functional>
#include <vector>

#include "core/tensor.h"

namespace tandem {

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph);

// Queues `callback` to run on this thread when the backward pass currently
// running finishes, after every node has run (PyTorch's queue_callback). Only
// valid from inside a backward (a hook or a node); DDP uses it to wait for its
// buckets at the end of backward. If backward fails, queued callbacks are dropped.
void queue_backward_callback(std::function<void()> callback);
bool in_backward();

}  // namespace tandem
