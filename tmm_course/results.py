"""The GPU results files in ``results/``: read and written here, each carrying where, when
and how it was measured."""

from __future__ import annotations

import datetime
import json
import platform
import sys
from pathlib import Path

import torch

RESULTS = Path(__file__).resolve().parents[1] / "results"


def provenance(module: str, argv: list[str] | None = None) -> dict:
    """Device, capability, versions, date and the command (``python -m module args``)."""
    import triton

    args = sys.argv[1:] if argv is None else argv
    return {
        "device": torch.cuda.get_device_name(0),
        "capability": list(torch.cuda.get_device_capability(0)),
        "versions": {
            "python": platform.python_version(),
            "torch": torch.__version__,
            "triton": triton.__version__,
        },
        "date": datetime.date.today().isoformat(),
        "command": " ".join(["python", "-m", module, *args]),
    }


def stored(name: str) -> dict:
    """A committed results file, ``results/<name>``."""
    return json.loads((RESULTS / name).read_text(encoding="utf-8"))


def write(path: Path, data: dict) -> None:
    """Write measurements as indented JSON, creating the folder if needed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
