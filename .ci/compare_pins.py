"""Print every pinned package whose installed version changed between two `pip freeze`
listings (nothing if none did):  python .ci/compare_pins.py PINS BEFORE AFTER"""

import re
import sys


def versions(path: str) -> dict[str, str]:
    found = {}
    with open(path, encoding="utf-8") as file:
        lines = file.read().splitlines()
    for line in lines:
        match = re.match(r"([A-Za-z0-9_.\-]+)==(\S+)", line.strip())
        if match:
            found[match[1].lower().replace("_", "-")] = match[2]
    return found


pins, before, after = (versions(p) for p in sys.argv[1:4])
for name in pins:
    if before.get(name) != after.get(name):
        print(f"  {name}: {before.get(name)} -> {after.get(name)}")
