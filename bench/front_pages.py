"""Front pages of sites the default model was not trained on: `genui new`'s blank site and `genui new --from`'s
renamed copies of the forum and the wiki, each with and without an opening for its "/" route, and the shipped sites
themselves for reference. The default model learned the example sites' prompts, titles included; these are the
pages a developer's own site gets first.

    python bench/front_pages.py                      # seeds 0-2, every variant: a table
    python bench/front_pages.py --seeds 8 --only shipped,shipped+opening --json

Each page is written as the app would (lab.quality.generate_pages) and judged as the example site it copies would be
(lab.quality.skeleton_ok; the blank site as the wiki), on the page as served. Prints a table, or one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from genui.app import SITES_DIR
from genui.scaffold import add_front_opening, create_site
from genui.sites import Site, load_site
from lab.quality import generate_pages, load_dictionary, report

NAME = "club"
BRIEFS = {
    "forum": "A chess club's forum: openings, endgames, tournaments and club news.",
    "wiki": "A field guide to the birds of the Pacific Northwest: species, songs and where to see them.",
}


def with_front_opening(source: Path, folder: Path) -> Path:
    """A copy of the example site ``source`` whose "/" route has the opening genui new --from gives a copy."""
    shutil.copytree(source, folder)
    add_front_opening(folder, load_site(source))
    return folder


def without_front_opening(site: Site, folder: Path) -> Path:
    """A copy of ``site`` whose "/" route has no opening."""
    shutil.copytree(site.root, folder)
    toml = (folder / "site.toml").read_text(encoding="utf-8")
    toml = re.sub(r'^opening = "(home|front)_opening\.j2".*\n', "", toml, count=1, flags=re.M)
    (folder / "site.toml").write_text(toml, encoding="utf-8")
    return folder


def variants(work: Path) -> dict[str, tuple[str, Site]]:
    """label -> (the example site it is judged as, the site)."""
    out: dict[str, tuple[str, Site]] = {}
    for kind in ("forum", "wiki"):
        out[f"{kind} shipped"] = (kind, load_site(SITES_DIR / kind))
        out[f"{kind} shipped+opening"] = (kind, load_site(with_front_opening(SITES_DIR / kind, work / kind)))
        renamed = create_site(NAME, BRIEFS[kind], work / "renamed" / kind, example=kind)  # with the opening
        out[f"{kind} renamed"] = (kind, load_site(without_front_opening(renamed, work / "plain" / kind / NAME)))
        out[f"{kind} renamed+opening"] = (kind, renamed)
    blank = create_site(NAME, BRIEFS["wiki"], work / "blank")  # genui new: its home has the wiki's opening
    out["blank"] = ("wiki", load_site(without_front_opening(blank, work / "plain" / "blank" / NAME)))
    out["blank+opening"] = ("wiki", blank)
    return out


async def measure(args: argparse.Namespace) -> dict[str, list[dict[str, Any]]]:
    from engine import load_engine

    only = set(args.only.split(",")) if args.only else None
    dictionary, examples = load_dictionary(), {kind: load_site(SITES_DIR / kind) for kind in ("forum", "wiki")}
    out: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="genui-front-") as folder:
        chosen = {k: v for k, v in variants(Path(folder)).items() if only is None or k.partition(" ")[2] in only}
        engine = load_engine()
        try:
            for label, (kind, site) in chosen.items():
                for seed in range(args.seeds):
                    [page] = await generate_pages(engine, {site.name: site}, [(site.name, "/")], seed)
                    [judged] = report([dataclasses.replace(page, site=kind)], {kind: examples[kind]}, dictionary)
                    out.setdefault(label, []).append(
                        {
                            "seed": seed,
                            "skeleton": judged.skeleton == 1.0,
                            "dictionary_words": round(judged.dictionary_words, 4),
                            "seconds": round(page.seconds, 2),
                            "html": page.html,
                        }
                    )
                    print(f"{label} seed {seed}: {page.seconds:.1f} s", file=sys.stderr)
        finally:
            await engine.close()
    return out


def print_table(result: dict[str, list[dict[str, Any]]]) -> None:
    print("| front page | skeleton | dictionary words | s/page |")
    print("| --- | --- | --- | --- |")
    for label, rows in result.items():
        skeleton = sum(row["skeleton"] for row in rows)
        words = sum(row["dictionary_words"] for row in rows) / len(rows)
        seconds = sum(row["seconds"] for row in rows) / len(rows)
        print(f"| {label} | {skeleton} of {len(rows)} | {words:.1%} | {seconds:.1f} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/front_pages.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1 (default: %(default)s)")
    parser.add_argument(
        "--only",
        help="variants by their second word, comma-separated: shipped, shipped+opening, renamed, renamed+opening "
        "(blank and blank+opening are left out when given)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args))
    if args.json:
        print(json.dumps(result))
    else:
        print_table(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
