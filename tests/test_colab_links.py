"""colab_links.md is generated from notebooks/ and never stale."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import NOTEBOOKS, ROOT

from tmm_course.teach import colab


def test_colab_links_match_notebooks():
    stored = (ROOT / colab.LINKS_FILE).read_text(encoding="utf-8")
    assert stored == colab.render_links(ROOT), "stale: run `python -m tmm_course.teach.colab`"


def test_every_notebook_has_a_badge():
    stored = (ROOT / colab.LINKS_FILE).read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        assert colab.colab_url(f"notebooks/{path.name}") in stored


def test_every_notebook_asks_colab_for_a_t4_and_no_more():
    for path in NOTEBOOKS:
        metadata = json.loads(path.read_text(encoding="utf-8"))["metadata"]
        assert metadata["accelerator"] == "GPU", path.name
        assert metadata["colab"]["gpuType"] == "T4", f"{path.name}: run `make colab-links`"


def test_the_generator_sets_the_runtime_a_notebook_asks_for():
    notebook = {"metadata": {"accelerator": "GPU", "colab": {"gpuType": "A100", "x": 1}}}
    assert colab.sync_runtime(notebook)
    assert notebook["metadata"]["colab"] == {"gpuType": "T4", "x": 1}
    assert not colab.sync_runtime(notebook)


def test_url_names_repository_and_branch():
    url = colab.colab_url("notebooks/x.ipynb", "me/fork", "dev")
    assert url == "https://colab.research.google.com/github/me/fork/blob/dev/notebooks/x.ipynb"


def test_install_cell_names_the_same_repository_and_branch():
    source = colab.install_cell_source("me/fork", "dev")
    assert "git+https://github.com/me/fork@dev" in source
    assert 'if "google.colab" in sys.modules:' in source


def test_generator_rewrites_a_stale_install_cell(tmp_path):
    import shutil

    (tmp_path / "notebooks").mkdir()
    target = tmp_path / "notebooks" / NOTEBOOKS[0].name
    shutil.copy(NOTEBOOKS[0], target)
    notebook = json.loads(target.read_text())
    install = next(
        c for c in notebook["cells"] if colab.INSTALL_TAG in c["metadata"].get("tags", [])
    )
    install["source"] = ["stale"]
    install["metadata"] = {"tags": [colab.INSTALL_TAG]}
    target.write_text(json.dumps(notebook))
    assert colab.main(["--root", str(tmp_path)]) == 0
    fixed = json.loads(target.read_text())
    install = next(c for c in fixed["cells"] if colab.INSTALL_TAG in c["metadata"].get("tags", []))
    assert "".join(install["source"]) == colab.install_cell_source()
    assert install["metadata"]["cellView"] == "form"  # and collapsed, even if it was not
    assert install["metadata"]["jupyter"] == {"source_hidden": True}
    assert (tmp_path / colab.LINKS_FILE).read_text() == colab.render_links(tmp_path)


def run_install_cell(url: str, workdir: Path, **env: str) -> subprocess.CompletedProcess:
    """Run notebook 0's install cell as Colab would (``.ci/install_command.py``: its own code,
    ``google.colab`` faked) with ``url`` for the repository, from ``workdir``."""
    script = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "install_command.py"), str(NOTEBOOKS[0]), url],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    environ = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, "-c", script], cwd=workdir, capture_output=True, text=True,
        env={**environ, **env}, timeout=600,
    )  # fmt: skip


def test_install_cell_stops_with_a_plain_error_when_the_repository_is_unreachable(tmp_path):
    missing = f"git+file://{tmp_path}/no-such-repository@main"
    done = run_install_cell(missing, tmp_path)
    assert done.returncode != 0, "the cell went on although nothing was installed"
    error = done.stderr
    assert "RuntimeError: Could not install the course from" in error
    assert missing in error  # the URL it tried
    assert "no-such-repository" in error.split("pip said:")[1]  # git's own words come along
    for advice in ("must be public", "make colab-links", "upload a wheel"):
        assert advice in error
    assert "ModuleNotFoundError" not in error


def test_install_cell_installs_an_uploaded_wheel_first(tmp_path):
    (tmp_path / "tmm_course-0.1.0-py3-none-any.whl").write_bytes(b"not a zip file")
    done = run_install_cell(f"git+file://{tmp_path}/no-such-repository", tmp_path)
    assert done.returncode != 0
    assert "Could not install the course from tmm_course-0.1.0-py3-none-any.whl" in done.stderr


def test_install_cell_installs_the_course_from_a_reachable_repository(tmp_path):
    """The cell against this checkout's last commit (git+file), into a folder of its own:
    the package is built and found, the dependencies (already here) left alone."""
    target = tmp_path / "site"
    target.mkdir()
    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    done = run_install_cell(
        f"git+file://{ROOT}@{head}", tmp_path,
        PIP_TARGET=str(target), PIP_NO_DEPS="1", PYTHONPATH=str(target),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == "installed"
    assert (target / "tmm_course" / "teach" / "colab.py").is_file()


def test_install_cell_script_refuses_a_cell_without_the_url(tmp_path):
    notebook = json.loads(NOTEBOOKS[0].read_text())
    install = next(
        c for c in notebook["cells"] if colab.INSTALL_TAG in c["metadata"].get("tags", [])
    )
    install["source"] = ["import sys\n"]
    path = tmp_path / "x.ipynb"
    path.write_text(json.dumps(notebook))
    done = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "install_command.py"), str(path), "git+file:///x"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert done.returncode != 0
    assert "expected one repository URL" in done.stderr
