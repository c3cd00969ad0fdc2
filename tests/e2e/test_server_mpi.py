"""`mpirun -np 2 deepinfer serve --tp 2 --ep 2`: rank 0 serves the OpenAI API and the other rank follows the
step plan; greedy completions through the official client equal a one-rank `deepinfer generate`, concurrent
streams all finish; SIGUSR2 to mpirun (forwarded as is) drains rank 0, which ends the followers, and mpirun
exits 0; SIGTERM to mpirun (which Open MPI escalates to SIGKILL after a few seconds) still gets rank 0's
drain and leaves no process behind. Env: DEEPINFER_BIN.
"""
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
import unittest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from server_fixture import BIN, ServerProcess  # noqa: E402

MODEL = "deepinfer-tiny"
PROMPTS = [[5, 6, 7, 8], [100, 200, 300, 400, 500, 17, 18], [33, 44, 55, 66, 77, 88, 99, 11, 22]]


def one_rank_greedy(prompt, max_tokens):
    out = subprocess.run([BIN, "generate", "--threads", "1", "--prompt-ids", ",".join(map(str, prompt)),
                          "--max-tokens", str(max_tokens), "--temperature", "0", "--ignore-eos", "--json"],
                         capture_output=True, text=True, timeout=300, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["text"]


class MpiServer(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = ServerProcess("--tp", "2", "--ep", "2", threads=1, mpi_ranks=2)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_greedy_completion_equals_one_rank(self):
        client = self.server.client()
        for prompt in PROMPTS:
            got = client.completions.create(model=MODEL, prompt=prompt, max_tokens=12, temperature=0,
                                            extra_body={"ignore_eos": True})
            self.assertEqual(got.choices[0].text, one_rank_greedy(prompt, 12), f"prompt {prompt}")
            self.assertEqual(got.usage.completion_tokens, 12)

    def test_concurrent_streams_finish(self):
        client = self.server.client()
        results, errors = [None] * 6, []

        def stream(i):
            try:
                text = ""
                for chunk in client.chat.completions.create(
                        model=MODEL, messages=[{"role": "user", "content": f"question {i}"}], max_tokens=10,
                        temperature=0, stream=True, extra_body={"ignore_eos": True}):
                    if chunk.choices and chunk.choices[0].delta.content:
                        text += chunk.choices[0].delta.content
                results[i] = text
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=stream, args=(i,)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=300)
        self.assertEqual(errors, [])
        self.assertTrue(all(r is not None for r in results), results)


def alive(pid):
    """True while the process exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class MpiServerShutdown(unittest.TestCase):
    def stop_with(self, sig):
        server = ServerProcess("--tp", "2", threads=1, mpi_ranks=2)
        try:
            # The ranks are mpirun's children (other tests may run servers of their own meanwhile).
            ranks = [int(p) for p in subprocess.run(["pgrep", "-P", str(server.proc.pid)], capture_output=True,
                                                    text=True).stdout.split()]
            self.assertEqual(len(ranks), 2, "expected mpirun to have started 2 ranks")
            client = server.client()
            client.completions.create(model=MODEL, prompt=[1, 2, 3], max_tokens=4, temperature=0)
            server.signal(sig)
            code = server.proc.wait(timeout=120)
            log = server.log_text()
        finally:
            server.stop()
        # mpirun may exit a moment before its ranks do: give them 30 s (a zombie awaiting its reaper is gone).
        deadline = time.time() + 30
        while True:
            left = [pid for pid in ranks if alive(pid)]
            if not left or time.time() > deadline:
                break
            time.sleep(0.1)
        self.assertEqual(left, [], "ranks left behind")
        self.assertIn("serve: signal", log)  # rank 0 took the signal (followers ignore it)
        return code, log

    def test_sigusr2_drains_and_exits_zero(self):
        code, log = self.stop_with(signal.SIGUSR2)
        self.assertEqual(code, 0, log[-3000:])
        self.assertIn("serve: drained, exiting", log)

    def test_sigterm_ends_every_rank(self):
        # Open MPI's own SIGTERM handling kills the job a few seconds later whatever the ranks do; what we
        # guarantee is that nothing hangs or stays behind.
        self.stop_with(signal.SIGTERM)


if __name__ == "__main__":
    unittest.main()
