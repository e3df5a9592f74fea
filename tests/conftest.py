from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes import SITES_DIR, ClientFactory, FakeEngine
from starlette.testclient import TestClient

from genui.app import create_app
from genui.sites import Site, load_site, load_sites


@pytest.fixture
def wiki() -> Site:
    return load_site(SITES_DIR / "wiki")


@pytest.fixture
def all_sites() -> list[Site]:
    return load_sites(SITES_DIR)


@pytest.fixture
def client_factory(tmp_path: Path) -> Iterator[ClientFactory]:
    """make(sites, engine=FakeEngine(), read_ahead=0, reload=False) -> a started TestClient on a fresh database.

    Its live stream sends every draft (``draft_interval=0``) unless told otherwise, so tests can count them.
    """
    clients: list[TestClient] = []

    def make(
        sites: list[Site],
        engine: FakeEngine | None = None,
        draft_interval: float = 0.0,
        read_ahead: int = 0,
        reload: bool = False,
        **kwargs: object,
    ) -> TestClient:
        db = tmp_path / f"db{len(clients)}.sqlite3"
        engine = engine or FakeEngine()
        app = create_app(sites, engine, db_path=db, draft_interval=draft_interval, read_ahead=read_ahead, reload=reload)
        client = TestClient(app, **kwargs)  # type: ignore[arg-type]
        client.__enter__()
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)
