// Naming the rank that never reached a collective, after a timeout.
//
// When an op times out, every rank stuck in it checks in under
// "<prefix>stuck/<seq>/<rank>" and waits a little for the others; the ranks
// that never check in are the ones that did not reach op number `seq` (dead,
// stuck elsewhere, or issuing different ops). Used by both backends on the
// failure path only, so it costs nothing while things work.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

#include "comm/store.h"

namespace tandem::comm {

// "2, 3", or empty if every rank checked in within `window`.
std::string ranks_not_at_op(Store& store, const std::string& prefix, uint64_t seq, int rank, int size,
                            std::chrono::milliseconds window);

}  // namespace tandem::comm
