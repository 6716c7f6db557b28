"""Where, when and how a GPU figure was measured: stored next to every result we ship."""

from __future__ import annotations

import datetime
import platform
import sys

import torch


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
