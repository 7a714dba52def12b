"""Running one of a skill's scripts in the sandbox (never on the worker).

The sandbox runs a Python program with a JSON input (``sandbox/base.py``). The program
here (``LAUNCHER``) writes the skill's files, as the registry read them (the bytes the
content hash covers), into a fresh directory of the sandbox's scratch space, moves there,
and runs the script as ``__main__`` with its arguments as ``sys.argv[1:]`` and the
given text as its stdin. The sandbox's limits (time, memory, processes, output, no
network) hold for the script as for any code.

Only Python scripts (``.py``) run: the sandbox holds a Python interpreter and nothing
else the host has (no shell, no node). A skill shipping a shell script can be read, not
run, and the tool says so.
"""

from __future__ import annotations

import base64
import json

from dagwright.errors import ToolError
from dagwright.skills.folder import Skill, resource_path

RUNNABLE_SUFFIX = ".py"
MAX_ARGS = 64
MAX_ARG_CHARS = 4_000

# Runs inside the sandbox: its stdin is the JSON of ``launcher_input``.
LAUNCHER = """\
import base64, json, os, runpy, sys, tempfile, io
_job = json.load(sys.stdin)
_root = tempfile.mkdtemp(prefix="skill-")
for _path, _data in _job["files"].items():
    _target = os.path.join(_root, _path)
    os.makedirs(os.path.dirname(_target), exist_ok=True)
    with open(_target, "wb") as _f:
        _f.write(base64.b64decode(_data))
os.chdir(_root)
_script = os.path.join(_root, _job["script"])
sys.argv = [_job["script"], *_job["args"]]
sys.path.insert(0, os.path.dirname(_script))
sys.stdin = io.StringIO(_job["stdin"])
runpy.run_path(_script, run_name="__main__")
"""


def launcher_input(skill: Skill, script: str, args: list[str], stdin: str) -> str:
    """The launcher's input: the skill's files, the script to run, its arguments and
    stdin; ToolError for a script that is not one of the skill's Python scripts, or
    arguments past the bounds."""
    path = resource_path(script)
    if path not in skill.scripts:
        listed = ", ".join(skill.scripts) or "none"
        raise ToolError(f"skill {skill.name!r} has no script {script!r}; its scripts: {listed}")
    if not path.endswith(RUNNABLE_SUFFIX):
        raise ToolError(
            f"only Python scripts run here (the sandbox has no other interpreter): "
            f"read {path!r} with read_skill_file instead"
        )
    if len(args) > MAX_ARGS or any(len(arg) > MAX_ARG_CHARS for arg in args):
        raise ToolError(f"at most {MAX_ARGS} arguments of {MAX_ARG_CHARS} characters each")
    files = {name: base64.b64encode(data).decode() for name, data in skill.files.items()}
    return json.dumps({"files": files, "script": path, "args": args, "stdin": stdin})
