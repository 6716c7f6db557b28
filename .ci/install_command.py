"""Print a notebook's Colab install cell as a Python script that runs it as Colab would, with
the repository URL replaced by ``url``:  python .ci/install_command.py NOTEBOOK URL > cell.py

The cell's own code runs (its pip command, its error when the install fails); only
``google.colab`` is faked, since the cell installs nothing elsewhere."""

import json
import re
import sys

notebook, url = sys.argv[1], sys.argv[2]
with open(notebook, encoding="utf-8") as file:
    cells = json.load(file)["cells"]
cell = next(c for c in cells if "colab-install" in c["metadata"].get("tags", []))
source = "".join(cell["source"])
if "%pip" in source or "!pip" in source:
    sys.exit("the install cell uses IPython syntax; this script runs plain Python")
source, count = re.subn(r"git\+https://github\.com/[^\"' ]+", url, source)
if count != 1:
    sys.exit(f"expected one repository URL in the install cell, found {count}")
print("import sys, types\nsys.modules['google.colab'] = types.ModuleType('google.colab')\n")
print(source)
