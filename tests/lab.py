"""Start the README's JupyterLab (`make course`) on a free loopback port, and stop it."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "tmm-test-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.read()


def quiet_settings(folder: Path) -> Path:
    """User settings for a test server: every cell kept in the page (no windowing), no news,
    and no autosave, so that running the course never writes outputs into notebooks/."""
    for plugin, values in {
        # autosave off; the 1 s interval makes any save show up at once in the tests
        "@jupyterlab/docmanager-extension/plugin": {"autosave": False, "autosaveInterval": 1},
        "@jupyterlab/notebook-extension/tracker": {"windowingMode": "none"},
        "@jupyterlab/apputils-extension/notification": {"fetchNews": "false"},
    }.items():
        path = folder / f"{plugin}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values))
    return folder


@contextlib.contextmanager
def jupyterlab(workdir: Path, extra_env: dict[str, str] | None = None) -> Iterator[str]:
    """Run `make course` listening on 127.0.0.1 only, with its own settings and workspace
    folders; yield its base URL; stop it (and its kernels) on the way out, failing or not."""
    port = free_port()
    env = {
        **os.environ,
        "JUPYTERLAB_SETTINGS_DIR": str(quiet_settings(workdir / "settings")),
        "JUPYTERLAB_WORKSPACES_DIR": str(workdir / "workspaces"),
        **(extra_env or {}),
    }
    args = (
        f"--no-browser --ServerApp.ip=127.0.0.1 --port={port} "
        f"--IdentityProvider.token={TOKEN} --LabApp.expose_app_in_browser=True"
    )
    log = (workdir / "jupyterlab.log").open("w")
    server = subprocess.Popen(
        ["make", "-s", "course", f"LAB_ARGS={args}"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                get(f"{base}/api/status?token={TOKEN}")
                break
            except OSError:
                assert server.poll() is None, (workdir / "jupyterlab.log").read_text()[-2000:]
                assert time.monotonic() < deadline, "JupyterLab did not answer within 90 s"
                time.sleep(0.5)
        yield base
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
        log.close()
