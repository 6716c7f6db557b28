"""The README's run command (`make course`) serves JupyterLab with every notebook listed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request

from conftest import NOTEBOOKS, ROOT


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read()


def test_make_course_serves_every_notebook():
    port, token = free_port(), "tmm-test-token"
    args = f"--no-browser --ServerApp.ip=127.0.0.1 --port={port} --IdentityProvider.token={token}"
    server = subprocess.Popen(
        ["make", "-s", "course", f"LAB_ARGS={args}"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                listing = json.loads(get(f"{base}/api/contents/notebooks?token={token}"))
                break
            except OSError:
                assert server.poll() is None, server.stdout.read().decode()
                assert time.monotonic() < deadline, "JupyterLab did not answer within 90 s"
                time.sleep(0.5)
        served = sorted(item["name"] for item in listing["content"] if item["type"] == "notebook")
        assert served == [p.name for p in NOTEBOOKS]
        assert b"JupyterLab" in get(f"{base}/lab?token={token}")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
