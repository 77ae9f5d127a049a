// gguf/gguf.cpp — the validating GGUF v2/v3 reader: header, metadata and tensor infos parsed
// through a bounds-checked cursor, then the tensors' extents checked against the file (the
// layout is described in gguf/gguf_format.h).
#include "gguf/gguf.h"

#include <algorithm>
#include <cinttypes>
#include <cstring>
#include <unordered_set>

#include "core/error.h"
#include "gguf/gguf_format.h"

namespace jllm {

namespace {

bool valid_type(uint32_t t) { return t <= static_cast<uint32_t>(GgufType::FLOAT64); }

template <typename T>
T load_le(const uint8_t* p) {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

// Float to integer without undefined behaviour: NaN -> 0, out-of-range values saturate.
int64_t saturate_to_i64(double v) {
    if (!(v == v)) return 0;
    if (v >= 9.2233720368547758e18) return INT64_MAX;
    if (v <= -9.2233720368547758e18) return INT64_MIN;
    return static_cast<int64_t>(v);
}

bool mul_overflow(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_mul_overflow(a, b, out); }
bool add_overflow(uint64_t a, uint64_t b, uint64_t* out) { return __builtin_add_overflow(a, b, out); }

// Sequential cursor over the mapped bytes; every read is bounds-checked.
class Cursor {
public:
    Cursor(const uint8_t* base, uint64_t size, const std::string& name)
        : base_(base), size_(size), name_(name) {}

    uint64_t pos() const { return pos_; }
    uint64_t remaining() const { return size_ - pos_; }
    std::string context;  // "key 'x'" / "tensor 'y'" for messages

    [[noreturn]] void fail(const std::string& what, uint64_t at) const {
        std::string msg = strfmt("gguf: %s: %s at offset %" PRIu64, name_.c_str(), what.c_str(), at);
        if (!context.empty()) msg += " (" + context + ")";
        throw JllmError(msg);
    }
    [[noreturn]] void fail(const std::string& what) const { fail(what, pos_); }

    const uint8_t* take(uint64_t n, const char* what) {
        if (n > remaining()) {
            fail(strfmt("file truncated: %s needs %" PRIu64 " bytes, %" PRIu64 " left", what, n,
                        remaining()));
        }
        const uint8_t* p = base_ + pos_;
        pos_ += n;
        return p;
    }
    template <typename T>
    T read(const char* what) {
        return load_le<T>(take(sizeof(T), what));
    }
    std::string_view read_string(const char* what, uint64_t max_len) {
        const uint64_t at = pos_;
        const uint64_t len = read<uint64_t>(what);
        if (len > max_len) fail(strfmt("%s length %" PRIu64 " exceeds the limit %" PRIu64, what, len, max_len), at);
        if (len > remaining()) {
            fail(strfmt("file truncated: %s of %" PRIu64 " bytes, %" PRIu64 " left", what, len, remaining()), at);
        }
        const uint8_t* p = take(len, what);
        return std::string_view(reinterpret_cast<const char*>(p), static_cast<size_t>(len));
    }

private:
    const uint8_t* base_;
    uint64_t size_;
    uint64_t pos_ = 0;
    const std::string& name_;
};

void read_scalar(Cursor& c, GgufType t, GgufValue& v) {
    const uint64_t at = c.pos();
    switch (t) {
        case GgufType::UINT8: v.u = c.read<uint8_t>("u8 value"); break;
        case GgufType::INT8: v.i = c.read<int8_t>("i8 value"); break;
        case GgufType::UINT16: v.u = c.read<uint16_t>("u16 value"); break;
        case GgufType::INT16: v.i = c.read<int16_t>("i16 value"); break;
        case GgufType::UINT32: v.u = c.read<uint32_t>("u32 value"); break;
        case GgufType::INT32: v.i = c.read<int32_t>("i32 value"); break;
        case GgufType::UINT64: v.u = c.read<uint64_t>("u64 value"); break;
        case GgufType::INT64: v.i = c.read<int64_t>("i64 value"); break;
        case GgufType::FLOAT32: v.f = c.read<float>("f32 value"); break;
        case GgufType::FLOAT64: v.f = c.read<double>("f64 value"); break;
        case GgufType::BOOL: {
            const uint8_t b = c.read<uint8_t>("bool value");
            if (b > 1) c.fail(strfmt("bool value %u is neither 0 nor 1", b), at);
            v.u = b;
            break;
        }
        case GgufType::STRING: v.str = c.read_string("string value", GgufLimits::MAX_STRING); break;
        default: c.fail(strfmt("unexpected value type %u", static_cast<unsigned>(t)), at);
    }
}

void read_value(Cursor& c, GgufType t, GgufValue& v) {
    v.type = t;
    if (t != GgufType::ARRAY) {
        read_scalar(c, t, v);
        return;
    }
    const uint64_t at = c.pos();
    const uint32_t et = c.read<uint32_t>("array element type");
    if (!valid_type(et)) c.fail(strfmt("unknown array element type %u", et), at);
    if (static_cast<GgufType>(et) == GgufType::ARRAY) c.fail("nested arrays are not supported", at);
    const uint64_t count = c.read<uint64_t>("array length");
    if (count > GgufLimits::MAX_ARRAY) {
        c.fail(strfmt("array length %" PRIu64 " exceeds the limit %" PRIu64, count, GgufLimits::MAX_ARRAY), at);
    }
    GgufArray& a = v.arr;
    a.elem_type = static_cast<GgufType>(et);
    a.count = count;
    if (a.elem_type == GgufType::STRING) {
        // Each string needs at least its 8-byte length: reject impossible counts before reserving.
        if (count > c.remaining() / 8) {
            c.fail(strfmt("array of %" PRIu64 " strings cannot fit in the %" PRIu64 " bytes left", count,
                          c.remaining()), at);
        }
        a.strings.reserve(static_cast<size_t>(count));
        for (uint64_t i = 0; i < count; ++i) a.strings.push_back(c.read_string("array string", GgufLimits::MAX_STRING));
        return;
    }
    const uint64_t esz = gguf_scalar_size(a.elem_type);
    uint64_t bytes = 0;
    if (mul_overflow(count, esz, &bytes) || bytes > c.remaining()) {
        c.fail(strfmt("file truncated: array of %" PRIu64 " x %s needs more than the %" PRIu64 " bytes left", count,
                      gguf_type_name(a.elem_type), c.remaining()), at);
    }
    a.data = c.take(bytes, "array data");
    if (a.elem_type == GgufType::BOOL) {
        for (uint64_t i = 0; i < count; ++i) {
            if (a.data[i] > 1) c.fail(strfmt("bool array element %" PRIu64 " is %u", i, a.data[i]), at);
        }
    }
}

std::string quote_view(std::string_view s, size_t max_len) {
    std::string out = "\"";
    size_t n = 0;
    for (char ch : s) {
        if (n++ >= max_len) {
            out += "...";
            break;
        }
        const unsigned char uc = static_cast<unsigned char>(ch);
        if (ch == '\n') out += "\\n";
        else if (ch == '\t') out += "\\t";
        else if (ch == '"') out += "\\\"";
        else if (ch == '\\') out += "\\\\";
        else if (uc < 0x20) out += strfmt("\\x%02x", uc);
        else out += ch;
    }
    out += "\"";
    return out;
}

}  // namespace

const char* gguf_type_name(GgufType t) {
    switch (t) {
        case GgufType::UINT8: return "u8";
        case GgufType::INT8: return "i8";
        case GgufType::UINT16: return "u16";
        case GgufType::INT16: return "i16";
        case GgufType::UINT32: return "u32";
        case GgufType::INT32: return "i32";
        case GgufType::FLOAT32: return "f32";
        case GgufType::BOOL: return "bool";
        case GgufType::STRING: return "string";
        case GgufType::ARRAY: return "array";
        case GgufType::UINT64: return "u64";
        case GgufType::INT64: return "i64";
        case GgufType::FLOAT64: return "f64";
    }
    return "unknown";
}

int64_t GgufArray::get_int(uint64_t i) const {
    JLLM_ASSERT(i < count && data != nullptr);
    const uint8_t* p = data + i * gguf_scalar_size(elem_type);
    switch (elem_type) {
        case GgufType::UINT8:
        case GgufType::BOOL: return load_le<uint8_t>(p);
        case GgufType::INT8: return load_le<int8_t>(p);
        case GgufType::UINT16: return load_le<uint16_t>(p);
        case GgufType::INT16: return load_le<int16_t>(p);
        case GgufType::UINT32: return load_le<uint32_t>(p);
        case GgufType::INT32: return load_le<int32_t>(p);
        case GgufType::UINT64: return static_cast<int64_t>(load_le<uint64_t>(p));
        case GgufType::INT64: return load_le<int64_t>(p);
        case GgufType::FLOAT32: return saturate_to_i64(load_le<float>(p));
        case GgufType::FLOAT64: return saturate_to_i64(load_le<double>(p));
        default: JLLM_ASSERT_MSG(false, "get_int on a non-numeric array");
    }
    return 0;
}

double GgufArray::get_float(uint64_t i) const {
    JLLM_ASSERT(i < count && data != nullptr);
    const uint8_t* p = data + i * gguf_scalar_size(elem_type);
    if (elem_type == GgufType::FLOAT32) return load_le<float>(p);
    if (elem_type == GgufType::FLOAT64) return load_le<double>(p);
    if (elem_type == GgufType::UINT64) return static_cast<double>(load_le<uint64_t>(p));
    return static_cast<double>(get_int(i));
}

std::string GgufValue::to_string(size_t max_array_items) const {
    switch (type) {
        case GgufType::UINT8:
        case GgufType::UINT16:
        case GgufType::UINT32:
        case GgufType::UINT64: return strfmt("%" PRIu64, u);
        case GgufType::INT8:
        case GgufType::INT16:
        case GgufType::INT32:
        case GgufType::INT64: return strfmt("%" PRId64, i);
        case GgufType::FLOAT32:
        case GgufType::FLOAT64: return strfmt("%g", f);
        case GgufType::BOOL: return u ? "true" : "false";
        case GgufType::STRING: return quote_view(str, 120);
        case GgufType::ARRAY: {
            std::string out = strfmt("[%s x %" PRIu64 "] [", gguf_type_name(arr.elem_type), arr.count);
            const uint64_t n = std::min<uint64_t>(arr.count, max_array_items);
            for (uint64_t k = 0; k < n; ++k) {
                if (k) out += ", ";
                if (arr.elem_type == GgufType::STRING) out += quote_view(arr.strings[k], 40);
                else if (arr.elem_type == GgufType::FLOAT32 || arr.elem_type == GgufType::FLOAT64)
                    out += strfmt("%g", arr.get_float(k));
                else if (arr.elem_type == GgufType::UINT64) out += strfmt("%" PRIu64, static_cast<uint64_t>(arr.get_int(k)));
                else out += strfmt("%" PRId64, arr.get_int(k));
            }
            if (arr.count > n) out += ", ...";
            out += "]";
            return out;
        }
    }
    return "?";
}

std::string GgufTensorInfo::shape_string() const {
    std::string s = "[";
    for (uint32_t d = 0; d < n_dims; ++d) {
        if (d) s += ", ";
        s += strfmt("%" PRId64, ne[d]);
    }
    return s + "]";
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
    std::unique_ptr<GgufFile> f(new GgufFile());
    f->map_ = MmapFile(path);
    f->path_ = path;
    f->base_ = f->map_.data();
    f->size_ = f->map_.size();
    f->parse();
    return f;
}

std::unique_ptr<GgufFile> GgufFile::from_memory(const uint8_t* data, size_t size, const std::string& name) {
    std::unique_ptr<GgufFile> f(new GgufFile());
    f->path_ = name;
    f->base_ = data;
    f->size_ = size;
    f->parse();
    return f;
}

void GgufFile::parse() {
    Cursor c(base_, size_, path_);
    if (size_ < 4) c.fail(strfmt("file too small for a GGUF header (%" PRIu64 " bytes)", size_), 0);
    const uint32_t magic = c.read<uint32_t>("magic");
    if (magic != GGUF_MAGIC) {
        char m[5] = {0};
        std::memcpy(m, base_, 4);
        for (char& ch : m) if (ch && (ch < 0x20 || ch > 0x7e)) ch = '?';
        c.fail(strfmt("bad magic '%s' (expected 'GGUF')", m), 0);
    }
    version_ = c.read<uint32_t>("version");
    if (version_ != 2 && version_ != 3) {
        if (version_ == 1) c.fail("GGUF version 1 is not supported (only 2 and 3)", 4);
        if ((version_ & 0xFFFF) == 0 && version_ != 0) c.fail(strfmt("unsupported version %u (a big-endian file?)", version_), 4);
        c.fail(strfmt("unsupported GGUF version %u (only 2 and 3)", version_), 4);
    }
    const uint64_t n_tensors = c.read<uint64_t>("tensor count");
    const uint64_t n_kv = c.read<uint64_t>("metadata count");
    if (n_tensors > GgufLimits::MAX_TENSORS) c.fail(strfmt("tensor count %" PRIu64 " exceeds the limit", n_tensors), 8);
    if (n_kv > GgufLimits::MAX_KV) c.fail(strfmt("metadata count %" PRIu64 " exceeds the limit", n_kv), 16);
    // Minimal encodings: a kv is >= 8 (key len) + 4 (type) + 1 bytes; a tensor info >= 8 + 4 + 8 + 4 + 8.
    if (n_kv > c.remaining() / 13) c.fail(strfmt("metadata count %" PRIu64 " cannot fit in the file", n_kv), 16);
    if (n_tensors > c.remaining() / 32) c.fail(strfmt("tensor count %" PRIu64 " cannot fit in the file", n_tensors), 8);

    kvs_.reserve(static_cast<size_t>(n_kv));
    std::unordered_set<std::string_view> seen_keys;
    for (uint64_t k = 0; k < n_kv; ++k) {
        GgufKV kv;
        kv.offset = c.pos();
        c.context = strfmt("metadata entry %" PRIu64, k);
        const std::string_view key = c.read_string("key", GgufLimits::MAX_KEY);
        if (key.empty()) c.fail("empty metadata key", kv.offset);
        kv.key.assign(key.data(), key.size());
        c.context = "key '" + kv.key + "'";
        if (!seen_keys.insert(key).second) c.fail("duplicate metadata key", kv.offset);
        const uint64_t type_at = c.pos();
        const uint32_t t = c.read<uint32_t>("value type");
        if (!valid_type(t)) c.fail(strfmt("unknown value type %u", t), type_at);
        read_value(c, static_cast<GgufType>(t), kv.value);
        kvs_.push_back(std::move(kv));
    }
    c.context.clear();

    alignment_ = GGUF_DEFAULT_ALIGNMENT;
    if (const GgufKV* a = find("general.alignment")) {
        if (a->value.type != GgufType::UINT32) {
            throw JllmError(strfmt("gguf: %s: general.alignment has type %s, expected u32 (at offset %" PRIu64 ")",
                                   path_.c_str(), gguf_type_name(a->value.type), a->offset));
        }
        const uint64_t al = a->value.u;
        if (al == 0 || (al & (al - 1)) != 0 || al > GgufLimits::MAX_ALIGNMENT) {
            throw JllmError(strfmt("gguf: %s: general.alignment %" PRIu64 " is not a power of two in [1, %" PRIu64
                                   "] (at offset %" PRIu64 ")",
                                   path_.c_str(), al, GgufLimits::MAX_ALIGNMENT, a->offset));
        }
        alignment_ = al;
    }

    tensors_.reserve(static_cast<size_t>(n_tensors));
    std::unordered_set<std::string_view> seen_names;
    for (uint64_t k = 0; k < n_tensors; ++k) {
        GgufTensorInfo ti;
        const uint64_t at = c.pos();
        c.context = strfmt("tensor info %" PRIu64, k);
        const std::string_view name = c.read_string("tensor name", GgufLimits::MAX_KEY);
        if (name.empty()) c.fail("empty tensor name", at);
        ti.name.assign(name.data(), name.size());
        c.context = "tensor '" + ti.name + "'";
        if (!seen_names.insert(name).second) c.fail("duplicate tensor name", at);
        const uint64_t dims_at = c.pos();
        ti.n_dims = c.read<uint32_t>("n_dims");
        if (ti.n_dims == 0 || ti.n_dims > GgufLimits::MAX_DIMS) {
            c.fail(strfmt("n_dims %u is outside [1, %u]", ti.n_dims, GgufLimits::MAX_DIMS), dims_at);
        }
        uint64_t n_elem = 1;
        for (uint32_t d = 0; d < ti.n_dims; ++d) {
            const uint64_t ne_at = c.pos();
            const uint64_t ne = c.read<uint64_t>("dimension");
            if (ne == 0 || ne > static_cast<uint64_t>(INT64_MAX)) {
                c.fail(strfmt("dimension %u is %" PRIu64 " (must be in [1, 2^63))", d, ne), ne_at);
            }
            if (mul_overflow(n_elem, ne, &n_elem) || n_elem > static_cast<uint64_t>(INT64_MAX)) {
                c.fail("element count overflows", ne_at);
            }
            ti.ne[d] = static_cast<int64_t>(ne);
        }
        const uint64_t type_at = c.pos();
        const uint32_t type_id = c.read<uint32_t>("tensor type");
        const TypeTraits* tt = type_traits(type_id);
        if (tt == nullptr) c.fail(strfmt("unknown or unsupported tensor type id %u", type_id), type_at);
        ti.type = tt->type;
        if (ti.ne[0] % tt->block_size != 0) {
            c.fail(strfmt("row length %" PRId64 " is not a multiple of the %s block size %" PRId64, ti.ne[0],
                          tt->name, tt->block_size), dims_at);
        }
        uint64_t rows = n_elem / static_cast<uint64_t>(ti.ne[0]);
        uint64_t row_bytes = 0;
        if (mul_overflow(static_cast<uint64_t>(ti.ne[0] / tt->block_size), tt->type_size, &row_bytes) ||
            mul_overflow(rows, row_bytes, &ti.nbytes)) {
            c.fail("tensor byte size overflows", dims_at);
        }
        const uint64_t off_at = c.pos();
        ti.offset = c.read<uint64_t>("tensor data offset");
        if (ti.offset % alignment_ != 0) {
            c.fail(strfmt("data offset %" PRIu64 " is not a multiple of the alignment %" PRIu64, ti.offset, alignment_),
                   off_at);
        }
        tensors_.push_back(std::move(ti));
    }
    c.context.clear();

    // The data section starts at the next multiple of the alignment after the tensor infos.
    const uint64_t infos_end = c.pos();
    uint64_t data_off = 0;
    if (add_overflow(infos_end, alignment_ - 1, &data_off)) c.fail("data offset overflows", infos_end);
    data_off -= data_off % alignment_;
    data_offset_ = data_off;
    if (!tensors_.empty() && data_offset_ > size_) {
        c.fail(strfmt("file truncated: data section would start at %" PRIu64 " past the end (%" PRIu64 " bytes)",
                      data_offset_, size_), infos_end);
    }

    std::vector<size_t> order(tensors_.size());
    for (size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return tensors_[a].offset < tensors_[b].offset; });
    uint64_t prev_end = 0;
    const GgufTensorInfo* prev = nullptr;
    for (size_t k : order) {
        GgufTensorInfo& ti = tensors_[k];
        uint64_t start = 0, end = 0;
        if (add_overflow(data_offset_, ti.offset, &start) || add_overflow(start, ti.nbytes, &end) || end > size_) {
            throw JllmError(strfmt("gguf: %s: tensor '%s' (%s %s, %" PRIu64 " bytes at data offset %" PRIu64
                                   ") extends past the end of the file (%" PRIu64 " bytes)",
                                   path_.c_str(), ti.name.c_str(), type_name(ti.type), ti.shape_string().c_str(),
                                   ti.nbytes, ti.offset, size_));
        }
        if (prev != nullptr && ti.offset < prev_end) {
            throw JllmError(strfmt("gguf: %s: tensor '%s' at data offset %" PRIu64 " overlaps tensor '%s' (ends at %" PRIu64 ")",
                                   path_.c_str(), ti.name.c_str(), ti.offset, prev->name.c_str(), prev_end));
        }
        ti.file_offset = start;
        ti.data = base_ + start;
        prev_end = ti.offset + ti.nbytes;
        prev = &ti;
    }
}

const GgufKV* GgufFile::find(std::string_view key) const {
    for (const GgufKV& kv : kvs_) {
        if (kv.key == key) return &kv;
    }
    return nullptr;
}

namespace {
[[noreturn]] void type_mismatch(const std::string& path, const GgufKV& kv, const char* expected) {
    throw JllmError(strfmt("gguf: %s: key '%s' has type %s, expected %s", path.c_str(), kv.key.c_str(),
                           gguf_type_name(kv.value.type), expected));
}
}  // namespace

std::optional<uint64_t> GgufFile::get_uint(std::string_view key) const {
    const GgufKV* kv = find(key);
    if (!kv) return std::nullopt;
    switch (kv->value.type) {
        case GgufType::UINT8:
        case GgufType::UINT16:
        case GgufType::UINT32:
        case GgufType::UINT64: return kv->value.u;
        case GgufType::INT8:
        case GgufType::INT16:
        case GgufType::INT32:
        case GgufType::INT64:
            if (kv->value.i < 0) {
                throw JllmError(strfmt("gguf: %s: key '%s' is %" PRId64 ", expected a non-negative value", path_.c_str(),
                                       kv->key.c_str(), kv->value.i));
            }
            return static_cast<uint64_t>(kv->value.i);
        default: type_mismatch(path_, *kv, "an unsigned integer");
    }
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
    const GgufKV* kv = find(key);
    if (!kv) return std::nullopt;
    switch (kv->value.type) {
        case GgufType::INT8:
        case GgufType::INT16:
        case GgufType::INT32:
        case GgufType::INT64: return kv->value.i;
        case GgufType::UINT8:
        case GgufType::UINT16:
        case GgufType::UINT32:
        case GgufType::UINT64:
            if (kv->value.u > static_cast<uint64_t>(INT64_MAX)) type_mismatch(path_, *kv, "an integer that fits in i64");
            return static_cast<int64_t>(kv->value.u);
        default: type_mismatch(path_, *kv, "an integer");
    }
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
    const GgufKV* kv = find(key);
    if (!kv) return std::nullopt;
    if (kv->value.type == GgufType::FLOAT32 || kv->value.type == GgufType::FLOAT64) return kv->value.f;
    type_mismatch(path_, *kv, "f32 or f64");
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
    const GgufKV* kv = find(key);
    if (!kv) return std::nullopt;
    if (kv->value.type == GgufType::BOOL) return kv->value.u != 0;
    type_mismatch(path_, *kv, "bool");
}

std::optional<std::string_view> GgufFile::get_string(std::string_view key) const {
    const GgufKV* kv = find(key);
    if (!kv) return std::nullopt;
    if (kv->value.type == GgufType::STRING) return kv->value.str;
    type_mismatch(path_, *kv, "string");
}

const GgufArray* GgufFile::get_array(std::string_view key) const {
    const GgufKV* kv = find(key);
    if (!kv) return nullptr;
    if (kv->value.type == GgufType::ARRAY) return &kv->value.arr;
    type_mismatch(path_, *kv, "array");
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
    for (const GgufTensorInfo& t : tensors_) {
        if (t.name == name) return &t;
    }
    return nullptr;
}

}  // namespace jllm
