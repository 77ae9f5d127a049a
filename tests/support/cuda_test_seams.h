// tests/support/cuda_test_seams.h — what the CUDA tests read of a CUDA backend's inner state,
// kept out of the engine's library: the graphs it holds and the decode step's first logits copy.
#pragma once

#include <cstdint>

#include "backend/backend.h"

namespace jllm {

// The CUDA graphs `backend` (a CUDA backend) holds now (decode steps and other forwards; 0 with
// graphs off): lets tests check that a path ran as graphs.
int cuda_backend_graph_count(const Backend& backend);
// Rows of a decode step's logits copied to the host while the GPU computes the rest (0: one copy
// after the whole product): lets tests check that the two-copy path ran.
int64_t cuda_backend_logits_head(const Backend& backend);

}  // namespace jllm
