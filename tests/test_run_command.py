"""The README's run command (`make course`) serves JupyterLab with every notebook listed."""

from __future__ import annotations

import json

from conftest import NOTEBOOKS
from lab import TOKEN, get, jupyterlab


def test_make_course_serves_every_notebook(tmp_path):
    with jupyterlab(tmp_path) as base:
        listing = json.loads(get(f"{base}/api/contents/notebooks?token={TOKEN}"))
        served = sorted(i["name"] for i in listing["content"] if i["type"] == "notebook")
        assert served == [p.name for p in NOTEBOOKS]
        assert b"JupyterLab" in get(f"{base}/lab?token={TOKEN}")
