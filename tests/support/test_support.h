// Shared helpers for the gtest suites: paths of the source tree, shared data and scratch directories.
#pragma once

#include <filesystem>
#include <string>

namespace deepinfer::testing {

std::filesystem::path source_dir();
std::filesystem::path shared_data_dir();
// A fresh empty directory under the build tree, unique per call; removed at process exit.
std::filesystem::path make_temp_dir(const std::string& tag);

}  // namespace deepinfer::testing
