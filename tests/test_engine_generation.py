from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

import pytest
import torch
from engine_fixtures import tiny_model

from engine import CanvasFrame, DoneFrame, EngineError, Frame, GenerationRequest, LoadedModel, StepFrame
from engine.denoise import Pins
from engine.generation import fits, left_pad, plan_batch, run_plan, settings_for
from engine.streaming import FrameStreamer, Row


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoadedModel]:
    with tiny_model(tmp_path_factory.mktemp("tiny")) as model:
        yield model


def generate(loaded: LoadedModel, *requests: GenerationRequest) -> list[list[Frame]]:
    """Run requests as one batch; the frames of each row."""
    frames: list[list[Frame]] = [[] for _ in requests]
    rows = [Row(emit=received.append) for received in frames]
    run_plan(loaded, plan_batch(loaded, requests, rows))
    return frames


def done(frames: list[Frame]) -> DoneFrame:
    assert isinstance(frames[-1], DoneFrame)
    return frames[-1]


def test_same_seed_gives_the_same_text(loaded: LoadedModel) -> None:
    request = GenerationRequest(prompt="Hash table", max_canvases=2, max_steps=4, seed=7, stop_at_eos=False)
    assert done(generate(loaded, request)[0]).text == done(generate(loaded, request)[0]).text


def test_different_seeds_give_different_text(loaded: LoadedModel) -> None:
    request = GenerationRequest(prompt="Hash table", max_steps=4, seed=1, stop_at_eos=False)
    other = GenerationRequest(prompt="Hash table", max_steps=4, seed=2, stop_at_eos=False)
    assert done(generate(loaded, request)[0]).text != done(generate(loaded, other)[0]).text


def test_seeding_leaves_the_callers_random_state_alone(loaded: LoadedModel) -> None:
    torch.manual_seed(123)
    expected = torch.rand(3)
    torch.manual_seed(123)
    generate(loaded, GenerationRequest(prompt="x", max_steps=2, seed=5))
    assert torch.equal(torch.rand(3), expected)


def test_max_canvases_caps_the_tokens(loaded: LoadedModel) -> None:
    request = GenerationRequest(prompt="Linked list", max_canvases=2, max_steps=3, stop_at_eos=False)
    frames = generate(loaded, request)[0]
    final = done(frames)
    assert [canvas.tokens for canvas in final.canvases] == [loaded.canvas_length] * 2
    assert final.stats["tokens"] == 2 * loaded.canvas_length
    assert all(canvas.steps <= 3 for canvas in final.canvases)


def test_a_page_stops_at_its_end_of_text_before_the_cap(loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch) -> None:
    """The model writes its end of text in the first canvas: one canvas of the three allowed, and its text ends
    there."""
    denoiser = loaded.denoiser
    denoise = denoiser.denoise

    def ends_at_once(*args: Any) -> Any:
        logits = denoise(*args)
        logits[:, 4:, denoiser.eos_id] = 1e4  # every position from the fifth on
        return logits

    monkeypatch.setattr(denoiser, "denoise", ends_at_once)
    final = done(generate(loaded, GenerationRequest(prompt="Array", max_canvases=3, max_steps=3))[0])
    assert len(final.canvases) == 1 and final.canvases[0].tokens <= 4 and final.stats["tokens"] <= 4


def test_step_frames_arrive_before_their_canvas_and_the_final_text(loaded: LoadedModel) -> None:
    frames = generate(loaded, GenerationRequest(prompt="Hash", max_canvases=2, max_steps=3, stop_at_eos=False))[0]
    kinds = [(type(frame).__name__, getattr(frame, "canvas", None)) for frame in frames]
    assert kinds == [
        ("StepFrame", 0), ("StepFrame", 0), ("StepFrame", 0), ("CanvasFrame", 0),
        ("StepFrame", 1), ("StepFrame", 1), ("StepFrame", 1), ("CanvasFrame", 1),
        ("DoneFrame", None),
    ]  # fmt: skip
    steps = [frame for frame in frames if isinstance(frame, StepFrame)]
    assert [frame.step for frame in steps] == [1, 2, 3, 1, 2, 3]
    assert all(frame.accepted >= 1 and frame.entropy > 0 for frame in steps)
    canvases = [frame for frame in frames if isinstance(frame, CanvasFrame)]
    assert steps[2].text == canvases[0].text  # the last draft is the canvas
    assert done(frames).ttff_s <= done(frames).seconds


def test_a_canvas_says_whether_the_adaptive_stop_ended_it(loaded: LoadedModel) -> None:
    # Any entropy is confident enough and no stillness is asked for: every canvas stops after its first step.
    eager = GenerationRequest(
        prompt="Hash", max_canvases=2, max_steps=4, stop_at_eos=False, stability_threshold=0, confidence_threshold=1e9
    )
    # A canvas cannot hold still for as many steps as it has: each runs to max_steps.
    capped = GenerationRequest(
        prompt="Hash", max_canvases=2, max_steps=4, stop_at_eos=False, stability_threshold=4, confidence_threshold=1e9
    )
    stopped, ran = (done(generate(loaded, request)[0]).canvases for request in (eager, capped))
    assert [(c.steps, c.stopped_early) for c in stopped] == [(1, True), (1, True)]
    assert [(c.steps, c.stopped_early) for c in ran] == [(4, False), (4, False)]


def test_tokens_per_forward_is_tokens_over_denoising_steps(loaded: LoadedModel) -> None:
    final = done(generate(loaded, GenerationRequest(prompt="x", max_canvases=2, max_steps=4, stop_at_eos=False))[0])
    assert final.tokens_per_forward == pytest.approx(2 * loaded.canvas_length / 8)


def test_invalid_settings_are_engine_errors(loaded: LoadedModel) -> None:
    with pytest.raises(EngineError, match="t_max"):
        settings_for(loaded, GenerationRequest(prompt="x", t_min=0.9, t_max=0.5))
    with pytest.raises(EngineError, match="max_canvases"):
        settings_for(loaded, GenerationRequest(prompt="x", max_canvases=0))
    with pytest.raises(EngineError, match="t_min must be a number"):
        settings_for(loaded, GenerationRequest(prompt="x", t_min="cold", t_max=0.5))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"prompt": None}, "prompt must be text"),
        ({"prompt": 123}, "prompt must be text"),
        ({"opening": 5}, "opening must be text"),
        ({"gaps": "ab"}, "gaps must be a tuple of texts"),  # two gaps, "a" and "b", it was
        ({"gaps": (5,)}, "gaps must be a tuple of texts"),
        ({"max_tokens": True}, "max_tokens must be a positive integer"),  # one token, it was
        ({"t_max": True}, "t_max must be a number"),
        ({"t_max": "0.7"}, "t_max must be a number"),
    ],
)
def test_fields_of_the_wrong_kind_are_refused_before_queueing_and_do_not_fit(
    loaded: LoadedModel, fields: dict[str, object], said: str
) -> None:
    """They reached the worker, failed there as an engine bug with a traceback ("text input must be of type str"),
    or were read as something else (an engine user's walkthrough); fits() raised on them."""
    request = GenerationRequest(**{"prompt": "x", **fields})  # type: ignore[arg-type]
    with pytest.raises(EngineError, match=said):
        settings_for(loaded, request)
    if "prompt" in fields or "opening" in fields or "max_tokens" in fields:
        assert not fits(loaded, request)


def test_a_prompt_longer_than_the_model_is_an_engine_error(loaded: LoadedModel) -> None:
    request = GenerationRequest(prompt="hash " * 600)
    with pytest.raises(EngineError, match="exceeds the model's 512 positions"):
        plan_batch(loaded, [request], [Row(emit=lambda frame: None)])


def test_left_padding_does_not_change_what_a_prompt_sees(loaded: LoadedModel) -> None:
    """A short prompt batched with a long one gets the logits it gets alone (same canvas)."""
    denoiser = loaded.denoiser
    short = denoiser.encode_prompt("Hash")
    long = denoiser.encode_prompt("A much longer prompt about linked lists, arrays and hash tables")
    canvas = torch.randint(0, denoiser.vocab_size, (1, loaded.canvas_length))
    seen = []
    with torch.no_grad():
        for prompts in ([short], [long, short]):
            input_ids, attention_mask = left_pad(prompts, denoiser.pad_id, loaded.device)
            prefix = denoiser.prefill(input_ids, attention_mask)
            seen.append(denoiser.denoise(prefix, canvas.expand(len(prompts), -1), None))
    alone, batched = seen
    torch.testing.assert_close(batched[1], alone[0], atol=1e-4, rtol=1e-4)


def test_variations_differ_from_each_other(loaded: LoadedModel) -> None:
    request = GenerationRequest(prompt="Hash table", max_steps=4, seed=3, stop_at_eos=False)
    texts = [done(frames).text for frames in generate(loaded, request, request, request)]
    assert len(set(texts)) == 3


def test_a_batch_is_reproducible_for_its_prompts_and_seed(loaded: LoadedModel) -> None:
    request = GenerationRequest(prompt="Hash table", max_steps=4, seed=3, stop_at_eos=False)
    other = GenerationRequest(prompt="Linked list", max_steps=4, seed=3, stop_at_eos=False)
    first = [done(frames).text for frames in generate(loaded, request, other)]
    assert [done(frames).text for frames in generate(loaded, request, other)] == first


def test_requests_with_different_settings_are_not_batched(loaded: LoadedModel) -> None:
    rows = [Row(emit=lambda frame: None), Row(emit=lambda frame: None)]
    requests = [GenerationRequest(prompt="a", max_steps=4), GenerationRequest(prompt="b", max_steps=5)]
    with pytest.raises(ValueError, match="share their generation settings"):
        plan_batch(loaded, requests, rows)


OPENING = "<h1>Hash table</h1>"


def test_an_opening_holds_in_every_draft_of_the_first_canvas_and_starts_the_text(loaded: LoadedModel) -> None:
    opened = GenerationRequest(prompt="Hash table", max_canvases=2, max_steps=4, stop_at_eos=False, opening=OPENING)
    plain = GenerationRequest(prompt="Linked list", max_canvases=2, max_steps=4, stop_at_eos=False)
    with_opening, without = generate(loaded, opened, plain)  # one batch: the opening is per row
    drafts = [f for f in with_opening if isinstance(f, StepFrame) and f.canvas == 0]
    assert len(drafts) == 4 and all(f.text.startswith(OPENING) for f in drafts)
    canvases = [f for f in with_opening if isinstance(f, CanvasFrame)]
    assert canvases[0].text.startswith(OPENING) and not canvases[1].text.startswith(OPENING)  # first canvas only
    assert done(with_opening).text.startswith(OPENING) and len(done(with_opening).text) > len(OPENING)
    assert not done(without).text.startswith(OPENING)
    assert done(generate(loaded, opened, plain)[0]).text == done(with_opening).text  # reproducible


def test_an_opening_that_fills_the_page_is_an_engine_error(loaded: LoadedModel) -> None:
    request = GenerationRequest(prompt="x", max_canvases=2, opening="<p>Hash table</p>" * loaded.canvas_length)
    with pytest.raises(EngineError, match="opening is .* tokens, which leaves no room in the page"):
        plan_batch(loaded, [request], [Row(emit=lambda frame: None)])


def test_an_opening_longer_than_a_canvas_runs_on_into_the_next(loaded: LoadedModel) -> None:
    length, words = loaded.canvas_length, []
    while len(loaded.tokenizer.encode(" ".join(words), add_special_tokens=False)) <= length + 2:
        words.append(f"item{len(words)}")
    opening = " ".join(words)  # a whole canvas and a few tokens of the next
    long = GenerationRequest(prompt="List", max_canvases=3, max_steps=4, stop_at_eos=False, opening=opening)
    short = GenerationRequest(prompt="List", max_canvases=3, max_steps=4, stop_at_eos=False, opening="<h1>List</h1>")
    spanning = generate(loaded, long)[0]
    assert not [f for f in spanning if isinstance(f, StepFrame) and f.canvas == 0]  # given whole: no step
    drafts = [f for f in spanning if isinstance(f, StepFrame) and f.canvas == 1]
    tail = loaded.tokenizer.decode(loaded.tokenizer.encode(opening, add_special_tokens=False)[length:])
    assert drafts and all(f.text.startswith(tail) for f in drafts)  # the rest pinned in the second canvas
    assert done(spanning).text.startswith(opening) and len(done(spanning).text) > len(opening)
    together, other = generate(loaded, long, short)  # one batch: openings of one and two canvases
    assert done(together).text.startswith(opening)
    assert done(other).text.startswith("<h1>List</h1>") and not done(other).text.startswith(opening[:20])
    assert [f for f in other if isinstance(f, StepFrame) and f.canvas == 0]  # its first canvas is denoised


def test_fits_agrees_with_the_length_checks_of_a_plan(loaded: LoadedModel) -> None:
    from engine.generation import fits

    positions = loaded.denoiser.max_positions
    room = positions - 2 * loaded.canvas_length - 2  # <bos> and <response> take two positions
    words = ["Hash table " * n for n in (1, room // 4, room, positions)]
    for text in words:
        for opening in ("", OPENING, "<p>x</p>" * loaded.canvas_length):
            request = GenerationRequest(prompt=text, max_canvases=2, opening=opening)
            planned = True
            try:
                plan_batch(loaded, [request], [Row(emit=lambda frame: None)])
            except EngineError:
                planned = False
            assert fits(loaded, request) == planned
    assert fits(loaded, GenerationRequest(prompt="Hash table", max_canvases=2))
    assert not fits(loaded, GenerationRequest(prompt="Hash table " * positions, max_canvases=2))


def test_max_tokens_rounds_up_to_whole_canvases_and_replaces_max_canvases(loaded: LoadedModel) -> None:
    request = GenerationRequest(
        prompt="x", max_canvases=5, max_tokens=loaded.canvas_length + 1, max_steps=2, stop_at_eos=False
    )
    final = done(generate(loaded, request)[0])
    assert len(final.canvases) == 2
    with pytest.raises(EngineError, match="max_tokens"):
        settings_for(loaded, GenerationRequest(prompt="x", max_tokens=0))


def test_a_word_written_twice_is_left_out_of_the_text_unless_pinned(loaded: LoadedModel) -> None:
    tokenizer, length = loaded.tokenizer, loaded.canvas_length

    def one(text: str) -> int:
        (token,) = tokenizer.encode(text, add_special_tokens=False)
        return int(token)

    hash_, table, keys, fox, digit = one("Hash"), one(" table"), one(" keys"), one(" fox"), one("11"[0])
    letter, h, the, the_ = one("A"), one(" h"), one("The"), one(" the")
    # Two canvases: an opening `HashHash` (pinned: the reader's title), words and digits written twice, and a
    # repeat across the canvases' boundary.
    first = [hash_, hash_, table, table, digit, digit, letter, letter, h, h, the, the_, the_]
    first += [fox] * (length - len(first) - 1) + [keys]
    second = [keys, table] + [fox] * (length - 2)
    pinned = Pins(torch.tensor([first + second]), torch.tensor([[True, True] + [False] * (2 * length - 2)]))

    def text(drop: bool, pins: Pins | None) -> str:
        frames: list[Frame] = []
        settings = dataclasses.replace(
            settings_for(loaded, GenerationRequest(prompt="x", max_canvases=2)), drop_doubled_words=drop
        )
        streamer = FrameStreamer(tokenizer, [Row(emit=frames.append)], settings, loaded.denoiser.eos_id, False, pins)
        for canvas in (first, second):
            streamer.canvas(torch.tensor([canvas]))
        streamer.end()
        return done(frames).text

    def decoded(ids: list[int]) -> str:
        return str(tokenizer.decode(ids, skip_special_tokens=True))

    assert text(False, pinned) == decoded(first + second)
    # The pin stays, and so do digits, a letter in a word (`AA`) and a word's start after a piece (`The the`).
    kept = [hash_, hash_, table, digit, digit, letter, letter, h, the, the_, fox, keys, table, fox]
    assert text(True, pinned) == decoded(kept)
    assert text(True, None) == decoded(kept[1:])


def test_a_whole_word_or_a_word_across_a_separator_written_twice_is_left_out(loaded: LoadedModel) -> None:
    tokenizer = loaded.tokenizer

    def ids(*pieces: str) -> list[int]:
        out = []
        for piece in pieces:
            (token,) = tokenizer.encode(piece, add_special_tokens=False)
            out.append(int(token))
        return out

    def text(canvas: list[int], pinned: list[bool] | None = None) -> str:
        frames: list[Frame] = []
        settings = dataclasses.replace(
            settings_for(loaded, GenerationRequest(prompt="x", max_canvases=1)), drop_doubled_words=True
        )
        padded = canvas + ids(" fox") * (loaded.canvas_length - len(canvas))
        keep = (pinned or []) + [False] * (len(padded) - len(pinned or []))
        pins = Pins(torch.tensor([padded]), torch.tensor([keep]))
        streamer = FrameStreamer(tokenizer, [Row(emit=frames.append)], settings, loaded.denoiser.eos_id, False, pins)
        streamer.canvas(torch.tensor([padded]))
        streamer.end()
        return done(frames).text.removesuffix(" fox")  # the padding, written over and over, reads once

    # The tiny model's tokenizer has few merges; the default model's reads `>Desktop desktop` as `>`, `Desk`, `top`,
    # ` desktop` and `client.py.py` as `client`, `.`, `py`, `.`, `py`.
    # A word split in two pieces after a tag, then the same word whole.
    assert text(ids(">", "h", "ash", " hash", " table")) == ">hash table"
    # Across a separator stuck to both words, however often.
    assert text(ids("Hash", ".", "Hash", "<")) == "Hash<"
    assert text(ids(" table", "-", "ab", "-", "ab", "-", "ab", ",")) == " table-ab,"
    assert text(ids("ash", "_", "ash", "/")) == "ash/"
    # Not a repeat: the word goes on (`bash.bashrc`), the word before is longer (`numpy.py`), a space comes
    # between (`one. One`), digits (`1.1`), or the separator is pinned.
    for kept in (("Hash", ".", "Hash", "ab", "<"), ("h", "ash", ".", "ash", "<"), (" hash", ".", " hash", " table")):
        assert text(ids(*kept)) == "".join(kept)
    assert text(ids("1", ".", "1", "<")) == "1.1<"
    assert text(ids("Hash", ".", "Hash", "<"), [False, True]) == "Hash.Hash<"


def test_the_default_models_stutters_are_left_out_of_its_text() -> None:
    """What the default model writes twice on its pages (a board of session 46's server: `Pro WebWeb is in the in
    the out`, `in lin · · 64 points`; a wiki article: `object,, containing`), read with its own tokenizer."""
    from transformers import AutoTokenizer

    from engine.denoise import DenoiseSettings
    from engine.identity import DEFAULT_MODEL

    tokenizer = AutoTokenizer.from_pretrained(DEFAULT_MODEL)
    settings = DenoiseSettings(max_canvases=1, max_steps=1, entropy_bound=1.0, drop_doubled_words=True)

    def text(written: str | tuple[str, ...], pinned: int = 0, drop: bool = True) -> str:
        """``written`` read as the tokenizer splits it, or as the tokens given (a tuple: each piece one token)."""
        pieces = (written,) if isinstance(written, str) else written
        ids = [i for piece in pieces for i in tokenizer.encode(piece, add_special_tokens=False)]
        assert isinstance(written, str) or len(ids) == len(written), "each piece must be one token"
        ids.append(tokenizer.eos_token_id)
        keep = torch.tensor([[i < pinned for i in range(len(ids))]])
        frames: list[Frame] = []
        streamer = FrameStreamer(
            tokenizer,
            [Row(emit=frames.append)],
            dataclasses.replace(settings, drop_doubled_words=drop),
            tokenizer.eos_token_id,
            True,
            Pins(torch.tensor([ids]), keep),
        )
        streamer.canvas(torch.tensor([ids]))
        streamer.end()
        return done(frames).text

    assert text(" Pro WebWeb is in the in the out") == " Pro Web is in the out"
    assert text(" Pro WebWeb web is") == " Pro Web is"  # the word the stuck repeat left goes on
    assert text(" by x in lin · · 64 points") == " by x in lin · 64 points"
    assert text(" 78 points ·  · 20 replies") == " 78 points ·  20 replies"  # whitespace between (session 47)
    assert text(" a ·\n· b") == " a ·\n b"
    assert text(" a · b · c") == " a · b · c"
    assert text(" a object,, containing, and a,,,, b") == " a object, containing, and a, b"
    assert text(" in the in the in the end") == " in the end"
    assert text(">DownloadsDownloads</a>") == ">Downloads</a>"
    # A board's meta line (seed 0's first clicks, sessions 47-48): a word and its dot written twice.
    assert text(" by x in debian · debian · 3 points · 4 replies") == " by x in debian · 3 points · 4 replies"
    assert text(" in science · science · 26 points") == " in science · 26 points"
    # The desktop's file manager at seed 0 (session 48): the pair's last piece written a third time.
    assert text(("/", "Down", "loads", "Down", "loads", "loads", "/")) == "/Downloads/"
    assert text(" list-list-list.") == " list."
    # A word repeated across a separator goes once, with its separator, and nothing more (the model's board at seed
    # 0: `April_to_to_to_to`, `notes.txt.txt`).
    assert text('/r/x/April_to_to_to_to">April to to to') == '/r/x/April_to">April to'
    assert text(" notes.txt.txt and high-priority-priority now") == " notes.txt and high-priority now"
    assert text(" Pro WebWeb is in the in the out", drop=False) == " Pro WebWeb is in the in the out"
    # What English, names and data write twice on purpose, and what only looks like a repeat, stays.
    for kept in (
        " over and over and over",
        " as bright as bright",
        " step by step by step, day after day after day",
        " New York New York is",
        " a murmur and a bonbon, dumdum",  # ` mur` + `mur`: lower case; ` d` + `um`: one letter
        " the theory of the theorem",
        " in the inn the",  # ` inn` is no ` in`
        " for (;;) {}",
        " item · 3 · 4",
        " WebSite Web and WikiWikiWeb",
        " COCOMO and over and over and over again and again and again, as sad as sad can be",
        " the U.S.S.R. and e.g. i.e. a.k.a. 1.1.1.1, 10.x.x.x and self.x.x = 1",
        " e.g.g.g.g. is one letter's run",
        " No. No. No.",
        " Bora Bora and Walla Walla",
        " -.-.-. and _-_-_-",
        " id,name,,age and [1,,3]",
        " x · a · a · b and 12 · 12 · 3",  # one letter, or no letters
        " in Debian · debian · 3 and anti-science · science · 4",  # not the same word
    ):
        assert text(kept) == kept
    # A pinned repeat stays (the opening wrote it), and so does the model's first copy of a pinned pair.
    assert text(" in the in the end", pinned=4) == " in the in the end"
    assert text(" Web Web", pinned=2) == " Web Web"
    assert text(" in science · science · 26", pinned=4) == " in science · science · 26"  # the word pinned


def test_a_pair_written_twice_at_a_canvas_end_waits_for_the_next_canvas() -> None:
    """The default model's board at seed 0 (session 46) listed `Pro Web is in the in the out`: it wrote `in the in
    in the` at its first canvas's end, where what follows was not known yet."""
    from transformers import AutoTokenizer

    from engine.denoise import DenoiseSettings
    from engine.identity import DEFAULT_MODEL

    tokenizer = AutoTokenizer.from_pretrained(DEFAULT_MODEL)
    settings = DenoiseSettings(max_canvases=3, max_steps=1, entropy_bound=1.0, drop_doubled_words=True)

    def text(*canvases: str) -> tuple[str, list[str]]:
        frames: list[Frame] = []
        streamer = FrameStreamer(tokenizer, [Row(emit=frames.append)], settings, tokenizer.eos_token_id, True)
        for index, written in enumerate(canvases):
            ids = tokenizer.encode(written, add_special_tokens=False)
            streamer.canvas(torch.tensor([ids + [tokenizer.eos_token_id] * (index == len(canvases) - 1)]))
        streamer.end()
        return done(frames).text, [frame.text for frame in frames if isinstance(frame, CanvasFrame)]

    final, shown = text(" Pro Web is in the in in the", " out by x")
    assert final == " Pro Web is in the out by x"
    assert shown == [" Pro Web is in the", " out by x"]  # the canvases' texts still add up to the page
    assert text(" then in the in the", "ory of it")[0] == " then in the in theory of it"  # no pair: a word goes on
    assert text(" it is in the in the", "")[0] == " it is in the"  # the page ended: nothing follows
    assert text(" it is in the in the", " end", " and")[0] == " it is in the end and"


def test_an_infill_regions_last_words_are_read_with_the_text_after_it() -> None:
    """An infill's region is followed by the kept text after it, in the same canvas: that is what follows the
    region's last token, not the page's end."""
    from transformers import AutoTokenizer

    from engine.denoise import DenoiseSettings
    from engine.identity import DEFAULT_MODEL

    tokenizer = AutoTokenizer.from_pretrained(DEFAULT_MODEL)
    settings = DenoiseSettings(max_canvases=1, max_steps=1, entropy_bound=1.0, drop_doubled_words=True)

    def infill(region: str, after: str) -> str:
        ids = tokenizer.encode(region, add_special_tokens=False)
        kept = tokenizer.encode(after, add_special_tokens=False)
        frames: list[Frame] = []
        row = Row(emit=frames.append, span=slice(0, len(ids)), prefix="It is", suffix=after)
        streamer = FrameStreamer(tokenizer, [row], settings, tokenizer.eos_token_id, True)
        streamer.canvas(torch.tensor([ids + kept + [tokenizer.eos_token_id]]))
        streamer.end()
        return done(frames).text

    assert infill(" in the in the", "ory of it") == "It is in the in theory of it"  # the region's word goes on
    assert infill(" in the in the", " end") == "It is in the end"
    assert infill(" a WebWeb", "site") == "It is a WebWebsite"  # `Web` does not end its word


def test_digits_and_whitespace_may_run_past_the_cap_and_words_may_not() -> None:
    """``cap_runs`` leaves the default tokenizer's digits (`1000000`) and whitespace (indentation) alone."""
    from transformers import AutoTokenizer

    from engine.generation import free_to_run
    from engine.identity import DEFAULT_MODEL

    tokenizer = AutoTokenizer.from_pretrained(DEFAULT_MODEL)
    free = free_to_run(tokenizer, len(tokenizer))
    assert free.shape == (len(tokenizer),)

    def one(text: str) -> int:
        ids = tokenizer.encode(text, add_special_tokens=False)
        assert len(ids) == 1, (text, ids)
        return int(ids[0])

    assert all(free[one(text)] for text in ("0", "7", "\n", "    ", "\n\n"))
    assert not any(free[one(text)] for text in (".", "g", " the", "~", "_", "li"))
    assert free_to_run(tokenizer, len(tokenizer)) is free  # once per tokenizer


def test_a_row_whose_consumer_left_is_no_longer_computed_and_the_others_finish(
    loaded: LoadedModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Three variations; the second's consumer leaves after its first frame: the next forwards run over two rows,
    and the other two pages are written to their end."""
    widths: list[int] = []
    denoise = type(loaded.denoiser).denoise

    def counting(self, prefix, canvas, self_conditioning):  # type: ignore[no-untyped-def]
        widths.append(canvas.shape[0])
        return denoise(self, prefix, canvas, self_conditioning)

    monkeypatch.setattr(type(loaded.denoiser), "denoise", counting)
    request = GenerationRequest(prompt="Hash table", max_steps=4, seed=3, stop_at_eos=False)
    frames: list[list[Frame]] = [[], [], []]
    rows = [
        Row(emit=frames[0].append),
        Row(emit=frames[1].append, cancelled=lambda: bool(frames[1])),
        Row(emit=frames[2].append),
    ]
    run_plan(loaded, plan_batch(loaded, [request] * 3, rows))
    assert widths[0] == 3 and set(widths[1:]) == {2}
    assert len(frames[1]) == 1 and isinstance(done(frames[0]), DoneFrame) and isinstance(done(frames[2]), DoneFrame)
