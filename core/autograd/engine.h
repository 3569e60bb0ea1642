// The backward engine.
//
// backward(roots, grads) runs every node reachable from the roots exactly
// once, after all gradients flowing into it have been summed, most recently
// created node first among those ready. Leaves that require grad receive their
// gradient through AccumulateGrad, whose post-accumulate hooks therefore fire
// once per parameter per backward, with the gradient complete.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace tandem {

void run_backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph);

}  // namespace tandem
