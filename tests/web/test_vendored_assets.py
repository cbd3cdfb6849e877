"""The browser libraries are vendored from npm at the versions web-assets/package-lock.json pins
(scripts/vendor-web-assets.sh): the copies in the package and the tests are exactly those files."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_vendored_files_match_the_manifest_and_the_lockfile() -> None:
    manifest = json.loads((REPO / "web-assets" / "vendored.json").read_text())
    lock = json.loads((REPO / "web-assets" / "package-lock.json").read_text())
    wanted = json.loads((REPO / "web-assets" / "package.json").read_text())["dependencies"]
    assert {entry["package"] for entry in manifest.values()} == set(wanted)
    for path, entry in manifest.items():
        assert hashlib.sha256((REPO / path).read_bytes()).hexdigest() == entry["sha256"], path
        assert entry["version"] == wanted[entry["package"]] == lock["packages"][
            f"node_modules/{entry['package']}"]["version"], path
        assert lock["packages"][f"node_modules/{entry['package']}"]["integrity"].startswith("sha512-")


def test_no_page_loads_anything_from_elsewhere() -> None:
    templates = REPO / "src" / "tidekeep" / "web" / "templates"
    for template in templates.rglob("*.html"):
        text = template.read_text()
        assert "http://" not in text and "https://" not in text and "//cdn" not in text, template
        assert "<script>" not in text and " on" + "click=" not in text, template  # the CSP allows no inline script
