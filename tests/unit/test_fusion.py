"""Reciprocal rank fusion: hand-computed scores, deterministic tie-breaks, input checks."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from search_api.query import rrf


def test_single_ranking_keeps_its_order() -> None:
    assert rrf([["a", "b", "c"]]) == [("a", 1 / 61), ("b", 1 / 62), ("c", 1 / 63)]


def test_agreement_beats_a_single_first_place() -> None:
    fused = rrf([["a", "b", "c"], ["b", "c", "d"]], k=60)
    assert [item for item, _ in fused] == ["b", "c", "a", "d"]
    scores = dict(fused)
    assert scores["b"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 62)
    assert scores["a"] == pytest.approx(1 / 61)
    assert scores["d"] == pytest.approx(1 / 63)


def test_k_and_weights() -> None:
    assert rrf([["a"], ["b"]], k=0, weights=[1.0, 3.0]) == [("b", 3.0), ("a", 1.0)]
    assert rrf([["a", "b"], ["b", "a"]], k=1, weights=[2.0, 1.0]) == [
        ("a", 2 / 2 + 1 / 3),
        ("b", 2 / 3 + 1 / 2),
    ]
    assert rrf([["a"], ["b"]], weights=[0.0, 1.0])[0][0] == "b"


def test_ties_go_to_best_rank_then_id() -> None:
    # x and y both score 1/61 + 1/63 with best rank 1: the id decides; q (2/62) is just below.
    fused = rrf([["y", "q", "x"], ["x", "q", "y"]])
    assert fused[0][1] == fused[1][1] > fused[2][1]
    assert [i for i, _ in fused] == ["x", "y", "q"]
    # k=0: w = 1/1, y = 1/1, x = 1/2 + 1/2: all tie; x's best rank (2) puts it last.
    assert rrf([["y", "x"], ["w", "x"]], k=0) == [("w", 1.0), ("y", 1.0), ("x", 1.0)]


def test_equal_scores_compare_equal_whatever_the_order_of_rankings() -> None:
    rankings = [["a", "b", "c"], ["c", "a", "b"], ["b", "c", "a"]]
    fused = rrf(rankings)
    assert fused[0][1] == fused[1][1] == fused[2][1]
    assert [i for i, _ in fused] == ["a", "b", "c"]
    assert rrf(list(reversed(rankings))) == fused


def test_duplicates_within_a_ranking_count_once() -> None:
    assert rrf([["a", "a", "b"]]) == [("a", 1 / 61), ("b", 1 / 63)]


def test_empty_input() -> None:
    assert rrf([]) == []
    assert rrf([[], []]) == []


@pytest.mark.parametrize(
    ("kwargs", "rankings"),
    [
        ({"k": -1}, [["a"]]),
        ({"weights": [1.0]}, [["a"], ["b"]]),
        ({"weights": [-1.0]}, [["a"]]),
        ({"weights": [math.nan]}, [["a"]]),
    ],
)
def test_bad_arguments(kwargs: dict[str, object], rankings: list[list[str]]) -> None:
    with pytest.raises(ValueError):
        rrf(rankings, **kwargs)  # type: ignore[arg-type]


@given(st.lists(st.lists(st.sampled_from("abcdefgh"), max_size=8), max_size=4))
def test_fusion_is_a_deterministic_total_order(rankings: list[list[str]]) -> None:
    fused = rrf(rankings)
    ids = [item for item, _ in fused]
    assert len(ids) == len(set(ids)) == len({i for r in rankings for i in r})
    scores = [score for _, score in fused]
    assert scores == sorted(scores, reverse=True)
    assert rrf(rankings) == fused
    assert dict(rrf(list(reversed(rankings)))) == dict(fused)


def test_hybrid_fuse_cuts_each_leg_to_its_depth_and_weighs_it() -> None:
    from search_api.candidates import Candidate
    from search_api.query import HybridTuning
    from search_api.service import fuse

    def hits(*keys: str) -> list[Candidate]:
        return [Candidate(k, f"t-{k}", 0, 1.0) for k in keys]

    text, vector = hits("a", "b", "c"), hits("c", "d")
    even = fuse(text, vector, HybridTuning(k=1, text_depth=2, vector_depth=2))
    # c is beyond the text depth: it counts by its vector rank only (1/2), like a (1/2)
    assert [c.message_key for c in even] == ["a", "c", "b", "d"]
    assert [round(c.score, 4) for c in even] == [0.5, 0.5, 0.3333, 0.3333]
    leaning = fuse(text, vector, HybridTuning(k=1, text_weight=0.5, vector_weight=1.0))
    assert [c.message_key for c in leaning][:2] == ["c", "d"]  # c: 0.5/4 + 1/2; d: 1/3
    assert text[0].score == 1.0  # the legs' candidates are not changed
