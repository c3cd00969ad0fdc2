"""The OpenAI API of `deepinfer serve` driven by the official openai client, on the built-in tiny checkpoint
(random weights: the text is gibberish, but every property below is exact): completions and chat, streaming
and not, usage, stop strings, logprobs, echo with prompt logprobs, n > 1, seeds, 16 concurrent clients,
thinking / chat modes, /v1/models and /metrics.

Exactness anchors: greedy text equals `deepinfer generate` on the same prompt; streamed text equals the
non-streamed text; a request gives the same tokens alone or among 15 others (batch invariance); echo's prompt
logprobs equal the logprobs the same tokens had when they were generated.
Env: DEEPINFER_BIN.
"""
import json
import pathlib
import subprocess
import sys
import threading
import unittest

import openai

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from server_fixture import BIN, ServerProcess  # noqa: E402

MODEL = "deepinfer-tiny"
CHAT = {"chat_template_kwargs": {"thinking": False}}


class ServerApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess()
        cls.client = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def complete(self, prompt, max_tokens=12, **kw):
        extra = kw.pop("extra_body", {})
        extra.setdefault("ignore_eos", True)
        return self.client.completions.create(model=MODEL, prompt=prompt, max_tokens=max_tokens, extra_body=extra, **kw)

    # --- models, health ---

    def test_models(self):
        models = self.client.models.list().data
        self.assertEqual([m.id for m in models], [MODEL])
        self.assertEqual(models[0].owned_by, "deepinfer")
        self.assertEqual(models[0].model_extra["max_model_len"], 65536)
        self.assertEqual(self.server.get("/health")[0], 200)

    # --- completions ---

    def test_greedy_completion_equals_cli_generate(self):
        r = self.complete("The quick brown fox", max_tokens=10, temperature=0)
        cli = subprocess.run([BIN, "generate", "--prompt", "The quick brown fox", "--max-tokens", "10", "--temperature", "0",
                              "--ignore-eos", "--json", "--threads", "2"], capture_output=True, text=True, check=True)
        expected = json.loads(cli.stdout.splitlines()[-1])
        self.assertEqual(r.choices[0].text, expected["text"])
        self.assertEqual(r.choices[0].finish_reason, "length")
        self.assertEqual(r.usage.completion_tokens, 10)
        self.assertEqual(r.usage.prompt_tokens, len(expected["prompt_ids"]))
        self.assertEqual(r.usage.total_tokens, r.usage.prompt_tokens + 10)
        self.assertTrue(r.id.startswith("cmpl-"))
        self.assertEqual(r.object, "text_completion")
        self.assertEqual(r.model, MODEL)
        # The same prompt given as token ids gives the same text.
        ids = self.complete(expected["prompt_ids"], max_tokens=10, temperature=0)
        self.assertEqual(ids.choices[0].text, expected["text"])

    def test_streaming_equals_blocking_with_usage(self):
        full = self.complete("Streaming test", max_tokens=16, temperature=0).choices[0].text
        chunks = list(self.complete("Streaming test", max_tokens=16, temperature=0, stream=True,
                                    stream_options={"include_usage": True}))
        self.assertGreater(len(chunks), 2)
        text = "".join(c.choices[0].text for c in chunks if c.choices)
        self.assertEqual(text, full)
        self.assertEqual([c.choices[0].finish_reason for c in chunks if c.choices][-1], "length")
        self.assertIsNone(chunks[0].usage)
        self.assertEqual(chunks[-1].choices, [])
        self.assertEqual(chunks[-1].usage.completion_tokens, 16)
        # Without include_usage no chunk carries usage.
        plain = list(self.complete("Streaming test", max_tokens=4, temperature=0, stream=True))
        self.assertTrue(all(c.usage is None for c in plain))

    def test_stop_string_cuts_the_text(self):
        full = self.complete("Stop here", max_tokens=32, temperature=0).choices[0].text
        # A stop string whose first occurrence is well inside the text.
        for start in range(4, len(full) - 3):
            stop = full[start:start + 3]
            if full.find(stop) == start and stop.strip():
                break
        else:
            self.skipTest(f"no usable stop string in {full!r}")
        r = self.complete("Stop here", max_tokens=32, temperature=0, stop=[stop, "\u00a7never\u00a7"])
        self.assertEqual(r.choices[0].text, full[:start])
        self.assertEqual(r.choices[0].finish_reason, "stop")
        streamed = list(self.complete("Stop here", max_tokens=32, temperature=0, stop=stop, stream=True))
        self.assertEqual("".join(c.choices[0].text for c in streamed), full[:start])
        self.assertEqual(streamed[-1].choices[0].finish_reason, "stop")

    def test_completion_logprobs(self):
        r = self.complete("Logprobs", max_tokens=6, temperature=0, logprobs=3)
        lp = r.choices[0].logprobs
        self.assertEqual(len(lp.tokens), 6)
        self.assertEqual(len(lp.token_logprobs), 6)
        self.assertEqual(len(lp.top_logprobs), 6)
        self.assertEqual("".join(lp.tokens), r.choices[0].text)
        self.assertEqual(lp.text_offset[0], 0)
        for i, (token, value, top) in enumerate(zip(lp.tokens, lp.token_logprobs, lp.top_logprobs)):
            self.assertLessEqual(value, 0.0)
            self.assertIn(len(top), (3, 4))
            # Greedy: the chosen token is the most likely one.
            self.assertAlmostEqual(value, max(top.values()), places=5)
            self.assertAlmostEqual(top[token], value, places=5)
            if i:
                self.assertEqual(lp.text_offset[i], lp.text_offset[i - 1] + len(lp.tokens[i - 1].encode()))

    def test_echo_and_prompt_logprobs(self):
        # Generate a continuation G of P with logprobs; then score P + G with echo: the echoed logprobs of
        # G's tokens are those it was generated with.
        prompt = [11, 200, 345, 77, 500]
        gen = self.complete(prompt, max_tokens=5, temperature=0, logprobs=2)
        g_text = gen.choices[0].text
        g_lp = gen.choices[0].logprobs.token_logprobs
        cli = subprocess.run([BIN, "generate", "--prompt-ids", ",".join(map(str, prompt)), "--max-tokens", "5",
                              "--temperature", "0", "--ignore-eos", "--json", "--threads", "2"],
                             capture_output=True, text=True, check=True)
        g_ids = json.loads(cli.stdout.splitlines()[-1])["output_ids"]
        scored = self.complete(prompt + g_ids, max_tokens=0, echo=True, logprobs=2)
        c = scored.choices[0]
        self.assertEqual(scored.usage.completion_tokens, 0)
        lp = c.logprobs
        self.assertEqual(len(lp.token_logprobs), len(prompt) + 5)
        self.assertIsNone(lp.token_logprobs[0])
        self.assertIsNone(lp.top_logprobs[0])
        for mine, theirs in zip(lp.token_logprobs[len(prompt):], g_lp):
            self.assertAlmostEqual(mine, theirs, delta=2e-3)
        self.assertTrue(c.text.endswith(g_text))
        # Echo with generation: the prompt text leads every choice.
        r = self.complete("Echo me", max_tokens=3, echo=True, temperature=0)
        self.assertTrue(r.choices[0].text.startswith("Echo me"))
        streamed = list(self.complete("Echo me", max_tokens=3, echo=True, temperature=0, stream=True))
        self.assertEqual("".join(ch.choices[0].text for ch in streamed), r.choices[0].text)

    def test_several_prompts_with_n_choices(self):
        r = self.complete([[5, 6, 7, 8], [9, 10, 11, 12]], max_tokens=5, n=2, temperature=0)
        self.assertEqual([c.index for c in r.choices], [0, 1, 2, 3])
        # Greedy: both choices of a prompt agree; each prompt's text equals its single-prompt completion.
        self.assertEqual(r.choices[0].text, r.choices[1].text)
        self.assertEqual(r.choices[2].text, r.choices[3].text)
        self.assertEqual(r.choices[2].text, self.complete([9, 10, 11, 12], max_tokens=5, temperature=0).choices[0].text)
        self.assertEqual(r.usage.prompt_tokens, 8)
        self.assertEqual(r.usage.completion_tokens, 20)

    def test_seed_reproducibility(self):
        def sample(seed):
            r = self.complete("Seeded sampling", max_tokens=10, n=3, temperature=1.0, seed=seed)
            return [c.text for c in r.choices]
        a, b, other = sample(1234), sample(1234), sample(99)
        self.assertEqual(a, b)
        self.assertNotEqual(a, other)
        self.assertGreater(len(set(a)), 1, "n choices of one seed must be different streams")
        # Streamed with the same seed: the same texts.
        chunks = list(self.complete("Seeded sampling", max_tokens=10, n=3, temperature=1.0, seed=1234, stream=True))
        texts = ["", "", ""]
        for ch in chunks:
            texts[ch.choices[0].index] += ch.choices[0].text
        self.assertEqual(texts, a)

    def test_sixteen_concurrent_clients(self):
        prompts = [[20 + i, 300 + 7 * i, 40 + i, 5 + i] for i in range(16)]
        alone = {i: self.complete(prompts[i], max_tokens=8, temperature=0).choices[0].text for i in (0, 5, 14)}
        alone[3] = self.client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "client 3"}],
                                                       max_tokens=8, temperature=0, extra_body=CHAT).choices[0].message.content
        results, errors = [None] * 16, []

        def worker(i):
            try:
                client = self.server.client()
                if i % 4 == 3:
                    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": f"client {i}"}],
                                                       max_tokens=8, temperature=0, extra_body=CHAT)
                    results[i] = r.choices[0].message.content
                elif i % 2:
                    chunks = client.completions.create(model=MODEL, prompt=prompts[i], max_tokens=8, temperature=0,
                                                       stream=True, extra_body={"ignore_eos": True})
                    results[i] = "".join(c.choices[0].text for c in chunks)
                else:
                    r = client.completions.create(model=MODEL, prompt=prompts[i], max_tokens=8, temperature=0,
                                                  extra_body={"ignore_eos": True})
                    results[i] = r.choices[0].text
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(f"client {i}: {e!r}")

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        self.assertEqual(errors, [])
        self.assertTrue(all(r is not None for r in results))
        # Batch invariance: the same tokens alone and among 15 other requests.
        for i, text in alone.items():
            self.assertEqual(results[i], text, f"client {i}")

    # --- chat ---

    def test_chat_mode_content(self):
        messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}]
        r = self.client.chat.completions.create(model=MODEL, messages=messages, max_tokens=8, temperature=0,
                                                extra_body={**CHAT, "ignore_eos": True})
        msg = r.choices[0].message
        self.assertEqual(msg.role, "assistant")
        self.assertIsInstance(msg.content, str)
        self.assertNotIn("reasoning_content", msg.model_extra or {})
        self.assertEqual(r.usage.completion_tokens, 8)
        self.assertEqual(r.object, "chat.completion")
        # max_completion_tokens is the newer name of max_tokens.
        r2 = self.client.chat.completions.create(model=MODEL, messages=messages, max_completion_tokens=8, temperature=0,
                                                 extra_body={**CHAT, "ignore_eos": True})
        self.assertEqual(r2.choices[0].message.content, msg.content)
        chunks = list(self.client.chat.completions.create(model=MODEL, messages=messages, max_tokens=8, temperature=0,
                                                          stream=True, stream_options={"include_usage": True},
                                                          extra_body={**CHAT, "ignore_eos": True}))
        self.assertEqual(chunks[0].choices[0].delta.role, "assistant")
        self.assertEqual("".join(c.choices[0].delta.content or "" for c in chunks if c.choices), msg.content)
        self.assertEqual(chunks[-1].usage.completion_tokens, 8)
        self.assertEqual([c.choices[0].finish_reason for c in chunks if c.choices][-1], "length")

    def test_thinking_mode_reasoning_content(self):
        # Thinking mode (the default): the prompt opens <think>; the tiny model never closes it, so all the
        # output is reasoning_content and content is null (vLLM's DeepSeek parser does the same).
        messages = [{"role": "user", "content": "Think about this"}]
        kw = dict(model=MODEL, messages=messages, max_tokens=10, temperature=0)
        r = self.client.chat.completions.create(**kw, extra_body={"ignore_eos": True})
        msg = r.choices[0].message
        reasoning = msg.model_extra["reasoning_content"]
        self.assertIsNone(msg.content)
        self.assertGreater(len(reasoning), 0)
        self.assertNotIn("</think>", reasoning)
        effort = self.client.chat.completions.create(**kw, extra_body={"ignore_eos": True,
                                                                       "chat_template_kwargs": {"thinking": True, "reasoning_effort": "max"}})
        self.assertIn("reasoning_content", effort.choices[0].message.model_extra)
        chat = self.client.chat.completions.create(**kw, extra_body={**CHAT, "ignore_eos": True})
        self.assertIsInstance(chat.choices[0].message.content, str)
        self.assertNotIn("reasoning_content", chat.choices[0].message.model_extra or {})
        # Streamed: reasoning deltas concatenate to the blocking reasoning_content; no content deltas.
        chunks = list(self.client.chat.completions.create(**kw, stream=True, extra_body={"ignore_eos": True}))
        streamed = "".join((c.choices[0].delta.model_extra or {}).get("reasoning_content") or "" for c in chunks)
        self.assertEqual(streamed, reasoning)
        self.assertEqual("".join(c.choices[0].delta.content or "" for c in chunks), "")

    def test_continue_final_message_is_content(self):
        # An open final assistant turn with its reasoning closed: what follows is content, not reasoning.
        messages = [{"role": "user", "content": "Question"},
                    {"role": "assistant", "reasoning_content": "I know this.", "content": "The answer is"}]
        r = self.client.chat.completions.create(model=MODEL, messages=messages, max_tokens=6, temperature=0,
                                                extra_body={"continue_final_message": True, "add_generation_prompt": False,
                                                            "ignore_eos": True})
        msg = r.choices[0].message
        self.assertIsInstance(msg.content, str)
        self.assertGreater(len(msg.content), 0)

    def test_chat_logprobs_and_n(self):
        r = self.client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "lp"}], max_tokens=5,
                                                temperature=0, logprobs=True, top_logprobs=2, n=2,
                                                extra_body={**CHAT, "ignore_eos": True})
        self.assertEqual(len(r.choices), 2)
        self.assertEqual(r.choices[0].message.content, r.choices[1].message.content)
        content = r.choices[0].logprobs.content
        self.assertEqual(len(content), 5)
        for entry in content:
            self.assertEqual(len(entry.top_logprobs), 2)
            self.assertAlmostEqual(entry.logprob, entry.top_logprobs[0].logprob, places=5)
            self.assertGreaterEqual(entry.top_logprobs[0].logprob, entry.top_logprobs[1].logprob)
            self.assertEqual(bytes(entry.bytes).decode("utf-8", "replace"), entry.token)
        self.assertEqual(r.usage.completion_tokens, 10)

    def test_prompt_over_the_default_context(self):
        # 70,000 tokens against the 65,536 the tiny model allows: refused before the engine, lengths named.
        with self.assertRaises(openai.BadRequestError) as ctx:
            self.complete([5] * 70000, max_tokens=1)
        err = ctx.exception.body
        self.assertEqual(err["param"], "prompt")
        self.assertIn("70000 tokens", err["message"])
        self.assertIn("65536", err["message"])
        self.assertEqual(self.complete("after", max_tokens=2).usage.completion_tokens, 2)

    # --- metrics ---

    def test_metrics(self):
        self.complete("metrics", max_tokens=4)
        m = self.server.metrics()
        for series in ("deepinfer_num_requests_waiting{model_name=\"deepinfer-tiny\"}",
                       "deepinfer_num_requests_running{model_name=\"deepinfer-tiny\"}",
                       "deepinfer_kv_cache_usage_ratio{pool=\"compressed\"}",
                       "deepinfer_kv_cache_usage_ratio{pool=\"window\"}",
                       "deepinfer_num_preemptions_total", "deepinfer_prefix_cache_hit_rate",
                       "deepinfer_prefix_cache_queries_total", "deepinfer_prefix_cache_hits_total"):
            self.assertIn(series, m)
        self.assertGreater(m["deepinfer_prompt_tokens_total"], 0)
        self.assertGreaterEqual(m["deepinfer_generation_tokens_total"], 4)
        self.assertGreaterEqual(m["deepinfer_time_to_first_token_seconds_count"], 1)
        self.assertGreaterEqual(m["deepinfer_time_per_output_token_seconds_count"], 3)
        self.assertGreaterEqual(m["deepinfer_e2e_request_latency_seconds_count"], 1)
        self.assertEqual(m["deepinfer_time_to_first_token_seconds_bucket{le=\"+Inf\"}"],
                         m["deepinfer_time_to_first_token_seconds_count"])
        self.assertGreaterEqual(m["deepinfer_http_responses_total{code=\"200\"}"], 1)
        self.assertGreaterEqual(m["deepinfer_request_success_total{finished_reason=\"length\"}"], 1)
        self.assertTrue(0.0 <= m["deepinfer_kv_cache_usage_ratio{pool=\"compressed\"}"] <= 1.0)
        # The same prompt twice: the second one hits the prefix cache.
        long_prompt = list(range(100, 400))
        before = self.server.metrics()["deepinfer_prefix_cache_hits_total"]
        self.complete(long_prompt, max_tokens=2)
        self.complete(long_prompt, max_tokens=2)
        self.assertGreater(self.server.metrics()["deepinfer_prefix_cache_hits_total"], before)


if __name__ == "__main__":
    unittest.main()
