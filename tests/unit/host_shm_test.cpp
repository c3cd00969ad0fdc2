// Shared memory across the ranks of a host (LocalComm ranks are threads of one host): content, size check,
// the name is unlinked once every rank has it, and segments of dead creators are cleaned up.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>

#include "dist/host_shm.h"
#include "dist/local_comm.h"

namespace deepinfer::dist {
namespace {

TEST(HostShm, EveryRankSeesTheLeaderDataAndTheNameIsGone) {
    const std::string key = std::to_string(getpid()) + "-test-region";
    std::atomic<int> fills{0};
    std::vector<std::vector<uint8_t>> seen(3);
    auto statuses = run_local_ranks(3, [&](Comm& world) {
        DI_ASSIGN_OR_RETURN(auto host, split_by_host(world));
        if (host->size() != 3) return error(StatusCode::kInternal, "host group has {} ranks", host->size());
        DI_ASSIGN_OR_RETURN(auto region, share_on_host(*host, key, 4096, [&](uint8_t* d) {
                                ++fills;
                                for (int i = 0; i < 4096; ++i) d[i] = static_cast<uint8_t>(i * 7);
                            }));
        seen[world.rank()].assign(region->data(), region->data() + region->size());
        return Status::ok();
    });
    for (auto& s : statuses) ASSERT_TRUE(s.is_ok()) << s.to_string();
    EXPECT_EQ(fills.load(), 1);  // loaded once per host
    for (int r = 0; r < 3; ++r) {
        ASSERT_EQ(seen[r].size(), 4096u);
        EXPECT_EQ(seen[r][100], static_cast<uint8_t>(700 % 256));
    }
    int fd = shm_open(shared_region_name(key).c_str(), O_RDONLY, 0);
    EXPECT_LT(fd, 0) << "the segment name must be unlinked after set-up";
    if (fd >= 0) close(fd);
}

TEST(HostShm, LeftoversOfDeadCreatorsAreUnlinked) {
    // A pid that cannot exist (above the kernel's pid_max default of 4194304).
    const std::string stale = shared_region_name("4194999-engram-1-table");
    int fd = shm_open(stale.c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    close(fd);
    const std::string live = shared_region_name(std::to_string(getpid()) + "-live");
    fd = shm_open(live.c_str(), O_CREAT | O_RDWR, 0600);
    ASSERT_GE(fd, 0);
    close(fd);
    unlink_stale_regions();
    fd = shm_open(stale.c_str(), O_RDONLY, 0);
    EXPECT_LT(fd, 0) << "stale segment of a dead creator survived";
    if (fd >= 0) close(fd);
    fd = shm_open(live.c_str(), O_RDONLY, 0);
    EXPECT_GE(fd, 0) << "a live creator's segment was removed";
    if (fd >= 0) close(fd);
    shm_unlink(live.c_str());
}

}  // namespace
}  // namespace deepinfer::dist
