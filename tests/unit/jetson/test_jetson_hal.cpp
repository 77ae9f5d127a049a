// tests/unit/jetson/test_jetson_hal.cpp — the Jetson HAL on fixture trees laid out like an Orin
// Nano Super on L4T R36 and an Orin Nano on R35; off-Jetson everything is "unknown"; --dump-hal
// round-trips; the thermal guard's pacing and stop decisions.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "jetson/jetson_hal.h"
#include "jetson/thermal_guard.h"
#include "jllm_jetson.h"
#include "test_paths.h"

namespace jllm {
namespace {

std::string fixture(const std::string& name) { return test::data_dir() + "/sysfs/" + name; }

TEST(JetsonInfo, OrinNanoSuperR36) {
    JetsonHal hal(fixture("orin_nano_super_r36"));
    const JetsonInfo ji = hal.info();
    EXPECT_TRUE(ji.is_jetson);
    EXPECT_EQ(ji.l4t, "R36.4.3");
    EXPECT_EQ(ji.model, "NVIDIA Jetson Orin Nano Engineering Reference Developer Kit Super");
    EXPECT_EQ(ji.cuda_version, "12.6.68");
    EXPECT_EQ(ji.sm_count, -1);  // only a GPU provider knows
    EXPECT_EQ(ji.compute_capability, "unknown");
}

TEST(JetsonInfo, GpuProviderFillsSmCountWithoutACudaHeader) {
    JetsonHal hal(fixture("orin_nano_super_r36"), [] {
        GpuProperties g;
        g.sm_count = 8;
        g.cc_major = 8;
        g.cc_minor = 7;
        g.cuda_version = "12.6";
        return g;
    });
    const JetsonInfo ji = hal.info();
    EXPECT_EQ(ji.sm_count, 8);
    EXPECT_EQ(ji.compute_capability, "8.7");
    EXPECT_EQ(ji.cuda_version, "12.6");
}

TEST(PowerState, OrinNanoSuperR36) {
    const PowerState ps = JetsonHal(fixture("orin_nano_super_r36")).power();
    EXPECT_EQ(ps.mode_id, 2);
    EXPECT_EQ(ps.mode_name, "MAXN_SUPER");
    EXPECT_EQ(ps.gpu_cur_mhz, 1020);
    EXPECT_EQ(ps.gpu_max_mhz, 1020);
    EXPECT_EQ(ps.gpu_load_pct, 35);  // 347 per mille
    EXPECT_EQ(ps.emc_cur_mhz, 3199);
    EXPECT_EQ(ps.emc_max_mhz, 3199);
    EXPECT_EQ(ps.cpu_cur_mhz, 1728);  // the highest over online CPUs
    EXPECT_EQ(ps.cpu_max_mhz, 1728);
    EXPECT_EQ(ps.cpus_online, 6);
    EXPECT_EQ(ps.cpus_online_list, "0-5");
}

TEST(PowerState, OrinNanoR35UsesTheOlderPaths) {
    const PowerState ps = JetsonHal(fixture("orin_nano_r35")).power();
    EXPECT_EQ(ps.mode_id, 0);
    EXPECT_EQ(ps.mode_name, "15W");
    EXPECT_EQ(ps.gpu_cur_mhz, 625);  // 624.75 MHz rounded
    EXPECT_EQ(ps.gpu_load_pct, 0);
    EXPECT_EQ(ps.emc_cur_mhz, 2133);
    EXPECT_EQ(ps.cpu_cur_mhz, 1510);
    EXPECT_EQ(JetsonHal(fixture("orin_nano_r35")).info().l4t, "R35.5.0");
}

TEST(ThermalState, ZonesByTypeWithTripPoints) {
    const ThermalState ts = JetsonHal(fixture("orin_nano_super_r36")).thermal();
    ASSERT_EQ(ts.zones.size(), 7u);
    for (const char* t : {"cpu-thermal", "gpu-thermal", "soc0-thermal", "soc1-thermal", "soc2-thermal", "tj-thermal"}) {
        const ThermalZone* z = ts.find(t);
        ASSERT_NE(z, nullptr) << t;
        EXPECT_TRUE(z->valid()) << t;
    }
    EXPECT_FLOAT_EQ(ts.find("gpu-thermal")->temp_c, 46.5f);
    EXPECT_FALSE(ts.find("cv0-thermal")->valid());  // a disabled zone reads empty
    EXPECT_FLOAT_EQ(ts.max_c(), 47.25f);
    const ThermalZone* tj = ts.find("tj-thermal");
    ASSERT_EQ(tj->trips.size(), 3u);
    EXPECT_EQ(tj->trips[1].type, "passive");
    EXPECT_FLOAT_EQ(tj->trips[1].temp_c, 99.0f);
    EXPECT_FLOAT_EQ(tj->critical_c(), 104.5f);
    EXPECT_FLOAT_EQ(ts.critical_c(), 104.5f);
}

TEST(PowerRails, Ina3221Channels) {
    const std::vector<PowerRail> rs = JetsonHal(fixture("orin_nano_super_r36")).rails();
    ASSERT_EQ(rs.size(), 3u);
    EXPECT_EQ(rs[0].name, "VDD_IN");
    EXPECT_EQ(rs[0].mv, 5064);
    EXPECT_EQ(rs[0].ma, 1192);
    EXPECT_EQ(rs[0].mw, 5064 * 1192 / 1000);
    EXPECT_EQ(rs[1].name, "VDD_CPU_GPU_CV");
    EXPECT_EQ(rs[2].name, "VDD_SOC");
    const LiveStats ls = JetsonHal(fixture("orin_nano_super_r36")).live();
    EXPECT_EQ(ls.board_mw, 5064 * 1192 / 1000);
    EXPECT_EQ(ls.mem_available, 5400000LL * 1024);
    EXPECT_EQ(ls.rss_peak, 412340LL * 1024);
}

TEST(JetsonHal, OffJetsonEverythingIsUnknownAndNothingFails) {
    const std::string root = std::string(JLLM_BINARY_DIR) + "/test_jetson_empty_root";
    ASSERT_EQ(std::system(("mkdir -p '" + root + "'").c_str()), 0);
    JetsonHal hal(root);
    const JetsonInfo ji = hal.info();
    EXPECT_FALSE(ji.is_jetson);
    EXPECT_EQ(ji.l4t, "unknown");
    EXPECT_EQ(ji.model, "unknown");
    EXPECT_EQ(ji.cuda_version, "unknown");
    const PowerState ps = hal.power();
    EXPECT_EQ(ps.mode_id, -1);
    EXPECT_EQ(ps.mode_name, "unknown");
    EXPECT_EQ(ps.gpu_cur_mhz, -1);
    EXPECT_EQ(ps.emc_cur_mhz, -1);
    EXPECT_EQ(ps.cpus_online, -1);
    EXPECT_TRUE(hal.thermal().zones.empty());
    EXPECT_LT(hal.thermal().max_c(), -273.0f);
    EXPECT_TRUE(hal.rails().empty());
    EXPECT_TRUE(hal.files().empty());
    EXPECT_NE(hal.summary().find("unknown"), std::string::npos);
    // A non-existent root behaves the same.
    EXPECT_EQ(JetsonHal("/nonexistent-root-for-test").power().mode_name, "unknown");
}

TEST(JetsonHal, DumpWritesAFixtureTreeThatReadsBackTheSame) {
    const std::string out = std::string(JLLM_BINARY_DIR) + "/test_jetson_dump";
    ASSERT_EQ(std::system(("rm -rf '" + out + "'").c_str()), 0);
    JetsonHal src(fixture("orin_nano_super_r36"));
    const int n = src.dump(out);
    EXPECT_EQ(static_cast<size_t>(n), src.files().size());
    EXPECT_GT(n, 50);
    JetsonHal copy(out);
    EXPECT_EQ(copy.summary(), src.summary());
    EXPECT_EQ(copy.files(), src.files());
}

TEST(JetsonHal, SummaryNamesDeviceModeClocksAndTemperatures) {
    const std::string s = JetsonHal(fixture("orin_nano_super_r36")).summary();
    for (const char* part : {"Orin Nano", "R36.4.3", "MAXN_SUPER", "GPU 1020/1020 MHz", "EMC 3199/3199 MHz",
                             "tj-thermal 47.2 C", "VDD_IN 6036 mW"}) {
        EXPECT_NE(s.find(part), std::string::npos) << part << "\n" << s;
    }
}

TEST(JetsonHal, DefaultRootComesFromTheEnvironment) {
    ::setenv("JLLM_SYSFS_ROOT", "/some/root", 1);
    EXPECT_EQ(default_sysfs_root(), "/some/root");
    ::unsetenv("JLLM_SYSFS_ROOT");
    EXPECT_EQ(default_sysfs_root(), "/");
}

TEST(ThermalGuard, PacesAbovePaceAndStopsAtTheCriticalTrip) {
    ThermalGuard g;
    ThermalConfig c;
    c.pace_c = 45.0f;  // the fixture's hottest zone is 47.25 C
    c.interval_ms = 0.0;
    g.configure(fixture("orin_nano_super_r36"), c);
    ASSERT_TRUE(g.enabled());
    EXPECT_FLOAT_EQ(g.stop_c(), 104.5f);
    EXPECT_EQ(g.step(), ThermalAction::Pace);
    EXPECT_NEAR(g.pause_ms(), 100.0 * (0.1 + 0.9 * (2.25 / 59.5)), 1e-3);
    EXPECT_FLOAT_EQ(g.peak_c(), 47.25f);
    c.pace_c = 85.0f;
    g.configure(fixture("orin_nano_super_r36"), c);
    EXPECT_EQ(g.step(), ThermalAction::None);
    c.stop_c = 47.0f;  // configured stop below the current temperature
    g.configure(fixture("orin_nano_super_r36"), c);
    EXPECT_EQ(g.step(), ThermalAction::Stop);
}

TEST(ThermalGuard, NoZonesMeansNoPolicy) {
    ThermalGuard g;
    g.configure("/nonexistent-root-for-test", ThermalConfig{});
    EXPECT_FALSE(g.enabled());
    EXPECT_EQ(g.step(), ThermalAction::None);
    EXPECT_LT(g.peak_c(), -273.0f);
}

}  // namespace
}  // namespace jllm
