// model/model_weights.cpp — tensor-name patterns, shape and type validation.
#include "model/model_weights.h"

#include <cinttypes>

#include "core/error.h"
#include "gguf/gguf.h"

namespace jllm {

bool is_matmul_type(GgmlType t) {
    switch (t) {
        case GgmlType::F32:
        case GgmlType::F16:
        case GgmlType::BF16:
        case GgmlType::Q4_0:
        case GgmlType::Q4_1:
        case GgmlType::Q5_0:
        case GgmlType::Q5_1:
        case GgmlType::Q8_0:
        case GgmlType::Q2_K:
        case GgmlType::Q3_K:
        case GgmlType::Q4_K:
        case GgmlType::Q5_K:
        case GgmlType::Q6_K: return true;
        default: return false;
    }
}

namespace {

std::string shape_str(int64_t cols, int64_t rows) {
    return rows <= 1 ? strfmt("[%" PRId64 "]", cols) : strfmt("[%" PRId64 ", %" PRId64 "]", cols, rows);
}

enum class Kind { Matrix, Vector };

WeightTensor bind_tensor(const GgufFile& f, const std::string& name, Kind kind, int64_t cols, int64_t rows,
                  bool required) {
    WeightTensor w;
    w.name = name;
    const GgufTensorInfo* t = f.find_tensor(name);
    if (!t) {
        if (required) throw JllmError("model: missing tensor '" + name + "' (expected " + shape_str(cols, rows) + ")");
        return w;
    }
    const int64_t actual_rows = t->ne[1] * t->ne[2] * t->ne[3];
    const bool shape_ok = (kind == Kind::Vector) ? (t->n_dims == 1 && t->ne[0] == cols)
                                                 : (t->n_dims == 2 && t->ne[0] == cols && t->ne[1] == rows);
    if (!shape_ok) {
        throw JllmError("model: tensor '" + name + "' has shape " + t->shape_string() + ", expected " +
                        shape_str(cols, kind == Kind::Vector ? 1 : rows));
    }
    if (kind == Kind::Vector && t->type != GgmlType::F32) {
        throw JllmError(std::string("model: tensor '") + name + "' has type " + type_name(t->type) +
                        ", expected F32");
    }
    if (kind == Kind::Matrix && !is_matmul_type(t->type)) {
        throw JllmError(std::string("model: tensor '") + name + "' has unsupported type " + type_name(t->type) +
                        " (supported: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K)");
    }
    w.type = t->type;
    w.cols = t->ne[0];
    w.rows = actual_rows;
    w.row_bytes = row_size(t->type, t->ne[0]);
    w.data = t->data;
    w.nbytes = t->nbytes;
    return w;
}

}  // namespace

ModelWeights bind_model_weights(const GgufFile& f, const ModelConfig& c) {
    ModelWeights m;
    m.mapping = f.mapping();
    const int64_t E = c.n_embd, Q = c.q_dim(), KV = c.kv_dim(), F = c.n_ff, V = c.n_vocab;
    m.token_embd = bind_tensor(f, "token_embd.weight", Kind::Matrix, E, V, true);
    m.output_norm = bind_tensor(f, "output_norm.weight", Kind::Vector, E, 1, true);
    m.output = bind_tensor(f, "output.weight", Kind::Matrix, E, V, false);
    if (!m.output.present()) {
        if (!c.recipe->output_may_be_tied) throw JllmError("model: missing tensor 'output.weight'");
        m.output = m.token_embd;
        m.tied_output = true;
    }
    m.rope_freqs = bind_tensor(f, "rope_freqs.weight", Kind::Vector, c.n_rot / 2, 1, false);
    m.total_bytes = m.token_embd.nbytes + m.output_norm.nbytes + (m.tied_output ? 0 : m.output.nbytes) +
                    m.rope_freqs.nbytes;
    m.layers.resize(static_cast<size_t>(c.n_layer));
    for (int64_t il = 0; il < c.n_layer; ++il) {
        const std::string p = strfmt("blk.%" PRId64 ".", il);
        LayerWeights& L = m.layers[static_cast<size_t>(il)];
        L.attn_norm = bind_tensor(f, p + "attn_norm.weight", Kind::Vector, E, 1, true);
        L.wq = bind_tensor(f, p + "attn_q.weight", Kind::Matrix, E, Q, true);
        L.wk = bind_tensor(f, p + "attn_k.weight", Kind::Matrix, E, KV, true);
        L.wv = bind_tensor(f, p + "attn_v.weight", Kind::Matrix, E, KV, true);
        L.wo = bind_tensor(f, p + "attn_output.weight", Kind::Matrix, Q, E, true);
        L.bq = bind_tensor(f, p + "attn_q.bias", Kind::Vector, Q, 1, c.recipe->qkv_bias);
        L.bk = bind_tensor(f, p + "attn_k.bias", Kind::Vector, KV, 1, c.recipe->qkv_bias);
        L.bv = bind_tensor(f, p + "attn_v.bias", Kind::Vector, KV, 1, c.recipe->qkv_bias);
        L.q_norm = bind_tensor(f, p + "attn_q_norm.weight", Kind::Vector, c.head_dim, 1, c.recipe->qk_norm);
        L.k_norm = bind_tensor(f, p + "attn_k_norm.weight", Kind::Vector, c.head_dim, 1, c.recipe->qk_norm);
        L.ffn_norm = bind_tensor(f, p + "ffn_norm.weight", Kind::Vector, E, 1, true);
        L.w_gate = bind_tensor(f, p + "ffn_gate.weight", Kind::Matrix, E, F, true);
        L.w_up = bind_tensor(f, p + "ffn_up.weight", Kind::Matrix, E, F, true);
        L.w_down = bind_tensor(f, p + "ffn_down.weight", Kind::Matrix, F, E, true);
        for (const WeightTensor* w : {&L.attn_norm, &L.wq, &L.wk, &L.wv, &L.wo, &L.bq, &L.bk, &L.bv, &L.q_norm,
                                      &L.k_norm, &L.ffn_norm, &L.w_gate, &L.w_up, &L.w_down}) {
            m.total_bytes += w->nbytes;
        }
    }
    return m;
}

}  // namespace jllm
