// Training text of the synthetic tokenizer (synthetic_tokenizer.h): a few KB of English prose and code,
// written for this project, so that the built-in tiny checkpoint needs no files from outside the repository.
#include "tokenizer/synthetic_tokenizer.h"

namespace deepinfer::tokenizer {

std::string_view synthetic_training_text() {
    static constexpr std::string_view kText = R"TEXT(
The lighthouse on the northern cape was built in 1871, and for most of its life it was kept by one family.
Every evening the keeper climbed the ninety-two steps, trimmed the wick, wound the clockwork that turned the
lens, and wrote three lines in the log: the time the light was lit, the state of the sea, and the direction
of the wind. The log books fill a whole shelf in the village library now. Reading them in order is strange
and calming. Nothing happens for months; then a storm arrives, a ship is late, and the handwriting changes.

When the light was automated in 1962 the last keeper stayed on as a caretaker. She painted the railings
every spring, counted the birds that nested under the gallery, and answered letters from children who
wanted to know whether the light ever went out. It did, twice: once when the power failed during a gale,
and once when a seagull flew into the lamp room and knocked the bulb from its holder. Both times she lit
the old paraffin burner, which still worked, and sat with it until morning.

Cooking for one person is mostly a question of planning. A pot of beans on Sunday becomes soup on Monday,
a filling for flatbread on Tuesday, and a thick sauce for pasta on Wednesday. Onions, garlic, a tin of
tomatoes, a spoon of paprika and a little vinegar at the end are enough for most of it. Bread is easier
than people think: flour, water, salt, a pinch of yeast, and time. The dough does the work while you sleep.

People often ask how a language model turns text into numbers. The first step is the tokenizer. It splits
the text into pieces, maps each piece to an integer, and hands the integers to the model. A byte-level
tokenizer never meets a character it cannot represent, because every string is a sequence of bytes and
every byte has a token of its own. Frequent sequences of bytes are merged into longer tokens, so common
words like "the", "and", "model" and "token" become single tokens while rare words are spelled out in
several pieces. Decoding runs the other way: ids become bytes, and the bytes become text again.

An inference engine keeps the model's weights in memory, schedules requests, and reuses the attention
cache between steps. Prefill processes the whole prompt at once; decode produces one token per step for
each running sequence. Batching many sequences together keeps the hardware busy. The scheduler decides
which requests run, which wait, and which are preempted when memory is short. Good engines measure
everything: time to first token, tokens per second, memory per sequence, and the tail latency of requests.

Questions worth asking of any benchmark: what was measured, on which machine, with which inputs, and how
many times? A number without its command line is a rumour. A test that cannot fail is decoration. When two
implementations disagree, the first job is to find the smallest input that shows the difference.

Weather report for the coast: winds from the southwest at 15 to 20 knots, gusting 30 in the afternoon.
Seas 2 to 3 metres, easing overnight. Visibility good, becoming moderate in showers. Temperatures between
9 and 14 degrees. Tomorrow: dry at first, rain spreading from the west by evening.

def merge_counts(words: dict[str, int]) -> dict[tuple[str, str], int]:
    """Counts adjacent symbol pairs over all words, weighted by word frequency."""
    counts: dict[tuple[str, str], int] = {}
    for word, freq in words.items():
        symbols = word.split(" ")
        for left, right in zip(symbols, symbols[1:]):
            counts[(left, right)] = counts.get((left, right), 0) + freq
    return counts


class Cache:
    def __init__(self, capacity=1024):
        self.capacity = capacity
        self.items = {}

    def get(self, key, default=None):
        return self.items.get(key, default)

    def put(self, key, value):
        if len(self.items) >= self.capacity:
            self.items.clear()
        self.items[key] = value


for i in range(10):
    if i % 2 == 0:
        print(f"even {i}")
    else:
        print(f"odd {i}")

#include <cstdint>
#include <string>
#include <vector>

// Returns the number of bytes in the longest valid UTF-8 prefix of `text`.
size_t valid_prefix(const std::string& text) {
    size_t pos = 0;
    while (pos < text.size()) {
        unsigned char c = static_cast<unsigned char>(text[pos]);
        size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if (pos + len > text.size()) break;
        pos += len;
    }
    return pos;
}

template <typename T>
struct Matrix {
    int rows = 0;
    int cols = 0;
    std::vector<T> data;
    T& at(int r, int c) { return data[static_cast<size_t>(r) * cols + c]; }
};

int main(int argc, char** argv) {
    std::vector<int32_t> ids = {1, 2, 3, 5, 8, 13, 21, 34};
    int64_t total = 0;
    for (int32_t id : ids) total += id;
    return total == 87 ? 0 : 1;
}

$ cmake --preset release && cmake --build build/release -j2
$ ctest --test-dir build/release --output-on-failure
$ git log --oneline | head -5

{"model": "tiny", "layers": 4, "hidden_size": 256, "heads": 4, "vocab_size": 1024, "rope_theta": 10000.0}
{"role": "user", "content": "What is the capital of France?"}
{"role": "assistant", "content": "The capital of France is Paris."}

SELECT name, count(*) AS n FROM orders WHERE created_at >= '2024-01-01' GROUP BY name ORDER BY n DESC;

Numbers: 0 1 2 3 4 5 6 7 8 9 10 11 12 42 100 256 1000 1024 4096 65536 3.14159 2.71828 -1 +1 1e-6 0x7f
Dates and times: 2026-09-10, 12:30, 09:15:00, Monday, Tuesday, Wednesday, Thursday, Friday, Saturday.

A few words in other scripts, so that common non-ASCII bytes get merges too: café, naïve, über, señor,
Ελληνικά, русский язык, 日本語, 中文, 한국어, العربية, हिन्दी.

The keeper's last log entry is short. "Light lit at 19:42. Sea calm. Wind light from the west. All well."
She closed the book, put it on the shelf with the others, and walked down the ninety-two steps.
)TEXT";
    return kText;
}

}  // namespace deepinfer::tokenizer
