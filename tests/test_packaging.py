"""A wheel, installed away from the checkout, carries everything `genui serve` needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Runs inside the unpacked wheel, from an empty folder: no checkout on its path.
PROBE = """
import json, sys
from pathlib import Path
from starlette.testclient import TestClient
import engine.identity, genui, genui.app, genui.resources
from genui.sites import load_sites

sites = load_sites(genui.app.SITES_DIR)
app = genui.app.create_app(sites, engine=object(), db_path=genui.app.DEFAULT_DB)
with TestClient(app) as client:
    index = client.get("/")
    htmx = client.get("/_genui/static/htmx.min.js")
    css = client.get("/_genui/css/wiki.css")
model = engine.identity.DEFAULT_MODEL
print(json.dumps({
    "genui": genui.__file__,
    "paths": [str(p) for p in (genui.app.SITES_DIR, genui.app.STATIC_DIR, genui.resources.bundled("templates"), model)],
    "db": str(genui.app.DEFAULT_DB),
    "sites": sorted(s.name for s in sites),
    "index": [index.status_code, "Genpedia" in index.text],
    "htmx": [htmx.status_code, len(htmx.content)],
    "css": css.status_code,
    "model": sorted(p.name for p in model.iterdir()),
    "lab": sorted(p.name for p in Path(__import__("lab").__file__).parent.glob("*.json")),
}))
"""


@pytest.mark.slow
def test_a_wheel_installed_elsewhere_serves_the_sites_and_finds_the_model(tmp_path: Path) -> None:
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
    built = subprocess.run([*pip_wheel, "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    (wheel,) = tmp_path.glob("genui-*.whl")
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(target)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target), "XDG_DATA_HOME": str(tmp_path / "data")}
    probe = subprocess.run([sys.executable, "-c", PROBE], cwd=elsewhere, env=env, capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr
    found = json.loads(probe.stdout)

    assert Path(found["genui"]).is_relative_to(target)
    assert all(Path(p).is_relative_to(target) for p in found["paths"])
    assert Path(found["db"]) == tmp_path / "data" / "genui" / "genui.sqlite3"
    assert {"forum", "os", "wiki"} <= set(found["sites"])  # and any site a user added to sites/ (genui new)
    assert found["index"] == [200, True]
    assert found["htmx"][0] == 200 and found["htmx"][1] > 10_000
    assert found["css"] == 200
    assert found["lab"] == ["generation_defaults.json"]  # genui adapt --export writes them beside an adapter
    shipped = {"genui.json", "adapter_config.json", "adapter_model.safetensors", "generation_config.json"}
    assert shipped | {"tokenizer.json"} <= set(found["model"])


def test_a_checkout_uses_its_own_folders() -> None:
    from engine.identity import DEFAULT_MODEL
    from genui.app import DEFAULT_DB, SITES_DIR, STATIC_DIR

    assert (SITES_DIR, STATIC_DIR) == (ROOT / "sites", ROOT / "static")
    assert DEFAULT_DB == ROOT / "var" / "genui.sqlite3" and DEFAULT_MODEL == ROOT / "models" / "genui-smollm"


def test_every_dependency_is_pinned_in_the_constraints_dev_installs_with() -> None:
    """./dev installs under constraints.txt; a dependency added to pyproject.toml without a pin there would come in
    at whatever version was released last, which is what broke fresh installs once (transformers 5.24)."""
    import re
    import tomllib

    root = Path(__file__).resolve().parent.parent
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    wanted = [*project["dependencies"], *project["optional-dependencies"]["dev"]]
    pinned = {}
    for line in (root / "constraints.txt").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version, f"constraints.txt: {line!r} is not name==version"
            pinned[re.sub(r"[-_.]+", "-", name).lower()] = version
    names = {re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", spec)[0]).lower() for spec in wanted}  # type: ignore[index]
    assert names - {"torch"} <= set(pinned), f"not in constraints.txt: {sorted(names - {'torch'} - set(pinned))}"
    assert "torch" not in pinned  # ./dev picks the torch build for the machine
    assert "-c constraints.txt" in (root / "dev").read_text()
