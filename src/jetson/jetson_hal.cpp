// jetson/jetson_hal.cpp — JetsonHal: reads the board's identity, power mode, clocks, thermal
// zones and power rails from files under an injectable root (paths and their sources in
// jetson/hal_paths.h). Missing or unreadable files leave a field "unknown"; nothing throws
// except dump() when its output directory cannot be written.
#include <algorithm>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "core/error.h"
#include "jetson/hal_paths.h"
#include "jetson/jetson_hal.h"
#include "memory/memory_budget.h"
#include "core/sysfs_root.h"

namespace fs = std::filesystem;

namespace jllm {

namespace {

std::optional<std::string> read_raw(const std::string& root, const std::string& abs) {
    std::ifstream in(rooted_path(root, abs), std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) return std::nullopt;
    return ss.str();
}

// Trimmed text (trailing whitespace and the device tree's NUL terminator removed).
std::optional<std::string> read_text(const std::string& root, const std::string& abs) {
    std::optional<std::string> s = read_raw(root, abs);
    if (!s) return s;
    while (!s->empty() && (std::isspace(static_cast<unsigned char>(s->back())) || s->back() == '\0')) s->pop_back();
    return s;
}

int64_t read_int(const std::string& root, const std::string& abs) {
    std::optional<std::string> s = read_text(root, abs);
    if (!s || s->empty()) return -1;
    char* end = nullptr;
    const long long v = std::strtoll(s->c_str(), &end, 10);
    if (end == s->c_str()) return -1;
    return static_cast<int64_t>(v);
}

bool exists(const std::string& root, const std::string& abs) {
    std::error_code ec;
    return fs::exists(rooted_path(root, abs), ec);
}

// Entries of a directory whose names start with `prefix` followed by a number, sorted by it.
std::vector<std::pair<int, std::string>> numbered_entries(const std::string& root, const std::string& abs,
                                                          const std::string& prefix) {
    std::vector<std::pair<int, std::string>> out;
    std::error_code ec;
    fs::directory_iterator it(rooted_path(root, abs), ec);
    if (ec) return out;
    for (const fs::directory_entry& e : it) {
        const std::string name = e.path().filename().string();
        if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
        const std::string num = name.substr(prefix.size());
        if (!std::all_of(num.begin(), num.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) continue;
        out.emplace_back(std::atoi(num.c_str()), name);
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<std::string> dir_names(const std::string& root, const std::string& abs) {
    std::vector<std::string> out;
    std::error_code ec;
    fs::directory_iterator it(rooted_path(root, abs), ec);
    if (ec) return out;
    for (const fs::directory_entry& e : it) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

// "0-3,5" -> {0,1,2,3,5}; empty on a malformed list.
std::vector<int> parse_cpu_list(const std::string& s) {
    std::vector<int> cpus;
    std::stringstream ss(s);
    std::string part;
    while (std::getline(ss, part, ',')) {
        if (part.empty()) continue;
        const size_t dash = part.find('-');
        char* end = nullptr;
        const long a = std::strtol(part.c_str(), &end, 10);
        if (end == part.c_str() || a < 0 || a > 4096) return {};
        long b = a;
        if (dash != std::string::npos) {
            b = std::strtol(part.c_str() + dash + 1, &end, 10);
            if (b < a || b > 4096) return {};
        }
        for (long i = a; i <= b; ++i) cpus.push_back(static_cast<int>(i));
    }
    return cpus;
}

int64_t hz_to_mhz(int64_t hz) { return hz < 0 ? -1 : (hz + 500000) / 1000000; }

std::string mhz_text(int64_t v) { return v < 0 ? std::string("unknown") : std::to_string(v); }

// Paths of thermal zone files: (zone dir abs path, index).
std::vector<std::pair<int, std::string>> zone_dirs(const std::string& root) {
    std::vector<std::pair<int, std::string>> out;
    for (auto& [n, name] : numbered_entries(root, hal_paths::THERMAL_DIR, "thermal_zone")) {
        out.emplace_back(n, std::string(hal_paths::THERMAL_DIR) + "/" + name);
    }
    return out;
}

// hwmon directories of every INA3221 instance.
std::vector<std::string> ina3221_hwmon_dirs(const std::string& root) {
    std::vector<std::string> out;
    for (const std::string& dev : dir_names(root, hal_paths::INA3221_DRIVER_DIR)) {
        const std::string hw = std::string(hal_paths::INA3221_DRIVER_DIR) + "/" + dev + "/hwmon";
        for (auto& [n, name] : numbered_entries(root, hw, "hwmon")) out.push_back(hw + "/" + name);
    }
    return out;
}

std::vector<int> cpu_indices(const std::string& root) {
    std::vector<int> out;
    for (auto& [n, name] : numbered_entries(root, hal_paths::CPU_DIR, "cpu")) out.push_back(n);
    return out;
}

}  // namespace

float ThermalZone::critical_c() const {
    for (const TripPoint& t : trips) {
        if (t.type == "critical") return t.temp_c;
    }
    return -1.0f;
}

float ThermalState::max_c() const {
    float m = -1000.0f;
    for (const ThermalZone& z : zones) {
        if (z.valid()) m = std::max(m, z.temp_c);
    }
    return m;
}

float ThermalState::critical_c() const {
    float c = -1.0f;
    for (const ThermalZone& z : zones) {
        const float zc = z.critical_c();
        if (zc > 0.0f && (c < 0.0f || zc < c)) c = zc;
    }
    return c;
}

const ThermalZone* ThermalState::find(const std::string& type) const {
    for (const ThermalZone& z : zones) {
        if (z.type == type) return &z;
    }
    return nullptr;
}

JetsonHal::JetsonHal(std::string root, GpuPropertiesProvider gpu) : root_(std::move(root)), gpu_(std::move(gpu)) {
    if (root_.empty()) root_ = "/";
}

JetsonInfo JetsonHal::info() const {
    JetsonInfo ji;
    if (std::optional<std::string> rel = read_text(root_, hal_paths::NV_TEGRA_RELEASE)) {
        const std::string first = rel->substr(0, rel->find('\n'));
        ji.l4t_raw = first;
        // "# R36 (release), REVISION: 4.3, ..." -> "R36.4.3"
        const size_t r = first.find('R');
        const size_t rev = first.find("REVISION:");
        if (r != std::string::npos && rev != std::string::npos) {
            const int major = std::atoi(first.c_str() + r + 1);
            std::string minor;
            for (size_t i = rev + 9; i < first.size(); ++i) {
                const char c = first[i];
                if (c == ' ' && minor.empty()) continue;
                if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') minor += c;
                else break;
            }
            if (major > 0 && !minor.empty()) ji.l4t = strfmt("R%d.%s", major, minor.c_str());
        }
        ji.is_jetson = true;
    }
    std::optional<std::string> model = read_text(root_, hal_paths::DT_MODEL);
    if (!model) model = read_text(root_, hal_paths::DT_MODEL_ALT);
    if (model && !model->empty()) ji.model = *model;
    if (std::optional<std::string> compat = read_raw(root_, hal_paths::DT_COMPATIBLE)) {
        if (compat->find("nvidia,tegra") != std::string::npos) ji.is_jetson = true;
    }
    if (std::optional<std::string> js = read_text(root_, hal_paths::CUDA_VERSION_JSON)) {
        // {"cuda" : {"name" : "CUDA SDK", "version" : "12.6.68"}, ...}: the first "version" after "cuda".
        const size_t c = js->find("\"cuda\"");
        const size_t v = c == std::string::npos ? c : js->find("\"version\"", c);
        if (v != std::string::npos) {
            const size_t q1 = js->find('"', js->find(':', v) + 1);
            const size_t q2 = q1 == std::string::npos ? q1 : js->find('"', q1 + 1);
            if (q2 != std::string::npos) ji.cuda_version = js->substr(q1 + 1, q2 - q1 - 1);
        }
    }
    if (gpu_) {
        const GpuProperties gp = gpu_();
        if (gp.sm_count > 0) ji.sm_count = gp.sm_count;
        if (gp.cc_major >= 0) ji.compute_capability = strfmt("%d.%d", gp.cc_major, std::max(gp.cc_minor, 0));
        if (!gp.cuda_version.empty()) ji.cuda_version = gp.cuda_version;
    }
    return ji;
}

PowerState JetsonHal::power() const {
    PowerState ps;
    // nvpmodel: active mode id from the status file (else the configured default), name from the conf.
    const std::optional<std::string> conf = read_text(root_, hal_paths::NVPMODEL_CONF);
    if (std::optional<std::string> st = read_text(root_, hal_paths::NVPMODEL_STATUS)) {
        const size_t p = st->find("pmode:");
        if (p != std::string::npos) ps.mode_id = std::atoi(st->c_str() + p + 6);
    }
    if (conf) {
        auto value_after = [](const std::string& line, const char* key) -> std::string {
            const size_t k = line.find(key);
            if (k == std::string::npos) return {};
            size_t i = k + std::strlen(key);
            std::string v;
            while (i < line.size() && line[i] != ' ' && line[i] != '>' && line[i] != '\t') v += line[i++];
            return v;
        };
        std::stringstream ss(*conf);
        std::string line;
        int default_id = -1;
        std::vector<std::pair<int, std::string>> modes;
        while (std::getline(ss, line)) {
            const size_t first = line.find_first_not_of(" \t");
            if (first == std::string::npos || line[first] == '#') continue;
            if (line.find("POWER_MODEL") != std::string::npos && line.find("ID=") != std::string::npos) {
                modes.emplace_back(std::atoi(value_after(line, "ID=").c_str()), value_after(line, "NAME="));
            } else if (line.find("PM_CONFIG") != std::string::npos) {
                const std::string d = value_after(line, "DEFAULT=");
                if (!d.empty()) default_id = std::atoi(d.c_str());
            }
        }
        if (ps.mode_id < 0) ps.mode_id = default_id;
        for (auto& [id, name] : modes) {
            if (id == ps.mode_id && !name.empty()) ps.mode_name = name;
        }
    }
    // GPU: R36 path first, then R35.
    const std::string r36 = hal_paths::GPU_DEVFREQ_R36, r35 = hal_paths::GPU_DEVFREQ_R35;
    const bool is_r36 = exists(root_, r36 + "/cur_freq");
    const std::string gpu = is_r36 ? r36 : r35;
    ps.gpu_cur_mhz = hz_to_mhz(read_int(root_, gpu + "/cur_freq"));
    ps.gpu_max_mhz = hz_to_mhz(read_int(root_, gpu + "/max_freq"));
    const int64_t load = read_int(root_, is_r36 ? hal_paths::GPU_LOAD_R36 : hal_paths::GPU_LOAD_R35);
    if (load >= 0) ps.gpu_load_pct = static_cast<int>((load + 5) / 10);  // per mille
    // EMC.
    const std::string emc = hal_paths::EMC_DEVFREQ_R36;
    if (exists(root_, emc + "/cur_freq")) {
        ps.emc_cur_mhz = hz_to_mhz(read_int(root_, emc + "/cur_freq"));
        ps.emc_max_mhz = hz_to_mhz(read_int(root_, emc + "/max_freq"));
    } else {
        ps.emc_cur_mhz = hz_to_mhz(read_int(root_, hal_paths::EMC_RATE_R35));
        ps.emc_max_mhz = hz_to_mhz(read_int(root_, hal_paths::EMC_MAX_R35));
    }
    // CPUs.
    if (std::optional<std::string> online = read_text(root_, hal_paths::CPU_ONLINE)) {
        const std::vector<int> cpus = parse_cpu_list(*online);
        if (!cpus.empty()) {
            ps.cpus_online = static_cast<int>(cpus.size());
            ps.cpus_online_list = *online;
        }
        int64_t cur = -1;
        for (int c : cpus) {
            cur = std::max(cur, read_int(root_, strfmt("%s/cpu%d/cpufreq/scaling_cur_freq", hal_paths::CPU_DIR, c)));
        }
        if (cur >= 0) ps.cpu_cur_mhz = (cur + 500) / 1000;
        const int c0 = cpus.empty() ? 0 : cpus.front();
        int64_t mx = read_int(root_, strfmt("%s/cpu%d/cpufreq/scaling_max_freq", hal_paths::CPU_DIR, c0));
        if (mx < 0) mx = read_int(root_, strfmt("%s/cpu%d/cpufreq/cpuinfo_max_freq", hal_paths::CPU_DIR, c0));
        if (mx >= 0) ps.cpu_max_mhz = (mx + 500) / 1000;
    }
    return ps;
}

ThermalState JetsonHal::thermal() const {
    ThermalState ts;
    for (auto& [n, dir] : zone_dirs(root_)) {
        ThermalZone z;
        z.index = n;
        z.type = read_text(root_, dir + "/type").value_or("");
        if (z.type.empty()) z.type = strfmt("thermal_zone%d", n);
        // A disabled zone's temp reads empty (or fails): the zone stays, its temperature unknown.
        if (std::optional<std::string> raw = read_text(root_, dir + "/temp"); raw && !raw->empty()) {
            char* end = nullptr;
            const long long t = std::strtoll(raw->c_str(), &end, 10);
            if (end != raw->c_str()) z.temp_c = static_cast<float>(t) / 1000.0f;
        }
        for (int i = 0; i < 32; ++i) {
            const std::string trip = strfmt("%s/trip_point_%d_", dir.c_str(), i);
            if (!exists(root_, trip + "temp")) break;
            TripPoint tp;
            tp.temp_c = static_cast<float>(read_int(root_, trip + "temp")) / 1000.0f;
            tp.type = read_text(root_, trip + "type").value_or("");
            z.trips.push_back(tp);
        }
        ts.zones.push_back(std::move(z));
    }
    return ts;
}

std::vector<PowerRail> JetsonHal::rails() const {
    std::vector<PowerRail> out;
    for (const std::string& hw : ina3221_hwmon_dirs(root_)) {
        for (int k = 1; k <= 3; ++k) {
            std::optional<std::string> label = read_text(root_, strfmt("%s/in%d_label", hw.c_str(), k));
            if (!label || label->empty()) continue;
            PowerRail r;
            r.name = *label;
            r.mv = read_int(root_, strfmt("%s/in%d_input", hw.c_str(), k));
            r.ma = read_int(root_, strfmt("%s/curr%d_input", hw.c_str(), k));
            if (r.mv >= 0 && r.ma >= 0) r.mw = r.mv * r.ma / 1000;
            out.push_back(r);
        }
    }
    return out;
}

LiveStats JetsonHal::live() const {
    LiveStats ls;
    ls.power = power();
    ls.thermal = thermal();
    ls.rails = rails();
    for (const PowerRail& r : ls.rails) {
        if (r.name == "VDD_IN") ls.board_mw = r.mw;
    }
    ls.mem_available = read_meminfo(root_).available;
    const ProcessMemory pm = read_process_memory(root_);
    ls.rss = pm.rss;
    ls.rss_peak = pm.rss_peak;
    return ls;
}

std::vector<std::string> JetsonHal::files() const {
    namespace p = hal_paths;
    std::vector<std::string> c = {p::NV_TEGRA_RELEASE, p::DT_MODEL, p::DT_MODEL_ALT, p::DT_COMPATIBLE,
                                  p::CUDA_VERSION_JSON, p::NVPMODEL_STATUS, p::NVPMODEL_CONF, p::GPU_LOAD_R36,
                                  p::GPU_LOAD_R35, p::EMC_RATE_R35, p::EMC_MAX_R35, p::CPU_ONLINE, p::PROC_MEMINFO,
                                  p::PROC_SELF_STATUS};
    for (const char* d : {p::GPU_DEVFREQ_R36, p::GPU_DEVFREQ_R35, p::EMC_DEVFREQ_R36}) {
        c.push_back(std::string(d) + "/cur_freq");
        c.push_back(std::string(d) + "/max_freq");
    }
    for (int cpu : cpu_indices(root_)) {
        for (const char* f : {"scaling_cur_freq", "scaling_max_freq", "cpuinfo_max_freq"}) {
            c.push_back(strfmt("%s/cpu%d/cpufreq/%s", p::CPU_DIR, cpu, f));
        }
    }
    for (auto& [n, dir] : zone_dirs(root_)) {
        c.push_back(dir + "/type");
        c.push_back(dir + "/temp");
        for (int i = 0; i < 32 && exists(root_, strfmt("%s/trip_point_%d_temp", dir.c_str(), i)); ++i) {
            c.push_back(strfmt("%s/trip_point_%d_temp", dir.c_str(), i));
            c.push_back(strfmt("%s/trip_point_%d_type", dir.c_str(), i));
        }
    }
    for (const std::string& hw : ina3221_hwmon_dirs(root_)) {
        for (int k = 1; k <= 3; ++k) {
            for (const char* f : {"in%d_label", "in%d_input", "curr%d_input"}) c.push_back(hw + "/" + strfmt(f, k));
        }
    }
    std::vector<std::string> out;
    for (const std::string& f : c) {
        std::error_code ec;
        if (fs::is_regular_file(rooted_path(root_, f), ec)) out.push_back(f);
    }
    return out;
}

int JetsonHal::dump(const std::string& dir) const {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) throw JllmError("--dump-hal: cannot create '" + dir + "': " + ec.message());
    int n = 0;
    for (const std::string& f : files()) {
        std::optional<std::string> data = read_raw(root_, f);
        if (!data) continue;  // e.g. debugfs without root: the fixture simply lacks it
        const fs::path dst = fs::path(dir) / f.substr(1);
        fs::create_directories(dst.parent_path(), ec);
        std::ofstream out(dst, std::ios::binary);
        out.write(data->data(), static_cast<std::streamsize>(data->size()));
        if (!out) throw JllmError("--dump-hal: cannot write '" + dst.string() + "'");
        ++n;
    }
    return n;
}

std::string JetsonHal::summary() const {
    const JetsonInfo ji = info();
    const PowerState ps = power();
    const ThermalState ts = thermal();
    const std::vector<PowerRail> rs = rails();
    std::string s;
    s += strfmt("Device: %s%s\n", ji.model.c_str(), ji.is_jetson ? "" : " (not a Jetson: HAL fields unknown)");
    s += strfmt("L4T: %s; CUDA %s; SMs %s; SM %s\n", ji.l4t.c_str(), ji.cuda_version.c_str(),
                ji.sm_count > 0 ? std::to_string(ji.sm_count).c_str() : "unknown", ji.compute_capability.c_str());
    s += strfmt("Power mode: %s (id %s)\n", ps.mode_name.c_str(),
                ps.mode_id >= 0 ? std::to_string(ps.mode_id).c_str() : "unknown");
    s += strfmt("Clocks: GPU %s/%s MHz (load %s), EMC %s/%s MHz, CPU %s/%s MHz, %s CPUs online (%s)\n",
                mhz_text(ps.gpu_cur_mhz).c_str(), mhz_text(ps.gpu_max_mhz).c_str(),
                ps.gpu_load_pct >= 0 ? strfmt("%d%%", ps.gpu_load_pct).c_str() : "unknown",
                mhz_text(ps.emc_cur_mhz).c_str(), mhz_text(ps.emc_max_mhz).c_str(), mhz_text(ps.cpu_cur_mhz).c_str(),
                mhz_text(ps.cpu_max_mhz).c_str(), ps.cpus_online > 0 ? std::to_string(ps.cpus_online).c_str() : "unknown",
                ps.cpus_online_list.c_str());
    std::string temps;
    for (const ThermalZone& z : ts.zones) {
        if (!temps.empty()) temps += ", ";
        temps += z.valid() ? strfmt("%s %.1f C", z.type.c_str(), z.temp_c) : z.type + " unknown";
    }
    const float crit = ts.critical_c();
    s += strfmt("Temperatures: %s%s\n", temps.empty() ? "unknown" : temps.c_str(),
                crit > 0 ? strfmt(" (critical %.1f C)", crit).c_str() : "");
    std::string rails_s;
    for (const PowerRail& r : rs) {
        if (!rails_s.empty()) rails_s += ", ";
        rails_s += r.mw >= 0 ? strfmt("%s %lld mW", r.name.c_str(), static_cast<long long>(r.mw)) : r.name + " unknown";
    }
    s += strfmt("Power rails: %s\n", rails_s.empty() ? "unknown" : rails_s.c_str());
    return s;
}

std::string board_summary(const std::string& sysfs_root) { return JetsonHal(sysfs_root).summary(); }

int dump_board_files(const std::string& sysfs_root, const std::string& dir) { return JetsonHal(sysfs_root).dump(dir); }

}  // namespace jllm
