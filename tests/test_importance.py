"""The importance a memory gets when the caller gives none (services/rules.py): an explicit request
to keep something, or an instruction, raises it; the same words inside a statement do not. On
LoCoMo's conversations "important", "always" and "never" are mostly chit-chat ("it's so important",
"I've always wanted to"), and the raise they gave let those turns outrank the answer: dev R@5 61.0
with it, 63.8 without (tools/eval_retrieval.py --only locomo)."""

from __future__ import annotations

import pytest

from mcp_memory.services.rules import estimate_importance

PLAIN = estimate_importance("The user lives in Berlin", "fact")

RAISED = [
    "Never push directly to the main branch; open a pull request",
    "Caroline: Always bring a water bottle to the trail.",
    "Please make sure the tests pass before merging",
    "You should always run the linter first",
    "Important: the user is allergic to peanuts",
    "IMPORTANT! Rotate the staging keys every month",
    "Remember this: the door code ends in 4471",
    "From now on reply in Spanish",
    "Don't forget the standup moved to 9:30",
    "记住：用户对花生过敏",
    "以后都用中文回复",
]

NOT_RAISED = [
    "Taking time for yourself is so important.",
    "Melanie: I have always wanted to paint the lake at dawn",
    "Sharing our experiences isn't always easy",
    "I'll make sure these kids have a safe place",
    "It's important to me that people get the help they need",
    "The user never drinks coffee after lunch",
]


@pytest.mark.parametrize("text", RAISED)
def test_a_request_or_an_instruction_raises_importance(text: str) -> None:
    assert estimate_importance(text, "fact") > PLAIN


@pytest.mark.parametrize("text", NOT_RAISED)
def test_the_same_words_inside_a_statement_do_not(text: str) -> None:
    assert estimate_importance(text, "fact") == PLAIN
