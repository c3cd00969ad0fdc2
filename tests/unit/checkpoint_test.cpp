// Checkpoint I/O and validation: safetensors round trip, every malformed input refused with a message
// naming the file and the problem, config validation, census of the released tensor layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "loader/safetensors.h"
#include "model/census.h"
#include "model/config.h"
#include "model/tensor_table.h"
#include "support/test_support.h"
#include "support/tiny_model.h"

namespace deepinfer {
namespace {
namespace fs = std::filesystem;

std::string write_file(const fs::path& dir, const std::string& name, const std::string& bytes) {
    fs::path p = dir / name;
    std::ofstream out(p, std::ios::binary);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p.string();
}

std::string safetensors_bytes(const std::string& header_json, const std::string& data) {
    std::string out(8, '\0');
    uint64_t len = header_json.size();
    std::memcpy(out.data(), &len, 8);
    return out + header_json + data;
}

std::string open_error(const std::string& path) {
    auto f = loader::SafetensorsFile::open(path);
    return f ? std::string() : f.status().message();
}

TEST(Safetensors, RoundTripsThroughTheWriter) {
    auto dir = testing::make_temp_dir("st");
    loader::SafetensorsWriter w;
    w.add("a", DType::kF32, {2, 2}, std::vector<uint8_t>(16, 1));
    w.add("b", DType::kF8E4M3, {3}, {1, 2, 3});
    ASSERT_TRUE(w.write((dir / "x.safetensors").string()).is_ok());
    auto f = loader::SafetensorsFile::open((dir / "x.safetensors").string());
    ASSERT_TRUE(f.has_value()) << f.status().to_string();
    ASSERT_EQ((*f)->tensors().size(), 2u);
    EXPECT_EQ((*f)->tensors()[1].name, "b");
    EXPECT_EQ((*f)->tensors()[1].dtype, DType::kF8E4M3);
    EXPECT_EQ((*f)->tensors()[1].data[2], 3);
}

TEST(Safetensors, RefusesMalformedFilesWithPreciseMessages) {
    auto dir = testing::make_temp_dir("st-bad");
    const std::string ok_header = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    struct Case {
        std::string bytes, expect;
    };
    std::string truncated_len = safetensors_bytes(ok_header, std::string(8, 'x')).substr(0, 5);
    std::string header_past_end = safetensors_bytes(ok_header, "");
    header_past_end[0] = static_cast<char>(200);
    std::vector<Case> cases = {
        {truncated_len, "shorter than the 8-byte header"},
        {header_past_end, "runs past the end of the file"},
        {safetensors_bytes("{not json", std::string(8, 'x')), "not valid JSON"},
        {safetensors_bytes(R"({"t":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", std::string(8, 'x')), "unknown dtype \"F33\""},
        {safetensors_bytes(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", std::string(8, 'x')), "run past the data section"},
        {safetensors_bytes(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", std::string(8, 'x')), "needs 12 bytes"},
        {safetensors_bytes(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", std::string(8, 'x')), "reversed"},
        {safetensors_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                           std::string(8, 'x')), "overlap"},
        {safetensors_bytes(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", std::string(8, 'x')), "non-negative"},
    };
    for (size_t i = 0; i < cases.size(); ++i) {
        std::string path = write_file(dir, "case" + std::to_string(i) + ".safetensors", cases[i].bytes);
        std::string msg = open_error(path);
        EXPECT_NE(msg.find(cases[i].expect), std::string::npos) << "case " << i << ": " << msg;
        EXPECT_NE(msg.find(path), std::string::npos) << "message must name the file: " << msg;
    }
}

// Seeded random damage to a small file's header (bytes flipped, spliced, cut; the length prefix changed): each
// variant must open with every tensor inside the file and its size matching dtype x shape, or be refused with a
// message naming the file -- never crash or read outside the mapping (the asan preset checks the latter).
TEST(Safetensors, RandomlyDamagedHeadersOpenConsistentlyOrAreRefused) {
    auto dir = testing::make_temp_dir("st-fuzz");
    const std::string header =
        R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]},)"
        R"("b":{"dtype":"BF16","shape":[3],"data_offsets":[16,22]},"c":{"dtype":"F8_E4M3","shape":[2],"data_offsets":[22,24]}})";
    const std::string good = safetensors_bytes(header, std::string(24, 'd'));
    const std::string path = (dir / "fuzz.safetensors").string();
    ASSERT_EQ(open_error(write_file(dir, "fuzz.safetensors", good)), "");
    std::mt19937 rng(20261204);
    const char* splices[] = {"{", "}", "[", "]", ",", ":", "\"", "-1", "1e999", "18446744073709551615", "99999999999",
                             "\"F64\"", "null", "[0,0]", "\\u0000", "\xff"};
    int opened = 0, refused = 0;
    for (int i = 0; i < 3000; ++i) {
        std::string bytes = good;
        const uint64_t header_end = 8 + header.size();
        switch (rng() % 4) {
            case 0:  // flip 1-3 header bytes
                for (int k = 0, n = 1 + static_cast<int>(rng() % 3); k < n; ++k)
                    bytes[8 + rng() % header.size()] = static_cast<char>(rng() % 256);
                break;
            case 1: {  // splice a token into the header, the length prefix adjusted
                const std::string token = splices[rng() % std::size(splices)];
                bytes.insert(8 + rng() % header.size(), token);
                const uint64_t len = header.size() + token.size();
                std::memcpy(bytes.data(), &len, 8);
                break;
            }
            case 2:  // cut the file anywhere
                bytes.resize(rng() % bytes.size());
                break;
            default: {  // a wrong length prefix
                const uint64_t len = rng() % 2 ? rng() % (header_end + 32) : (uint64_t{rng()} << 32 | rng());
                std::memcpy(bytes.data(), &len, 8);
            }
        }
        write_file(dir, "fuzz.safetensors", bytes);
        auto f = loader::SafetensorsFile::open(path);
        if (!f) {
            ++refused;
            ASSERT_NE(f.status().message().find(path), std::string::npos) << "variant " << i << ": "
                                                                          << f.status().message();
            continue;
        }
        ++opened;
        for (const auto& t : (*f)->tensors()) {
            ASSERT_EQ(static_cast<int64_t>(t.nbytes), t.numel() * static_cast<int64_t>(dtype_size(t.dtype)))
                << "variant " << i << " tensor " << t.name;
            ASSERT_EQ(t.nbytes, static_cast<size_t>(std::count(t.data, t.data + t.nbytes, 'd')))
                << "variant " << i << " tensor " << t.name << ": data outside the data section";
        }
    }
    EXPECT_GT(opened, 20);  // both outcomes occur: the damage is neither all harmless nor all fatal
    EXPECT_GT(refused, 1000);
    // A header nested 200000 levels deep (valid JSON) is refused, not a stack overflow.
    const std::string deep = R"({"t":)" + std::string(200000, '[') + std::string(200000, ']') + "}";
    const std::string msg = open_error(write_file(dir, "deep.safetensors", safetensors_bytes(deep, "")));
    EXPECT_NE(msg.find("deep.safetensors"), std::string::npos) << msg;
}

TEST(Safetensors, IndexNamingAMissingShardIsRefused) {
    auto dir = testing::make_temp_dir("st-index");
    write_file(dir, "model.safetensors.index.json", R"({"weight_map":{"w":"model-00001-of-00002.safetensors"}})");
    auto store = loader::TensorStore::open_dir(dir.string());
    ASSERT_FALSE(store.has_value());
    EXPECT_NE(store.status().message().find("does not exist"), std::string::npos) << store.status().message();
    EXPECT_NE(store.status().message().find("model-00001-of-00002.safetensors"), std::string::npos);
}

// A generated tiny checkpoint, copied so it can be damaged.
fs::path damaged_copy(const std::string& tag) {
    fs::path src = testing::tiny_checkpoint("default");
    fs::path dst = testing::make_temp_dir(tag);
    for (auto& e : fs::directory_iterator(src)) fs::copy(e.path(), dst / e.path().filename());
    return dst;
}

std::string load_error(const fs::path& dir) {
    auto config = model::load_model_config((dir / "config.json").string());
    if (!config) return config.status().message();
    auto store = loader::TensorStore::open_dir(dir.string());
    if (!store) return store.status().message();
    Status s = model::check_checkpoint(*config, *store, nullptr);
    return s.is_ok() ? std::string() : s.message();
}

fs::path first_shard(const fs::path& dir) {
    for (auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".safetensors") return e.path();
    return {};
}

TEST(Checkpoint, GeneratedTinyCheckpointPassesTheCensus) {
    EXPECT_EQ(load_error(testing::tiny_checkpoint("default")), "");
}

TEST(Checkpoint, TruncatedShardIsRefused) {
    auto dir = damaged_copy("trunc");
    fs::path shard = first_shard(dir);
    fs::resize_file(shard, fs::file_size(shard) - 100);
    std::string msg = load_error(dir);
    EXPECT_NE(msg.find("run past the data section"), std::string::npos) << msg;
    EXPECT_NE(msg.find(shard.filename().string()), std::string::npos) << msg;
}

TEST(Checkpoint, FlippedHeaderByteIsRefused) {
    auto dir = damaged_copy("flip");
    fs::path shard = first_shard(dir);
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(8);  // the opening brace of the JSON header
    f.put('X');
    f.close();
    std::string msg = load_error(dir);
    EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
}

TEST(Checkpoint, DroppedTensorIsRefusedByName) {
    auto dir = damaged_copy("drop");
    // Rewrite the shard without one compressor tensor, and the index without it.
    fs::path shard = first_shard(dir);
    auto file = loader::SafetensorsFile::open(shard.string());
    ASSERT_TRUE(file.has_value());
    loader::SafetensorsWriter w;
    const std::string dropped = "layers.2.attn.compressor.wgate.weight";
    for (const auto& t : (*file)->tensors())
        if (t.name != dropped) w.add(t.name, t.dtype, t.shape, std::vector<uint8_t>(t.data, t.data + t.nbytes));
    file->reset();
    ASSERT_TRUE(w.write(shard.string()).is_ok());
    std::ifstream in(dir / "model.safetensors.index.json");
    nlohmann::json index = nlohmann::json::parse(in);
    index["weight_map"].erase(dropped);
    std::ofstream(dir / "model.safetensors.index.json") << index.dump();
    std::string msg = load_error(dir);
    EXPECT_NE(msg.find("missing tensor " + dropped), std::string::npos) << msg;
}

TEST(Checkpoint, WrongScaleGridIsRefused) {
    auto dir = damaged_copy("grid");
    fs::path shard = first_shard(dir);
    auto file = loader::SafetensorsFile::open(shard.string());
    ASSERT_TRUE(file.has_value());
    loader::SafetensorsWriter w;
    for (const auto& t : (*file)->tensors()) {
        auto shape = t.shape;
        std::vector<uint8_t> bytes(t.data, t.data + t.nbytes);
        if (t.name == "layers.0.ffn.experts.0.w1.scale") {  // MXFP4 scales per 16 instead of 32 (the NVFP4 trap)
            shape[1] *= 2;
            bytes.resize(bytes.size() * 2, 127);
        }
        w.add(t.name, t.dtype, shape, bytes);
    }
    file->reset();
    ASSERT_TRUE(w.write(shard.string()).is_ok());
    std::string msg = load_error(dir);
    EXPECT_NE(msg.find("layers.0.ffn.experts.0.w1.scale"), std::string::npos) << msg;
    EXPECT_NE(msg.find("1x32"), std::string::npos) << msg;
}

model::ModelConfig parse_or_die(const std::string& json) {
    auto c = model::parse_model_config(json, "config.json");
    EXPECT_TRUE(c.has_value()) << c.status().message();
    return c.has_value() ? *c : model::ModelConfig{};
}

std::string config_error(const std::function<void(nlohmann::json&)>& edit) {
    nlohmann::json j = nlohmann::json::parse(model::model_config_to_json(model::ModelConfig::released()));
    edit(j);
    auto c = model::parse_model_config(j.dump(), "config.json");
    return c ? std::string() : c.status().message();
}

TEST(Config, ReleasedConfigRoundTripsAndHasTheSpecRoles) {
    model::ModelConfig c = parse_or_die(model::model_config_to_json(model::ModelConfig::released()));
    ASSERT_EQ(c.roles.size(), 43u);
    EXPECT_TRUE(c.roles[2].kv_source && c.roles[2].index_source && c.roles[2].compress_ratio == 2);
    EXPECT_EQ(c.roles[5].kv_source_layer, 2);
    EXPECT_EQ(c.roles[19].kv_source_layer, 14);
    EXPECT_TRUE(c.roles[20].candidate_source && c.roles[20].compress_ratio == 1);
    EXPECT_EQ(c.roles[27].kv_source_layer, 20);
    EXPECT_EQ(c.roles[27].index_source_layer, 24);
    EXPECT_TRUE(c.roles[24].uses_candidates && !c.roles[24].kv_source);
    EXPECT_TRUE(c.roles[1].engram && c.roles[14].engram);
    EXPECT_FALSE(c.roles[0].yarn);
    EXPECT_TRUE(c.roles[2].yarn);
    EXPECT_TRUE(c.roles[41].is_dspark);
    EXPECT_EQ(c.roles[41].n_routed_experts, 128);
}

TEST(Config, InconsistenciesAreLoadErrorsNamingTheField) {
    EXPECT_NE(config_error([](auto& j) { j["text_config"]["compress_ratios"][2] = 0; }).find("kv_source_layer_ids: layer 2 has compress_ratio 0"), std::string::npos);
    EXPECT_NE(config_error([](auto& j) { j.erase("quantization_config"); }).find("quantization_config"), std::string::npos);
    EXPECT_NE(config_error([](auto& j) { j["quantization_config"]["weight_block_size"] = {128, 128}; }).find("weight_block_size"), std::string::npos);
    EXPECT_NE(config_error([](auto& j) { j["text_config"]["compress_ratios"][3] = 1; }).find("layer 3 (ratio 1) would read"), std::string::npos);
    EXPECT_NE(config_error([](auto& j) { j["text_config"]["compress_ratios"].erase(0); }).find("compress_ratios: expected 43"), std::string::npos);
    EXPECT_NE(config_error([](auto& j) { j["text_config"]["engram_num_embeddings"][0] = 5; }).find("engram_num_embeddings[0]"), std::string::npos);
    EXPECT_NE(config_error([](auto& j) { j["text_config"]["hidden_size"] = "wide"; }).find("text_config.hidden_size: expected an integer"), std::string::npos);
    EXPECT_NE(config_error([](auto& j) { j["text_config"]["candidate_source_layer_id"] = 21; }).find("candidate_source_layer_id"), std::string::npos);
    EXPECT_NE(config_error([](auto& j) { j["text_config"]["num_hash_layers"] = 3; }).find("num_hash_layers"), std::string::npos);
    EXPECT_NE(config_error([](auto& j) { j.erase("text_config"); }).find("text_config"), std::string::npos);
    // A number past a double is a JSON error naming the file, not an exception out of the loader.
    auto overflow = model::parse_model_config(R"({"text_config": {"hidden_size": 1e999}})", "cfg.json");
    ASSERT_FALSE(overflow.has_value());
    EXPECT_NE(overflow.status().message().find("cfg.json: not valid JSON"), std::string::npos)
        << overflow.status().message();
}

// Every value of the released config.json, one at a time, replaced by each of a set of wrong values (types,
// signs, sizes): parse_model_config answers each with a config or an error naming the file -- never an exception
// (a type_error from a get<> on the wrong type would escape the loader) or a crash.
TEST(Config, EveryFieldReplacedByWrongValuesIsAnAnswerNotAnException) {
    const nlohmann::json released = nlohmann::json::parse(model::model_config_to_json(model::ModelConfig::released()));
    const std::vector<nlohmann::json> wrong = {nullptr, true, -1, 0, 1e300, 2.5, "x", nlohmann::json::array(),
                                               nlohmann::json::array({-7, "a"}), nlohmann::json::object(),
                                               nlohmann::json::object({{"a", 1}})};
    std::vector<nlohmann::json::json_pointer> pointers;
    const nlohmann::json flat = released.flatten();  // {"/a/b": leaf}
    for (const auto& leaf : flat.items()) {
        auto pointer = nlohmann::json::json_pointer(leaf.key());
        for (; !pointer.empty(); pointer = pointer.parent_pointer()) pointers.push_back(pointer);
    }
    int refused = 0, cases = 0;
    for (const auto& pointer : pointers) {
        for (const auto& value : wrong) {
            nlohmann::json doc = released;
            doc[pointer] = value;
            ++cases;
            try {
                auto config = model::parse_model_config(doc.dump(), "cfg.json");
                if (!config) {
                    ++refused;
                    EXPECT_NE(config.status().message().find("cfg.json"), std::string::npos)
                        << pointer.to_string() << " = " << value.dump() << ": " << config.status().message();
                }
            } catch (const std::exception& e) {
                ADD_FAILURE() << pointer.to_string() << " = " << value.dump() << " threw " << e.what();
            }
        }
    }
    EXPECT_GT(refused, cases / 2) << cases << " cases";
}

TEST(Census, ReleasedLayoutMatchesSpecCounts) {
    // spec §3.1: 96,085 tensors, of which 263 vision/aligner tensors and the 3 image_* embeddings are
    // not part of the text model.
    std::vector<model::TensorSpec> specs = model::expected_tensors(model::ModelConfig::released());
    EXPECT_EQ(specs.size(), 96085u - 263u - 3u);
    std::map<std::string, int> per_role;
    int64_t bytes = 0;
    for (const auto& s : specs) {
        per_role[s.role]++;
        bytes += s.bytes();
    }
    EXPECT_EQ(per_role["attn.wq_a"], 43);  // 40 layers + 3 DSpark blocks
    EXPECT_EQ(per_role["attn.compressor.wkv"], 4);
    EXPECT_EQ(per_role["attn.compressor.wgate"], 3);
    EXPECT_EQ(per_role["attn.indexer.wq_b"], 8);
    EXPECT_EQ(per_role["attn.indexer.wk"], 4);
    EXPECT_EQ(per_role["engram.embed"], 2);
    EXPECT_EQ(per_role["ffn.experts.w1"], 40 * 384 + 3 * 128);
    // One routed expert slot: 18,800,640 bytes (spec §3.3).
    int64_t slot = 0;
    for (const auto& s : specs)
        if (s.name.rfind("layers.0.ffn.experts.0.", 0) == 0) slot += s.bytes();
    EXPECT_EQ(slot, 18800640);
    EXPECT_GT(bytes, int64_t{500} * 1000 * 1000 * 1000);
}

TEST(Census, ReleasedCacheFootprintIs890BytesPerToken) {
    model::CacheFootprint f = model::cache_footprint(model::ModelConfig::released());
    EXPECT_DOUBLE_EQ(f.compressed_bytes_per_token, 890.0);
    EXPECT_EQ(f.window_bytes_per_sequence, 43 * 128 * 528);
}

}  // namespace
}  // namespace deepinfer

namespace deepinfer {
namespace {

// spec §3.3 tensor table, released dims: names, dtypes and shapes the loader must accept.
TEST(Census, ReleasedTensorTableMatchesTheSpec) {
    std::map<std::string, model::TensorSpec> by_name;
    for (auto& s : model::expected_tensors(model::ModelConfig::released())) by_name[s.name] = s;
    struct Want {
        const char* name;
        DType dtype;
        std::vector<int64_t> shape;
    };
    const std::vector<Want> wants = {
        {"embed.weight", DType::kBF16, {129280, 5120}},
        {"head.weight", DType::kBF16, {129280, 5120}},
        {"layers.0.hc_attn_fn", DType::kF32, {24, 20480}},
        {"layers.0.hc_ffn_scale", DType::kF32, {3}},
        {"layers.0.attn.attn_sink", DType::kF32, {64}},
        {"layers.0.attn.wq_a.weight", DType::kF8E4M3, {1280, 5120}},
        {"layers.0.attn.wq_a.scale", DType::kF8E8M0, {40, 160}},
        {"layers.0.attn.wq_b.scale", DType::kF8E8M0, {1024, 40}},
        {"layers.0.attn.wkv.scale", DType::kF8E8M0, {16, 160}},
        {"layers.0.attn.wo_a.weight", DType::kF8E4M3, {8192, 4096}},
        {"layers.0.attn.wo_a.scale", DType::kF8E8M0, {256, 128}},
        {"layers.0.attn.wo_b.scale", DType::kF8E8M0, {160, 256}},
        {"layers.2.attn.compressor.wkv.weight", DType::kBF16, {512, 5120}},
        {"layers.2.attn.compressor.wgate.weight", DType::kBF16, {512, 5120}},
        {"layers.20.attn.compressor.norm.weight", DType::kBF16, {512}},
        {"layers.20.attn.indexer.wk.weight", DType::kBF16, {128, 512}},
        {"layers.24.attn.indexer.wq_b.scale", DType::kF8E8M0, {128, 40}},
        {"layers.36.attn.indexer.weights_proj.weight", DType::kBF16, {32, 5120}},
        {"layers.0.ffn.gate.weight", DType::kBF16, {384, 5120}},
        {"layers.0.ffn.gate.bias_vl", DType::kF32, {384}},
        {"layers.39.ffn.experts.383.w1.weight", DType::kI8, {2304, 2560}},
        {"layers.39.ffn.experts.383.w1.scale", DType::kF8E8M0, {2304, 160}},
        {"layers.39.ffn.experts.383.w2.weight", DType::kI8, {5120, 1152}},
        {"layers.39.ffn.experts.383.w2.scale", DType::kF8E8M0, {5120, 72}},
        {"layers.0.ffn.shared_experts.w1.scale", DType::kF8E8M0, {72, 160}},
        {"layers.0.ffn.shared_experts.w2.scale", DType::kF8E8M0, {160, 72}},
        {"layers.1.engram.embed.weight", DType::kF8E4M3, {384006168, 256}},
        {"layers.14.engram.embed.scale", DType::kF8E8M0, {384016682, 8}},
        {"layers.1.engram.wkv.scale", DType::kF8E8M0, {800, 192}},
        {"layers.14.engram.q_weight", DType::kBF16, {4, 5120}},
        {"mtp.0.main_proj.scale", DType::kF8E8M0, {160, 480}},
        {"mtp.2.markov_head.head.weight", DType::kBF16, {129280, 256}},
        {"mtp.2.confidence_head.proj.weight", DType::kBF16, {1, 5376}},
        {"mtp.1.ffn.experts.127.w3.weight", DType::kI8, {2304, 2560}},
    };
    for (const auto& w : wants) {
        auto it = by_name.find(w.name);
        ASSERT_NE(it, by_name.end()) << w.name;
        EXPECT_EQ(it->second.dtype, w.dtype) << w.name;
        EXPECT_EQ(it->second.shape, w.shape) << w.name;
    }
    for (const char* absent : {"layers.20.attn.compressor.wgate.weight", "layers.3.attn.compressor.wkv.weight",
                               "layers.21.attn.indexer.wq_b.weight", "mtp.0.embed.weight", "layers.0.hc_head_fn",
                               "mtp.1.ffn.experts.128.w1.weight", "layers.0.ffn.gate.tid2eid"})
        EXPECT_EQ(by_name.count(absent), 0u) << absent;
}

}  // namespace
}  // namespace deepinfer
