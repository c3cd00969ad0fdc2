"""Seeded random bad input to `deepinfer serve`: valid completion and chat bodies with a field's value replaced by
an arbitrary JSON value, a field dropped, or their bytes truncated, flipped or spliced. Every request must get an
answer -- 200, or a 4xx with an OpenAI error object -- never a 500 or a dropped connection, and the server must
still serve a good request at the end (a bad request never takes the server down). Set DEEPINFER_FUZZ_SEED /
DEEPINFER_FUZZ_COUNT to explore further. Env: DEEPINFER_BIN.
"""
import json
import os
import pathlib
import random
import sys
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from server_fixture import ServerProcess  # noqa: E402

MODEL = "deepinfer-tiny"

COMPLETION = {"model": MODEL, "prompt": "hello there", "max_tokens": 3, "temperature": 0.7, "top_p": 0.9, "n": 2,
              "stop": ["\n", "x"], "seed": 5, "logprobs": 2, "echo": True, "presence_penalty": 0.5,
              "frequency_penalty": 0.1, "stream": False, "top_k": 4, "min_p": 0.05, "min_tokens": 1,
              "repetition_penalty": 1.1, "ignore_eos": True, "stop_token_ids": [7], "best_of": 2, "user": "u"}
CHAT = {"model": MODEL, "max_tokens": 3, "messages": [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "hi"}]},
            {"role": "assistant", "content": "ok", "reasoning_content": "think",
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{\"a\": 1}"}}]},
            {"role": "tool", "content": "42", "tool_call_id": "c1"},
            {"role": "user", "content": "again"}],
        "tools": [{"type": "function", "function": {"name": "f", "description": "d",
                                                    "parameters": {"type": "object", "properties": {"a": {}}}}}],
        "tool_choice": "auto", "logprobs": True, "top_logprobs": 2, "reasoning_effort": "high",
        "chat_template_kwargs": {"thinking": True}, "stream": False, "n": 2, "seed": 3,
        "max_completion_tokens": 3, "response_format": {"type": "text"}}

VALUES = [None, True, False, 0, -1, 1, 2, 7.5, -0.0, 1e308, -1e308, 2 ** 31, 2 ** 63, -(2 ** 63) - 1, 2 ** 64,
          "", "x", "a" * 5000, "\u0000", "\ufffd", "<｜end▁of▁sentence｜>", [], [[]], [1, 2], [-1], [2 ** 40],
          ["a", ""], [None], {}, {"a": {}}, {"type": "text"}, {"role": "user"}, [{"type": "image_url"}],
          [{"role": "user", "content": None}], [{"role": "assistant", "tool_calls": [{}]}], "NaN"]


def paths(value, prefix=()):
    """Every key path into a JSON value (dict keys and list indices)."""
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from paths(v, prefix + (i,))


def mutate(rng, body):
    """A bad variant of body: JSON-level (replace, drop) or byte-level (truncate, flip, splice)."""
    kind = rng.randrange(5)
    if kind < 2:
        doc = json.loads(json.dumps(body))
        path = rng.choice([p for p in paths(doc) if p])
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        if kind == 0:
            parent[path[-1]] = rng.choice(VALUES)
        elif isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent.pop(path[-1])
        return json.dumps(doc, ensure_ascii=rng.random() < 0.5).encode()
    raw = bytearray(json.dumps(body).encode())
    if kind == 2:
        return bytes(raw[:rng.randrange(len(raw))])
    if kind == 3:
        for _ in range(rng.randint(1, 4)):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        return bytes(raw)
    at = rng.randrange(len(raw))
    return bytes(raw[:at]) + rng.choice([b"{", b"}", b"[", b"]", b",", b":", b'"', b"\\", b"1e999", b"null",
                                         b"\xff", b"\xc3", b"\x00"]) + bytes(raw[at:])


class ServerFuzzTest(unittest.TestCase):
    def test_random_bad_bodies_get_answers_not_crashes(self):
        seed = int(os.environ.get("DEEPINFER_FUZZ_SEED", "1"))
        count = int(os.environ.get("DEEPINFER_FUZZ_COUNT", "400"))
        rng = random.Random(seed)
        server = ServerProcess("--max-model-len", 512)
        try:
            statuses = {}
            for i in range(count):
                path, body = rng.choice([("/v1/completions", COMPLETION), ("/v1/chat/completions", CHAT)])
                data = mutate(rng, body)
                try:
                    status, reply = server.request("POST", path, data, timeout=120)
                except OSError as e:
                    self.fail(f"request {i} (seed {seed}) to {path} got no answer ({e}); body: {data[:300]!r}\n"
                              f"{server.log_text()[-3000:]}")
                statuses[status] = statuses.get(status, 0) + 1
                self.assertTrue(status == 200 or 400 <= status < 500,
                                f"request {i} (seed {seed}) to {path}: {status} {reply[:300]!r}; body: {data[:300]!r}")
                if status == 200 and reply.startswith(b"data: "):  # "stream" became true: server-sent events
                    events = [line[6:] for line in reply.split(b"\n") if line.startswith(b"data: ")]
                    self.assertEqual(events[-1], b"[DONE]", reply[-300:])
                    for event in events[:-1]:
                        json.loads(event)
                    continue
                answer = json.loads(reply)
                if status != 200:
                    self.assertIsInstance(answer["error"]["message"], str)
                    self.assertTrue(answer["error"]["message"], reply)
            print(f"statuses (seed {seed}, {count} requests): {dict(sorted(statuses.items()))}", file=sys.stderr)
            # Both kinds of outcome occurred (the mutations are neither all harmless nor all fatal).
            self.assertGreater(statuses.get(200, 0), count // 20, statuses)
            self.assertGreater(statuses.get(400, 0), count // 4, statuses)
            status, reply = server.request("POST", "/v1/completions",
                                           {"model": MODEL, "prompt": "fine", "max_tokens": 2, "ignore_eos": True})
            self.assertEqual(status, 200, reply)
            self.assertEqual(json.loads(reply)["usage"]["completion_tokens"], 2)
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main()
