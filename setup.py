"""What pyproject.toml cannot say: which folders a wheel carries inside the packages.

A checkout keeps templates/, static/, sites/ and models/ at the top level; a wheel carries them as
genui/_bundle/{templates,static,sites} and engine/_bundle/models, where genui.resources and engine.loading look
first. Every subfolder is listed as a package of its own so that setuptools copies it without warnings.
"""

from pathlib import Path

from setuptools import setup

BUNDLES = {
    "genui._bundle.templates": "templates",
    "genui._bundle.static": "static",
    "genui._bundle.sites": "sites",
    "engine._bundle.models": "models",
}


def bundle_packages() -> dict[str, str]:
    """Package name -> folder, for every bundled folder and its subfolders."""
    found = {}
    for package, folder in BUNDLES.items():
        root = Path(folder)
        for sub in [root, *sorted(p for p in root.rglob("*") if p.is_dir())]:
            parts = sub.relative_to(root).parts
            if any(part.startswith((".", "__")) for part in parts):
                continue
            found[".".join([package, *parts])] = sub.as_posix()
    return found


bundles = bundle_packages()
setup(
    packages=["genui", "engine", "lab", *bundles],
    package_dir=bundles,
    # lab's shipped defaults: `genui adapt --export` writes them beside a new adapter
    package_data={**{name: ["*"] for name in bundles}, "lab": ["generation_defaults.json"]},
)
