// include/jllm.h — the master header of libjetson_llm_core.a: everything an embedding program
// needs (the Engine, its configuration, requests and results, chat rendering, the memory report,
// the board's live statistics, logging). Nothing else in the library is public.
#pragma once

#include "jllm_chat.h"
#include "jllm_engine.h"
#include "jllm_jetson.h"
#include "jllm_log.h"
#include "jllm_memory.h"
#include "jllm_types.h"
