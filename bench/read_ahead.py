"""What reading ahead buys a visitor: how soon the pages an article links to are ready, and what a click costs.

Serves the wiki in-process on the default model (or --model) with a fresh page cache, opens one article as a
browser without scripts does (the article written while the visitor waits), and then, while nobody asks for
anything, lets genui read ahead (genui/readahead.py). For each of the first N pages the article links to it reports
when the page was stored, counted from the moment the article was shown; the seconds the model took to write it
(what a click would have waited without reading ahead); and how long a click on the link (an htmx GET, as the page's
own link sends it) then takes to answer with the page whole.

    python bench/read_ahead.py [--page /Hash_table] [--links 3] [--model DIR] [--device cpu] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import html
import json
import re
import tempfile
import time
from pathlib import Path

from starlette.testclient import TestClient

from engine import load_engine
from genui.app import SITES_DIR, create_app
from genui.pages import Pages
from genui.readahead import linked_urls
from genui.sites import load_site
from genui.store import StoredPage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--page", default="/Hash_table", help="the wiki article the visitor opens")
    parser.add_argument("--links", type=int, default=3, help="pages read ahead (genui serve --read-ahead)")
    parser.add_argument("--model", help="checkpoint folder (default: the shipped models/genui-smollm)")
    parser.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    parser.add_argument("--wait", type=float, default=900.0, help="seconds to wait for the pages read ahead")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args()

    engine = load_engine(model=args.model, device=args.device)
    with tempfile.TemporaryDirectory() as folder:
        app = create_app([load_site(SITES_DIR / "wiki")], engine, Path(folder) / "pages.sqlite3", read_ahead=args.links)
        with TestClient(app) as client:
            pages: Pages = app.state.pages
            portal = client.portal
            assert portal is not None
            runtime = pages.sites["wiki"]

            def stored(url: str) -> StoredPage | None:
                location = runtime.locate(url)
                assert location is not None
                return pages.page(pages.job(runtime, location))

            asked = time.time()
            shell = client.get(args.page)  # the shell at once; its <noscript> refresh waits for the article
            refresh = re.search(r'http-equiv="refresh" content="0; url=([^"]+)"', shell.text)
            assert refresh is not None, "the article was served from a cache it should not have"
            client.get(html.unescape(refresh.group(1)), follow_redirects=False)
            shown = time.time()
            article = portal.call(stored, args.page)
            assert article is not None, "the article was not written"
            links = []
            for url in linked_urls(article.html):
                location = runtime.locate(url)
                if location is not None and location.url != args.page and url not in links:
                    links.append(url)
            links = links[: args.links]
            deadline = time.monotonic() + args.wait
            while time.monotonic() < deadline and not all(portal.call(stored, url) for url in links):
                time.sleep(0.5)
            rows = []
            for url in links:
                page = portal.call(stored, url)
                started = time.perf_counter()
                click = client.get(
                    url, headers={"HX-Request": "true", "HX-Current-URL": f"http://testserver{args.page}"}
                )
                answered = time.perf_counter() - started
                whole = page is not None and "ws-connect" not in click.text
                rows.append(
                    {
                        "link": url,
                        "ready_after_s": None if page is None else round(page.created - shown, 2),
                        "write_s": None if page is None else round(page.seconds, 2),
                        "click_ms": round(answered * 1000, 1),
                        "served_whole": whole,
                    }
                )
    asyncio.run(engine.close())
    result = {
        "model": engine.model_id,
        "page": args.page,
        "article_s": round(shown - asked, 2),
        "links": rows,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['model']}: {args.page} written while the visitor waited, {result['article_s']} s")
    print(f"{'link':<32} {'ready after (s)':>16} {'write (s)':>10} {'click (ms)':>11} {'whole':>6}")
    for row in rows:
        ready = "-" if row["ready_after_s"] is None else f"{row['ready_after_s']:.1f}"
        write = "-" if row["write_s"] is None else f"{row['write_s']:.1f}"
        print(f"{row['link']:<32} {ready:>16} {write:>10} {row['click_ms']:>11.1f} {str(row['served_whole']):>6}")


if __name__ == "__main__":
    main()
