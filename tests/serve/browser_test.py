"""The explorer page end to end in headless Chromium (selenium): the first page and its
headline figures, search, filter, switch view and version, open a model's page, copy its run
script, see coverage and the diff, reload from the URL; a row whose text fields hold HTML and
script must render as text. Saves screenshots to ARTIFACTS/explorer*.png.
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
    from selenium.webdriver.common.action_chains import ActionChains
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

    def wait(self, predicate, what, seconds=30):
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

    def quiet(self, what, seconds=0.3):
        """Waits until no render has finished for `seconds` (typing renders at each key)."""
        end = time.time() + 10
        last, since = None, time.time()
        while time.time() < end:
            now = self.d.find_element(By.TAG_NAME, "body").get_attribute("data-ready")
            if now != last:
                last, since = now, time.time()
            elif time.time() - since >= seconds:
                self.ready = now
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what}")

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


# ---- accessibility ----------------------------------------------------------------------------

# WCAG 2.x contrast (1.4.3) of every visible element with its own text: its computed `color`
# against its effective background, found by walking up the ancestors to the first opaque
# background-color and compositing the semi-transparent ones on the way over it (the root counts
# as white unless the page sets a background). Form fields count too: a select shows its chosen
# option, an input its value or its placeholder (::placeholder). Needs 4.5:1, or 3:1 for large
# text (24px, or 18.66px and bold). Disabled controls are exempt, as WCAG exempts inactive
# user-interface components; elements hidden from sight (display, visibility, opacity 0, or
# clipped to 1px as screen-reader-only text) are skipped. Returns the measured elements'
# minimum and every failure.
CONTRAST_JS = r"""
const parse = (c) => {
  const m = /^rgba?\(([^)]*)\)$/.exec(c.trim());
  if (!m) return null;
  const v = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number);
  return { r: v[0], g: v[1], b: v[2], a: v.length > 3 ? v[3] : 1 };
};
const over = (top, under) => ({  // top composited over an opaque colour
  r: top.r * top.a + under.r * (1 - top.a), g: top.g * top.a + under.g * (1 - top.a),
  b: top.b * top.a + under.b * (1 - top.a), a: 1 });
const lum = (c) => {
  const f = (x) => { x /= 255; return x <= 0.03928 ? x / 12.92 : ((x + 0.055) / 1.055) ** 2.4; };
  return 0.2126 * f(c.r) + 0.7152 * f(c.g) + 0.0722 * f(c.b);
};
const hex = (c) => '#' + [c.r, c.g, c.b].map((x) => Math.round(x).toString(16).padStart(2, '0'))
  .join('') + (c.a < 1 ? '/' + c.a.toFixed(2) : '');
const describe = (e) => {
  let s = e.tagName.toLowerCase() + (e.id ? '#' + e.id : '');
  for (const c of e.classList) s += '.' + c;
  const parent = e.parentElement && e.parentElement.closest('[id]');
  return (parent && parent !== e ? parent.tagName.toLowerCase() + '#' + parent.id + ' ' : '') + s;
};
const hidden = (e) => {
  if (!e.checkVisibility({ checkOpacity: true, checkVisibilityCSS: true,
    opacityProperty: true, visibilityProperty: true })) return true;
  for (let n = e; n && n !== document.documentElement; n = n.parentElement) {
    const r = n.getBoundingClientRect(), cs = getComputedStyle(n);
    if ((r.width <= 1 || r.height <= 1) && (cs.overflow !== 'visible' || cs.clip !== 'auto'))
      return true;
  }
  return false;
};
const background = (e) => {
  const layers = [];
  for (let n = e; n; n = n.parentElement) {
    const cs = getComputedStyle(n);
    if (cs.backgroundImage !== 'none') return { error: 'background-image on ' + describe(n) };
    const bg = parse(cs.backgroundColor);
    if (!bg) return { error: 'unparsed background ' + cs.backgroundColor };
    if (bg.a > 0) layers.push(bg);
    if (bg.a >= 1) break;
  }
  let c = { r: 255, g: 255, b: 255, a: 1 };
  for (const l of layers.reverse()) c = over(l, c);
  return { c };
};
const ownText = (e) => {
  if (e instanceof HTMLSelectElement)
    return e.selectedIndex >= 0 ? [e.options[e.selectedIndex].text, null] : null;
  if (e instanceof HTMLInputElement || e instanceof HTMLTextAreaElement) {
    if (e.type === 'hidden') return null;
    if (e.value) return [e.value, null];
    return e.placeholder ? [e.placeholder, '::placeholder'] : null;
  }
  const t = [...e.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE)
    .map((n) => n.data).join('').trim();
  return t ? [t, null] : null;
};
const skip = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'OPTION', 'OPTGROUP', 'TITLE']);
const out = { checked: 0, exempt: 0, min: null, failures: [] };
for (const e of document.querySelectorAll('body, body *')) {
  if (skip.has(e.tagName)) continue;
  const text = ownText(e);
  if (!text || hidden(e)) continue;
  if (e.matches(':disabled')) { out.exempt++; continue; }  // WCAG: inactive components
  const cs = getComputedStyle(e, text[1]);
  const base = getComputedStyle(e);
  const bg = background(e);
  const fg = parse(cs.color);
  const what = describe(e) + (text[1] || '') + ' "' + text[0].slice(0, 40) + '"';
  if (bg.error || !fg) {
    out.failures.push({ what, why: bg.error || 'unparsed ' + cs.color });
    continue;
  }
  // Translucent ancestors: blend the text towards its background (close enough for text whose
  // background is on the same layer).
  let opacity = 1;
  for (let n = e; n; n = n.parentElement) opacity *= Number(getComputedStyle(n).opacity);
  const ink = over({ ...fg, a: fg.a * opacity }, bg.c);
  const [l1, l2] = [lum(ink), lum(bg.c)].sort((x, y) => y - x);
  const ratio = (l1 + 0.05) / (l2 + 0.05);
  const size = parseFloat(base.fontSize), weight = parseInt(base.fontWeight, 10);
  const large = size >= 24 || (size >= 18.66 && weight >= 700);
  const need = large ? 3 : 4.5;
  const r = { what, fg: hex(fg), bg: hex(bg.c), ratio: Math.round(ratio * 100) / 100, need,
    size: base.fontSize, weight };
  out.checked++;
  if (!out.min || ratio < out.min.exact) out.min = { ...r, exact: ratio };
  if (ratio < need) out.failures.push(r);
}
return out;
"""

# Whether the page styles a dark scheme (a prefers-color-scheme: dark rule, or color-scheme dark).
DARK_JS = r"""
const dark = (rules) => [...rules].some((r) =>
  (r instanceof CSSMediaRule && /prefers-color-scheme\s*:\s*dark/.test(r.conditionText)) ||
  (r.cssRules && dark(r.cssRules)));
for (const s of document.styleSheets) {
  try { if (dark(s.cssRules)) return true; } catch (e) { /* another origin's sheet */ }
}
const meta = document.querySelector('meta[name="color-scheme"]');
return /dark/.test(getComputedStyle(document.documentElement).colorScheme) ||
  Boolean(meta && /dark/.test(meta.content));
"""


# Elements of known contrast, to check the audit itself: (id, parent background, colour, font
# size, weight, how: "" / "disabled" / "hidden", whether the audit must fail it).
CALIBRATION = [
    ("gray77", "", "#777777", "15px", "400", "", True),            # 4.48:1
    ("gray76", "", "#767676", "15px", "400", "", False),           # 4.54:1
    ("large", "", "#949494", "24px", "400", "", False),            # 3.03:1, large
    ("large-bold", "", "#949494", "18.67px", "700", "", False),    # 3.03:1, large and bold
    ("small-bold", "", "#949494", "18px", "700", "", True),        # 3.03:1, not large
    ("veil-white", "rgba(0, 0, 0, 0.5)", "#ffffff", "15px", "400", "", True),  # 3.95:1
    ("veil-black", "rgba(0, 0, 0, 0.5)", "#000000", "15px", "400", "", False),  # 5.28:1
    ("disabled", "", "#cccccc", "15px", "400", "disabled", False),  # exempt
    ("hidden", "", "#eeeeee", "15px", "400", "hidden", False),      # screen-reader-only
]

CALIBRATE_JS = r"""
const box = document.createElement('div');
box.id = 'a11y-cal';
for (const [id, veil, color, size, weight, how] of arguments[0]) {
  const wrap = document.createElement('div');
  if (veil) wrap.style.backgroundColor = veil;
  const e = document.createElement(how === 'disabled' ? 'button' : 'span');
  e.id = 'a11y-cal-' + id;
  e.textContent = 'calibration ' + id;
  Object.assign(e.style, { color, fontSize: size, fontWeight: weight });
  if (how === 'disabled') e.disabled = true;
  if (how === 'hidden') e.className = 'visually-hidden';
  wrap.append(e);
  box.append(wrap);
}
document.body.append(box);
"""


def calibrate(p):
    """The audit against elements of known contrast (set through the CSSOM, which the page's
    CSP allows), then removes them."""
    d = p.d
    d.execute_script(CALIBRATE_JS, [list(c) for c in CALIBRATION])
    try:
        r = d.execute_script(CONTRAST_JS)
    finally:
        d.execute_script("document.getElementById('a11y-cal').remove()")
    failed = {f["what"].split("a11y-cal-")[1].split('"')[0].strip()
              for f in r["failures"] if "a11y-cal-" in f["what"]}
    want = {c[0] for c in CALIBRATION if c[6]}
    assert failed == want, f"the contrast audit fails {sorted(failed)}, not {sorted(want)}"
    gray = [f for f in r["failures"] if "a11y-cal-gray77" in f["what"]][0]
    assert gray["ratio"] == 4.48, gray


class Contrast:
    """Runs CONTRAST_JS in each colour scheme the page has, asserts, keeps each scheme's
    minimum."""

    def __init__(self):
        self.min = {}    # scheme -> (ratio, description)
        self.runs = []   # (scheme, page state, elements checked)

    def schemes(self, d):
        return ["light", "dark"] if d.execute_script(DARK_JS) else ["light"]

    def audit(self, p, where):
        d = p.d
        failures = []
        for scheme in self.schemes(d):
            d.execute_cdp_cmd("Emulation.setEmulatedMedia", {
                "features": [{"name": "prefers-color-scheme", "value": scheme}]})
            r = d.execute_script(CONTRAST_JS)
            assert r["checked"] > 0, f"contrast ({where}, {scheme}): no text found"
            self.runs.append((scheme, where, r["checked"]))
            m = r["min"]
            if scheme not in self.min or m["ratio"] < self.min[scheme][0]:
                self.min[scheme] = (m["ratio"], f"{m['what']} {m['fg']} on {m['bg']} ({where})")
            for f in r["failures"]:
                failures.append(f"  [{scheme}] {f['what']}: " + (
                    f["why"] if "why" in f else
                    f"{f['fg']} on {f['bg']} = {f['ratio']}:1 < {f['need']}:1 "
                    f"({f['size']}, weight {f['weight']})"))
        d.execute_cdp_cmd("Emulation.setEmulatedMedia", {
            "features": [{"name": "prefers-color-scheme", "value": "light"}]})
        assert not failures, f"text below WCAG contrast ({where}):\n" + "\n".join(failures)

    def report(self):
        for scheme, (ratio, what) in sorted(self.min.items()):
            n = sum(c for s, _, c in self.runs if s == scheme)
            print(f"contrast [{scheme}]: minimum {ratio:.2f}:1 over {n} text elements "
                  f"in {sum(1 for s, _, _ in self.runs if s == scheme)} page states; "
                  f"lowest: {what}")


# Landmarks, language, title, accessible names, table headers, statuses in text. Returns the
# problems found.
SEMANTICS_JS = r"""
const problems = [];
const text = (e) => (e ? e.textContent.trim() : '');
if (document.querySelectorAll('main').length !== 1) problems.push('not exactly one <main>');
if (!document.documentElement.lang) problems.push('<html> has no lang');
if (!document.title.trim()) problems.push('no <title>');
const name = (e) => {
  if ((e.getAttribute('aria-label') || '').trim()) return e.getAttribute('aria-label').trim();
  const by = (e.getAttribute('aria-labelledby') || '').split(/\s+/).filter(Boolean)
    .map((id) => text(document.getElementById(id))).join(' ').trim();
  if (by) return by;
  if (e.labels) for (const l of e.labels) if (text(l)) return text(l);
  return e.tagName === 'BUTTON' ? text(e) : '';
};
const describe = (e) => e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
  [...e.classList].map((c) => '.' + c).join('');
for (const e of document.querySelectorAll('input, select, textarea, button')) {
  if (e.type === 'hidden' || e.closest('[aria-hidden="true"]')) continue;
  if (!name(e)) problems.push(describe(e) + ' has no accessible name');
}
for (const t of document.querySelectorAll('table')) {
  const ths = t.querySelectorAll('th');
  if (t.rows.length && !ths.length) problems.push(describe(t) + ' has no <th> header');
  for (const th of ths)
    if (!['col', 'row', 'colgroup', 'rowgroup'].includes(th.getAttribute('scope')))
      problems.push(describe(t) + ' <th> "' + text(th) + '" has no scope');
}
for (const b of document.querySelectorAll('.badge')) {
  const status = [...b.classList].find((c) => c.startsWith('badge-')).slice(6);
  if (status !== 'unknown' && text(b) !== status)
    problems.push('badge ' + status + ' says "' + text(b) + '", not its status');
  if (!text(b)) problems.push('badge ' + status + ' has no text');
}
for (const seg of document.querySelectorAll('#coverage-chart .seg')) {
  const status = [...seg.classList].find((c) => c.startsWith('badge-')).slice(6);
  const row = seg.closest('.bar-row');
  const label = seg.parentElement.getAttribute('aria-label') || '';
  if (!label.includes(status) || !text(row.querySelector('.bar-count')).includes(status))
    problems.push('coverage segment ' + status + ' is colour only in ' + text(row).slice(0, 40));
}
return problems;
"""


def semantics(p, where):
    problems = p.d.execute_script(SEMANTICS_JS)
    assert not problems, f"semantics ({where}):\n  " + "\n  ".join(problems)


# Focus indicators: the controls the keyboard can reach, each with its outline and box-shadow
# while not focused (keyed by a number kept on the element). Then, at each Tab, the focused one.
FOCUSABLE_JS = r"""
document.activeElement.blur();
window.__a11yKey = window.__a11yKey || new WeakMap();
window.__a11yRest = new Map();
let next = 1;
const style = (e) => { const cs = getComputedStyle(e);
  return [cs.outlineStyle, cs.outlineWidth, cs.outlineColor, cs.boxShadow].join(' | '); };
const keys = [];
for (const e of document.querySelectorAll(
    'a[href], button, input, select, textarea, [tabindex]:not([tabindex="-1"])')) {
  if (e.matches(':disabled') || e.tabIndex < 0 || !e.checkVisibility({ checkVisibilityCSS: true,
    visibilityProperty: true })) continue;
  if (!window.__a11yKey.has(e)) window.__a11yKey.set(e, next++ + '-' + Math.random());
  window.__a11yRest.set(window.__a11yKey.get(e), style(e));
  keys.push(window.__a11yKey.get(e));
}
return keys;
"""

FOCUSED_JS = r"""
const e = document.activeElement;
if (!e || e === document.body) return null;
const cs = getComputedStyle(e);
const key = (window.__a11yKey && window.__a11yKey.get(e)) || null;
return { key, what: e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') +
    [...e.classList].map((c) => '.' + c).join('') + ' "' + (e.textContent || e.value || '')
    .trim().slice(0, 30) + '"',
  visible: e.matches(':focus-visible'), outline: [cs.outlineStyle, cs.outlineWidth],
  now: [cs.outlineStyle, cs.outlineWidth, cs.outlineColor, cs.boxShadow].join(' | '),
  rest: key ? window.__a11yRest.get(key) : null, shadow: cs.boxShadow,
  inDetail: Boolean(e.closest('#detail')) };
"""


def press(d, *keys):
    ActionChains(d).send_keys(*keys).perform()


def focused(d):
    return d.execute_script(FOCUSED_JS)


def focus_walk(p, where):
    """Tabs through the whole page: each control the keyboard reaches must match :focus-visible
    and show an outline (width > 0, style not none) or a box-shadow it lacks when unfocused, and
    every visible enabled control must be reached."""
    d = p.d
    keys = d.execute_script(FOCUSABLE_JS)
    seen, bad = [], []
    for _ in range(len(keys) + 10):
        press(d, Keys.TAB)
        f = focused(d)
        if f is None:
            continue  # the page lost focus to the browser between the last control and the first
        key = f["key"] or f["what"]  # a control outside the list, e.g. a scrollable box
        if key in seen:
            break
        seen.append(key)
        outline = f["outline"][0] != "none" and float(f["outline"][1].rstrip("px") or 0) > 0
        shadow = f["shadow"] != "none"
        if not f["visible"] or not (outline or shadow) or f["now"] == f["rest"]:
            bad.append(f"  {f['what']}: focus-visible {f['visible']}, focused {f['now']!r}, "
                       f"unfocused {f['rest']!r}")
    missed = [k for k in keys if k not in seen]
    assert not bad, f"focus not visible ({where}):\n" + "\n".join(bad)
    assert not missed, f"{len(missed)} of {len(keys)} controls not reached by Tab ({where})"
    print(f"focus: {len(seen)} controls reached by Tab, each with a visible indicator ({where})")


def keyboard_flow(p, contrast):
    """The keyboard alone: "/" to the search, a name, Tab to the first row's button, Enter opens
    its detail (focus on its heading), Tab reaches every copy button, Escape closes the detail
    and focus goes back to the row's button."""
    d = p.d
    p.ready = None
    d.get("about:blank")
    d.get(p.url)
    p.settled("a fresh load")
    press(d, "/")
    assert d.switch_to.active_element.get_attribute("id") == "search", "/ focuses the search"
    press(d, "model-1")
    p.wait(lambda: p.model_ids() and all("model-1" in m for m in p.model_ids()),
           "search results")
    p.quiet("the search's last render")
    first = p.model_ids()[0]
    path = []
    for _ in range(30):
        press(d, Keys.TAB)
        f = focused(d)
        path.append(f and f["what"])
        if d.execute_script("return document.activeElement === "
                            "document.querySelector('#rows-body button.model-link')"):
            break
    else:
        raise AssertionError("Tab from the search never reached the first row's button: "
                             + ", ".join(map(str, path)))
    press(d, Keys.ENTER)
    p.wait(lambda: p.text("detail-heading") == first and "Run script" in p.text("detail-body"),
           "Enter opening the first row's detail")
    p.quiet("the detail's render")
    assert d.switch_to.active_element.get_attribute("id") == "detail-heading", \
        "focus moves to the opened detail's heading"
    copies = d.execute_script("return document.querySelectorAll('#detail button.copy').length")
    assert copies, "the detail has copy buttons"
    reached = set()
    for _ in range(40):
        press(d, Keys.TAB)
        f = focused(d)
        assert f and f["inDetail"], f"Tab left the detail before its copy buttons: {f}"
        if f["what"].startswith("button.copy"):
            reached.add(d.switch_to.active_element.get_attribute("aria-label"))
            if len(reached) == copies:
                break
    assert len(reached) == copies, f"copy buttons reached by Tab: {reached}"
    contrast.audit(p, "detail open, keyboard")
    semantics(p, "detail open")
    focus_walk(p, "models, detail open")
    # Escape from inside the detail (on its last copy button): focus back on the row's button.
    d.execute_script("const b = document.querySelectorAll('#detail button.copy');"
                     "b[b.length - 1].focus()")
    press(d, Keys.ESCAPE)
    p.wait(lambda: not d.find_element(By.ID, "detail").is_displayed(), "Escape closing the detail")
    p.wait(lambda: d.execute_script(
        "const e = document.activeElement;"
        "return e.matches('#rows-body button.model-link') && e.textContent === arguments[0]",
        first), "focus back on the row's button after Escape")
    assert "model" not in p.state(), p.state()
    print(f"keyboard: / search, Tab to {first}, Enter, {copies} copy buttons by Tab, Escape "
          "back to the row's button")


# ---- issue 19, items 14 to 16 -------------------------------------------------------------

def full_screenshot(d, path):
    """The whole page, not only the window's height."""
    size = d.get_window_size()
    height = d.execute_script("return document.documentElement.scrollHeight")
    d.set_window_size(size["width"], max(size["height"], height + 150))
    try:
        d.save_screenshot(path)
    finally:
        d.set_window_size(size["width"], size["height"])


def first_page(p, server):
    """14: a fresh load opens on what was run (not on a ranking none of which has run), with
    headline figures above it: models and architectures passing, each ranking's coverage, the
    versions."""
    d = p.d
    assert "view" not in p.state(), p.state()
    line = p.text("rows-line")
    assert "ranking" not in line, f"the first page follows a ranking: {line}"
    badges = d.execute_script(
        "return [...document.querySelectorAll('#rows-body .badge')].map((b) => b.textContent)")
    assert badges and badges.count("untested") < len(badges) / 2, badges
    _, s = server.json("/api/summary?lathe=0.1.0")
    head = p.text("headline")
    by_view = {r["view"]: r for r in s["rankings"]}
    want = [f"{s['by_status']['pass']} of {s['rows']} models pass",
            f"{s['coverage']['passing']} of {s['coverage']['architectures']} architectures",
            f"Selected: 0 of {fx.SELECTED_UNRUN} run",
            f"Trending: 3 of 4 run, {by_view['trending']['passed']} pass",
            "lathe 0.1.0", "transformers " + ", ".join(s["transformers_versions"])]
    missing = [w for w in want if w not in head]
    assert not missing, f"headline {head!r} lacks {missing}"
    print(f"first page: all rows, headline: {' | '.join(head.splitlines())}")


def model_page(p, fixture_id, artifacts):
    """15: a model's page has its own URL and replaces the list at the top of the page; status,
    error and log tail first, then the tokens (ids, said to be ids), the run script and
    compile-cache command only where the row has them, the stack last without duplicates; a
    link to the Hub page for Hub models only."""
    d = p.d
    d.get(p.url + "#")
    p.settled("the first page again")
    first = p.model_ids()[0]
    assert len(p.model_ids()) == 50, len(p.model_ids())
    d.find_element(By.CSS_SELECTOR, "#rows-body button.model-link").click()
    p.wait(lambda: p.text("detail-heading") == first, "the first row's page")
    p.quiet("the model page")
    assert p.state().get("model") == first, p.state()
    assert not d.find_element(By.ID, "models-view").is_displayed(), "the list stays beside it"
    top = d.execute_script("return [window.scrollY, "
                           "document.getElementById('detail-heading').getBoundingClientRect().top,"
                           " window.innerHeight]")
    assert top[0] == 0 and 0 <= top[1] < top[2] / 3, f"the page opens out of view: {top}"
    d.find_element(By.ID, "close-detail").click()
    p.wait(lambda: d.find_element(By.ID, "models-view").is_displayed(), "back to the list")
    assert "model" not in p.state()

    # A local checkpoint's error: no run script, no Hub page.
    d.get(p.url + "#" + urllib.parse.urlencode({"q": "broken", "model": fx.LOCAL_ERROR_ID}))
    p.wait(lambda: p.text("detail-heading") == fx.LOCAL_ERROR_ID and "Stack" in
           p.text("detail-body"), "the local error's page")
    p.quiet("the local error's page")
    heads = d.execute_script(
        "return [...document.querySelectorAll('#detail-body h3')].map((h) => h.textContent)")
    order = [h.split(" (")[0] for h in heads]
    for a, b in (("Error message", "Log tail"), ("Log tail", "Tokens"), ("Tokens", "Stack")):
        assert a in order and b in order and order.index(a) < order.index(b), order
    assert order[-1] == "Stack", f"the stack is not last: {order}"
    assert "Run script" not in order and "Compile-cache fetch" not in order, order
    assert "no run script" in p.text("detail-body")
    first_key = d.execute_script("return document.querySelector('#detail-body dl dt').textContent")
    assert first_key == "Status", first_key
    empty = d.execute_script(
        "return [...document.querySelectorAll('#detail button.copy')]"
        ".filter((b) => !b.closest('.block').querySelector('pre').textContent.trim()).length")
    assert empty == 0, f"{empty} copy buttons over empty boxes"
    keys = d.execute_script(
        "return [...document.querySelectorAll('#detail table.stack th')].map((t) => t.textContent)")
    assert keys and len(keys) == len(set(keys)), f"the stack repeats itself: {keys}"
    assert not d.find_elements(By.CSS_SELECTOR, "#detail a.hub"), "a local model has no Hub page"
    assert "token ids only" in p.text("detail-body")
    full_screenshot(d, os.path.join(artifacts, "explorer-model.png"))

    # A Hub model: its Hub page, its tokens as ids, said so.
    d.get(p.url + "#" + urllib.parse.urlencode({"model": "org1/model-1"}))
    p.wait(lambda: p.text("detail-heading") == "org1/model-1" and "Stack" in
           p.text("detail-body"), "a Hub model's page")
    hub = d.find_elements(By.CSS_SELECTOR, "#detail a.hub")
    assert [a.get_attribute("href") for a in hub] == ["https://huggingface.co/org1/model-1"], hub
    assert "token ids only" in p.text("detail-body")
    assert "Run script" in p.text("detail-body")

    # A tiny fixture from the sweep: no Hub page.
    d.get(p.url + "#" + urllib.parse.urlencode({"model": fixture_id}))
    p.wait(lambda: p.text("detail-heading") == fixture_id and "Stack" in
           p.text("detail-body"), "the fixture's page")
    assert not d.find_elements(By.CSS_SELECTOR, "#detail a.hub"), "a tiny fixture has no Hub page"
    print("model page: at the top, error first, stack last and unique, Hub link for Hub ids")


def filters_and_views(p, server):
    """16: architecture and parameter-count filters; a ranked view without its ranking file
    says so."""
    d = p.d
    d.get(p.url + "#")
    p.settled("the first page again")
    Select(d.find_element(By.ID, "arch")).select_by_value("LlamaForCausalLM")
    p.wait(lambda: p.state().get("arch") == "LlamaForCausalLM", "the architecture filter")
    p.quiet("the architecture filter")
    archs = d.execute_script("return [...document.querySelectorAll('#rows-body tr')]"
                             ".map((tr) => tr.cells[1].textContent)")
    assert archs and set(archs) == {"LlamaForCausalLM"}, archs
    Select(d.find_element(By.ID, "size")).select_by_value("1e9-1e10")
    p.wait(lambda: p.state().get("size") == "1e9-1e10", "the parameter filter")
    p.quiet("the parameter filter")
    _, rows = server.json("/api/rows?view=all&lathe=0.1.0&limit=500")
    want = sorted(i["model_id"] for i in rows["items"] if i["architecture"] == "LlamaForCausalLM"
                  and 1e9 <= i.get("parameters", 0) < 1e10)
    assert want and sorted(p.model_ids()) == want, (p.model_ids(), want)
    d.find_element(By.CSS_SELECTOR, '#views button[data-view="downloads"]').click()
    p.wait(lambda: p.state().get("view") == "downloads", "the downloads view")
    p.quiet("the downloads view")
    assert p.model_ids() == [], "a view without a ranking file lists rows"
    assert "No downloads ranking" in p.text("rows-line"), p.text("rows-line")
    print(f"filters: {len(want)} Llama models of 1B to 10B; downloads without a ranking says so")


def coverage_shares(p):
    """16: each architecture's bar splits 100% of its width among its statuses."""
    bars = p.d.execute_script(
        "return [...document.querySelectorAll('#coverage-chart .bar')].map((b) => [b.clientWidth,"
        " [...b.children].reduce((s, c) => s + c.getBoundingClientRect().width, 0)])")
    assert bars and all(abs(w - s) <= 3 for w, s in bars), f"bars not shares of 100%: {bars}"
    counts = p.d.execute_script("return [...document.querySelectorAll('#coverage-chart "
                                ".bar-count')].map((c) => c.textContent)")
    assert all("% pass" in c for c in counts), counts


def ranking_coverage(p, server, artifacts, contrast):
    """18: the coverage view leads with each ranking's figures (implemented and verified pass,
    of its models and of its architectures) exactly as /api/coverage gives them, then the
    architectures lathe lacks by use; the rows' own figure follows, labelled fixture coverage.
    A ranked model of an unimplemented architecture lists as unsupported, without a row."""
    d = p.d
    d.get(p.url + "#tab=coverage&task=image-text-to-text")
    p.wait(lambda: d.find_elements(By.CSS_SELECTOR, "#ranking-coverage-body tr"), "the ranking table")
    p.quiet("the ranking table")
    _, cov = server.json("/api/coverage?task=image-text-to-text&lathe=0.1.0")
    cells = d.execute_script(
        "return [...document.querySelectorAll('#ranking-coverage-body tr')]"
        ".map((tr) => [...tr.children].map((c) => c.textContent))")
    want = [[f"{r['task']} / Selected", r["snapshot"], str(r["models"]),
             r["percent"]["models_implemented"], r["percent"]["models_pass"],
             str(r["architectures"]), r["percent"]["architectures_implemented"],
             r["percent"]["architectures_pass"]] for r in cov["rankings"]]
    assert cells == want, f"ranking table {cells} is not the API's {want}"
    assert cells[0][3:5] == ["33.3%", "0.0%"], cells
    missing = p.text("unimplemented")
    assert f"{fx.UNIMPLEMENTED_ARCH} (2 ranked models)" in missing, missing
    view = p.text("coverage-view")
    assert view.index("Coverage of the rankings") < view.index("Coverage of the rows' own"), view
    assert p.text("fixture-line").startswith("Fixture coverage:"), p.text("fixture-line")
    d.save_screenshot(os.path.join(artifacts, "explorer-ranking-coverage.png"))
    contrast.audit(p, "coverage of a ranking with unimplemented architectures")
    semantics(p, "coverage of a ranking with unimplemented architectures")
    # The ranking's list: unimplemented architectures as unsupported, the other untested; the
    # headline leads with the implemented share.
    d.get(p.url + "#task=image-text-to-text&view=selected")
    p.wait(lambda: fx.UNSUPPORTED_IDS[0] in p.model_ids(), "the image-text-to-text ranking")
    p.quiet("the image-text-to-text ranking")
    assert [p.badge_of(m) for m in fx.UNSUPPORTED_IDS] == ["unsupported"] * 2
    assert p.badge_of(fx.VISION_ID) == "untested", p.badge_of(fx.VISION_ID)
    head = p.text("headline")
    assert "Selected: 33.3% of 3 models implemented, 0.0% verified pass" in head, head
    assert head.index("Rankings implemented") < head.index("Rows' architectures"), head
    d.find_element(By.XPATH, f'//button[text()="{fx.UNSUPPORTED_IDS[0]}"]').click()
    p.wait(lambda: p.text("detail-heading") == fx.UNSUPPORTED_IDS[0], "the unsupported model's page")
    p.wait(lambda: "not implemented" in p.text("detail-body"), "why it is not run")
    assert p.d.execute_script("return document.querySelector('#detail-body .badge').textContent") \
        == "unsupported"
    print(f"ranking coverage: {cells[0]}; {missing.splitlines()[-1]}")


def diff_one_version(p, lathe, data, catalog, artifacts):
    """16: with one version, or A the same as B, the diff says there is nothing to compare."""
    d = p.d
    Select(d.find_element(By.ID, "diff-a-lathe")).select_by_value("0.1.0")
    Select(d.find_element(By.ID, "diff-b-lathe")).select_by_value("0.1.0")
    p.wait(lambda: "nothing to compare" in p.text("diff-line"), "A = B explained")
    assert not d.find_elements(By.CSS_SELECTOR, "#diff-body table"), "tables of nothing"
    one = fx.Server(lathe, os.path.join(data, "sweep"), catalog, web=WEB)
    try:
        d.get(one.url + "#tab=diff")
        p.wait(lambda: "nothing to compare" in p.text("diff-line"), "one version explained")
        assert "one lathe version" in p.text("diff-line"), p.text("diff-line")
        assert not d.find_elements(By.CSS_SELECTOR, "#diff-body table")
        d.save_screenshot(os.path.join(artifacts, "explorer-diff-one.png"))
    finally:
        one.stop()
    print(f"diff: {p.text('diff-line')}")


def favicon(p, server):
    """16: the page names an SVG icon that the server answers."""
    href = p.d.execute_script(
        "return document.querySelector('link[rel=\"icon\"]')?.getAttribute('href')")
    assert href, "no favicon"
    code, headers, body = server.get(href)
    assert code == 200 and headers["Content-Type"] == "image/svg+xml", (code, headers)
    assert body.lstrip().startswith(b"<svg"), body[:40]


def main():
    args = fx.parse_args([(("--artifacts",), {"required": True})])
    os.makedirs(args.artifacts, exist_ok=True)
    with fx.Scratch() as root:
        data, catalog, fixture_id = fx.make_data(root, args.lathe, args.make_dataset)
        server = fx.Server(args.lathe, data, catalog, web=WEB)
        for name in ("index.html", "style.css", "app.js", "favicon.svg"):
            with open(os.path.join(WEB, name), "rb") as f:
                assert server.get(name)[2] == f.read(), f"the server does not serve {WEB}/{name}"
        driver = start_browser()
        try:
            run(Page(driver, server.url), server, args, data, catalog, fixture_id)
        except Exception:
            driver.save_screenshot(os.path.join(args.artifacts, "explorer-failure.png"))
            raise
        finally:
            driver.quit()
            server.stop()
    print("browser test passed")


def run(p, server, args, data, catalog, fixture_id):
    d, artifacts = p.d, args.artifacts
    d.execute_cdp_cmd("Browser.grantPermissions", {
        "origin": p.url.rstrip("/"), "permissions": ["clipboardReadWrite", "clipboardSanitizedWrite"]})
    d.get(p.url)
    p.settled("the first render")
    # On a loaded machine the rows can land a render after the first (seen under a full ctest
    # -j2): wait for them, then take that render as the one later steps start from.
    p.wait(lambda: p.model_ids() or None, "the default view to list the dataset's rows")
    p.ready = d.find_element(By.TAG_NAME, "body").get_attribute("data-ready")
    first_page(p, server)
    d.save_screenshot(os.path.join(artifacts, "explorer-first.png"))
    favicon(p, server)
    calibrate(p)
    contrast = Contrast()
    contrast.audit(p, "rows")
    semantics(p, "rows")

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
    contrast.audit(p, "trending, with untested rows")

    # Another lathe version.
    Select(d.find_element(By.ID, "lathe")).select_by_value("0.0.9")
    p.wait(lambda: "lathe 0.0.9" in p.text("rows-line"), "the version switch")
    assert p.state()["lathe"] == "0.0.9"
    Select(d.find_element(By.ID, "lathe")).select_by_value("0.1.0")
    p.wait(lambda: "lathe 0.1.0" in p.text("rows-line"), "the version switch back")

    # The row full of injection strings: opened, every field shown as text, nothing run.
    d.find_element(By.CSS_SELECTOR, '#views button[data-view="all"]').click()
    p.wait(lambda: "view" not in p.state(), "the all-rows view (the default)")
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
    assert not d.find_elements(By.CSS_SELECTOR, "#detail a.hub"), "a Hub link from a hostile id"

    # Copy the run script; the clipboard holds it exactly.
    d.find_element(By.CSS_SELECTOR, 'button[aria-label="Copy Run script"]').click()
    p.wait(lambda: "Copied" in p.text("detail-body"), "the copy feedback")
    copied = d.execute_async_script(
        "const done = arguments[0]; navigator.clipboard.readText().then(done, (e) => done('ERR ' + e));")
    assert copied == "echo '" + fx.INJECTION + "'", copied
    contrast.audit(p, "detail of the injection row, copied")

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
    contrast.audit(p, "detail of a swept row")
    semantics(p, "detail of a swept row")
    d.find_element(By.TAG_NAME, "body").send_keys(Keys.ESCAPE)
    p.wait(lambda: not d.find_element(By.ID, "detail").is_displayed(), "Escape closing the detail")
    model_page(p, fixture_id, artifacts)
    contrast.audit(p, "page of a tiny fixture")
    semantics(p, "page of a tiny fixture")
    filters_and_views(p, server)
    contrast.audit(p, "downloads without a ranking")

    # Coverage chart, then the diff between the two versions.
    d.get(p.url + "#tab=coverage")
    p.wait(lambda: d.find_elements(By.CSS_SELECTOR, "#coverage-chart .bar-row"), "the coverage chart")
    p.quiet("the coverage chart")
    coverage_shares(p)
    d.save_screenshot(os.path.join(artifacts, "explorer-coverage.png"))
    contrast.audit(p, "coverage")
    semantics(p, "coverage")
    ranking_coverage(p, server, artifacts, contrast)
    d.get(p.url + "#tab=coverage")
    p.settled("the coverage view again")
    d.find_element(By.ID, "tab-diff").click()
    p.wait(lambda: "regressions" in p.text("diff-line"), "the diff")
    Select(d.find_element(By.ID, "diff-a-lathe")).select_by_value("0.0.9")
    Select(d.find_element(By.ID, "diff-b-lathe")).select_by_value("0.1.0")
    p.wait(lambda: "A = lathe 0.0.9" in p.text("diff-line") and "B = lathe 0.1.0" in p.text("diff-line"),
           "the chosen versions")
    assert "Regressions (pass in A, not in B)" in p.text("diff-body")
    assert d.find_elements(By.CSS_SELECTOR, "#diff-body table.diff tr"), "regression rows"
    d.save_screenshot(os.path.join(artifacts, "explorer-diff.png"))
    contrast.audit(p, "diff")
    semantics(p, "diff")
    focus_walk(p, "diff")

    # The URL is the state: a fresh load of it shows the same diff.
    url = d.current_url
    d.get("about:blank")
    d.get(url)
    p.wait(lambda: "A = lathe 0.0.9" in p.text("diff-line"), "the diff restored from the URL")
    assert not d.find_element(By.ID, "diff-view").get_attribute("hidden")
    diff_one_version(p, args.lathe, data, catalog, artifacts)

    keyboard_flow(p, contrast)
    contrast.report()


if __name__ == "__main__":
    main()
