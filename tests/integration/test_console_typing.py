"""Search as you type in the console, in the real browser (as ``test_console.py``, on the same
demo mailbox): results follow the query box, contacts are offered after ``from:``, and the
API's "did you mean" is a link."""

from __future__ import annotations

import httpx
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.integration.test_console import api, browser  # noqa: F401 - the same fixtures
from tests.support.api_fixtures import TOKEN_A, Api
from tests.support.console_browser import answered, hit_keys, page_state, status

pytestmark = [pytest.mark.stack, pytest.mark.slow]


def _keys_of(api: Api, q: str) -> list[str]:  # noqa: F811 - the fixture's value, passed on
    answer = httpx.get(f"{api.url}/v1/mailboxes/{api.mailbox_a}/search",
                       params={"q": q, "limit": 10},
                       headers={"Authorization": f"Bearer {TOKEN_A}"}, timeout=60)
    assert answer.status_code == 200, answer.text
    return [h["message_key"] for h in answer.json()["hits"]]


def _type(browser: WebDriver, text: str) -> None:  # noqa: F811 - the fixture's value
    box = browser.find_element(By.ID, "q")
    box.clear()
    box.send_keys(text)


def test_results_follow_the_query_box_without_enter(
    api: Api, browser: WebDriver  # noqa: F811
) -> None:
    answered(browser, lambda: _type(browser, "lemon tart"))
    assert hit_keys(browser) == _keys_of(api, "lemon tart"), page_state(browser)
    # Typed on quickly: only the last query's answer is shown (the earlier one cancelled).
    def retype() -> None:
        _type(browser, "lisbon")
        _type(browser, "budget")
    answered(browser, retype)
    WebDriverWait(browser, 30).until(lambda d: hit_keys(d) == _keys_of(api, "budget"))
    assert browser.find_element(By.ID, "q").get_attribute("value") == "budget"


def test_contacts_are_offered_after_from(api: Api, browser: WebDriver) -> None:  # noqa: F811
    _type(browser, "from:rive")
    menu = browser.find_element(By.ID, "contacts")
    WebDriverWait(browser, 30).until(lambda d: menu.is_displayed())
    offered = [li.get_attribute("data-email")
               for li in menu.find_elements(By.CSS_SELECTOR, "li.contact")]
    # "Sam Rivera" and "Grace Rivera": a name word; the mailbox's own correspondents only.
    assert offered == ["sam.rivera@northwind.example", "grace.rivera@example.net"], offered
    first = menu.find_elements(By.CSS_SELECTOR, "li.contact")[0]
    answered(browser, lambda: browser.execute_script(
        "arguments[0].dispatchEvent(new MouseEvent('mousedown', {bubbles: true}))", first))
    assert browser.find_element(By.ID, "q").get_attribute("value") == (
        "from:sam.rivera@northwind.example ")
    assert not menu.is_displayed()
    assert hit_keys(browser) == _keys_of(api, "from:sam.rivera@northwind.example")


def test_did_you_mean_is_a_link(api: Api, browser: WebDriver) -> None:  # noqa: F811
    _type(browser, "lisbom")
    answered(browser, browser.find_element(By.ID, "go").click)
    offer = browser.find_element(By.ID, "did-you-mean")
    assert offer.is_displayed(), page_state(browser)
    link = browser.find_element(By.ID, "dym-link")
    assert link.text == "lisbon"
    answered(browser, link.click)
    assert browser.find_element(By.ID, "q").get_attribute("value") == "lisbon"
    assert hit_keys(browser) == _keys_of(api, "lisbon") and hit_keys(browser)
    assert not offer.is_displayed(), status(browser)
