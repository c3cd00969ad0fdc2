"""Starts `deepinfer serve` on a free loopback port for the e2e tests and always stops it.

The server is started with --port 0 (it binds a free port and logs it), its log goes to a temporary file, and
it is ready once GET /health answers 200. stop() sends SIGTERM, waits, and kills the process if it lingers.
Env: DEEPINFER_BIN (the CLI); the built-in tiny checkpoint comes from the default cache directory (generated
atomically on first use, so concurrent test processes are safe).
"""
import json
import os
import re
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

BIN = os.environ.get("DEEPINFER_BIN", "build/release/tools/deepinfer")
SANITIZER_REPORT = re.compile(r"WARNING: ThreadSanitizer|ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:")
STARTUP_TIMEOUT = 300  # seconds; the first run generates the built-in checkpoint
CLIENT_IDLE_EXPIRY = 1.0  # seconds an idle pooled client connection is kept; the server keeps it 5 (client())


class ServerProcess:
    def __init__(self, *args, threads=2, mpi_ranks=0):
        """mpi_ranks > 0 starts the server under `mpirun -np mpi_ranks` (rank 0 serves, the others follow)."""
        self.log = tempfile.NamedTemporaryFile(prefix="deepinfer-serve-", suffix=".log", delete=False)
        cmd = [BIN, "serve", "--host", "127.0.0.1", "--port", "0", "--threads", str(threads), *map(str, args)]
        env = None
        if mpi_ranks:
            cmd = ["mpirun", "--oversubscribe", "--bind-to", "none", "-np", str(mpi_ranks)] + cmd
            env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.port = None
        try:
            self._wait_ready()
        except BaseException:
            self.stop()
            raise

    def log_text(self):
        with open(self.log.name, encoding="utf-8", errors="replace") as f:
            return f.read()

    def _wait_ready(self):
        deadline = time.time() + STARTUP_TIMEOUT
        while self.port is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"deepinfer serve exited with {self.proc.returncode}:\n{self.log_text()}")
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", self.log_text())
            if m:
                self.port = int(m.group(1))
            elif time.time() > deadline:
                raise RuntimeError(f"deepinfer serve did not start:\n{self.log_text()}")
            else:
                time.sleep(0.05)
        while True:
            try:
                if self.get("/health")[0] == 200:
                    return
            except OSError:
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError(f"/health never answered 200:\n{self.log_text()}")
            time.sleep(0.05)

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def client(self, **kwargs):
        """The official OpenAI client, without retries (so that every error reaches the test) and with idle pooled
        connections dropped after CLIENT_IDLE_EXPIRY seconds, well before the server closes them."""
        import openai
        kwargs.setdefault("api_key", "unused")
        kwargs.setdefault("max_retries", 0)
        kwargs.setdefault("timeout", 120)
        if "http_client" not in kwargs:
            # Why: the client's transport (httpx) keeps an idle connection for 5 s, the server's keep-alive timeout
            # (ServerConfig::keep_alive_seconds) is 5 s as well, and the client's clock starts when it has read the
            # response, after the server's. A request sent ~5 s after the last one on a connection can meet the
            # server's close in flight: "Server disconnected without sending a response" (HTTP/1.1's keep-alive
            # race, RFC 9112 section 9.3.1). Clients retry such requests (the OpenAI client twice by default);
            # these tests run without retries, so their client lets go first. Seen once, under load, in
            # test_server_api's 70,000-token request, which takes the client ~2 s to build.
            limits = openai.DEFAULT_CONNECTION_LIMITS  # httpx.Limits or httpx2.Limits, as this openai uses
            uses_httpx2 = type(limits).__module__.startswith("httpx2")
            make = openai.DefaultHttpx2Client if uses_httpx2 else openai.DefaultHttpxClient
            kwargs["http_client"] = make(limits=type(limits)(max_connections=limits.max_connections,
                                                             max_keepalive_connections=limits.max_keepalive_connections,
                                                             keepalive_expiry=CLIENT_IDLE_EXPIRY))
        return openai.OpenAI(base_url=self.url + "/v1", **kwargs)

    def request(self, method, path, body=None, headers=None, timeout=60):
        """(status, body bytes) of a raw HTTP request; body may be bytes or a JSON-able object."""
        data = body if isinstance(body, (bytes, type(None))) else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers or {})
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def get(self, path):
        return self.request("GET", path)

    def metrics(self):
        """The /metrics exposition as {series (name + labels): value}."""
        status, text = self.get("/metrics")
        assert status == 200, status
        out = {}
        for line in text.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def signal(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        log = self.log_text()
        if self.proc.returncode != 0:
            print(f"deepinfer serve exited with {self.proc.returncode}; its log:\n{log[-4000:]}")
        self.log.close()
        os.unlink(self.log.name)
        # A sanitizer build (presets asan, tsan) reports into the log; a report fails the test that ran the server,
        # also one that came at shutdown, after every request had its answer.
        report = SANITIZER_REPORT.search(log)
        if report:
            raise AssertionError(f"sanitizer report in the server's log:\n{log[report.start():][:6000]}")
