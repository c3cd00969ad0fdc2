"""Bad input to `deepinfer serve`: each gets the right 4xx with an OpenAI error body naming what was wrong,
and nothing else is disturbed: a long stream running meanwhile completes exactly, and good requests keep being
served. A client that disconnects mid-stream has its request cancelled and its KV blocks freed.
The server runs with --max-model-len 512 (cheap over-long prompts) and without prefix caching (freed blocks
return the pools to zero). Env: DEEPINFER_BIN.
"""
import http.client
import json
import pathlib
import sys
import threading
import time
import unittest

import openai

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from server_fixture import ServerProcess  # noqa: E402

MODEL = "deepinfer-tiny"


class OneServerTest(unittest.TestCase):
    """The tests of a class share one server, started with SERVER_ARGS."""
    SERVER_ARGS = ()

    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess(*cls.SERVER_ARGS)
        cls.client = cls.server.client()

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def assert_good_request_works(self):
        r = self.client.completions.create(model=MODEL, prompt="still fine", max_tokens=3,
                                           extra_body={"ignore_eos": True})
        self.assertEqual(r.usage.completion_tokens, 3)


class ServerErrorsTest(OneServerTest):
    SERVER_ARGS = ("--max-model-len", 512, "--no-prefix-caching")

    def assert_api_error(self, call, status, param, *fragments, code=None):
        with self.assertRaises(openai.APIStatusError) as ctx:
            call()
        e = ctx.exception
        self.assertEqual(e.status_code, status, e.message)
        err = e.body  # the "error" object
        self.assertIsInstance(err, dict, e.response.text)
        self.assertEqual(err["param"], param, err)
        for f in fragments:
            self.assertIn(f, err["message"])
        if code is not None:
            self.assertEqual(err["code"], code)
        return err

    def raw(self, body, path="/v1/completions", method="POST"):
        status, data = self.server.request(method, path, body)
        return status, json.loads(data) if data else None

    def test_malformed_bodies(self):
        status, body = self.raw(b'{"model": "deepinfer-tiny", "prompt": "x",')
        self.assertEqual(status, 400)
        self.assertIn("not valid JSON", body["error"]["message"])
        self.assertEqual(body["error"]["code"], "invalid_json")
        self.assertEqual(body["error"]["type"], "invalid_request_error")
        status, body = self.raw(b"[1, 2, 3]")
        self.assertEqual(status, 400)
        self.assertIn("must be a JSON object, got array", body["error"]["message"])
        status, body = self.raw(b'{"model": "deepinfer-tiny", "prompt": "bad \xff\xfe bytes"}')
        self.assertEqual(status, 400)
        self.assertIn("not valid UTF-8", body["error"]["message"])
        self.assertIn("offset 43", body["error"]["message"])
        self.assertEqual(body["error"]["code"], "invalid_utf8")
        status, body = self.raw(b"", path="/v1/chat/completions")
        self.assertEqual(status, 400)
        status, body = self.raw(b'{"model": "deepinfer-tiny", "prompt": "x", "max_tokens": 1e400}')  # past a double
        self.assertEqual(status, 400)
        self.assertIn("not valid JSON: number overflow parsing '1e400'", body["error"]["message"])
        self.assertEqual(body["error"]["code"], "invalid_json")
        self.assert_good_request_works()

    def test_deeply_nested_bodies_are_refused(self):
        # A valid JSON document nested 200000 levels deep once crashed the server (a recursive copy overflowed
        # the connection thread's stack); bodies nested past 128 levels are refused before they are parsed.
        deep = b"[" * 200000 + b"]" * 200000
        for path in ("/v1/completions", "/v1/chat/completions"):
            for body in (b'{"model": "deepinfer-tiny", "prompt": ' + deep + b"}",
                         b'{"model": "deepinfer-tiny", "messages": ' + deep + b"}", b"[" * 300000):
                with self.subTest(path=path, size=len(body)):
                    status, err = self.raw(body, path=path)
                    self.assertEqual(status, 400)
                    self.assertIn("more than 128 levels", err["error"]["message"])
                    self.assertEqual(err["error"]["code"], "invalid_json")
        # 128 levels are parsed (and refused for what they hold, a prompt that is no token list)
        status, err = self.raw(b'{"model": "deepinfer-tiny", "max_tokens": 2, "prompt": ' + b"[" * 127 + b"]" * 127 + b"}")
        self.assertEqual(status, 400)
        self.assertEqual(err["error"]["param"], "prompt")
        self.assertEqual(self.server.get("/health")[0], 200)
        self.assert_good_request_works()

    def test_unknown_route_and_model(self):
        status, body = self.raw({"prompt": "x"}, path="/v1/nothing")
        self.assertEqual(status, 404)
        self.assertIn("/v1/nothing", body["error"]["message"])
        status, _ = self.raw(None, path="/v1/completions", method="GET")
        self.assertIn(status, (404, 405))
        self.assert_api_error(lambda: self.client.completions.create(model="gpt-9", prompt="x", max_tokens=2),
                              404, "model", "gpt-9", "deepinfer-tiny", code="model_not_found")
        self.assert_good_request_works()

    def test_wrong_types_and_ranges(self):
        c = self.client.completions.create
        cases = [
            (dict(temperature="hot"), "temperature", "must be a number"),
            (dict(max_tokens=-5), "max_tokens", "-5"),
            (dict(max_tokens=0), "max_tokens", ">= 1"),
            (dict(top_p=0), "top_p", "(0, 1]"),
            (dict(n=0), "n", "[1, 16]"),
            (dict(n=100), "n", "100"),
            (dict(presence_penalty=3), "presence_penalty", "[-2, 2]"),
            (dict(logprobs=50), "logprobs", "[0, 20]"),
            (dict(stop=["a", ""]), "stop", "stop[1]"),
            (dict(seed="seven"), "seed", "integer"),
            (dict(extra_body={"stop_token_ids": [5000]}), "stop_token_ids", "[0, 1024)"),
            (dict(extra_body={"top_k": -3}), "top_k", "-3"),
            (dict(extra_body={"min_p": 2}), "min_p", "[0, 1]"),
            (dict(extra_body={"min_tokens": 9}), "min_tokens", "max_tokens"),
            (dict(extra_body={"repetition_penalty": 0}), "repetition_penalty", "> 0"),
            (dict(stream_options={"include_usage": True}), "stream_options", "stream is true"),
        ]
        for kw, param, fragment in cases:
            with self.subTest(kw=kw):
                kw = dict(kw)
                kw.setdefault("max_tokens", 4)
                self.assert_api_error(lambda: c(model=MODEL, prompt="x", **kw), 400, param, fragment)
        self.assert_good_request_works()

    def test_prompt_errors(self):
        c = self.client.completions.create
        self.assert_api_error(lambda: c(model=MODEL, prompt=[1, 5000], max_tokens=2), 400, "prompt", "5000", "vocabulary")
        self.assert_api_error(lambda: c(model=MODEL, prompt="", max_tokens=2), 400, "prompt", "at least one token")
        self.assert_api_error(lambda: c(model=MODEL, prompt=list(range(3, 603)), max_tokens=2), 400, "prompt",
                              "600 tokens", "512", code="context_length_exceeded")
        self.assert_api_error(lambda: c(model=MODEL, prompt=["ok", "word " * 2000], max_tokens=2), 400, "prompt",
                              "prompt[1]", "512")
        self.assert_api_error(lambda: c(model=MODEL, prompt=list(range(3, 503)), max_tokens=100), 400, "max_tokens",
                              "512", "600", "500", "100", code="context_length_exceeded")
        chat = self.client.chat.completions.create
        self.assert_api_error(lambda: chat(model=MODEL, messages=[{"role": "wizard", "content": "x"}]), 400, "messages",
                              "messages[0]", "wizard")
        self.assert_api_error(lambda: chat(model=MODEL, messages=[{"role": "user", "content": "x " * 600}], max_tokens=2),
                              400, "messages", "512")
        self.assert_api_error(lambda: chat(model=MODEL, messages=[{"role": "user", "content": "x"}], max_tokens=2,
                                           top_logprobs=3), 400, "top_logprobs", "logprobs")
        image = [{"type": "text", "text": "what is this?"}, {"type": "image_url", "image_url": {"url": "data:,"}}]
        self.assert_api_error(lambda: chat(model=MODEL, messages=[{"role": "user", "content": image}], max_tokens=2),
                              400, "messages", "messages[0].content[1] is an image part", "text model only")
        self.assert_api_error(lambda: chat(model=MODEL, messages=[{"role": "user", "content": "x"}], max_tokens=2,
                                           response_format={"type": "json_object"}), 400, "response_format.type")
        self.assert_good_request_works()

    def test_unknown_fields_are_refused(self):
        for call in (lambda: self.client.completions.create(model=MODEL, prompt="x", max_tokens=2,
                                                            extra_body={"frobnicate": {"a": 1}}),
                     lambda: self.client.chat.completions.create(model=MODEL, max_tokens=2,
                                                                 messages=[{"role": "user", "content": "x"}],
                                                                 extra_body={"frobnicate": 1})):
            with self.assertRaises(openai.BadRequestError) as ctx:
                call()
            self.assertEqual(ctx.exception.status_code, 400)
            self.assertIn("Unrecognized request argument supplied: frobnicate", ctx.exception.body["message"])
            self.assertEqual(ctx.exception.body["param"], "frobnicate")
        # the known extensions pass
        r = self.client.completions.create(model=MODEL, prompt="x", max_tokens=2,
                                           extra_body={"ignore_eos": True, "top_k": 5, "min_p": 0.1})
        self.assertEqual(r.usage.completion_tokens, 2)

    def test_unknown_fields_ignored_when_allowed(self):
        server = ServerProcess("--allow-unknown-fields")
        try:
            r = server.client().completions.create(model=MODEL, prompt="x", max_tokens=2,
                                                   extra_body={"frobnicate": {"a": 1}, "ignore_eos": True})
            self.assertEqual(r.usage.completion_tokens, 2)
            self.assertIn("ignoring unknown request fields: frobnicate", server.log_text())
        finally:
            server.stop()

    def test_bad_requests_do_not_disturb_a_running_stream(self):
        result = {}

        def stream():
            chunks = list(self.client.completions.create(model=MODEL, prompt=[7, 8, 9], max_tokens=60, temperature=0,
                                                         stream=True, stream_options={"include_usage": True},
                                                         extra_body={"ignore_eos": True}))
            result["text"] = "".join(c.choices[0].text for c in chunks if c.choices)
            result["usage"] = chunks[-1].usage
        reference = self.client.completions.create(model=MODEL, prompt=[7, 8, 9], max_tokens=60, temperature=0,
                                                   extra_body={"ignore_eos": True}).choices[0].text
        t = threading.Thread(target=stream)
        t.start()
        bad = [b"{", b"\xff", b'{"prompt": 5}', b'{"prompt": "x", "max_tokens": -1}', b'{"prompt": [99999]}',
               json.dumps({"prompt": list(range(3, 700))}).encode()]
        while t.is_alive():
            for body in bad:
                status, _ = self.raw(body)
                self.assertEqual(status, 400)
            time.sleep(0.01)
        t.join()
        self.assertEqual(result["usage"].completion_tokens, 60)
        self.assertEqual(result["text"], reference)
        self.assert_good_request_works()


class ClientDisconnectTest(OneServerTest):
    """A client that goes away mid-stream: on a server of its own, whose model length lets the stream run long."""
    SERVER_ARGS = ("--no-prefix-caching",)

    def wait_for(self, predicate, timeout=15.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            m = self.server.metrics()
            if predicate(m):
                return m
            time.sleep(0.05)
        self.fail(f"condition not reached; metrics: {self.server.metrics()}")

    def test_client_disconnect_cancels_the_request(self):
        before = self.wait_for(lambda m: m["deepinfer_num_requests_running{model_name=\"deepinfer-tiny\"}"] == 0)
        # (20000 tokens take the tiny model ~25 s: still running when the client goes; the 400 of before took ~0.12
        # s, which a loaded machine could let it finish)
        body = {"model": MODEL, "prompt": [5, 6, 7], "max_tokens": 20000, "ignore_eos": True, "stream": True}
        conn = http.client.HTTPConnection("127.0.0.1", self.server.port, timeout=60)
        try:
            conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            self.assertEqual(r.status, 200)
            self.assertEqual(r.getheader("Content-Type"), "text/event-stream")
            lines = 0
            while lines < 3:
                line = r.readline()
                self.assertTrue(line, "stream ended early")
                if line.startswith(b"data: "):
                    lines += 1
            running = self.server.metrics()["deepinfer_num_requests_running{model_name=\"deepinfer-tiny\"}"]
            self.assertEqual(running, 1)
        finally:
            conn.close()
        # The connection is closed: the server notices at its next write and aborts the engine request.
        after = self.wait_for(lambda m: m["deepinfer_num_requests_running{model_name=\"deepinfer-tiny\"}"] == 0
                              and m["deepinfer_num_http_requests_in_flight{model_name=\"deepinfer-tiny\"}"] == 0)
        self.assertEqual(after["deepinfer_engine_requests_aborted_total"], before["deepinfer_engine_requests_aborted_total"] + 1)
        self.assertEqual(after["deepinfer_request_success_total{finished_reason=\"abort\"}"],
                         before["deepinfer_request_success_total{finished_reason=\"abort\"}"] + 1)
        self.assertLess(after["deepinfer_generation_tokens_total"] - before["deepinfer_generation_tokens_total"], 20000)
        # Its KV blocks are back in both pools (no prefix cache holds them on this server).
        self.assertEqual(after["deepinfer_kv_cache_blocks{pool=\"compressed\",state=\"used\"}"], 0)
        self.assertEqual(after["deepinfer_kv_cache_blocks{pool=\"window\",state=\"used\"}"], 0)
        self.assert_good_request_works()



if __name__ == "__main__":
    unittest.main()
