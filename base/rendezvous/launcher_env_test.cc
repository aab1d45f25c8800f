#include "base/rendezvous/launcher_env.h"

#include <map>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/fake_env.h"

namespace plexus {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(SlurmNodelistTest, ExpandsRangesListsAndPadding) {
  auto hosts = ExpandSlurmNodelist("node[01-03,7],gpu-a[1-2]-ib,login");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_THAT(*hosts, ElementsAre("node01", "node02", "node03", "node7", "gpu-a1-ib", "gpu-a2-ib",
                                  "login"));
}

TEST(SlurmNodelistTest, SeveralBracketGroupsMultiplyOut) {
  auto hosts = ExpandSlurmNodelist("r[1-2]n[8-9]");
  ASSERT_TRUE(hosts.ok()) << hosts.status();
  EXPECT_THAT(*hosts, ElementsAre("r1n8", "r1n9", "r2n8", "r2n9"));
}

TEST(SlurmNodelistTest, PaddingGrowsPastTheWidth) {
  auto hosts = ExpandSlurmNodelist("n[98-101]");
  ASSERT_TRUE(hosts.ok());
  EXPECT_THAT(*hosts, ElementsAre("n98", "n99", "n100", "n101"));
}

TEST(SlurmNodelistTest, BadSyntaxIsAnErrorNamingTheList) {
  for (const char* bad : {"node[1-", "node]1", "node[3-1]", "node[a-b]", "node[]", ""}) {
    auto hosts = ExpandSlurmNodelist(bad);
    ASSERT_FALSE(hosts.ok()) << bad;
    EXPECT_TRUE(absl::IsInvalidArgument(hosts.status()));
    EXPECT_THAT(std::string(hosts.status().message()), HasSubstr("Slurm node list")) << bad;
  }
}

TEST(SlurmPortTest, DeterministicInRangeAndDistinctPerStep) {
  EXPECT_EQ(SlurmRendezvousPort(123456, 0), SlurmRendezvousPort(123456, 0));
  EXPECT_NE(SlurmRendezvousPort(123456, 0), SlurmRendezvousPort(123456, 1));
  for (int64_t job : {0, 1, 19999, 20000, 987654321}) {
    for (int64_t step : {0, 3, 15, 16}) {
      const int port = SlurmRendezvousPort(job, step);
      EXPECT_GE(port, 15000);
      EXPECT_LT(port, 35000);
    }
  }
}

TEST(EnvStoreAddressTest, MasterVariablesWin) {
  auto where = EnvStoreAddress(testing::FakeEnv({{"MASTER_ADDR", "10.1.2.3"},
                                                 {"MASTER_PORT", "29500"},
                                                 {"SLURM_JOB_ID", "7"},
                                                 {"SLURM_JOB_NODELIST", "n[1-2]"}}));
  ASSERT_TRUE(where.ok()) << where.status();
  EXPECT_EQ(where->host, "10.1.2.3");
  EXPECT_EQ(where->port, 29500);
}

TEST(EnvStoreAddressTest, SlurmGivesTheFirstNodeOfTheStepAndAPort) {
  auto where = EnvStoreAddress(testing::FakeEnv({{"SLURM_JOB_ID", "4242"},
                                                 {"SLURM_STEP_ID", "2"},
                                                 {"SLURM_JOB_NODELIST", "all[1-9]"},
                                                 {"SLURM_STEP_NODELIST", "gpu[03-04]"}}));
  ASSERT_TRUE(where.ok()) << where.status();
  EXPECT_EQ(where->host, "gpu03");
  EXPECT_EQ(where->port, SlurmRendezvousPort(4242, 2));
  EXPECT_THAT(where->source, HasSubstr("SLURM_STEP_NODELIST=gpu[03-04]"));
}

TEST(EnvStoreAddressTest, EitherMasterVariableOverridesItsHalf) {
  auto port_only = EnvStoreAddress(testing::FakeEnv(
      {{"SLURM_JOB_ID", "9"}, {"SLURM_NODELIST", "a,b"}, {"MASTER_PORT", "1234"}}));
  ASSERT_TRUE(port_only.ok()) << port_only.status();
  EXPECT_EQ(port_only->host, "a");
  EXPECT_EQ(port_only->port, 1234);
  auto addr_only = EnvStoreAddress(testing::FakeEnv(
      {{"SLURM_JOB_ID", "9"}, {"SLURM_NODELIST", "a,b"}, {"MASTER_ADDR", "head"}}));
  ASSERT_TRUE(addr_only.ok()) << addr_only.status();
  EXPECT_EQ(addr_only->host, "head");
  EXPECT_EQ(addr_only->port, SlurmRendezvousPort(9, 0));
}

TEST(EnvStoreAddressTest, NothingSetSaysWhatToSet) {
  auto where = EnvStoreAddress(testing::FakeEnv({}));
  ASSERT_FALSE(where.ok());
  EXPECT_THAT(std::string(where.status().message()), HasSubstr("MASTER_ADDR and MASTER_PORT"));
  auto bad_port =
      EnvStoreAddress(testing::FakeEnv({{"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}}));
  EXPECT_THAT(std::string(bad_port.status().message()), HasSubstr("MASTER_PORT '70000'"));
}

TEST(LauncherTest, MpirunAndTorchrunAgentAreRecognised) {
  EXPECT_TRUE(UnderMpirun(testing::FakeEnv({{"OMPI_COMM_WORLD_SIZE", "3"}})));
  EXPECT_FALSE(UnderMpirun(testing::FakeEnv({{"SLURM_NTASKS", "3"}})));
  EXPECT_EQ(TorchrunAgentStorePrefix(testing::FakeEnv(
                {{"TORCHELASTIC_USE_AGENT_STORE", "True"}, {"TORCHELASTIC_RESTART_COUNT", "2"}})),
            "plexus/attempt_2");
  EXPECT_EQ(TorchrunAgentStorePrefix(testing::FakeEnv({{"TORCHELASTIC_USE_AGENT_STORE", "False"}})),
            std::nullopt);
  EXPECT_EQ(TorchrunAgentStorePrefix(testing::FakeEnv({})), std::nullopt);
}

}  // namespace
}  // namespace plexus
