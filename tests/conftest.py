from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromium
import pytest
from fakes import SITES_DIR, ClientFactory, FakeEngine, example_sites
from starlette.testclient import TestClient

from genui.app import create_app
from genui.sites import Site, load_site


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Says which test is being set up, before its fixtures are (a module's browser too): chromium.launch checks
    that it is marked browser."""
    chromium.RUNNING[:] = [item]


@pytest.fixture(autouse=True)
def logging_as_it_was() -> Iterator[None]:
    """Each test leaves the loggers as it found them: `genui serve` (cli.main) configures uvicorn's logging, whose
    handlers write to the sys.stderr of that moment, a capture pytest closes after the test; a later record from a
    server thread would then fail to write ("I/O operation on closed file")."""
    from transformers.utils import logging as transformers_logging

    # genui serve turns them off where its log is no terminal: set back as they were, either way, without
    # enable_progress_bar's warning where HF_HUB_DISABLE_PROGRESS_BARS is set
    bars = transformers_logging._tqdm_active
    names = ["", *logging.root.manager.loggerDict]
    loggers = [logging.getLogger(name) for name in names]
    before = [
        (logger, list(logger.handlers), list(logger.filters), logger.level, logger.propagate, logger.disabled)
        for logger in loggers
    ]
    yield
    for logger, handlers, filters, level, propagate, disabled in before:
        logger.handlers[:] = handlers
        logger.filters[:] = filters  # (logging's configuration adds to a logger's filters: --no-access-log's stayed)
        logger.setLevel(level)
        logger.propagate, logger.disabled = propagate, disabled
    for name in set(logging.root.manager.loggerDict) - set(names):  # loggers the test configured anew
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).filters.clear()
    transformers_logging._tqdm_active = bars


@pytest.fixture
def wiki() -> Site:
    return load_site(SITES_DIR / "wiki")


@pytest.fixture
def all_sites() -> list[Site]:
    return example_sites()


@pytest.fixture
def client_factory(tmp_path: Path) -> Iterator[ClientFactory]:
    """make(sites, engine=FakeEngine(), read_ahead=0, reload=False, sites_dir=None) -> a started TestClient on a
    fresh database.

    Its live stream sends every draft (``draft_interval=0``) unless told otherwise, so tests can count them.
    """
    clients: list[TestClient] = []

    def make(
        sites: list[Site],
        engine: FakeEngine | None = None,
        draft_interval: float = 0.0,
        read_ahead: int = 0,
        reload: bool = False,
        sites_dir: Path | None = None,
        app_options: dict[str, Any] | None = None,  # more of create_app's (unclaimed_s, runs_per_client)
        **kwargs: object,
    ) -> TestClient:
        db = tmp_path / f"db{len(clients)}.sqlite3"
        engine = engine or FakeEngine()
        app = create_app(
            sites,
            engine,
            db_path=db,
            draft_interval=draft_interval,
            read_ahead=read_ahead,
            reload=reload,
            sites_dir=sites_dir,
            **(app_options or {}),
        )
        client = TestClient(app, **kwargs)  # type: ignore[arg-type]
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)
