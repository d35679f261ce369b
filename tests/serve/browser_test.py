"""The explorer page end to end in headless Chromium (selenium): search, switch view and
version, open a row, copy its run script, see the diff, reload from the URL; a row whose text
fields hold HTML and script must render as text. Saves a screenshot to ARTIFACTS/explorer.png.
Exit code 77 (skipped) where Chromium, chromedriver or selenium are missing, unless CI=true.
Usage: browser_test.py --lathe BIN --make-dataset BIN --artifacts DIR
"""
import os
import shutil
import sys
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import explorer_fixture as fx  # noqa: E402

# The page under test is this checkout's web/ folder, passed explicitly: the binary's default is
# the web/ of the tree it was built from, which may be another checkout.
WEB = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                   "web")


def skip(why):
    if os.environ.get("CI") == "true":
        print(f"browser test cannot run in CI: {why}", file=sys.stderr)
        sys.exit(1)
    print(f"skipped: {why}", file=sys.stderr)
    sys.exit(77)


try:
    from selenium import webdriver
    from selenium.webdriver.common.by import By
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait
except ImportError:
    skip("selenium is not installed (tools/requirements-ci.txt)")

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
if not CHROMIUM or not DRIVER:
    skip("chromium and chromium-driver are not installed (apt-get install chromium chromium-driver)")


def start_browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
              "--window-size=1280,1000", "--no-first-run", "--disable-extensions"):
        opts.add_argument(a)
    service = webdriver.ChromeService(executable_path=DRIVER)
    return webdriver.Chrome(options=opts, service=service)


class Page:
    def __init__(self, driver, url):
        self.d, self.url = driver, url
        self.ready = None

    def wait(self, predicate, what, seconds=10):
        try:
            return WebDriverWait(self.d, seconds, poll_frequency=0.05,
                                 ignored_exceptions=[StaleElementReferenceException]).until(
                lambda d: predicate())
        except Exception as e:
            raise AssertionError(f"timed out waiting for {what}: {e}") from None

    def settled(self, what):
        """Waits for a render that finished after the last call."""
        before = self.ready
        self.wait(lambda: (self.d.find_element(By.TAG_NAME, "body").get_attribute("data-ready")
                           or None) not in (None, before), what)
        time.sleep(0.05)
        self.ready = self.d.find_element(By.TAG_NAME, "body").get_attribute("data-ready")

    # Read in one script, so a render in between cannot leave stale element references.
    def text(self, element_id):
        return self.d.execute_script("return document.getElementById(arguments[0]).innerText",
                                     element_id)

    def model_ids(self):
        return self.d.execute_script(
            "return [...document.querySelectorAll('#rows-body button.model-link')]"
            ".map((b) => b.textContent)")

    def badge_of(self, model_id):
        return self.d.execute_script(
            "for (const tr of document.querySelectorAll('#rows-body tr'))"
            "  if (tr.querySelector('button.model-link')?.textContent === arguments[0])"
            "    return tr.querySelector('.badge').textContent;"
            "return null;", model_id)

    def state(self):
        return dict(urllib.parse.parse_qsl(self.d.execute_script("return location.hash").lstrip("#")))


def main():
    args = fx.parse_args([(("--artifacts",), {"required": True})])
    os.makedirs(args.artifacts, exist_ok=True)
    with fx.Scratch() as root:
        data, catalog, fixture_id = fx.make_data(root, args.lathe, args.make_dataset)
        server = fx.Server(args.lathe, data, catalog, web=WEB)
        for name in ("index.html", "style.css", "app.js"):
            with open(os.path.join(WEB, name), "rb") as f:
                assert server.get(name)[2] == f.read(), f"the server does not serve {WEB}/{name}"
        driver = start_browser()
        try:
            run(Page(driver, server.url), fixture_id, args.artifacts)
        except Exception:
            driver.save_screenshot(os.path.join(args.artifacts, "explorer-failure.png"))
            raise
        finally:
            driver.quit()
            server.stop()
    print("browser test passed")


def run(p, fixture_id, artifacts):
    d = p.d
    d.execute_cdp_cmd("Browser.grantPermissions", {
        "origin": p.url.rstrip("/"), "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})
    d.get(p.url)
    p.settled("the first render")
    assert p.model_ids(), "the default view lists the dataset's rows"

    # Search as you type, with the "/" shortcut; the URL holds the query.
    d.find_element(By.TAG_NAME, "body").send_keys("/")
    assert d.switch_to.active_element.get_attribute("id") == "search"
    d.switch_to.active_element.send_keys("model-1")
    p.wait(lambda: p.model_ids() and all("model-1" in m for m in p.model_ids()), "search results")
    assert p.state().get("q") == "model-1", p.state()
    search = d.find_element(By.ID, "search")
    search.send_keys(Keys.CONTROL, "a")
    search.send_keys(Keys.BACKSPACE)
    p.wait(lambda: any("model-1" not in m for m in p.model_ids()), "the cleared search")

    # Trending: the ranking's order, and a ranked model without a row shows as untested.
    d.find_element(By.CSS_SELECTOR, '#views button[data-view="trending"]').click()
    p.wait(lambda: fx.UNRUN_ID in p.model_ids(), "the trending ranking")
    assert p.badge_of(fx.UNRUN_ID) == "untested", p.badge_of(fx.UNRUN_ID)
    assert p.model_ids()[0] == fixture_id, p.model_ids()
    assert p.state()["view"] == "trending"

    # Another lathe version.
    Select(d.find_element(By.ID, "lathe")).select_by_value("0.0.9")
    p.wait(lambda: "lathe 0.0.9" in p.text("rows-line"), "the version switch")
    assert p.state()["lathe"] == "0.0.9"
    Select(d.find_element(By.ID, "lathe")).select_by_value("0.1.0")
    p.wait(lambda: "lathe 0.1.0" in p.text("rows-line"), "the version switch back")

    # The row full of injection strings: opened, every field shown as text, nothing run.
    d.find_element(By.CSS_SELECTOR, '#views button[data-view="all"]').click()
    p.wait(lambda: p.state().get("view") == "all", "the all-rows view")
    search = d.find_element(By.ID, "search")
    search.send_keys("evil")
    p.wait(lambda: p.model_ids() == [fx.EVIL_ID], "the injection row, its id shown as text")
    p.wait(lambda: d.find_element(By.CSS_SELECTOR, "#rows-body button.model-link").send_keys(Keys.ENTER)
           or True, "the row's button")
    p.wait(lambda: p.text("detail-heading") == fx.EVIL_ID, "the injection row's detail")
    p.wait(lambda: "Log tail" in p.text("detail-body"), "the detail's blocks")
    body = p.text("detail-body")
    for label in ("message ", "verdict ", "log ", "echo '"):
        assert label + fx.INJECTION in body, f"{label!r} not shown as text"
    assert d.execute_script("return window.__pwned") is None, "an injected script ran"
    assert not d.find_elements(By.CSS_SELECTOR, "img, #detail script, #rows script")
    mismatch = d.find_elements(By.CSS_SELECTOR, "#detail-body .tok.mismatch")
    assert len(mismatch) == 2, "the first mismatch is highlighted in both token lines"

    # Copy the run script; the clipboard holds it exactly.
    d.find_element(By.CSS_SELECTOR, 'button[aria-label="Copy Run script"]').click()
    p.wait(lambda: "Copied" in p.text("detail-body"), "the copy feedback")
    copied = d.execute_async_script(
        "const done = arguments[0]; navigator.clipboard.readText().then(done, (e) => done('ERR ' + e));")
    assert copied == "echo '" + fx.INJECTION + "'", copied

    # A real sweep's row: its stack and run script.
    search.send_keys(Keys.CONTROL, "a")
    search.send_keys(fixture_id)
    p.wait(lambda: fixture_id in p.model_ids(), "the fixture row")
    d.execute_script(
        "[...document.querySelectorAll('#rows-body button.model-link')]"
        ".find((b) => b.textContent === arguments[0]).focus()", fixture_id)
    d.switch_to.active_element.send_keys(Keys.ENTER)  # keyboard, not a mouse
    p.wait(lambda: p.text("detail-heading") == fixture_id and "lathe generate" in p.text("detail-body"),
           "the fixture's run script")
    d.save_screenshot(os.path.join(artifacts, "explorer.png"))
    d.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
    p.wait(lambda: not d.find_element(By.ID, "detail").is_displayed(), "Escape closing the detail")

    # Coverage chart, then the diff between the two versions.
    d.find_element(By.ID, "tab-coverage").click()
    search.send_keys(Keys.CONTROL, "a")
    search.send_keys(Keys.BACKSPACE)
    p.wait(lambda: d.find_elements(By.CSS_SELECTOR, "#coverage-chart .bar-row"), "the coverage chart")
    d.find_element(By.ID, "tab-diff").click()
    p.wait(lambda: "regressions" in p.text("diff-line"), "the diff")
    Select(d.find_element(By.ID, "diff-a-lathe")).select_by_value("0.0.9")
    Select(d.find_element(By.ID, "diff-b-lathe")).select_by_value("0.1.0")
    p.wait(lambda: "A = lathe 0.0.9" in p.text("diff-line") and "B = lathe 0.1.0" in p.text("diff-line"),
           "the chosen versions")
    assert "Regressions (pass in A, not in B)" in p.text("diff-body")
    assert d.find_elements(By.CSS_SELECTOR, "#diff-body table.diff tr"), "regression rows"
    d.save_screenshot(os.path.join(artifacts, "explorer-diff.png"))

    # The URL is the state: a fresh load of it shows the same diff.
    url = d.current_url
    d.get("about:blank")
    d.get(url)
    p.wait(lambda: "A = lathe 0.0.9" in p.text("diff-line"), "the diff restored from the URL")
    assert not d.find_element(By.ID, "diff-view").get_attribute("hidden")


if __name__ == "__main__":
    main()
