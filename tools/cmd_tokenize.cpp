// `deepinfer tokenize` and `deepinfer detokenize`: text <-> ids with a tokenizer.json, one text or a JSONL
// batch (used by tests/unit/test_tokenizer_corpus.py), plus an encode benchmark (tools/bench_tokenizer.py).
#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tools/commands.h"
#include "tools/tokenizer_source.h"

namespace deepinfer::cli {
namespace {

using tokenizer::Tokenizer;

Expected<std::string> read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return Status(StatusCode::kNotFound, fmt::format("{}: cannot open", path));
    std::ostringstream buffer;
    buffer << in.rdbuf();
    return buffer.str();
}

Expected<std::string> hex_to_bytes(const std::string& hex, size_t line) {
    if (hex.size() % 2) return invalid_argument("line {}: \"hex\" has an odd number of digits", line);
    std::string out;
    for (size_t i = 0; i < hex.size(); i += 2) {
        int value = 0;
        for (size_t k = i; k < i + 2; ++k) {
            const char c = hex[k];
            const int digit = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (digit < 0) return invalid_argument("line {}: \"hex\" has a non-hex character", line);
            value = value * 16 + digit;
        }
        out.push_back(static_cast<char>(value));
    }
    return out;
}

// JSONL lines, each {"text": "..."} or {"hex": "<bytes>"} (for input that is not valid UTF-8).
Expected<std::vector<std::string>> read_jsonl_texts(const std::string& path) {
    DI_ASSIGN_OR_RETURN(std::string content, read_file(path));
    std::vector<std::string> texts;
    std::istringstream lines(content);
    std::string line;
    for (size_t n = 1; std::getline(lines, line); ++n) {
        if (line.empty()) continue;
        nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && j.contains("text") && j["text"].is_string()) {
            texts.push_back(j["text"].get<std::string>());
        } else if (j.is_object() && j.contains("hex") && j["hex"].is_string()) {
            DI_ASSIGN_OR_RETURN(std::string bytes, hex_to_bytes(j["hex"].get<std::string>(), n));
            texts.push_back(std::move(bytes));
        } else {
            return invalid_argument("{}:{}: expected a JSON object with a string \"text\" or \"hex\"", path, n);
        }
    }
    return texts;
}

void write_out(const std::string& s) { std::fwrite(s.data(), 1, s.size(), stdout); }

std::string ids_json(const std::vector<int32_t>& ids) { return fmt::format("[{}]", fmt::join(ids, ",")); }

std::string dump(const nlohmann::json& j) { return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

struct TokenizeArgs {
    TokenizerSource source;
    std::string text, file, jsonl;
    bool json = false, add_special = false, bench = false;
    double bench_seconds = 2.0;
};

Status bench(const Tokenizer& tok, const std::vector<std::string>& texts, const TokenizeArgs& args) {
    using Clock = std::chrono::steady_clock;
    std::vector<int32_t> ids;
    size_t bytes = 0, tokens = 0;
    for (const auto& t : texts) {  // warm-up pass (fills the BPE word cache, as HF's runs do too)
        ids.clear();
        DI_RETURN_IF_ERROR(tok.encode_into(t, ids, args.add_special));
        bytes += t.size();
        tokens += ids.size();
    }
    int passes = 0;
    const auto start = Clock::now();
    double elapsed = 0;
    do {
        for (const auto& t : texts) {
            ids.clear();
            DI_RETURN_IF_ERROR(tok.encode_into(t, ids, args.add_special));
        }
        ++passes;
        elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < args.bench_seconds);
    nlohmann::json r = {{"texts", texts.size()},        {"bytes", bytes},   {"tokens", tokens},
                        {"passes", passes},             {"seconds", elapsed},
                        {"bytes_per_second", bytes * passes / elapsed},
                        {"tokens_per_second", tokens * passes / elapsed}};
    write_out(dump(r) + "\n");
    return Status::ok();
}

Status run_tokenize(const TokenizeArgs& args) {
    DI_ASSIGN_OR_RETURN(Tokenizer tok, load_tokenizer(args.source));
    const int inputs = !args.text.empty() + !args.file.empty() + !args.jsonl.empty();
    if (inputs != 1) return invalid_argument("give exactly one of --text, --file, --jsonl");
    std::vector<std::string> texts;
    if (!args.jsonl.empty()) {
        DI_ASSIGN_OR_RETURN(texts, read_jsonl_texts(args.jsonl));
    } else if (!args.file.empty()) {
        DI_ASSIGN_OR_RETURN(std::string content, read_file(args.file));
        texts.push_back(std::move(content));
    } else {
        texts.push_back(args.text);
    }
    if (args.bench) return bench(tok, texts, args);

    std::string out;
    std::vector<int32_t> ids;
    for (const auto& t : texts) {
        ids.clear();
        DI_RETURN_IF_ERROR(tok.encode_into(t, ids, args.add_special));
        if (args.json) {
            nlohmann::json tokens = nlohmann::json::array();
            for (int32_t id : ids) tokens.push_back(std::string(*tok.id_to_token(id)));
            out += fmt::format("{{\"ids\":{},\"tokens\":{}}}\n", ids_json(ids), dump(tokens));
        } else if (!args.jsonl.empty()) {
            out += fmt::format("{{\"ids\":{}}}\n", ids_json(ids));
        } else {
            out += fmt::format("{}\n", fmt::join(ids, " "));
        }
    }
    write_out(out);
    return Status::ok();
}

struct DetokenizeArgs {
    TokenizerSource source;
    std::string ids, jsonl;
    bool json = false, skip_special = false;
};

Expected<std::vector<int32_t>> parse_id_list(const std::string& list) {
    std::vector<int32_t> ids;
    std::istringstream in(list);
    std::string item;
    while (std::getline(in, item, ',')) {
        size_t used = 0;
        long long value = 0;
        bool ok = !item.empty();
        if (ok) {
            try {
                value = std::stoll(item, &used);
            } catch (const std::exception&) {
                ok = false;
            }
        }
        if (!ok || used != item.size() || value < INT32_MIN || value > INT32_MAX) {
            return invalid_argument("--ids: \"{}\" is not an integer", item);
        }
        ids.push_back(static_cast<int32_t>(value));
    }
    return ids;
}

Status run_detokenize(const DetokenizeArgs& args) {
    DI_ASSIGN_OR_RETURN(Tokenizer tok, load_tokenizer(args.source));
    if (args.ids.empty() == args.jsonl.empty()) return invalid_argument("give exactly one of --ids, --jsonl");
    std::string out;
    if (!args.jsonl.empty()) {
        DI_ASSIGN_OR_RETURN(std::string content, read_file(args.jsonl));
        std::istringstream lines(content);
        std::string line;
        for (size_t n = 1; std::getline(lines, line); ++n) {
            if (line.empty()) continue;
            nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
            if (!j.is_object() || !j.contains("ids") || !j["ids"].is_array()) {
                return invalid_argument("{}:{}: expected a JSON object with an \"ids\" array", args.jsonl, n);
            }
            std::vector<int32_t> ids;
            for (const auto& v : j["ids"]) {
                if (!v.is_number_integer() || v.get<int64_t>() < INT32_MIN || v.get<int64_t>() > INT32_MAX) {
                    return invalid_argument("{}:{}: ids must be 32-bit integers", args.jsonl, n);
                }
                ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
            }
            Expected<std::string> text = tok.decode(ids, args.skip_special);
            if (!text) return text.status().with_context(fmt::format("{}:{}", args.jsonl, n));
            out += dump(nlohmann::json{{"text", *text}}) + "\n";
        }
    } else {
        DI_ASSIGN_OR_RETURN(std::vector<int32_t> ids, parse_id_list(args.ids));
        DI_ASSIGN_OR_RETURN(std::string text, tok.decode(ids, args.skip_special));
        out = args.json ? dump(nlohmann::json{{"text", text}}) + "\n" : text + "\n";
    }
    write_out(out);
    return Status::ok();
}

int report(const Status& s) {
    if (s.is_ok()) return 0;
    fmt::print(stderr, "error: {}\n", s.message());
    return 1;
}

}  // namespace

Command make_tokenize_command() {
    return {[](CLI::App& app, int* exit_code) {
        auto args = std::make_shared<TokenizeArgs>();
        auto* sub = app.add_subcommand("tokenize", "Encode text to token ids with a tokenizer.json");
        add_tokenizer_options(sub, args->source);
        sub->add_option("--text", args->text, "Text to encode");
        sub->add_option("--file", args->file, "Encode the whole content of this file as one text");
        sub->add_option("--jsonl", args->jsonl,
                        "Batch: one JSON object per line, {\"text\": ...} or {\"hex\": <bytes>}; prints {\"ids\": [...]} "
                        "per line");
        sub->add_flag("--json", args->json, "Print {\"ids\": [...], \"tokens\": [...]}");
        sub->add_flag("--add-special-tokens", args->add_special, "Apply the post-processor template (HF's flag)");
        sub->add_flag("--bench", args->bench, "Measure encode throughput over the input instead of printing ids");
        sub->add_option("--bench-seconds", args->bench_seconds, "Minimum measured time for --bench");
        sub->callback([args, exit_code] { *exit_code = report(run_tokenize(*args)); });
    }};
}

Command make_detokenize_command() {
    return {[](CLI::App& app, int* exit_code) {
        auto args = std::make_shared<DetokenizeArgs>();
        auto* sub = app.add_subcommand("detokenize", "Decode token ids to text with a tokenizer.json");
        add_tokenizer_options(sub, args->source);
        sub->add_option("--ids", args->ids, "Comma-separated token ids");
        sub->add_option("--jsonl", args->jsonl, "Batch: one {\"ids\": [...]} per line; prints {\"text\": ...} per line");
        sub->add_flag("--json", args->json, "Print {\"text\": ...}");
        sub->add_flag("--skip-special", args->skip_special, "Leave out special tokens");
        sub->callback([args, exit_code] { *exit_code = report(run_detokenize(*args)); });
    }};
}

}  // namespace deepinfer::cli
