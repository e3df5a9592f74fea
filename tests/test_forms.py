"""A route's form (site.toml's `form`): several query keys asked for at once, above the route's pages. A trip
planner asked for a destination, days and a budget, which the site bar's box (one key) could not, and a form the model
writes is dropped by the sanitiser (a hackathon team's app)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from chromium import browser_page, collect_problems, served
from fakes import ClientFactory, FakeEngine, visit

from genui.app import create_app
from genui.sites import Site, SiteConfigError, load_site

FORM = 'form = { fields = { destination = "Where to?", days = "Days" }, button = "Plan the trip" }'
TRIP = f"""\
name = "trip"
title = "Trip"
brief = "A trip planner."
carry = ["party"]

[[routes]]
pattern = "/"
template = "home.j2"

[[routes]]
pattern = "/plan"
template = "plan.j2"
query = ["destination", "days", "party"]
{FORM}
"""


def trip_site(root: Path, toml: str = TRIP) -> Path:
    (root / "prompts").mkdir(parents=True, exist_ok=True)
    (root / "prompts" / "plan.j2").write_text(
        "<page>plan</page>to={{ query.destination }}; days={{ query.days }}; party={{ query.party }}\n",
        encoding="utf-8",
    )
    (root / "prompts" / "home.j2").write_text("<page>home</page>\n", encoding="utf-8")
    (root / "site.toml").write_text(toml, encoding="utf-8")
    return root


@pytest.fixture
def trip(tmp_path: Path) -> Site:
    return load_site(trip_site(tmp_path / "trip"))


def fields(html: str) -> dict[str, str]:
    """The form's boxes and hidden inputs, by name, with their values ("" for none)."""
    form = re.search(r'<form class="genui-form".*?</form>', html, re.DOTALL)
    assert form is not None, html
    inputs = re.findall(r"<input ([^>]*)>", form.group(0))
    found = {}
    for attributes in inputs:
        name = re.search(r'name="([^"]*)"', attributes)
        value = re.search(r'value="([^"]*)"', attributes)
        assert name is not None
        found[name.group(1)] = value.group(1) if value else ""
    return found


def test_a_form_names_its_fields_in_order_with_their_labels_and_its_button(trip: Site) -> None:
    plan = trip.routes[1]
    assert plan.form == (("destination", "Where to?"), ("days", "Days")) and plan.form_words == "Plan the trip"
    assert trip.routes[0].form == ()


def test_a_route_with_a_form_has_no_box_in_the_site_bar_for_its_one_key(tmp_path: Path) -> None:
    """Two boxes of one name, the bar's and the form's, on the route's pages (a review)."""
    toml = TRIP.replace('query = ["destination", "days", "party"]', 'query = ["destination"]').replace(
        ', days = "Days"', ""
    )
    site = load_site(trip_site(tmp_path, toml.replace('carry = ["party"]\n', "")))
    assert site.routes[1].form == (("destination", "Where to?"),) and site.routes[1].bar_label is None


@pytest.mark.parametrize(
    ("form", "key", "fix"),
    [
        ('form = "destination"', "routes[1].form", "write it as a table: form = { fields = {"),
        ('form = { fields = { budget = "Budget" } }', "routes[1].form.fields.budget", "add it to query = [...]"),
        ("form = { fields = {} }", "routes[1].form.fields", "name the query keys it asks for"),
        ('form = { feilds = { days = "Days" } }', "routes[1].form.feilds", "fields"),
        ('form = { fields = { days = "" } }', "routes[1].form.fields.days", 'days = "Days"'),
        ('form = { fields = { days = "Days" }, button = 3 }', "routes[1].form.button", "as the visitor reads it"),
    ],
)
def test_a_form_that_cannot_be_drawn_is_refused_naming_its_key_and_the_fix(
    tmp_path: Path, form: str, key: str, fix: str
) -> None:
    with pytest.raises(SiteConfigError) as caught:
        load_site(trip_site(tmp_path, TRIP.replace(FORM, form)))
    assert caught.value.key == key and caught.value.file.endswith("site.toml") and fix in str(caught.value)


def test_a_form_on_a_route_with_parameters_is_refused(tmp_path: Path) -> None:
    toml = TRIP.replace('pattern = "/plan"', 'pattern = "/plan/{city}"')
    with pytest.raises(SiteConfigError, match="has parameters its form could not fill in"):
        load_site(trip_site(tmp_path, toml))


def test_the_form_stands_above_the_page_filled_in_with_what_it_asked_and_carried_keys_go_on(
    client_factory: ClientFactory, trip: Site
) -> None:
    engine = FakeEngine()
    client = client_factory([trip], engine)
    page = visit(client, "/plan?destination=S%C3%A3o%20Paulo&days=3&party=4")
    assert page.status_code == 200 and len(engine.calls) == 1
    assert "to=São Paulo; days=3; party=4" in engine.calls[0].prompt  # what the form asked reaches the prompt
    assert fields(page.text) == {"destination": "São Paulo", "days": "3", "party": "4"}
    assert 'type="hidden" name="party" value="4"' in page.text  # carried state, not a box of the form's
    assert '<label class="genui-field">Where to? <input name="destination"' in page.text
    assert page.text.index('class="genui-form"') < page.text.index('id="genui-content"')  # above the page
    assert 'class="genui-form"' not in visit(client, "/").text  # the route's own pages only


def test_an_address_with_nothing_in_the_forms_fields_is_the_form_and_no_page(
    client_factory: ClientFactory, trip: Site
) -> None:
    engine = FakeEngine()
    client = client_factory([trip], engine)
    for url in ("/plan", "/plan?party=4"):
        blank = client.get(url)
        assert blank.status_code == 200 and "<h1>Plan the trip</h1>" in blank.text
        assert "Nothing was asked yet: fill in the form above." in blank.text
        assert fields(blank.text)["destination"] == ""
    assert fields(client.get("/plan?party=4").text)["party"] == "4"
    assert engine.calls == []  # nothing written about nothing


def test_a_field_left_empty_is_no_part_of_the_address(client_factory: ClientFactory, trip: Site) -> None:
    client = client_factory([trip])
    answer = client.get("/plan?destination=Lisbon&days=&party=", follow_redirects=False)
    assert answer.status_code == 308 and answer.headers["location"] == "/plan?destination=Lisbon"
    answer = client.get("/plan?destination=&days=", follow_redirects=False)
    assert answer.status_code == 308 and answer.headers["location"] == "/plan"


@pytest.fixture
def page() -> Iterator[Any]:
    with browser_page() as opened:
        yield opened


@pytest.mark.browser
def test_a_visitor_fills_in_the_form_changes_one_value_and_goes_back(tmp_path: Path, trip: Site, page: Any) -> None:
    engine = FakeEngine(lambda prompt, seed: f"<h1>A plan</h1><p>{prompt.split('</page>')[1]}</p>", delay=0.02)
    with served(create_app([trip], engine, db_path=tmp_path / "pages.sqlite3")) as url:
        problems = collect_problems(page)
        page.goto(url + "/plan")
        page.fill(".genui-form input[name=destination]", "São Paulo")  # and the days left empty
        page.click(".genui-form button")
        page.wait_for_selector("#genui-content:not(.genui-live) .genui-page h1", timeout=15_000)
        assert page.url == url + "/plan?destination=S%C3%A3o+Paulo"  # the empty box is no part of the address
        page.fill(".genui-form input[name=days]", "3")
        page.click(".genui-form button")
        page.wait_for_url("**days=3**")
        page.wait_for_selector("#genui-content:not(.genui-live) .genui-page h1", timeout=15_000)
        page.fill(".genui-form input[name=days]", "2")
        page.press(".genui-form input[name=days]", "Enter")
        page.wait_for_url("**days=2**")
        page.wait_for_selector("#genui-content:not(.genui-live) .genui-page h1", timeout=15_000)
        assert page.input_value(".genui-form input[name=destination]") == "São Paulo"  # kept, as the page asked
        assert "to=São Paulo; days=2; party=" in engine.calls[-1].prompt and len(engine.calls) == 3
        page.go_back()
        page.wait_for_url("**days=3**")
        page.wait_for_selector(".genui-form input[name=days][value='3']")
        assert problems == []


@pytest.mark.browser
@pytest.mark.parametrize("width", [390, 1280])
def test_a_site_bar_box_with_a_long_label_keeps_room_to_type_in(tmp_path: Path, page: Any, width: int) -> None:
    """A box labelled "Destination, days, budget, interests" (40 characters, as many as a label may have) was 30 px
    wide beside its button, the words its label's (a hackathon team's review)."""
    toml = TRIP + '\n[[routes]]\npattern = "/find"\ntemplate = "home.j2"\nquery = ["q"]\n'
    toml += 'bar = "Destination, days, budget, interests"\n'
    site = load_site(trip_site(tmp_path / "trip", toml))
    with served(create_app([site], FakeEngine(), db_path=tmp_path / "pages.sqlite3")) as url:
        page.set_viewport_size({"width": width, "height": 800})
        page.goto(url + "/plan")
        box = page.locator(".genui-query input").bounding_box()
        assert box is not None and box["width"] >= 90, box
        assert page.evaluate("document.documentElement.scrollWidth") <= width  # and the page no wider than the screen
