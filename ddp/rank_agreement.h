// Checking that every rank describes something the same way (its model's
// parameters, its DDP options, its bucket layout) before collectives depend
// on it.
//
// Each rank describes the thing as an ordered list of fields (name, value).
// All ranks gather every rank's list (two all_gathers: the lengths, then the
// padded text) and compare each rank's with rank 0's, field by field. Every
// rank reaches the same verdict from the same data, so a difference throws on
// every rank, naming the first rank and field that differ, instead of letting
// the ranks go on to issue collectives that do not match (which would reduce
// garbage, or wait for a peer that never comes until the timeout).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "comm/process_group.h"
#include "core/device.h"

namespace tandem::ddp {

struct Field {
  std::string name;   // "bucket_cap_mb", "bucket 3"; no newline or tab
  std::string value;  // no newline
};

// Throws, on every rank, "DDP: <what> differs between ranks: <field> is '<a>'
// on rank 0 but '<b>' on rank <r> (<advice>)" for the lowest rank r that
// differs and its first differing field. `where` is the device the exchange
// runs on (the backend's: CUDA for nccl).
void check_ranks_agree(comm::ProcessGroup& group, const std::vector<Field>& fields, Device where,
                       std::chrono::milliseconds timeout, const std::string& what, const std::string& advice);

}  // namespace tandem::ddp
