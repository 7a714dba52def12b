"""Group change subjects (one per line on stdin) by their conventional-commit kind.

Prints JSON: ``features``, ``fixes``, ``other`` (subjects without their prefix) and
``ran_in`` (the folder it ran in). ``--check-path PATH`` adds ``path_visible``: whether
PATH exists where the script runs (in dagwright's sandbox, no host file does).
"""

import argparse
import json
import os
import re
import sys

KINDS = {"feat": "features", "fix": "fixes"}
PREFIX = re.compile(r"^(?P<kind>[a-z]+)(\([^)]*\))?!?:\s*(?P<subject>.+)$")


def group(lines):
    grouped = {"features": [], "fixes": [], "other": []}
    for line in (line.strip() for line in lines):
        if not line:
            continue
        match = PREFIX.match(line)
        kind = KINDS.get(match["kind"], "other") if match else "other"
        grouped[kind].append(match["subject"] if match else line)
    return grouped


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--check-path")
    options = parser.parse_args()
    result = group(sys.stdin.read().splitlines())
    result["ran_in"] = os.getcwd()
    if options.check_path:
        result["path_visible"] = os.path.exists(options.check_path)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
