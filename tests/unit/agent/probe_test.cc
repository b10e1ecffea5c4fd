#include "methods/probe/jobs/probe_job.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "profiler-agent/device.h"
#include "tests/testing/status_matchers.h"

namespace tailor::profiler {
namespace {

using ::tailor::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kX86CpuInfo[] =
    "processor\t: 0\n"
    "vendor_id\t: GenuineIntel\n"
    "cpu family\t: 6\n"
    "model\t\t: 167\n"
    "model name\t: Intel(R) Xeon(R) Platinum 8480+\n"
    "stepping\t: 1\n"
    "\n"
    "processor\t: 1\n"
    "model\t\t: 167\n"
    "model name\t: Intel(R) Xeon(R) Platinum 8480+\n";

constexpr char kArmCpuInfo[] =
    "processor\t: 0\n"
    "BogoMIPS\t: 108.00\n"
    "Features\t: fp asimd evtstrm\n"
    "CPU implementer\t: 0x41\n"
    "CPU part\t: 0xd08\n"
    "\n"
    "Hardware\t: BCM2835\n"
    "Revision\t: c03111\n"
    "Model\t\t: Raspberry Pi 4 Model B Rev 1.1\n";

constexpr char kMemInfo[] =
    "MemTotal:       24683656 kB\n"
    "MemFree:        23347000 kB\n"
    "MemAvailable:   23961316 kB\n"
    "Buffers:           24460 kB\n"
    "Cached:           739108 kB\n";

constexpr char kOldMemInfo[] =
    "MemTotal:        2048000 kB\n"
    "MemFree:          512000 kB\n"
    "Buffers:          102400 kB\n"
    "Cached:           204800 kB\n";

TEST(ParseCpuModelTest, X86UsesModelNameNotModelNumber) {
  EXPECT_EQ(ParseCpuModel(kX86CpuInfo), "Intel(R) Xeon(R) Platinum 8480+");
}

TEST(ParseCpuModelTest, ArmFallsBackToHardware) {
  EXPECT_EQ(ParseCpuModel(kArmCpuInfo), "BCM2835");
}

TEST(ParseCpuModelTest, UnknownWithoutAnyModelLine) {
  EXPECT_EQ(ParseCpuModel(""), "unknown");
  EXPECT_EQ(ParseCpuModel("processor : 0\nmodel name :\n"), "unknown");
}

TEST(ParseMemInfoTest, ReadsTotalAndAvailable) {
  TAILOR_ASSERT_OK_AND_ASSIGN(MemInfo mem, ParseMemInfo(kMemInfo));
  EXPECT_EQ(mem.total_kib, 24683656);
  EXPECT_EQ(mem.available_kib, 23961316);
}

TEST(ParseMemInfoTest, EstimatesAvailableOnOldKernels) {
  TAILOR_ASSERT_OK_AND_ASSIGN(MemInfo mem, ParseMemInfo(kOldMemInfo));
  EXPECT_EQ(mem.total_kib, 2048000);
  EXPECT_EQ(mem.available_kib, 512000 + 102400 + 204800);
}

TEST(ParseMemInfoTest, RejectsMissingTotal) {
  EXPECT_THAT(ParseMemInfo("MemFree: 10 kB\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("MemTotal")));
  EXPECT_THAT(ParseMemInfo("MemTotal: lots\n"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("MemTotal")));
}

std::string FixtureProc(const std::string& name, const std::string& cpuinfo,
                        const std::string& meminfo) {
  const std::string dir =
      absl::StrCat(::testing::TempDir(), "/probe_test_", name, "_", ::getpid());
  std::filesystem::create_directories(dir);
  if (!cpuinfo.empty()) std::ofstream(dir + "/cpuinfo") << cpuinfo;
  if (!meminfo.empty()) std::ofstream(dir + "/meminfo") << meminfo;
  return dir;
}

TEST(ReadHostInfoTest, ReadsFixtureFilesAndTheRealHost) {
  const std::string proc = FixtureProc("host", kX86CpuInfo, kMemInfo);
  TAILOR_ASSERT_OK_AND_ASSIGN(HostInfo host, ReadHostInfo(proc));
  EXPECT_EQ(host.cpu_model, "Intel(R) Xeon(R) Platinum 8480+");
  EXPECT_EQ(host.memory_total_mib, 24683656 / 1024);
  EXPECT_EQ(host.memory_available_mib, 23961316 / 1024);
  EXPECT_GE(host.logical_cores, 1);
  EXPECT_GE(host.usable_cores, 1);
  EXPECT_LE(host.usable_cores, host.logical_cores);
  EXPECT_FALSE(host.hostname.empty());
  EXPECT_THAT(host.kernel, HasSubstr("Linux"));
}

TEST(ReadHostInfoTest, MissingMeminfoIsNotFound) {
  const std::string proc = FixtureProc("nomem", kX86CpuInfo, "");
  EXPECT_THAT(ReadHostInfo(proc), StatusIs(absl::StatusCode::kNotFound, HasSubstr("meminfo")));
}

TEST(ReadHostInfoTest, MissingCpuinfoIsUnknownModel) {
  const std::string proc = FixtureProc("nocpu", "", kMemInfo);
  TAILOR_ASSERT_OK_AND_ASSIGN(HostInfo host, ReadHostInfo(proc));
  EXPECT_EQ(host.cpu_model, "unknown");
}

TEST(MedianTest, OddEvenAndEmpty) {
  EXPECT_EQ(Median({}), 0.0);
  EXPECT_EQ(Median({3, 1, 2}), 2.0);
  EXPECT_EQ(Median({4, 1, 3, 2}), 2.5);
}

TEST(MeasureTest, MatmulIsCorrectAndTimed) {
  const int n = 70;  // not a multiple of the block size, to cover the edges
  std::vector<float> a(n * n), b(n * n), c(n * n);
  for (int i = 0; i < n * n; ++i) {
    a[i] = static_cast<float>(i % 7) - 3.0f;
    b[i] = static_cast<float>(i % 5) * 0.5f;
  }
  EXPECT_GT(MeasureMatmulGflops(a, b, c, n), 0.0);
  for (int i = 0; i < n; i += 13) {
    for (int j = 0; j < n; j += 11) {
      double expected = 0;
      for (int k = 0; k < n; ++k) expected += double(a[i * n + k]) * b[k * n + j];
      EXPECT_NEAR(c[i * n + j], expected, 1e-3) << i << "," << j;
    }
  }
}

TEST(MeasureTest, MemcpyCopiesAndIsTimed) {
  std::vector<char> src(1 << 20, 7), dst(1 << 20, 0);
  EXPECT_GT(MeasureMemcpyGbps(src, dst), 0.0);
  EXPECT_EQ(dst, src);
}

TEST(DeviceTest, CpuDeviceUsesHostMemory) {
  const std::string proc = FixtureProc("device", kX86CpuInfo, kMemInfo);
  TAILOR_ASSERT_OK_AND_ASSIGN(DeviceDescription d, DetectDevice("cpu", proc));
  EXPECT_EQ(d.device_kind, "cpu");
  EXPECT_EQ(d.memory_mib, 24683656 / 1024);
  EXPECT_EQ(d.gpus, 0);
}

TEST(DeviceTest, MalformedDevicesAreRejected) {
  for (const char* bad : {"gpu", "cuda", "cuda:", "cuda:-1", "cuda:x", "CPU"}) {
    EXPECT_THAT(DetectDevice(bad),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cpu or cuda:N")))
        << bad;
  }
}

TEST(DeviceTest, CudaWithoutCudaBuildSaysHowToRebuild) {
  if (BuiltWithCuda()) GTEST_SKIP() << "built with CUDA";
  EXPECT_THAT(DetectDevice("cuda:0"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("rebuild with -DTAILOR_WITH_CUDA=ON")));
}

TEST(DeviceTest, AgentInfoDefaultsNameToHostAndDevice) {
  DeviceDescription d;
  d.device = "cuda:1";
  d.device_kind = "NVIDIA H200";
  d.memory_mib = 143771;
  d.gpus = 1;
  d.gpu_type = "NVIDIA H200";
  v1::AgentInfo info = MakeAgentInfo(d, "", "node7", "tailor-builtin", "2");
  EXPECT_EQ(info.name(), "node7:cuda:1");
  EXPECT_EQ(info.device_kind(), "NVIDIA H200");
  EXPECT_EQ(info.memory_mib(), 143771);
  EXPECT_EQ(info.engine_version(), "2");
  EXPECT_EQ(MakeAgentInfo(d, "mine", "node7", "e", "1").name(), "mine");
}

}  // namespace
}  // namespace tailor::profiler
