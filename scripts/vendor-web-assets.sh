#!/usr/bin/env bash
# Fetch the dashboard's browser libraries from the npm registry at the versions web-assets/package-lock.json
# pins (npm checks each tarball's integrity) and copy the built files the dashboard serves into the package,
# plus axe-core for the accessibility tests. Run by hand when a version changes; the copies are committed,
# so neither installing nor running tidekeep needs npm or the network (docs/dashboard.md, "Assets").
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp web-assets/package.json web-assets/package-lock.json "$work/"
(cd "$work" && npm ci --ignore-scripts --no-audit --no-fund --silent)
vendor=src/tidekeep/web/static/vendor
mkdir -p "$vendor" tests/web/vendor
cp "$work/node_modules/htmx.org/dist/htmx.min.js" "$vendor/htmx.min.js"
cp "$work/node_modules/chart.js/dist/chart.umd.min.js" "$vendor/chart.umd.min.js"
cp "$work/node_modules/axe-core/axe.min.js" tests/web/vendor/axe.min.js
cp "$work/node_modules/htmx.org/LICENSE" "$vendor/LICENSE.htmx.org"
cp "$work/node_modules/chart.js/LICENSE.md" "$vendor/LICENSE.chart.js"
cp "$work/node_modules/axe-core/LICENSE" tests/web/vendor/LICENSE.axe-core
# the manifest the tests compare the copies with: package, version and SHA-256 of each file
"${PYTHON:-python3}" - "$work" "$vendor" <<'PY'
import hashlib, json, pathlib, sys
work, vendor = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
files = {f"{vendor}/htmx.min.js": "htmx.org", f"{vendor}/chart.umd.min.js": "chart.js",
         "tests/web/vendor/axe.min.js": "axe-core"}
manifest = {}
for name, package in files.items():
    version = json.loads((work / "node_modules" / package / "package.json").read_text())["version"]
    path = pathlib.Path(name)
    manifest[name] = {"package": package, "version": version,
                           "sha256": hashlib.sha256(path.read_bytes()).hexdigest()}
(pathlib.Path("web-assets") / "vendored.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
PY
echo "vendored: $(ls "$vendor" | tr '\n' ' ')"
