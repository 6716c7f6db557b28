"""Print a notebook's Colab install command as a shell command, with the repository URL
replaced by ``url``:  python .ci/install_command.py NOTEBOOK URL"""

import json
import re
import sys

notebook, url = sys.argv[1], sys.argv[2]
with open(notebook, encoding="utf-8") as file:
    cells = json.load(file)["cells"]
cell = next(c for c in cells if "colab-install" in c["metadata"].get("tags", []))
source = "".join(cell["source"])
line = next(line.strip() for line in source.splitlines() if line.strip().startswith("%pip install"))
line = re.sub(r"git\+https://github\.com/[^\"' ]+", url, line)
print(line.replace("%pip", '"$PY" -m pip', 1))  # the shell fills in $PY
