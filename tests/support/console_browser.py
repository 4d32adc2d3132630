"""Driving the search console in Debian's headless Chromium through Debian's ChromeDriver
(Selenium; both from apt, installed by ``.ci/run``: nothing downloads a browser)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import Select, WebDriverWait

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1100",
)


def chromium(user_data_dir: Path) -> WebDriver:
    """A fresh headless Chromium whose console log is kept (``driver.get_log("browser")``)."""
    for program in (CHROMIUM, CHROMEDRIVER):  # installed by .ci/run; never skipped
        assert shutil.which(program), f"{program} missing: apt-get install chromium chromium-driver"
    options = Options()
    options.binary_location = CHROMIUM
    for flag in (*FLAGS, f"--user-data-dir={user_data_dir}"):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)


def log_in(driver: WebDriver, url: str, mailbox: str, token: str) -> None:
    """Open the console of the API at ``url`` on ``mailbox`` and type the token once."""
    driver.get(f"{url}/console?mailbox={quote(mailbox)}")
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.CSS_SELECTOR, "#login button[type=submit]").click()


def answered(driver: WebDriver, action: Callable[[], Any]) -> None:
    """Do ``action`` and wait until the console has the API's answer to it."""
    before = int(driver.find_element(By.ID, "app").get_attribute("data-done") or 0)
    action()
    WebDriverWait(driver, 60).until(
        lambda d: int(d.find_element(By.ID, "app").get_attribute("data-done") or 0) > before
    )


def search(driver: WebDriver, q: str, *, limit: str = "10") -> None:
    box = driver.find_element(By.ID, "q")
    box.clear()
    box.send_keys(q)
    per_page = Select(driver.find_element(By.ID, "limit"))
    if per_page.first_selected_option.text != limit:  # a changed option searches by itself
        answered(driver, lambda: per_page.select_by_visible_text(limit))
    else:
        answered(driver, driver.find_element(By.ID, "go").click)


def hits(driver: WebDriver) -> list[WebElement]:
    return driver.find_elements(By.CSS_SELECTOR, "#hits > li.hit")


def hit_keys(driver: WebDriver) -> list[str]:
    return [h.get_attribute("data-key") or "" for h in hits(driver)]


def page_state(driver: WebDriver) -> str:
    """What the page shows, for a failing assertion's message."""
    return str(driver.execute_script(
        "return [document.getElementById('status').textContent,"
        " document.getElementById('error').textContent, document.body.innerText.slice(0, 2000)]"
    )) + str(driver.get_log("browser"))


def text_of(driver: WebDriver, element: WebElement) -> str:
    """The DOM's textContent: what the page holds as text, hidden parts included."""
    return str(driver.execute_script("return arguments[0].textContent", element))


def status(driver: WebDriver) -> str:
    return driver.find_element(By.ID, "status").text
