"""Fixtures of the client's tests: a real `lucent serve` (node bin/lucent.js, a temporary DATA_DIR, a free port, the
test models of data/test-models, callbacks to 127.0.0.1 allowed, the high rate limits of test/helper.ts, one
engine worker with one thread on the CPU, so that a 512x512 general_4x job runs long enough to be canceled), keys made with `lucent keys create`, real PNG and MP4 inputs, and a local webhook
receiver."""
from __future__ import annotations

import http.server
import os
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[3]
BIN = ROOT / "bin" / "lucent.js"
NODE = shutil.which("node") or "node"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def png(width: int, height: int) -> bytes:
    """A real RGB PNG (a gradient), width x height."""
    raw = b"".join(b"\x00" + b"".join(bytes((x * 255 // max(1, width - 1), y * 255 // max(1, height - 1), (x * 7 + y * 3) % 256))
                                      for x in range(width)) for y in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def png_size(data: bytes) -> tuple:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


@dataclass
class Key:
    key: str
    secret: str


@dataclass
class Server:
    base: str
    env: Dict[str, str]
    proc: subprocess.Popen
    keys: List[Key] = field(default_factory=list)

    def create_key(self, coins: int, *extra: str) -> Key:
        r = subprocess.run([NODE, str(BIN), "keys", "create", "--coins", str(coins), *extra], env=self.env,
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"lucent keys create exited {r.returncode}: {r.stderr[-2000:]}")
        out = r.stdout.rstrip().split("\n")
        return Key(key=out[-1].strip(), secret=out[-2].strip())


def start_server(tmp: Path, **env_extra: str) -> Server:
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = {
        **os.environ, "DATA_DIR": str(tmp), "PORT": str(port), "HOST": "127.0.0.1",
        "LUCENT_MODEL_DIR": os.environ.get("LUCENT_MODEL_DIR", str(ROOT / "data" / "test-models")),
        "LUCENT_FETCH_ALLOW": "127.0.0.1", "LUCENT_LOG_LEVEL": "warn", "LUCENT_PUBLIC_URL": base,
        # every key's bucket holds max(burst, its rate) tokens: keys at the default rate get test/helper.ts's high
        # limits, a key made with `--rate 1` a bucket of 1 token (the Retry-After tests)
        "LUCENT_RATE_BURST": "1", "LUCENT_RATE_PER_SEC": "100000", "LUCENT_WORKERS": "1",
        "LUCENT_BACKEND": "cpu", "LUCENT_ENGINE_THREADS": "1", "LUCENT_WEBHOOK_POLL_MS": "50", **env_extra,
    }
    # the database (and its schema) exists before the server starts: the first key makes it
    first = Server(base, env, None)  # type: ignore[arg-type]
    key = first.create_key(1000)
    # the other keys (before the server: its start holds the database a moment): one with no coins, one at 1
    # request per second
    with ThreadPoolExecutor(2) as pool:
        more = list(pool.map(lambda extra: first.create_key(*extra), [(0,), (1000, "--rate", "1")]))
    proc = subprocess.Popen([NODE, str(BIN), "serve"], env=env, cwd=str(ROOT), stdin=subprocess.DEVNULL)
    srv = Server(base, env, proc, [key, *more])
    deadline = time.monotonic() + 180
    while True:
        if proc.poll() is not None:
            raise RuntimeError(f"lucent serve exited with {proc.returncode}")
        try:
            if httpx.get(f"{base}/api/models", headers={"apikey": key.key}, timeout=2).status_code == 200:
                return srv
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError("lucent serve did not answer within 180 s")
        time.sleep(0.2)


def stop_server(srv: Server) -> None:
    srv.proc.terminate()
    try:
        srv.proc.wait(10)
    except subprocess.TimeoutExpired:
        srv.proc.kill()
        srv.proc.wait()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory):
    srv = start_server(tmp_path_factory.mktemp("lucent-data"))
    yield srv
    stop_server(srv)


@pytest.fixture(scope="session")
def key(server: Server) -> Key:
    """A key with 1000 coins (and its webhook secret), shared by the tests: they check balances as differences."""
    return server.keys[0]


@pytest.fixture(scope="session")
def poor_key(server: Server) -> Key:
    return server.keys[1]


@pytest.fixture(scope="session")
def slow_key(server: Server) -> Key:
    """A key limited to 1 request per second (a bucket of one token): its second call in a second gets 429."""
    return server.keys[2]


@pytest.fixture(scope="session")
def clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real 1.2 s 32x24 H.264 clip made by ffmpeg."""
    if not shutil.which("ffmpeg"):
        pytest.skip("ffmpeg not installed")
    out = tmp_path_factory.mktemp("clip") / "clip.mp4"
    subprocess.run(["ffmpeg", "-v", "error", "-f", "lavfi", "-i", "testsrc=duration=1.2:size=32x24:rate=10",
                    "-pix_fmt", "yuv420p", str(out)], check=True)
    return out


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@dataclass
class Delivery:
    path: str
    headers: Dict[str, str]
    body: bytes


class Receiver:
    """A local HTTP server that records every request (path, headers, raw body): a POST is answered 204, a GET
    with the bytes `result bytes`."""

    def __init__(self) -> None:
        self.got: List[Delivery] = []
        self.cond = threading.Condition()
        recv = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with recv.cond:
                    recv.got.append(Delivery(self.path, dict(self.headers.items()), body))
                    recv.cond.notify_all()
                self.send_response(204)
                self.end_headers()

            def do_GET(self) -> None:  # noqa: N802
                with recv.cond:
                    recv.got.append(Delivery(self.path, dict(self.headers.items()), b""))
                    recv.cond.notify_all()
                body = b"result bytes"
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def wait_for(self, path: str, n: int = 1, timeout: float = 30) -> List[Delivery]:
        end = time.monotonic() + timeout
        with self.cond:
            while True:
                got = [d for d in self.got if d.path == path]
                if len(got) >= n:
                    return got
                left = end - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{len(got)} deliveries to {path} after {timeout} s")
                self.cond.wait(left)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def receiver():
    r = Receiver()
    yield r
    r.close()


def pytest_report_header(config: pytest.Config) -> Optional[str]:
    return f"lucent: {BIN} with {NODE}, python {sys.version.split()[0]}"
