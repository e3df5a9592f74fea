"""End to end on the shipped model: `genui render` as a user runs it, through the real engine and checkpoint."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from engine.frames import DoneFrame
from lab.quality import shape, skeleton_ok

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "models" / "genui-smollm"

pytestmark = [pytest.mark.model, pytest.mark.slow]


def render(*options: str, page: tuple[str, str] = ("wiki", "/wiki/Hash_table")) -> dict[str, object]:
    assert (MODEL / "adapter_model.safetensors").is_file(), f"the default model is missing from {MODEL}"
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "genui.cli",
            "render",
            *page,
            "--json",
            "--device",
            "cpu",
            *options,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        # Offline for the hub: the adapter is a local folder and its base comes from PyPI (engine.base), once.
        env={**os.environ, "OMP_NUM_THREADS": "2", "HF_HUB_OFFLINE": "1"},
    )
    assert result.returncode == 0, result.stderr
    data: dict[str, object] = json.loads(result.stdout)
    return data


@pytest.fixture(scope="module")
def hash_table() -> dict[str, object]:
    """The page as the wiki serves it: the route's opening (its <h1>), then what the model writes."""
    return render()


@pytest.fixture(scope="module")
def model_alone() -> dict[str, object]:
    """The same page with the opening left out: every byte is the model's."""
    return render("--no-opening")


def test_render_reports_canvases_within_the_sites_budget(hash_table: dict[str, object]) -> None:
    canvases = hash_table["canvases"]
    # sites/wiki/site.toml: tokens = 384, six of the shipped model's 64-token canvases; steps = 24
    assert isinstance(canvases, list) and 1 <= len(canvases) <= 6
    for canvas in canvases:
        assert 1 <= canvas["steps"] <= 24 and 0 <= canvas["tokens"] <= 64 and canvas["seconds"] > 0
    assert isinstance(hash_table["seconds"], float) and hash_table["seconds"] > 0


def test_rendered_page_is_sanitised_and_links_only_within_the_site(hash_table: dict[str, object]) -> None:
    html = hash_table["html"]
    assert isinstance(html, str) and html.strip()
    page = shape(html)
    assert page.balanced  # the sanitiser's output always closes what it opens
    assert not any(tag in ("script", "iframe", "object", "embed", "form", "img", "style") for tag, _ in page.tags)
    assert not re.search(r"\son[a-z]+\s*=", html)
    assert all(href.startswith("/") and not href.startswith("//") for href in page.hrefs)
    for attribute in re.findall(r'\s(hx-[a-z-]+)="', html):  # only genui's own navigation attributes
        assert attribute in ("hx-get", "hx-target", "hx-push-url", "hx-swap")


def test_the_served_article_opens_with_its_title_and_goes_on_in_the_models_words(
    hash_table: dict[str, object], model_alone: dict[str, object]
) -> None:
    html = str(hash_table["html"])
    assert html.startswith('<article class="wiki">\n<h1>Hash table</h1>\n')  # sites/wiki/prompts/article_opening.j2
    opening = '<article class="wiki">\n<h1>Hash table</h1>\n'
    assert shape(html).h1[0] == "Hash table"
    assert len(re.findall(r"[A-Za-z]{2,}", html[len(opening) :])) >= 3  # the model wrote on after the pinned opening


def test_the_model_alone_writes_the_title_into_the_h1(model_alone: dict[str, object]) -> None:
    """With no opening pinned, every byte is the model's: it reads the title from its prompt into the heading
    (the retired from-scratch model never did)."""
    assert shape(str(model_alone["html"])).h1[:1] == ["Hash table"]


def test_the_served_article_has_the_wiki_structure(hash_table: dict[str, object]) -> None:
    """Well-formed, an <h1> naming the title, two paragraphs with words: the skeleton's structure. The title comes
    from the route's opening; the paragraphs, the list and the links are the model's."""
    page = shape(str(hash_table["html"]))
    assert page.balanced and page.h1[:1] == ["Hash table"]
    assert sum(bool(re.search(r"[A-Za-z]{2,}", paragraph)) for paragraph in page.paragraphs) >= 2


def test_the_served_article_has_the_wiki_skeleton(hash_table: dict[str, object]) -> None:
    """The issue's check, on the page as served: the structure above and no broken markup shown as text."""
    assert skeleton_ok("wiki", "/wiki/Hash_table", str(hash_table["html"]))


ALONE_SEEDS = range(8)


def test_the_model_alone_writes_the_wiki_skeleton_on_most_seeds() -> None:
    """With no opening, the shipped model writes the whole skeleton, title included, on most seeds: a rate, since a
    single seed's page depends on the CPU's floating-point kernels (seed 0 passes on one machine, fails on another).
    `genui render wiki /wiki/Hash_table --no-opening --seed N`, N = 0..7, on the CI machine: 5 of 8 (2026-11-23); the
    quality report's 10 held-out articles, served: 80%. The retired from-scratch model wrote it on none."""
    import asyncio

    import torch

    from engine import load_engine
    from genui.runtime import SiteRuntime
    from genui.sites import load_site

    runtime = SiteRuntime.build(load_site(ROOT / "sites" / "wiki"), "")
    location = runtime.locate("/Hash_table")
    assert location is not None
    threads = torch.get_num_threads()
    torch.set_num_threads(2)

    async def pages() -> list[str]:
        engine = load_engine(MODEL, "cpu")
        try:
            written = []
            for seed in ALONE_SEEDS:
                frames = [frame async for frame in engine.stream(runtime.direct_request(location, seed, opening=False))]
                done = frames[-1]
                assert isinstance(done, DoneFrame)
                written.append(runtime.render(done.text))
            return written
        finally:
            await engine.close()

    try:
        html = asyncio.run(pages())
    finally:
        torch.set_num_threads(threads)
    good = [seed for seed, page in zip(ALONE_SEEDS, html, strict=True) if skeleton_ok("wiki", "/wiki/Hash_table", page)]
    assert len(good) >= len(ALONE_SEEDS) // 2, f"skeleton on seeds {good} of {list(ALONE_SEEDS)}"


def test_the_display_panel_names_its_settings_and_the_model_fills_in_their_values() -> None:
    """The os site's settings opening names each panel's settings and leaves a gap for each value (engine.gaps),
    which the model writes a token at a time: the panel comes out as the corpus's panels are, a <dd> after each
    <dt>, with values the corpus gives those settings (147 of 150 over every panel at seeds 0-5,
    docs/model.md, session 35), where the model alone put them out of step on 5 of 6 seeds of the display panel."""
    from lab.corpus import Builder

    page = render(page=("os", "/settings/display"))
    html = str(page["html"])
    pairs = re.findall(r"<dt>([^<]*)</dt><dd>([^<]*)</dd>", html)
    assert [label for label, _ in pairs] == ["Resolution", "Scale", "Night light", "Refresh rate"], html
    values = dict(Builder.SETTINGS["display"])
    assert sum(value in values[label] for label, value in pairs) >= 3, pairs
    assert skeleton_ok("os", "/settings/display", html)
