"""The README's run command (`make course`) serves JupyterLab with every notebook listed and
no news prompt."""

from __future__ import annotations

import json

from conftest import NOTEBOOKS
from lab import TOKEN, get, jupyterlab


def test_make_course_serves_every_notebook_and_asks_nothing_about_news(tmp_path):
    with jupyterlab(tmp_path) as base:
        # the learner's JupyterLab defaults to never fetching news (so it never asks)
        notification = "@jupyterlab/apputils-extension:notification"
        settings = json.loads(get(f"{base}/lab/api/settings/{notification}?token={TOKEN}"))
        assert settings["schema"]["properties"]["fetchNews"]["default"] == "false"
        assert settings["schema"]["properties"]["checkForUpdates"]["default"] is False
        listing = json.loads(get(f"{base}/api/contents/notebooks?token={TOKEN}"))
        served = sorted(i["name"] for i in listing["content"] if i["type"] == "notebook")
        assert served == [p.name for p in NOTEBOOKS]
        assert b"JupyterLab" in get(f"{base}/lab?token={TOKEN}")
