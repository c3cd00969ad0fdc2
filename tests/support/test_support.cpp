// Test helpers: source / data paths and scratch directories.
#include "support/test_support.h"

#include <unistd.h>

#include <atomic>
#include <mutex>
#include <vector>

namespace deepinfer::testing {
namespace {
// The scratch directories of this process, removed when it exits. Their list is a static whose destructor removes
// them: an atexit handler registered before the list was first built would run after the list's destructor (C++
// runs both in reverse order of registration) and read a freed vector (ThreadSanitizer caught it).
class TempDirs {
   public:
    void add(const std::filesystem::path& dir) {
        std::lock_guard<std::mutex> lock(mutex_);
        dirs_.push_back(dir);
    }
    ~TempDirs() {
        std::error_code ec;
        for (auto& dir : dirs_) std::filesystem::remove_all(dir, ec);
    }

   private:
    std::mutex mutex_;
    std::vector<std::filesystem::path> dirs_;
};
TempDirs& temp_dirs() {
    static TempDirs dirs;
    return dirs;
}
}  // namespace

std::filesystem::path source_dir() { return DEEPINFER_SOURCE_DIR; }
std::filesystem::path shared_data_dir() { return DEEPINFER_SHARED_DATA; }

std::filesystem::path make_temp_dir(const std::string& tag) {
    static std::atomic<int> counter{0};
    auto dir = std::filesystem::path(DEEPINFER_BINARY_DIR) / "test-tmp" /
               (tag + "-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    temp_dirs().add(dir);
    return dir;
}

}  // namespace deepinfer::testing
