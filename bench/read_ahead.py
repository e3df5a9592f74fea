"""What reading ahead buys a visitor: how soon the pages a page links to are ready, and what a click then costs.

Serves one example site in-process on the default model (or --model) with a fresh page cache, opens one page as a
browser without scripts does (written while the visitor waits), and then, while nobody asks for anything, lets
genui read ahead (genui/readahead.py). For each of the first N pages the page links to (the model's links, then the
site's navigation) it reports when the page was stored, counted from the moment the first page was shown; the
seconds the model took to write it (what a click would have waited without reading ahead); and how long a click on
the link (an htmx GET, as the page's own link sends it) then takes to answer, and whether with the page whole.

With ``--interrupt URL`` it measures what reading ahead costs a visitor instead: once a page is being read ahead,
the visitor asks for URL (a page not on the list), and the report gives how long they waited for it and how long the
model took over it; the difference is the page read ahead giving way (its run cancelled within one step) and the
response around the run.

    python bench/read_ahead.py [--site wiki] [--page /] [--links 3] [--model DIR] [--device cpu] [--json]
    python bench/read_ahead.py --site wiki --page /Turing_machine --interrupt /Lambda_calculus
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
from genui.readahead import reading_list
from genui.sites import load_site
from genui.store import StoredPage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--site", default="wiki", help="the example site served (default: %(default)s)")
    parser.add_argument("--page", default="/", help="the page the visitor opens (default: %(default)s)")
    parser.add_argument("--links", type=int, default=3, help="pages read ahead (genui serve --read-ahead)")
    parser.add_argument("--model", help="checkpoint folder (default: the shipped models/genui-smollm)")
    parser.add_argument("--device", help="torch device (default: cuda if available, else cpu)")
    parser.add_argument("--wait", type=float, default=900.0, help="seconds to wait for the pages read ahead")
    parser.add_argument("--interrupt", metavar="URL", help="a page the visitor asks for while one is read ahead")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    args = parser.parse_args()

    engine = load_engine(model=args.model, device=args.device)
    with tempfile.TemporaryDirectory() as folder:
        site = load_site(SITES_DIR / args.site)
        app = create_app([site], engine, Path(folder) / "pages.sqlite3", read_ahead=args.links)
        with TestClient(app) as client:
            pages: Pages = app.state.pages
            portal = client.portal
            assert portal is not None
            runtime = pages.sites[args.site]

            def stored(url: str) -> StoredPage | None:
                location = runtime.locate(url)
                assert location is not None
                return pages.page(pages.job(runtime, location))

            def visit(url: str) -> float:
                """Seconds until ``url`` is written, asked for as a browser without scripts does."""
                started = time.perf_counter()
                shell = client.get(url)  # the shell at once; its <noscript> refresh waits for the page
                refresh = re.search(r'http-equiv="refresh" content="0; url=([^"]+)"', shell.text)
                assert refresh is not None, f"{url} was served from a cache it should not have"
                client.get(html.unescape(refresh.group(1)), follow_redirects=False)
                return time.perf_counter() - started

            page_s = visit(args.page)
            shown = time.time()
            shown_page = portal.call(stored, args.page)
            assert shown_page is not None, "the page was not written"
            location = runtime.locate(args.page)
            assert location is not None
            job = portal.call(pages.job, runtime, location)
            listed = portal.call(reading_list, pages, job, shown_page.html, args.links)
            links = [linked.location.url for linked in listed]  # what genui reads ahead, in its order
            deadline = time.monotonic() + args.wait
            rows: list[dict[str, object]] = []
            interrupt: dict[str, object] | None = None
            if args.interrupt:
                reading = None  # --links 0: the same visit on an engine that reads nothing ahead, to compare
                while args.links and (reading := portal.call(lambda: pages.reader.reading)) is None:
                    assert time.monotonic() < deadline and links, "nothing was read ahead"
                    time.sleep(0.05)
                time.sleep(1.0)  # well into its run
                waited = visit(args.interrupt)
                written = portal.call(stored, args.interrupt)
                assert written is not None
                interrupt = {
                    "url": args.interrupt,
                    "while_reading": reading,
                    "waited_s": round(waited, 2),
                    "write_s": round(written.seconds, 2),
                }
            while not args.interrupt and time.monotonic() < deadline:
                if all(portal.call(stored, url) for url in links):
                    break
                time.sleep(0.5)
            for url in [] if args.interrupt else links:
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
        "site": args.site,
        "page": args.page,
        "page_s": round(page_s, 2),
        "links": rows,
        "interrupt": interrupt,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['model']}: {args.site}{args.page} written while the visitor waited, {result['page_s']} s")
    if interrupt is not None:
        print(
            f"asked for {interrupt['url']} while {interrupt['while_reading'] or 'nothing'} was read ahead: waited "
            f"{interrupt['waited_s']} s for a page the model took {interrupt['write_s']} s over"
        )
        return
    print(f"{'link':<40} {'ready after (s)':>16} {'write (s)':>10} {'click (ms)':>11} {'whole':>6}")
    for row in rows:
        ready = "-" if row["ready_after_s"] is None else f"{row['ready_after_s']:.1f}"
        write = "-" if row["write_s"] is None else f"{row['write_s']:.1f}"
        print(f"{row['link']:<40} {ready:>16} {write:>10} {row['click_ms']:>11.1f} {str(row['served_whole']):>6}")


if __name__ == "__main__":
    main()
