// Test helpers: source / data paths and scratch directories.
#include "support/test_support.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

namespace deepinfer::testing {
namespace {
std::mutex g_mutex;
std::vector<std::filesystem::path>& temp_dirs() {
    static std::vector<std::filesystem::path> dirs;
    return dirs;
}
void remove_temp_dirs() {
    std::error_code ec;
    for (auto& dir : temp_dirs()) std::filesystem::remove_all(dir, ec);
}
}  // namespace

std::filesystem::path source_dir() { return DEEPINFER_SOURCE_DIR; }
std::filesystem::path shared_data_dir() { return DEEPINFER_SHARED_DATA; }

std::filesystem::path make_temp_dir(const std::string& tag) {
    static std::atomic<int> counter{0};
    static bool registered = [] { return std::atexit(remove_temp_dirs) == 0; }();
    (void)registered;
    auto dir = std::filesystem::path(DEEPINFER_BINARY_DIR) / "test-tmp" /
               (tag + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    std::lock_guard<std::mutex> lock(g_mutex);
    temp_dirs().push_back(dir);
    return dir;
}

}  // namespace deepinfer::testing
