"""The pure parts of contacts and "did you mean": the prefix as a leaf value, domains,
folding, names never from Bcc, which changes move a contact, edit distances, the rewrite."""

from __future__ import annotations

from indexer.core import contacts as summary
from indexer.core.documents import Participant
from search_api import contacts, suggest
from search_api.query import parse


def test_a_prefix_is_only_ever_a_leaf_value() -> None:
    for hostile in (".*", "a|b", "[", "\\", 'a"b', "(", "a{1,9}", "~@#&<>"):
        body = contacts.contacts_body("m", hostile, 5)
        matching = body["query"]["function_score"]["query"]["bool"]["filter"]
        assert matching[0] == {"term": {"mailbox_id": "m"}}
        prefixes = matching[1]["bool"]["should"]
        assert prefixes[0] == {"prefix": {"email.p": {"value": hostile}}}
        assert prefixes[1] == {"prefix": {"domains": {"value": hostile}}}


def test_domains_are_every_suffix_from_a_label() -> None:
    assert summary.domains("a@lists.gitlab.example") == [
        "lists.gitlab.example", "gitlab.example", "example"]
    assert summary.domains("ralf@linux-mips.org") == ["linux-mips.org", "org"]
    assert summary.domains("no-domain") == [] and summary.domains("x@") == []


def test_fold_and_names_never_from_bcc() -> None:
    assert summary.fold("Renée LEFÈVRE") == "renee lefevre"
    people = (Participant("bcc", "ralf@x.org", "Hidden"), Participant("cc", "RALF@x.org", "Ralf"))
    assert summary.name_in(people, "ralf@x.org") == "Ralf"
    assert summary.name_in(people[:1], "ralf@x.org") is None


def test_only_a_change_of_addresses_or_time_moves_contacts() -> None:
    doc = {"from": {"address": "A@x.org"}, "to": ["b@x.org"], "cc": [], "ts": 5}
    assert summary.touched(doc, {**doc, "clean": "re-parsed"}) == set()
    assert summary.touched(None, doc) == {"a@x.org", "b@x.org"}
    assert summary.touched(doc, None) == {"a@x.org", "b@x.org"}
    assert summary.touched(doc, {**doc, "cc": ["c@x.org"]}) == {"a@x.org", "b@x.org", "c@x.org"}
    assert summary.touched(doc, {**doc, "ts": 6}) == {"a@x.org", "b@x.org"}


def test_a_tally_reads_the_count_and_the_newest_message() -> None:
    answer = {"hits": {"total": {"value": 3}, "hits": [
        {"fields": {"ts": ["1556621014.000"], "message_key": ["k"]}}]}}
    assert summary.read_tally(answer) == summary.Tally(3, 1556621014, "k")
    assert summary.read_tally({"hits": {"total": {"value": 0}, "hits": []}}) == summary.ABSENT


def test_variants_are_every_word_one_edit_away() -> None:
    found = suggest.variants("kernal")
    assert {"kernel", "kenral", "kerna", "kernals", "kernnal"} <= found
    assert "kernal" not in found and "kurnel" not in found
    assert all(suggest.edits(v, "kernal") == 1 for v in found)
    assert len(suggest.variants("abcdefghij")) == 545  # 53 n + 25, less the repeats


def test_edits_count_a_swap_as_one() -> None:
    assert suggest.edits("recieve", "receive") == 1
    assert suggest.edits("treers", "trees") == 1
    assert suggest.edits("kernal", "kernel") == 1
    assert suggest.edits("lisbonn", "lisbon") == 1
    assert suggest.edits("abc", "xyz") == 3
    assert suggest._swapped("terms", "trems") and not suggest._swapped("trees", "trems")
    assert [suggest.allowed_edits(w) for w in ("ab", "abc", "abcde", "abcdef")] == [0, 1, 1, 2]


def test_only_free_words_are_corrected_case_kept() -> None:
    q = 'Kernal from:kernal "kernal" -kernal kernal'
    assert suggest._replaced(q, {"kernal": "kernel"}) == (
        'Kernel from:kernal "kernel" -kernel kernel')
    parse(suggest._replaced(q, {"kernal": "kernel"}))  # still a query


def test_what_is_never_corrected() -> None:
    for word in ("abc", "x86", "lib/file.c", "foo_bar", "日本語の"):
        assert not suggest._spellable(word), word
    assert suggest._spellable("Réunion") and suggest._spellable("kernal")
