"""The hybrid tuning harness chooses on the tune half only and scores with the API's fusion."""

from __future__ import annotations

from search_api import service
from search_api.candidates import Candidate
from search_api.query import HybridTuning
from sidecar_tools.quality import hybrid_tune as ht
from sidecar_tools.quality.queries import Identities

IDS = Identities({k: (f"<{k}>", f"t-{k}") for k in "abcdefgh"})


def _hits(keys: str) -> list[Candidate]:
    return [Candidate(k, f"t-{k}", 0, 1.0) for k in keys]


def _legs(half: str, text: str, vector: str, relevant: str) -> ht.Legs:
    texts = dict.fromkeys(ht.GRID_ANY_WORDS, _hits(""))
    texts["1"] = _hits(text)  # only the relaxed leg finds anything, as on descriptive queries
    return ht.Legs("s", half, frozenset(f"<{k}>" for k in relevant), IDS, texts, _hits(vector))


def test_the_choice_is_made_on_the_tune_half_only() -> None:
    tune = _legs("tune", "a", "bcdefgh" + "a", "a")  # full text finds what the vector ranks last
    default, best, ranked = ht.tune([tune])
    assert default.tuning == service.HYBRID and ranked[0] == best
    assert best.ndcg["tune"] == max(r.ndcg["tune"] for r in ranked) == 1.0
    assert best.tuning.any_words is not None  # with all words needed the text leg is empty
    assert ht.score([tune], HybridTuning(any_words=None)).ndcg["tune"] < 1.0
    for check in ("a", "b", "h"):  # whatever the check half says cannot change the choice
        with_check = ht.tune([tune, _legs("check", "b", "hgfedcb", check)])[1]
        assert with_check.tuning == best.tuning and with_check.ndcg["tune"] == best.ndcg["tune"]


def test_a_row_scores_what_the_api_would_rank() -> None:
    leg = _legs("tune", "ab", "ba", "a")
    row = ht.score([leg], HybridTuning(k=1, text_weight=1.0, vector_weight=0.5, any_words="1"))
    assert row.ndcg["tune"] == 1.0 and row.recall["tune"] == 1.0  # a: 1/2 + 0.25 beats b
    assert ht.tune_table(row, row, [row])[2].startswith("| shipped default | 1 | 1 / 0.5 |")
