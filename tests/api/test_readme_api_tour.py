"""The README's HTTP block runs as written, after the tour's first steps, on a free port: the
token, the server, the curl calls and the CLI through the API all succeed and say what the
README says they do."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.helpers.ports import unused_port

import tidekeep as tk

ROOT = Path(__file__).resolve().parents[2]


def api_block() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("The control plane as a service: `tidekeep serve`")
    match = re.search(r"```sh\n(.*?)```", readme[start:], re.S)
    assert match is not None
    return match.group(1)


def test_the_readme_api_block_runs(tmp_path: Path) -> None:
    home = tmp_path / "tour"
    with tk.connect(home=home, create=True) as client:
        client.create_stream("iot/sensors", tk.StreamConfig(segments=2))
    port = unused_port()
    script = api_block().replace("localhost:8620", f"localhost:{port}")
    script = script.replace("tidekeep api &", f"tidekeep api --listen 127.0.0.1:{port} &")
    assert script.count(str(port)) >= 6
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIDEKEEP_")}
    env["TIDEKEEP_HOME"] = str(home)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    marked = "".join(f"echo '@@'\n{line}" if line.startswith(("curl", "TIDEKEEP_SERVER")) else line
                     for line in script.splitlines(keepends=True))
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", marked], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    describe, preview, hold, audit, anonymous, listed = done.stdout.split("@@\n")[1:]
    assert json.loads(describe)["name"] == "iot/sensors"
    assert "reason" in json.loads(preview)
    assert json.loads(hold)["created_by"] == "tour"
    assert json.loads(audit)["items"][0]["actor"] == "tour"
    assert json.loads(anonymous)["status"] == 401
    assert "iot/sensors" in listed
