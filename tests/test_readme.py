"""The README's table of the example sites' URLs, checked against what the app answers."""

from __future__ import annotations

import re
from pathlib import Path

from fakes import ClientFactory, visit

from genui.sites import Site

README = Path(__file__).resolve().parent.parent / "README.md"
SAMPLES = {"title": "Hash_table", "board": "hacking", "thread": "My_first_lisp", "path": "home/ada", "panel": "display"}


def documented_urls() -> dict[str, list[str]]:
    """Site name -> the URLs in its row of the README's table (the last column, in backticks)."""
    rows = re.findall(r"^\| `([a-z][a-z0-9_-]*)` \|.*\| (`/.*`) \|$", README.read_text(encoding="utf-8"), re.M)
    assert rows, "README.md has no table of the example sites' URLs"
    return {name: re.findall(r"`([^`]+)`", urls) for name, urls in rows}


def served_url(site: Site, pattern: str, query: tuple[str, ...]) -> str:
    """A route as the README writes it under `genui serve`: ``{name:path}`` as ``{name}``, query keys as ``?key=``."""
    url = f"/{site.name}" + re.sub(r"\{(\w+):path\}", r"{\1}", pattern)
    return url + "".join(f"{'&' if n else '?'}{key}=" for n, key in enumerate(query))


def test_the_readme_lists_every_route_of_every_example_site(all_sites: list[Site]) -> None:
    served = {site.name: [served_url(site, route.pattern, route.query) for route in site.routes] for site in all_sites}
    assert documented_urls() == served


def test_every_url_in_the_readme_is_a_page_under_genui_serve(
    client_factory: ClientFactory, all_sites: list[Site]
) -> None:
    client = client_factory(all_sites, follow_redirects=False)
    for urls in documented_urls().values():
        for url in urls:
            concrete = re.sub(r"\{(\w+)\}", lambda m: SAMPLES[m.group(1)], url)
            concrete = re.sub(r"=(&|$)", r"=lisp\1", concrete)
            response = visit(client, concrete)
            assert response.status_code == 200 and '<div class="genui-page"' in response.text, concrete
