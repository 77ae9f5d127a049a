#include "backend/cpu/quant_dot_internal.h"
namespace jllm::cpu_detail {
VecDotFn vec_dot_avx512(GgmlType) { return nullptr; }
QuantizeActFn quantize_act_avx512(GgmlType) { return nullptr; }
}
