// Tokenizer assets for make-tiny.
#include "tiny/tokenizer_assets.h"

#include <fstream>
#include <sstream>

#include "tokenizer/engram_token_map.h"
#include "tokenizer/synthetic_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/v41_tokenizer.h"

namespace deepinfer::tiny {

Expected<TokenizerAssets> tokenizer_assets_from_json(std::string tokenizer_json, std::string tokenizer_config_json,
                                                     const std::string& source) {
    auto tok = tokenizer::Tokenizer::load_json(tokenizer_json);
    if (!tok) return tok.status().with_context(source);
    TokenizerAssets a;
    a.vocab_size = tok->vocab_size();
    auto id_of = [&](const char* content) -> Expected<int32_t> {
        auto id = tok->token_id(content);
        if (!id) return invalid_argument("{}: the tokenizer has no token {}", source, content);
        return *id;
    };
    DI_ASSIGN_OR_RETURN(a.bos_id, id_of("<｜begin▁of▁sentence｜>"));
    DI_ASSIGN_OR_RETURN(a.eos_id, id_of("<｜end▁of▁sentence｜>"));
    DI_ASSIGN_OR_RETURN(a.pad_id, id_of("<｜▁pad▁｜>"));
    DI_ASSIGN_OR_RETURN(a.noise_token_id, id_of("<｜System｜>"));
    DI_ASSIGN_OR_RETURN(a.engram_token_map, tokenizer::build_engram_token_map(*tok, a.vocab_size, &a.n_engram_classes));
    a.tokenizer_json = std::move(tokenizer_json);
    a.tokenizer_config_json = std::move(tokenizer_config_json);
    return a;
}

Expected<TokenizerAssets> synthetic_tokenizer_assets(int32_t vocab_size) {
    DI_ASSIGN_OR_RETURN(std::string json, tokenizer::make_synthetic_tokenizer_json(vocab_size));
    return tokenizer_assets_from_json(std::move(json), tokenizer::make_synthetic_tokenizer_config_json(),
                                      "synthetic tokenizer");
}

Expected<TokenizerAssets> v41_tokenizer_assets(const std::string& v3_tokenizer_dir) {
    const std::string path = v3_tokenizer_dir + "/tokenizer.json";
    std::ifstream in(path);
    if (!in) return error(StatusCode::kNotFound, "{}: cannot open", path);
    std::stringstream ss;
    ss << in.rdbuf();
    auto json = tokenizer::make_v41_tokenizer_json(ss.str());
    if (!json) return json.status().with_context(path);
    return tokenizer_assets_from_json(std::move(*json), tokenizer::make_v41_tokenizer_config_json(), path);
}

}  // namespace deepinfer::tiny
