"""A question asked in a dialog is answered by the turn after it: the reply takes the asking turn's
evidence, and a turn that asks something else in passing passes nothing on (issue 37, item 4)."""

from __future__ import annotations

import pytest
from mcp.client import Client

from mcp_memory.services.question import ANSWERS, asking_part
from tests.conftest import explained_hits, remember_all

pytestmark = pytest.mark.anyio

ASKED = "Melanie: Sounds great! What kind of counseling and mental health services do you want to pursue?"
REPLY = "Caroline: Working with trans people, mostly. Helping them accept who they are."
DIALOG = [
    "Caroline: Hey Mel! I had a busy week at the library.",
    "Melanie: Nice! The kids and I painted a sunset over the lake on Sunday.",
    "Caroline: I love that. I have been thinking about what to do after school.",
    ASKED,
    REPLY,
    "Melanie: That is wonderful. They will be lucky to have you.",
    "Caroline: Thanks! By the way, I finally adopted a puppy from the shelter.",
    "Melanie: We went camping with the whole family last month.",
    "Caroline: Just got back from a road trip to the coast! Anything new with you?",
    "Melanie: Been busy with pottery classes and swimming with the kids.",
]


@pytest.fixture
async def dialog(client: Client) -> Client:
    await remember_all(client, DIALOG)
    return client


async def test_the_reply_to_a_turn_asking_the_question_ranks_first(dialog: Client) -> None:
    hits = await explained_hits(dialog, "What kind of counseling services is Caroline interested in pursuing?")
    texts = [h["text"] for h in hits]
    assert texts[0] == REPLY, texts
    assert ANSWERS in hits[0]["why"]
    # it took the asking turn's evidence, no more: the asking turn's own, before its demotion
    asked = hits[texts.index(ASKED)]
    assert hits[0]["signals"]["fused"] - (hits[0]["signals"]["understanding"] or 0.0) == pytest.approx(
        asked["signals"]["fused"] - asked["signals"]["understanding"], abs=1e-3
    )


async def test_a_question_asked_in_passing_passes_nothing_on(dialog: Client) -> None:
    """The road trip turn matched with what it said; its closing "Anything new?" is not the question."""
    hits = await explained_hits(dialog, "When did Caroline take a road trip?")
    assert hits[0]["text"] == DIALOG[8]
    assert not any(ANSWERS in h["why"] for h in hits), [(h["text"], h["why"]) for h in hits]


async def test_a_statement_is_no_question_to_answer(dialog: Client) -> None:
    hits = await explained_hits(dialog, "counseling and mental health services")
    assert not any(ANSWERS in h["why"] for h in hits)


async def test_facts_without_speakers_are_not_a_dialog(client: Client) -> None:
    facts = [
        "What editor does the user prefer? Still to ask.",
        "The user writes code in Neovim.",
        "The user's dog is called Pixel.",
        "The user lives in Lisbon.",
        "The user is learning Japanese.",
    ]
    await remember_all(client, facts)
    hits = await explained_hits(client, "What editor does the user prefer?")
    assert not any(ANSWERS in h["why"] for h in hits)


def test_the_asking_part_is_the_closing_questions() -> None:
    assert (
        asking_part("Just got back from a trip! Anything new? How are the kids?") == "Anything new? How are the kids?"
    )
    assert asking_part("What do you want to pursue?") == "What do you want to pursue?"
    assert asking_part("I went camping.") == ""
