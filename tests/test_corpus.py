"""The corpus builder's parsing of Debian's dictionary entries."""

from __future__ import annotations

from lab.corpus import holdout, parse_entry, slug

FOLDOC = """hash table
HT

   <algorithm, data> A {lookup table} designed to efficiently store
   non-contiguous {key}s that may have wide gaps.

   A second paragraph about {collision}s.

   (1997-12-31)
"""

JARGON = """high bit
 n.

    [from high-order bit]

    1. The most significant bit in a byte. See {meta bit} and more text here to pass the length filter.
"""


def test_foldoc_entry_keeps_paragraphs_references_and_categories() -> None:
    entry = parse_entry(FOLDOC, jargon=False)
    assert entry is not None
    assert entry.title == "hash table"
    assert entry.categories == ("algorithm", "data")
    assert entry.refs == ("lookup table", "key", "collision")
    assert len(entry.paragraphs) == 2 and entry.paragraphs[0].startswith("A {lookup table}")


def test_jargon_entry_drops_part_of_speech_and_bracketed_etymology() -> None:
    entry = parse_entry(JARGON, jargon=True)
    assert entry is not None
    assert entry.paragraphs[0].startswith("1. The most significant bit")


def test_short_entries_are_skipped() -> None:
    assert parse_entry("tiny\n\n   <x> See {y}.\n", jargon=False) is None


def test_slugs_are_url_safe_and_holdout_is_stable() -> None:
    assert slug("C++ (language)") == "C++_(language)"
    assert holdout("wiki", "/wiki/Hash_table") == holdout("wiki", "/wiki/Hash_table")
