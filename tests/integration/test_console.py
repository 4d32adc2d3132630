"""The search console in a real browser: Debian's headless Chromium, driven by Selenium through
Debian's ChromeDriver (nothing downloads a browser), against ``sidecar serve`` on the local
stack, over the demo's sample mailbox plus one hostile message indexed by the real pipeline.

``SIDECAR_CONSOLE_SCREENSHOT=docs/using/console.png`` also writes the screenshot of docs/using/console.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver

from indexer.settings import to_env
from search_api.auth import token_hash
from tests.conftest import namespaced
from tests.support.api_fixtures import (
    TOKEN_A,
    Api,
    free_port,
    index_all,
    mail,
    serve_process,
    start_api,
    store_all,
)
from tests.support.console_browser import (
    answered,
    chromium,
    hit_keys,
    hits,
    log_in,
    page_state,
    search,
    status,
    text_of,
)
from tests.support.ops_helpers import SAMPLE
from tests.support.waiting import wait_http_ok

pytestmark = [pytest.mark.stack, pytest.mark.slow]

HOSTILE_SUBJECT = '<img src=x onerror="window.__pwned=1">Hostile invoice \u202etxt.exe'
HOSTILE_BODY = "Pay this hostile invoice <b>today</b>: <script>window.__pwned=2</script>"
HOSTILE = mail(
    900,
    HOSTILE_SUBJECT,
    HOSTILE_BODY,
    sender=('"><svg onload=alert(1)>', "evil@attacker.example"),
    to=["demo@example.com"],
    day=20,
)


def key(message_id: str) -> str:
    return hashlib.sha256(message_id.encode()).hexdigest()


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    unique = uuid.uuid4().hex[:8]
    tmp = tmp_path_factory.mktemp("console")
    settings = namespaced("console", tmp, unique, console=True)
    sample = [json.loads(line) for line in SAMPLE.read_text(encoding="utf-8").splitlines()]
    for running in start_api(settings, tmp, "demo@example.com", f"other-{unique}"):
        store_all(settings, running.mailbox_a, [*sample, HOSTILE])
        index_all(settings, tmp)
        yield running


@pytest.fixture(scope="module")
def browser(api: Api, tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    driver = chromium(tmp_path_factory.mktemp("chromium"))
    try:
        log_in(driver, api.url, api.mailbox_a, TOKEN_A)
        yield driver
    finally:
        driver.quit()


def test_token_lives_in_session_storage_only(api: Api, browser: WebDriver) -> None:
    stored = browser.execute_script(
        "return [sessionStorage.getItem('sidecar-console-token'), localStorage.length,"
        " document.cookie]"
    )
    assert stored == [TOKEN_A, 0, ""]
    assert TOKEN_A not in browser.current_url
    assert browser.find_element(By.ID, "token").get_attribute("value") == ""


def test_operator_query_shows_the_expected_hits(browser: WebDriver) -> None:
    search(browser, "from:travel subject:lisbon")
    expected = {key("lisbon-offsite-2@northwind.example"), key("lisbon-offsite-5@northwind.example")}
    assert set(hit_keys(browser)) == expected, page_state(browser)
    assert status(browser).startswith("2 hit(s) on page 1") and " ms · fulltext" in status(browser)
    first = hits(browser)[0]
    assert first.find_element(By.CSS_SELECTOR, ".subject mark").text == "Lisbon"
    assert "travel@northwind.example" in first.find_element(By.CSS_SELECTOR, ".from").text
    assert first.find_element(By.CSS_SELECTOR, ".thread").text == "thread of 6"
    assert re.fullmatch(r"2025-03-0[56] \d\d:\d\d UTC", first.find_element(By.CSS_SELECTOR, ".date").text)


def test_syntax_help_is_one_click_away(browser: WebDriver) -> None:
    browser.find_element(By.CSS_SELECTOR, "#syntax summary").click()
    example = browser.find_element(By.XPATH, "//*[@id='examples']//code[text()='has:attachment']")
    example.click()
    assert browser.find_element(By.ID, "q").get_attribute("value") == "has:attachment"
    answered(browser, browser.find_element(By.ID, "go").click)
    assert hit_keys(browser) == [key("outage-0311-1@northwind.example")]
    assert "📎 1" in hits(browser)[0].text


def test_mode_switch_changes_the_ranking(browser: WebDriver) -> None:
    search(browser, "checkout outage")
    fulltext = hit_keys(browser)
    assert fulltext and all(h.find_elements(By.CSS_SELECTOR, "mark") for h in hits(browser))
    answered(browser, browser.find_element(By.CSS_SELECTOR, "input[value=semantic]").click)
    semantic = hit_keys(browser)
    assert "· semantic" in status(browser)
    assert semantic and semantic != fulltext
    answered(browser, browser.find_element(By.CSS_SELECTOR, "input[value=hybrid]").click)
    assert "· hybrid" in status(browser) and hit_keys(browser)
    answered(browser, browser.find_element(By.CSS_SELECTOR, "input[value=fulltext]").click)
    assert hit_keys(browser) == fulltext


def test_collapse_shows_one_hit_per_thread(browser: WebDriver) -> None:
    search(browser, "release OR outage")
    answered(browser, browser.find_element(By.ID, "collapse").click)
    threads = [h.find_element(By.CSS_SELECTOR, ".thread").text for h in hits(browser)]
    assert len(threads) >= 2 and all(" matching · thread of " in t for t in threads), threads
    answered(browser, browser.find_element(By.ID, "collapse").click)


def test_similar_opens_with_the_exclude_thread_toggle(browser: WebDriver) -> None:
    search(browser, "lemon tart recipe")
    first = hits(browser)[0]
    own_thread = key("lemon-tart-1@northwind.example")
    answered(browser, first.find_element(By.CSS_SELECTOR, "button.similar").click)
    related = first.find_elements(By.CSS_SELECTOR, ".related-hit")
    assert related and first.find_element(By.CSS_SELECTOR, ".related").is_displayed()
    assert own_thread not in {r.get_attribute("data-thread") for r in related}
    answered(browser, first.find_element(By.CSS_SELECTOR, ".exclude").click)
    related = first.find_elements(By.CSS_SELECTOR, ".related-hit")
    assert own_thread in {r.get_attribute("data-thread") for r in related}
    assert first.get_attribute("data-key") not in {r.get_attribute("data-key") for r in related}


def test_cursor_paging_reaches_the_second_page(browser: WebDriver) -> None:
    search(browser, "release OR outage OR offsite", limit="5")
    page1 = hit_keys(browser)
    assert len(page1) == 5 and "more on the next page" in status(browser)
    assert browser.find_element(By.ID, "prev").get_attribute("disabled") == "true"
    answered(browser, browser.find_element(By.ID, "next").click)
    page2 = hit_keys(browser)
    assert len(page2) == 5 and not set(page1) & set(page2)
    assert status(browser).startswith("5 hit(s) on page 2")
    assert browser.find_element(By.ID, "page").text == "page 2"
    answered(browser, browser.find_element(By.ID, "prev").click)
    assert hit_keys(browser) == page1


@pytest.mark.parametrize(
    ("q", "mailbox", "status_line"),
    [
        ("(release", None, "400"),
        ("x" * 1100, None, "413"),
        ("release", "other", "403"),
    ],
)
def test_error_answers_show_the_api_message(
    api: Api, browser: WebDriver, q: str, mailbox: str | None, status_line: str
) -> None:
    target = api.mailbox_b if mailbox else api.mailbox_a
    answer = api.search(q, mailbox=target, limit=10)
    assert answer.status_code == int(status_line)
    box = browser.find_element(By.ID, "mailbox")
    box.clear()
    box.send_keys(target)
    try:
        search(browser, q)
        error = browser.find_element(By.ID, "error")
        assert error.is_displayed() and error.text.startswith(status_line)
        assert answer.json()["detail"] in error.text
        assert hits(browser) == []
    finally:
        box.clear()
        box.send_keys(api.mailbox_a)


def test_hostile_mail_renders_as_text_and_runs_nothing(browser: WebDriver) -> None:
    browser.get_log("browser")  # forget what earlier tests logged (e.g. their 400 answers)
    search(browser, "hostile invoice")
    [hit] = hits(browser)
    assert hit.get_attribute("data-key") == key("<msg900@example.org>")
    subject = hit.find_element(By.CSS_SELECTOR, ".subject")
    assert text_of(browser, subject) == HOSTILE_SUBJECT
    assert [m.text for m in subject.find_elements(By.TAG_NAME, "mark")] == ["Hostile", "invoice"]
    assert "<script>window.__pwned=2</script>" in text_of(browser, hit.find_element(By.CSS_SELECTOR, ".snippets"))
    assert "<b>today</b>" in text_of(browser, hit)
    assert '"><svg onload=alert(1)>' in text_of(browser, hit.find_element(By.CSS_SELECTOR, ".from"))
    for tag in ("img", "script", "svg", "b", "iframe"):
        assert browser.find_elements(By.CSS_SELECTOR, f"#hits {tag}") == [], tag
    assert browser.execute_script("return window.__pwned") is None
    answered(browser, hit.find_element(By.CSS_SELECTOR, "button.similar").click)
    assert browser.execute_script("return window.__pwned") is None
    logged = browser.get_log("browser")
    assert logged == [], logged  # no CSP violation, no failed load of "x", no error
    browser.execute_script("console.warn('control')")  # the log is read for real
    assert any("control" in entry["message"] for entry in browser.get_log("browser"))


def test_unavailable_backend_shows_the_503_message(
    api: Api, browser: WebDriver, tmp_path: Path
) -> None:
    """A replica that never opens the embedded vector store answers 503 for semantic search."""
    port = free_port()
    env = {
        **os.environ,
        **to_env(api.settings),
        "SIDECAR_API_PORT": str(port),
        "SIDECAR_API_TOKENS": json.dumps({token_hash(TOKEN_A): [api.mailbox_a]}),
    }
    replica = serve_process(env, tmp_path / "replica.log", "--no-vectors-consumer")
    try:
        url = f"http://127.0.0.1:{port}"
        wait_http_ok(f"{url}/healthz", timeout=90, proc=replica, log=tmp_path / "replica.log",
                     what="the replica")
        log_in(browser, url, api.mailbox_a, TOKEN_A)  # another origin: its own session storage
        browser.find_element(By.CSS_SELECTOR, "input[value=semantic]").click()
        search(browser, "server went down at night")
        error = browser.find_element(By.ID, "error")
        assert error.text == "503 Service Unavailable: qdrant is unavailable (retry after 5 s)"
        assert hits(browser) == []
    finally:
        replica.terminate()
        replica.wait(30)
        browser.get(f"{api.url}/console?mailbox={quote(api.mailbox_a)}")  # token still known


def test_screenshot_of_the_demo_mailbox(browser: WebDriver, tmp_path: Path) -> None:
    search(browser, "from:priya release")
    first = hits(browser)[0]
    answered(browser, first.find_element(By.CSS_SELECTOR, "button.similar").click)
    browser.execute_script("document.getElementById('syntax').open = false")
    shot = tmp_path / "console.png"
    assert browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    wanted = os.environ.get("SIDECAR_CONSOLE_SCREENSHOT")
    if wanted:
        shutil.copyfile(shot, wanted)
