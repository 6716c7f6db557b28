"""colab_links.md is generated from notebooks/ and never stale."""

from __future__ import annotations

from conftest import NOTEBOOKS, ROOT

from tmm_course.teach import colab


def test_colab_links_match_notebooks():
    stored = (ROOT / colab.LINKS_FILE).read_text(encoding="utf-8")
    assert stored == colab.render_links(ROOT), "stale: run `python -m tmm_course.teach.colab`"


def test_every_notebook_has_a_badge():
    stored = (ROOT / colab.LINKS_FILE).read_text(encoding="utf-8")
    for path in NOTEBOOKS:
        assert colab.colab_url(f"notebooks/{path.name}") in stored


def test_url_names_repository_and_branch():
    url = colab.colab_url("notebooks/x.ipynb", "me/fork", "dev")
    assert url == "https://colab.research.google.com/github/me/fork/blob/dev/notebooks/x.ipynb"


def test_install_cell_names_the_same_repository_and_branch():
    source = colab.install_cell_source("me/fork", "dev")
    assert "git+https://github.com/me/fork@dev" in source
    assert 'if "google.colab" in sys.modules:' in source


def test_generator_rewrites_a_stale_install_cell(tmp_path):
    import json
    import shutil

    (tmp_path / "notebooks").mkdir()
    target = tmp_path / "notebooks" / NOTEBOOKS[0].name
    shutil.copy(NOTEBOOKS[0], target)
    notebook = json.loads(target.read_text())
    install = next(
        c for c in notebook["cells"] if colab.INSTALL_TAG in c["metadata"].get("tags", [])
    )
    install["source"] = ["stale"]
    target.write_text(json.dumps(notebook))
    assert colab.main(["--root", str(tmp_path)]) == 0
    fixed = json.loads(target.read_text())
    assert colab.install_cell_source() in ["".join(c["source"]) for c in fixed["cells"]]
    assert (tmp_path / colab.LINKS_FILE).read_text() == colab.render_links(tmp_path)
