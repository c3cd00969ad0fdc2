// golden_probe: Engram row ids (spec §5.5.1) of a token sequence, computed with the model's hash layout and
// compressed token map (built from the checkpoint's tokenizer.json), for tests/model/test_goldens.py, which
// compares them with the reference's; the `deepinfer` CLI does not print them.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/engram_hash.h"
#include "model/model.h"

namespace deepinfer {
namespace {

std::vector<int32_t> parse_ids(const std::string& text) {
    std::vector<int32_t> ids;
    std::stringstream ss(text);
    std::string item;
    while (std::getline(ss, item, ','))
        if (!item.empty()) ids.push_back(static_cast<int32_t>(std::stol(item)));
    return ids;
}

struct Options {
    std::string model_dir, out_dir, engram_ids, engram_positions;
};

// Row ids of every Engram layer at the given positions of the token sequence.
Status engram(model::Model& m, const Options& o) {
    const std::vector<int32_t> ids = parse_ids(o.engram_ids);
    const model::EngramLayout layout = model::make_engram_layout(m.config());
    const std::vector<int32_t>& map = m.engram_token_map();
    const int32_t pad = map.at(m.config().engram_pad_token_id);
    nlohmann::json rows = nlohmann::json::object();
    for (int32_t p : parse_ids(o.engram_positions)) {
        if (p < 0 || p >= static_cast<int32_t>(ids.size()))
            return invalid_argument("golden_probe: engram position {} outside the {} ids", p, ids.size());
        nlohmann::json per_layer = nlohmann::json::array();
        for (size_t l = 0; l < layout.primes.size(); ++l) {
            std::vector<int64_t> r(layout.n_cols);
            model::engram_row_ids(layout, static_cast<int>(l), p, pad, [&](int s) { return map.at(ids[p - s]); }, r.data());
            per_layer.push_back(r);
        }
        rows[std::to_string(p)] = per_layer;
    }
    std::ofstream(o.out_dir + "/engram.json") << rows.dump() << "\n";
    return Status::ok();
}

}  // namespace
}  // namespace deepinfer

int main(int argc, char** argv) {
    using namespace deepinfer;
    CLI::App app{"golden_probe: Engram row ids for tests/model/test_goldens.py"};
    Options o;
    app.add_option("--model", o.model_dir, "Checkpoint directory")->required();
    app.add_option("--out", o.out_dir, "Output directory (engram.json)")->required();
    app.add_option("--engram-ids", o.engram_ids, "Token sequence, comma separated")->required();
    app.add_option("--engram-positions", o.engram_positions, "Positions whose row ids to write")->required();
    CLI11_PARSE(app, argc, argv);
    auto model = model::Model::load(o.model_dir, false);
    if (!model) {
        fmt::print(stderr, "golden_probe: {}\n", model.status().message());
        return 1;
    }
    Status s = engram(**model, o);
    if (!s.is_ok()) {
        fmt::print(stderr, "golden_probe: {}\n", s.message());
        return 1;
    }
    return 0;
}
