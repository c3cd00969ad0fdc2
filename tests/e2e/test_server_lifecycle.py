"""Admission and lifecycle of `deepinfer serve`: API keys (401), --max-concurrent (429 past the limit), a full
engine queue (429), SIGTERM draining (in-flight requests finish, exit code 0, no new connections) and a
second signal cancelling what is still running. Env: DEEPINFER_BIN.
"""
import json
import pathlib
import signal
import socket
import sys
import threading
import time
import unittest

import openai

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from server_fixture import ServerProcess  # noqa: E402

MODEL = "deepinfer-tiny"


def stream_in_thread(client, max_tokens, started, stop=None):
    """Runs a streamed completion in a thread; `started` is set at its first chunk; once `stop` is set the client
    closes the stream (a disconnect: the server cancels the request). Returns (thread, result)."""
    result = {"chunks": [], "error": None}

    def run():
        try:
            with client.completions.create(model=MODEL, prompt=[9, 8, 7], max_tokens=max_tokens, stream=True,
                                           stream_options={"include_usage": True},
                                           extra_body={"ignore_eos": True}) as stream:
                for chunk in stream:
                    result["chunks"].append(chunk)
                    started.set()
                    if stop is not None and stop.is_set():
                        break
        except Exception as e:  # noqa: BLE001 - inspected by the test
            result["error"] = e
            started.set()
    t = threading.Thread(target=run)
    t.start()
    return t, result


def finish_reason(result):
    reasons = [c.choices[0].finish_reason for c in result["chunks"] if c.choices and c.choices[0].finish_reason]
    return reasons[-1] if reasons else None


class ServerLifecycleTest(unittest.TestCase):
    def test_api_key_and_max_concurrent(self):
        server = ServerProcess("--api-key", "s3cret", "--max-concurrent", 2)
        try:
            with self.assertRaises(openai.AuthenticationError) as ctx:
                server.client(api_key="wrong").completions.create(model=MODEL, prompt="x", max_tokens=2)
            self.assertEqual(ctx.exception.body["code"], "invalid_api_key")
            with self.assertRaises(openai.AuthenticationError):
                server.client(api_key="wrong").models.list()
            self.assertEqual(server.get("/health")[0], 200)   # health and metrics need no key
            self.assertEqual(server.get("/metrics")[0], 200)
            client = server.client(api_key="s3cret")
            self.assertEqual(client.completions.create(model=MODEL, prompt="x", max_tokens=2).object, "text_completion")

            # Two streams fill --max-concurrent 2 until the test closes them (60000 tokens: minutes of streaming, so
            # they are running whatever the machine's load or the build, sanitizers included); a third request is
            # refused with 429 at once.
            events, stop = [threading.Event(), threading.Event()], threading.Event()
            runs = [stream_in_thread(client, 60000, e, stop) for e in events]
            for e in events:
                self.assertTrue(e.wait(60))
            t0 = time.time()
            with self.assertRaises(openai.RateLimitError) as ctx:
                client.completions.create(model=MODEL, prompt="x", max_tokens=2)
            self.assertLess(time.time() - t0, 5)
            self.assertEqual(ctx.exception.body["code"], "too_many_requests")
            self.assertIn("--max-concurrent", ctx.exception.body["message"])
            stop.set()
            for t, result in runs:
                t.join(60)
                self.assertFalse(t.is_alive())
                self.assertIsNone(result["error"])
                self.assertTrue(result["chunks"])
            # Slots are released once the server has seen the two disconnects: requests are admitted again.
            deadline = time.time() + 60
            while True:
                try:
                    r = client.completions.create(model=MODEL, prompt="x", max_tokens=2)
                    break
                except openai.RateLimitError:
                    self.assertLess(time.time(), deadline, "the closed streams' slots were never released")
                    time.sleep(0.05)
            self.assertEqual(r.usage.completion_tokens, 2)
        finally:
            server.stop()

    def test_full_engine_queue_is_429(self):
        server = ServerProcess("--max-waiting", 0)
        try:
            with self.assertRaises(openai.RateLimitError) as ctx:
                server.client().completions.create(model=MODEL, prompt="x", max_tokens=2)
            self.assertEqual(ctx.exception.body["code"], "queue_full")
            self.assertIn("queue is full", ctx.exception.body["message"])
            self.assertEqual(server.get("/health")[0], 200)
        finally:
            server.stop()

    def test_sigterm_drains_in_flight_requests(self):
        server = ServerProcess()
        try:
            started = threading.Event()
            t, result = stream_in_thread(server.client(), 48, started)
            self.assertTrue(started.wait(60))
            server.signal(signal.SIGTERM)
            # The listening socket closes: new connections are refused.
            deadline = time.time() + 10
            refused = False
            while time.time() < deadline and not refused:
                try:
                    socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
                    time.sleep(0.05)
                except OSError:
                    refused = True
            self.assertTrue(refused, "the server still accepts connections while draining")
            t.join(120)
            self.assertIsNone(result["error"])
            self.assertEqual(finish_reason(result), "length")
            self.assertEqual(result["chunks"][-1].usage.completion_tokens, 48)
            self.assertEqual(server.proc.wait(timeout=60), 0)
            self.assertIn("draining", server.log_text())
        finally:
            server.stop()

    def test_second_signal_cancels_in_flight_requests(self):
        server = ServerProcess()
        try:
            started = threading.Event()
            # (20000 tokens take the tiny model ~25 s: still running when the second signal comes 0.3 s later; 2000
            # took ~0.8 s, close to that under load)
            t, result = stream_in_thread(server.client(), 20000, started)
            self.assertTrue(started.wait(60))
            server.signal(signal.SIGTERM)
            time.sleep(0.3)
            server.signal(signal.SIGINT)
            t.join(60)
            self.assertFalse(t.is_alive())
            self.assertIsNone(result["error"])
            self.assertEqual(finish_reason(result), "abort")
            self.assertLess(result["chunks"][-1].usage.completion_tokens, 20000)
            self.assertEqual(server.proc.wait(timeout=60), 0)
        finally:
            server.stop()


if __name__ == "__main__":
    unittest.main()
