// Driver of the quantized GEMMs (fp8 32x32 block-scaled and MXFP4 1x32 weights; act_quant or bf16 activations):
// weights split over threads in pairs of 16-row groups (each thread streams a contiguous part once), activations
// in items of kActRowChunk rows (kTileItemRows for fp8 on AMX tiles), each made ready in the forms the ISA's
// kernels read -- by each thread for itself, or once for all threads where they have few weight rows each.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "backend/cpu/drivers.h"
#include "backend/cpu/packing.h"
#include "core/thread_profile.h"
#include "core/check.h"
#include "core/cpu_features.h"

namespace deepinfer::backend::cpu {

namespace {

// What differs between the fp8 and MXFP4 GEMMs for the driver.
struct QuantWeight {
    PackedLayout layout;
    int64_t rows, cols;
    const PackedWeight* prepared;
    int64_t code_bytes_per_group, scale_bytes_per_group;
    void (*pack)(const void* w, int64_t g0, int64_t g1, uint8_t* codes, uint8_t* scales);
    const void* canonical;
    void (*run)(const QuantGemmTask& task);
};

// Groups packed per step when a weight was not prepared (64 rows: the slab stays in L2; even: whole pairs).
constexpr int64_t kPackGroups = 4;

// One quantized GEMM of a grouped call: bf16 results into out, or fp32 results into out_f32 when it is set
// (row-parallel partial sums).
struct QuantProblem {
    Fp8Acts a;
    QuantWeight w;
    bf16* out;
    int64_t ldo;
    float* out_f32 = nullptr;
    // When set: bf16 activations [a.n, a.k] (row stride ldx) taken as they are, with unit scales (a.codes /
    // a.scales unused).
    const bf16* x = nullptr;
    int64_t ldx = 0;
};

// bf16 rows (row stride ldx) in the form the ISA's quantized GEMMs read (IsaOps::act_bytes: bf16 as is, or
// fp32, exact), with unit block scales.
void load_bf16_acts(const IsaOps& ops, const bf16* x, int64_t ldx, int64_t n, int64_t k, void* values,
                    float* act_scales) {
    for (int64_t i = 0; i < n; ++i) {
        if (ops.act_bytes == 2) {
            std::memcpy(static_cast<bf16*>(values) + i * k, x + i * ldx, static_cast<size_t>(k) * sizeof(bf16));
        } else {
            float* out = static_cast<float*>(values) + i * k;
            for (int64_t c = 0; c < k; ++c) out[c] = bf16_to_float(x[i * ldx + c]);
        }
    }
    std::fill(act_scales, act_scales + n * (k / 32), 1.0f);
}

// An item's activations as its GEMM tasks read them: values and scales (decode_acts / load_bf16_acts), the MXFP4
// integer rows (IsaOps::prep_fp4_row), the AMX tile rows and their shifts (IsaOps::fp8_tile_acts / fp4_tile_acts)
// and whether the tiles took them.
struct ReadyActs {
    void* values;
    float* scales;
    uint8_t* fp4_row;
    uint16_t* tile;
    int32_t* tile_shift;
    bool tile_ok;
};

// Activations made ready once for the threads of a call (gemm_quant): per item (or the item it shares them
// with) its regions of five buffers -- values, scales, integer rows, tile rows, shifts -- and the slices of rows
// the pool prepares them in.
constexpr int64_t kSliceRows = 16, kSharedRowsPerThread = 1024;
constexpr size_t kSharedActsBytes = size_t{32} << 20;  // per wave of items (k = 8192: 512-1024 rows)
inline size_t aligned(int64_t bytes) { return (static_cast<size_t>(bytes) + 63) / 64 * 64; }
struct SharedActs {
    struct Set {
        int64_t item;
        size_t at[5];
        bool tile_ok = false;
    };
    struct Slice {
        int64_t set, r0, r1;
        bool tile_ok;
    };
    AlignedBuffer buffers[5];
    std::vector<Set> sets;
    std::vector<Slice> slices;
    std::vector<int64_t> set_of;  // item -> its set (-1: not in the wave)
    ReadyActs ready(const Set& set) {
        return {buffers[0].data() + set.at[0],
                reinterpret_cast<float*>(buffers[1].data() + set.at[1]),
                buffers[2].data() + set.at[2],
                reinterpret_cast<uint16_t*>(buffers[3].data() + set.at[3]),
                reinterpret_cast<int32_t*>(buffers[4].data() + set.at[4]),
                set.tile_ok};
    }
};


// One call of gemm_quant: several GEMMs in one dispatch. Every (GEMM, chunk of activation rows, chunk of row-group
// pairs) is a work unit claimed by the pool's threads, so the threads stream the weights back to back instead of
// meeting at the end of each GEMM (a decode step's MoE is 18 small GEMVs). Each unit computes what the single
// GEMM's call would have for its rows: the same tasks, the same results.
class QuantGemmCall {
   public:
    QuantGemmCall(const IsaOps& ops, ThreadPool& pool) : ops_(ops), pool_(pool), lists_(thread_lists()) {}
    void run(const QuantProblem* problems, size_t count);

   private:
    struct Item {  // one GEMM's chunk of activation rows
        const QuantProblem* p;
        const PackedWeight* pw;
        int64_t i0, ni;
    };
    struct Unit {
        int64_t item, g0, g1;
    };
    // The work lists live in the calling thread's storage, kept between calls (a decode step makes ~50 GEMM calls
    // a layer).
    struct Lists {
        std::vector<Item> items;
        std::vector<Unit> units;
        std::vector<int64_t> decoded;  // per thread: the item whose activations it has ready in its scratch
        SharedActs shared;
    };
    static Lists& thread_lists() {
        thread_local Lists lists;
        return lists;
    }

    int64_t plan(const QuantProblem* problems, size_t count);
    // The forms an item's activations take besides values and scales.
    bool fp4_row_of(const Item& item) const;
    bool tile_acts_of(const Item& item) const;
    bool fp4_on_tiles(const Item& item) const;
    bool bits_acts_of(const Item& item) const;
    bool same_acts(int64_t i, int64_t j) const;
    void act_bytes(const Item& item, size_t bytes[5]) const;
    bool prepare_rows(const Item& item, int64_t r0, int64_t r1, const ReadyActs& to) const;
    size_t prepare_shared_wave(size_t first_unit);
    void run_unit(const Unit& unit, int thread);

    const IsaOps& ops_;
    ThreadPool& pool_;
    Lists& lists_;
    bool shared_ = false;
};

// The items and units of a call; returns the call's row groups.
int64_t QuantGemmCall::plan(const QuantProblem* problems, size_t count) {
    std::vector<Item>& items = lists_.items;
    std::vector<Unit>& units = lists_.units;
    items.clear();
    units.clear();
    // Units are sized by the whole call (about 8 per thread, whole pairs), not per GEMM: a unit starts a new
    // stream, which costs the hardware prefetchers a ramp, and a grouped call of many small GEMMs cut 8 ways
    // each made units of 256 KB (wo_a's 8 groups of 1024 x 4096: 72-78% of the bandwidth at 64 GB/s, 86-87% in
    // 2 MB units; the step's experts 72-76% -> 78-80%). A GEMM smaller than a unit is one unit.
    int64_t call_groups = 0;
    for (size_t q = 0; q < count; ++q)
        if (problems[q].a.n > 0) call_groups += row_groups(problems[q].w.rows);
    for (size_t q = 0; q < count; ++q) {
        const QuantProblem& p = problems[q];
        const Fp8Acts& a = p.a;
        const QuantWeight& w = p.w;
        DI_CHECK_MSG(a.k == w.cols && a.k % 32 == 0, "GEMM k {} vs weight cols {} (must match, multiple of 32)", a.k,
                     w.cols);
        if (a.n == 0 || w.rows == 0) continue;
        const PackedWeight* pw = w.prepared && w.prepared->layout == w.layout ? w.prepared : nullptr;
        if (pw)
            DI_CHECK_MSG(pw->rows == w.rows && pw->cols == w.cols, "prepared weight {}x{} vs matrix {}x{}", pw->rows,
                         pw->cols, w.rows, w.cols);
        const int64_t groups = row_groups(w.rows);
        // chunks of whole pairs of row groups: the packed layout interleaves a pair's chunks (packing.h)
        const int64_t chunk = (chunk_size(call_groups, pool_, pw ? 2 : kPackGroups) + 1) / 2 * 2;
        // fp8 on AMX tiles: items of up to kTileItemRows rows, each weight block decoded once for all of them
        const bool tile_items = w.layout == PackedLayout::kFp8R16K4 && ops_.fp8_tile_acts && ops_.fp8_tile_item_rows;
        const int64_t tile_rows = tile_items ? ops_.fp8_tile_item_rows() : 0;
        const int64_t item_rows = tile_rows > 0 ? tile_rows : kActRowChunk;
        // A call of one prepared GEMM: its pairs in a multiple of the thread count of units, as even as whole pairs
        // allow, so that the threads' first ranges (ThreadPool::run_claimed_chunks) hold the same rows. In units of
        // `chunk` the last one was short and the threads' shares differed by up to a unit (expert w1 on 2 threads:
        // 70 and 74 of 144 groups, docs/PERFORMANCE.md "Thirty-sixth session").
        const int64_t pairs = (groups + 1) / 2, threads = pool_.size();
        const bool even = count == 1 && pw && threads > 1;
        const int64_t even_units = std::min(pairs, ((groups + chunk - 1) / chunk + threads - 1) / threads * threads);
        // an item on the tiles: units of whole runs (tile_gemm_units)
        const int64_t run_units = tile_gemm_units(pairs, kTileRunPairs, pool_);
        auto split_evenly = [&](int64_t item, int64_t n_units) {
            for (int64_t u = 0; u < n_units; ++u)
                units.push_back({item, 2 * (u * pairs / n_units), std::min(groups, 2 * ((u + 1) * pairs / n_units))});
        };
        for (int64_t i0 = 0; i0 < a.n; i0 += item_rows) {
            items.push_back({&p, pw, i0, std::min(item_rows, a.n - i0)});
            const int64_t item = static_cast<int64_t>(items.size()) - 1;
            // fp8 on the tiles (tile_rows: AMX granted) beyond one row tile; and MXFP4 on the tiles, one GEMM, so
            // that many threads do not get units of one pair, each call paying the tile kernel's set-up (the tiles'
            // configuration, the masks of rows without exact sums, the scales' range) for little work (on 2 threads,
            // units of one pair ran 3-10% slower than five)
            if ((tile_rows > 0 && items.back().ni > kGroupRows) || (even && fp4_on_tiles(items.back()))) {
                split_evenly(item, run_units);
                continue;
            }
            if (even) {
                split_evenly(item, even_units);
                continue;
            }
            for (int64_t g0 = 0; g0 < groups; g0 += chunk) units.push_back({item, g0, std::min(groups, g0 + chunk)});
        }
    }
    return call_groups;
}

// act_quant rows against MXFP4 also go to the ISA's integer form where its GEMM of that many rows reads one.
bool QuantGemmCall::fp4_row_of(const Item& item) const {
    return ops_.prep_fp4_row && !item.p->x && item.p->w.layout == PackedLayout::kFp4R16K8 &&
           ops_.fp4_row_bytes(item.p->a.k, item.ni) > 0;
}

// fp8 and MXFP4 where the ISA has an AMX kernel that reads them: its activations are also made ready for it
// (scaled rows; MXFP4: with the integer form, whose flags that kernel reads too).
bool QuantGemmCall::tile_acts_of(const Item& item) const {
    if (item.p->w.layout == PackedLayout::kFp8R16K4) return ops_.fp8_tile_acts != nullptr;
    return fp4_row_of(item) && ops_.fp4_tile_acts;
}

// MXFP4 whose GEMM runs on the tiles where they take its rows: more than kFp4IntegerMaxRows rows, AMX granted.
bool QuantGemmCall::fp4_on_tiles(const Item& item) const {
    return item.p->w.layout == PackedLayout::kFp4R16K8 && tile_acts_of(item) && amx_enabled() &&
           item.ni > kFp4IntegerMaxRows;
}

// fp8 prepared without NaN codes, where the ISA has a bit-placing decode: likewise for that decode.
bool QuantGemmCall::bits_acts_of(const Item& item) const {
    return ops_.fp8_bits_acts && item.pw && item.pw->layout == PackedLayout::kFp8R16K4 && item.pw->plain_codes;
}

// Whether item j reads the activations item i's left ready (a step's expert w1 and w3 share their input): the
// same rows of the same source, prepared the same ways.
bool QuantGemmCall::same_acts(int64_t i, int64_t j) const {
    if (i < 0) return false;
    const Item &a = lists_.items[static_cast<size_t>(i)], &b = lists_.items[static_cast<size_t>(j)];
    return a.p->a.codes == b.p->a.codes && a.p->a.scales == b.p->a.scales && a.p->x == b.p->x &&
           a.p->ldx == b.p->ldx && a.p->a.k == b.p->a.k && a.i0 == b.i0 && a.ni == b.ni &&
           fp4_row_of(a) == fp4_row_of(b) && bits_acts_of(a) == bits_acts_of(b) && tile_acts_of(a) == tile_acts_of(b);
}

// The bytes of an item's activations in each form (ReadyActs' arrays in order: values, scales, MXFP4 integer rows,
// AMX tile rows, shifts), 0 for a form it does not take.
void QuantGemmCall::act_bytes(const Item& item, size_t bytes[5]) const {
    const int64_t k = item.p->a.k, ni = item.ni;
    bytes[0] = static_cast<size_t>(ni * k * ops_.act_bytes);
    bytes[1] = static_cast<size_t>(ni * (k / 32)) * sizeof(float);
    bytes[2] = fp4_row_of(item) ? static_cast<size_t>(ni * ops_.fp4_row_bytes(k, ni)) : 0;
    bytes[3] = tile_acts_of(item) ? static_cast<size_t>(tile_acts_elems(ni, k)) * 2 : 0;
    bytes[4] = tile_acts_of(item) ? static_cast<size_t>(ni) * sizeof(int32_t) : 0;
}

// Rows [r0, r1) of an item's activations into `to` (each array from the item's row 0): values and scales, the
// MXFP4 integer rows, the AMX tile rows (tile-blocked: r0 a multiple of 16); whether the tiles took them.
bool QuantGemmCall::prepare_rows(const Item& item, int64_t r0, int64_t r1, const ReadyActs& to) const {
    const Fp8Acts& a = item.p->a;
    const int64_t k = a.k, kb_count = k / 32, i = item.i0 + r0, rows = r1 - r0;
    void* values = static_cast<uint8_t*>(to.values) + r0 * k * ops_.act_bytes;
    float* scales = to.scales + r0 * kb_count;
    if (item.p->x) load_bf16_acts(ops_, item.p->x + i * item.p->ldx, item.p->ldx, rows, k, values, scales);
    else ops_.decode_acts(a.codes + i * k, a.scales + i * kb_count, rows, k, values, scales);
    if (!fp4_row_of(item))
        return tile_acts_of(item) && ops_.fp8_tile_acts(values, scales, rows, k, to.tile + r0 * k, to.tile_shift + r0);
    // MXFP4: the integer form, then the tile rows, which take its flags. Where the tiles take the rows, the GEMM of
    // more than kFp4IntegerMaxRows rows runs on them and reads only the flags (IsaOps::prep_fp4_flags) -- but of
    // its rows outside their window, which the integer kernel takes: the whole form, its planes.
    const int64_t row_bytes = ops_.fp4_row_bytes(k, item.ni);  // (the form the GEMM of ni rows reads)
    auto row_codes = [&](int64_t r) { return a.codes + (item.i0 + r) * k; };
    const bool flags = fp4_on_tiles(item) && ops_.prep_fp4_flags;
    for (int64_t r = r0; r < r1; ++r) {
        if (flags) ops_.prep_fp4_flags(row_codes(r), k, to.fp4_row + r * row_bytes);
        else ops_.prep_fp4_row(row_codes(r), k, item.ni, to.fp4_row + r * row_bytes);
    }
    const bool tiles = tile_acts_of(item) && ops_.fp4_tile_acts(values, scales, to.fp4_row + r0 * row_bytes, row_bytes,
                                                                rows, k, to.tile + r0 * k, to.tile_shift + r0);
    if (flags)
        for (int64_t r = r0; r < r1; ++r)
            if (!tiles || to.tile_shift[r] == kWideRow)
                ops_.prep_fp4_row(row_codes(r), k, item.ni, to.fp4_row + r * row_bytes);
    return tiles;
}

// The shared activations of a wave -- the units of consecutive items whose activations fit kSharedActsBytes (at
// least one item) -- made ready over the pool in slices of rows; returns the wave's end in units.
size_t QuantGemmCall::prepare_shared_wave(size_t first_unit) {
    const std::vector<Item>& items = lists_.items;
    const std::vector<Unit>& units = lists_.units;
    SharedActs& sh = lists_.shared;
    sh.sets.clear();
    sh.slices.clear();
    sh.set_of.assign(items.size(), -1);
    size_t bytes[5] = {};
    const int64_t first_item = units[first_unit].item;
    int64_t item = first_item;
    for (; item < static_cast<int64_t>(items.size()); ++item) {
        const Item& it = items[static_cast<size_t>(item)];
        int64_t same = -1;
        for (int64_t j = first_item; j < item && same < 0; ++j)
            if (same_acts(j, item)) same = sh.set_of[static_cast<size_t>(j)];
        if (same >= 0) {
            sh.set_of[static_cast<size_t>(item)] = same;
            continue;
        }
        size_t need[5];
        act_bytes(it, need);
        for (size_t& b : need) b = aligned(b);
        const size_t total = need[0] + need[1] + need[2] + need[3] + need[4];
        if (item > first_item && bytes[0] + bytes[1] + bytes[2] + bytes[3] + bytes[4] + total > kSharedActsBytes)
            break;
        SharedActs::Set set{item, {}};
        for (int b = 0; b < 5; ++b) set.at[b] = bytes[b], bytes[b] += need[b];
        sh.set_of[static_cast<size_t>(item)] = static_cast<int64_t>(sh.sets.size());
        const int64_t slices = std::max<int64_t>(1, it.ni / kSliceRows);
        for (int64_t c = 0; c < slices; ++c)
            sh.slices.push_back({static_cast<int64_t>(sh.sets.size()), c * kSliceRows,
                                 c + 1 == slices ? it.ni : (c + 1) * kSliceRows, false});
        sh.sets.push_back(set);
    }
    size_t end_unit = units.size();
    while (end_unit > first_unit && units[end_unit - 1].item >= item) --end_unit;
    for (int b = 0; b < 5; ++b) sh.buffers[b].ensure(bytes[b]);
    const bool profiling = thread_profiling();
    const auto start = profiling ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    pool_.parallel_for(sh.slices.size(), [&](size_t c0, size_t c1, int) {
        for (size_t c = c0; c < c1; ++c) {
            SharedActs::Slice& slice = sh.slices[c];
            const SharedActs::Set& set = sh.sets[static_cast<size_t>(slice.set)];
            slice.tile_ok = prepare_rows(items[static_cast<size_t>(set.item)], slice.r0, slice.r1, sh.ready(set));
        }
    });
    if (profiling) record_shared_acts(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    for (SharedActs::Set& set : sh.sets) set.tile_ok = true;
    for (const SharedActs::Slice& slice : sh.slices) sh.sets[static_cast<size_t>(slice.set)].tile_ok &= slice.tile_ok;
    return end_unit;
}

void QuantGemmCall::run_unit(const Unit& unit, int thread) {
    ThreadScratch& s = thread_scratch();
    SharedActs& sh = lists_.shared;
    int64_t& decoded = lists_.decoded[static_cast<size_t>(thread)];
    const Item& item = lists_.items[static_cast<size_t>(unit.item)];
    const Fp8Acts& a = item.p->a;
    const QuantWeight& w = item.p->w;
    const int64_t groups = row_groups(w.rows), i0 = item.i0, ni = item.ni;
    auto own = [&] {
        return ReadyActs{s.acts.data(),  s.act_scales.as<float>(), s.fp4_row.data(),
                         reinterpret_cast<uint16_t*>(s.tile_acts.data()), s.tile_shift.as<int32_t>(), s.tile_acts_ok};
    };
    auto ready_acts = [&] {
        return shared_ ? sh.ready(sh.sets[static_cast<size_t>(sh.set_of[static_cast<size_t>(unit.item)])]) : own();
    };
    if (decoded != unit.item && !same_acts(decoded, unit.item)) {
        if (!shared_) {  // this thread's own copy, once per item
            size_t need[5];
            act_bytes(item, need);
            AlignedBuffer* own_buffers[5] = {&s.acts, &s.act_scales, &s.fp4_row, &s.tile_acts, &s.tile_shift};
            for (int b = 0; b < 5; ++b) own_buffers[b]->ensure(need[b]);
            s.tile_acts_ok = prepare_rows(item, 0, ni, own());
        }
        s.gemm.ensure(static_cast<size_t>(gemm_scratch_floats(a.k)) * sizeof(float));  // (same k: same acts)
        const ReadyActs ready = ready_acts();
        s.bits_acts_ok = false;
        if (bits_acts_of(item) && !ready.tile_ok) {
            s.bits_acts.ensure(static_cast<size_t>(ops_.fp8_bits_acts_bytes(ni, a.k)));
            s.bits_acts_ok = ops_.fp8_bits_acts(ready.values, ni, a.k, !item.p->x, s.bits_acts.data());
        }
    }
    decoded = unit.item;
    const ReadyActs ready = ready_acts();
    const int64_t ldo = item.p->ldo;
    bf16* out = item.p->out;
    float* out_f32 = item.p->out_f32;
    QuantGemmTask task{ready.values, ready.scales, ni, a.k, nullptr, nullptr, 0, 0, nullptr, ldo, s.gemm.as<float>()};
    task.plain_scales = item.pw && item.pw->plain_scales;
    task.plain_codes = item.pw && item.pw->plain_codes;
    if (fp4_row_of(item)) task.fp4_row = ready.fp4_row;
    if (bits_acts_of(item) && s.bits_acts_ok) task.bits_acts = s.bits_acts.data();
    if (tile_acts_of(item) && ready.tile_ok) {
        task.tile_acts = ready.tile;
        task.tile_shift = ready.tile_shift;
    }
    auto run_groups = [&](int64_t g, int64_t count, const uint8_t* codes, const uint8_t* scales) {
        task.codes = codes;
        task.scales = scales;
        task.groups = count;
        task.rows = std::min(w.rows, (g + count) * kGroupRows) - g * kGroupRows;
        task.out = out ? out + i0 * ldo + g * kGroupRows : nullptr;
        task.out_f32 = out_f32 ? out_f32 + i0 * ldo + g * kGroupRows : nullptr;
        w.run(task);
    };
    if (item.pw) {
        const uint8_t* base = item.pw->data;
        const uint8_t* scales = base + groups * w.code_bytes_per_group + unit.g0 * w.scale_bytes_per_group;
        // prepare_fp8's subnormal-block flags follow the scales, indexed as they are (read by the bit-placing
        // decodes, which take weights without NaN codes)
        if ((task.bits_acts || task.tile_acts) && item.pw->plain_codes && item.pw->subnormal_flags)
            task.block_flags = scales + groups * w.scale_bytes_per_group;
        run_groups(unit.g0, unit.g1 - unit.g0, base + unit.g0 * w.code_bytes_per_group, scales);
        return;
    }
    s.pack.ensure(static_cast<size_t>(kPackGroups * (w.code_bytes_per_group + w.scale_bytes_per_group)));
    uint8_t* codes = s.pack.data();
    uint8_t* scales = codes + kPackGroups * w.code_bytes_per_group;
    for (int64_t g = unit.g0; g < unit.g1; g += kPackGroups) {
        const int64_t count = std::min(kPackGroups, unit.g1 - g);
        w.pack(w.canonical, g, g + count, codes, scales);
        run_groups(g, count, codes, scales);
    }
}

void QuantGemmCall::run(const QuantProblem* problems, size_t count) {
    const int64_t call_groups = plan(problems, count);
    const std::vector<Item>& items = lists_.items;
    const std::vector<Unit>& units = lists_.units;
    if (units.empty()) return;
    lists_.decoded.assign(static_cast<size_t>(pool_.size()), -1);
    // Where the items are split over the threads (a GEMM's few items, each in many units) and each thread has few
    // weight rows, their activations are made ready once, in slices of rows over the pool, rather than by every
    // thread that runs one of their units: per-thread preparation costs each thread the same whatever the thread
    // count while its share of the products shrinks, and on 16 threads the MXFP4 experts' (144-320 rows a thread)
    // took as long as their products (docs/PERFORMANCE.md, "Thirty-first session": 1.3-2.4x faster shared; at
    // 1600-2048 rows a thread parity; on 2 threads at 1152 rows 2-3% slower). Slices of 16 rows (the tiles'
    // blocks) and at least 16, so each call into the ISA sees what the whole item's would (the tile forms decline
    // fewer than 5 rows), and the bytes are those of one call over all rows.
    int64_t max_rows = 0;
    for (const Item& item : items) max_rows = std::max(max_rows, item.ni);
    shared_ = pool_.size() > 1 && max_rows >= 2 * kSliceRows && units.size() >= 2 * items.size() &&
              call_groups * kGroupRows <= kSharedRowsPerThread * pool_.size();
    for (size_t first_unit = 0; first_unit < units.size();) {
        const size_t end_unit = shared_ ? prepare_shared_wave(first_unit) : units.size();
        for_chunks(pool_, static_cast<int64_t>(end_unit - first_unit), 1, [](int) {},
                   [&](int64_t u0, int64_t u1, int thread) {
                       for (int64_t u = u0; u < u1; ++u) run_unit(units[first_unit + static_cast<size_t>(u)], thread);
                   });
        first_unit = end_unit;
    }
}

void gemm_quant(const IsaOps& ops, const QuantProblem* problems, size_t count, ThreadPool& pool) {
    QuantGemmCall(ops, pool).run(problems, count);
}

}  // namespace

namespace {
template <class Matrix, void (*Pack)(const Matrix&, int64_t, int64_t, uint8_t*, uint8_t*)>
QuantWeight quant_weight(PackedLayout layout, const Matrix& w, int64_t code_bytes_per_group,
                         int64_t scale_bytes_per_group, void (*run)(const QuantGemmTask&)) {
    return QuantWeight{layout,
                       w.rows,
                       w.cols,
                       w.prepared,
                       code_bytes_per_group,
                       scale_bytes_per_group,
                       [](const void* m, int64_t g0, int64_t g1, uint8_t* codes, uint8_t* scales) {
                           Pack(*static_cast<const Matrix*>(m), g0, g1, codes, scales);
                       },
                       &w,
                       run};
}
QuantWeight fp8_weight(const IsaOps& ops, const Fp8Matrix& w) {
    return quant_weight<Fp8Matrix, pack_fp8_groups>(PackedLayout::kFp8R16K4, w, fp8_packed_code_bytes(1, w.cols),
                                                    fp8_packed_scale_bytes(1, w.cols), ops.gemm_fp8);
}
QuantWeight fp4_weight(const IsaOps& ops, const Fp4Matrix& w) {
    return quant_weight<Fp4Matrix, pack_fp4_groups>(PackedLayout::kFp4R16K8, w, fp4_packed_code_bytes(1, w.cols),
                                                    fp4_packed_scale_bytes(1, w.cols), ops.gemm_fp4);
}
}  // namespace

void gemm_fp8(const IsaOps& ops, const Fp8Acts& a, const Fp8Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool) {
    const QuantProblem p{a, fp8_weight(ops, w), out, ldo};
    gemm_quant(ops, &p, 1, pool);
}

void gemm_fp8_f32(const IsaOps& ops, const Fp8Acts& a, const Fp8Matrix& w, float* out, int64_t ldo, ThreadPool& pool) {
    const QuantProblem p{a, fp8_weight(ops, w), nullptr, ldo, out};
    gemm_quant(ops, &p, 1, pool);
}

void gemm_fp8_bf16x(const IsaOps& ops, const bf16* x, int64_t n, const Fp8Matrix& w, bf16* out, int64_t ldo,
                    ThreadPool& pool) {
    QuantProblem p{Fp8Acts{nullptr, nullptr, n, w.cols}, fp8_weight(ops, w), out, ldo};
    p.x = x;
    p.ldx = w.cols;
    gemm_quant(ops, &p, 1, pool);
}

void gemm_fp8_bf16x_grouped(const IsaOps& ops, const Fp8Bf16xGemm* gemms, int64_t count, ThreadPool& pool) {
    std::vector<QuantProblem> problems;
    problems.reserve(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i) {
        const Fp8Bf16xGemm& g = gemms[i];
        DI_CHECK_MSG(g.ldx >= g.w.cols, "gemm_fp8_bf16x_grouped: x row stride {} < k {}", g.ldx, g.w.cols);
        QuantProblem p{Fp8Acts{nullptr, nullptr, g.n, g.w.cols}, fp8_weight(ops, g.w), g.out, g.ldo};
        p.x = g.x;
        p.ldx = g.ldx;
        problems.push_back(p);
    }
    gemm_quant(ops, problems.data(), problems.size(), pool);
}

void gemm_fp4(const IsaOps& ops, const Fp8Acts& a, const Fp4Matrix& w, bf16* out, int64_t ldo, ThreadPool& pool) {
    const QuantProblem p{a, fp4_weight(ops, w), out, ldo};
    gemm_quant(ops, &p, 1, pool);
}

void gemm_fp4_grouped(const IsaOps& ops, const Fp4Gemm* gemms, int64_t count, ThreadPool& pool) {
    std::vector<QuantProblem> problems;
    problems.reserve(static_cast<size_t>(count));
    for (int64_t i = 0; i < count; ++i)
        problems.push_back(QuantProblem{gemms[i].a, fp4_weight(ops, gemms[i].w), gemms[i].out, gemms[i].ldo});
    gemm_quant(ops, problems.data(), problems.size(), pool);
}

}  // namespace deepinfer::backend::cpu
