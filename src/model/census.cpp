// Census of a checkpoint against the tensor table.
#include "model/census.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <set>

#include "core/quant_records.h"
#include "model/tensor_table.h"

namespace deepinfer::model {

Status check_checkpoint(const ModelConfig& config, const loader::TensorStore& store, CensusReport* report) {
    CensusReport local;
    CensusReport& r = report ? *report : local;
    r = CensusReport{};
    std::set<std::string> expected_names;
    for (const TensorSpec& spec : expected_tensors(config)) {
        expected_names.insert(spec.name);
        const loader::TensorEntry* entry = store.find(spec.name);
        if (!entry)
            return corrupt("missing tensor {} ({}, {} {}{})", spec.name, spec.role, dtype_name(spec.dtype),
                           fmt::join(spec.shape, "x"),
                           spec.block >= 0 ? fmt::format(", block {}", spec.block) : std::string());
        if (entry->dtype != spec.dtype)
            return corrupt("{} (in {}): dtype {} but the checkpoint layout stores {} as {}", spec.name, entry->file,
                           dtype_name(entry->dtype), spec.role, dtype_name(spec.dtype));
        if (entry->shape != spec.shape) {
            std::string what = spec.kind == TensorKind::kFp8Scale   ? " (a 32x32 block scale grid)"
                               : spec.kind == TensorKind::kFp4Scale ? " (MXFP4: one e8m0 scale per 1x32 of unpacked "
                                                                      "elements)"
                                                                    : "";
            return corrupt("{} (in {}): shape [{}] but the config implies [{}]{}", spec.name, entry->file,
                           fmt::join(entry->shape, ", "), fmt::join(spec.shape, ", "), what);
        }
        r.tensors_per_role[spec.role] += 1;
    }
    for (const loader::TensorEntry* entry : store.entries()) {
        r.n_tensors += 1;
        r.total_bytes += static_cast<int64_t>(entry->nbytes);
        r.bytes_per_dtype[std::string(dtype_name(entry->dtype))] += static_cast<int64_t>(entry->nbytes);
        if (expected_names.count(entry->name)) continue;
        if (is_vision_tensor(entry->name)) {
            r.n_vision_tensors += 1;
            continue;
        }
        return corrupt("unexpected tensor {} (in {}): not part of the layout this config implies", entry->name,
                       entry->file);
    }
    return Status::ok();
}

std::string describe_layer_roles(const ModelConfig& c) {
    std::string out;
    for (int b = 0; b < c.n_blocks(); ++b) {
        const LayerRole& role = c.roles[b];
        std::string kv = role.kv_source ? "kv-source" : role.compress_ratio ? fmt::format("kv<-{}", role.kv_source_layer) : "window-only";
        std::string index = role.compress_ratio == 0 ? "-" : role.index_source ? "index-source"
                                                                               : fmt::format("topk<-{}", role.index_source_layer);
        std::string extra;
        if (role.candidate_source) extra += " candidate-source";
        if (role.uses_candidates) extra += " uses-candidates";
        if (role.engram) extra += fmt::format(" engram[{}]", role.engram_index);
        if (role.is_dspark) extra += " dspark";
        out += fmt::format("  {:<9} ratio {}  rope {:<11} {:<12} {:<13} experts {}/top-{}{}\n", c.block_prefix(b),
                           role.compress_ratio, role.yarn ? "yarn" : "plain", kv, index, role.n_routed_experts,
                           role.n_activated_experts, extra);
    }
    return out;
}

CacheFootprint cache_footprint(const ModelConfig& c) {
    CacheFootprint f;
    for (int b = 0; b < c.num_hidden_layers; ++b) {
        const LayerRole& role = c.roles[b];
        if (!role.kv_source) continue;
        double per_entry = static_cast<double>(compressed_record_bytes(c.head_dim) + index_key_record_bytes(c.index_head_dim));
        f.compressed_bytes_per_token += per_entry / role.compress_ratio;
    }
    f.window_bytes_per_sequence =
        static_cast<int64_t>(c.n_blocks()) * c.sliding_window * static_cast<int64_t>(window_record_bytes(c.head_dim));
    return f;
}

}  // namespace deepinfer::model
