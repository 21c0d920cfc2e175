"""A report renders in headless Chromium (Debian package ``chromium``) to a screenshot that is not blank.

Skipped, saying why, where Chromium is not installed.
"""
import os
import shutil
import subprocess

from accelopt import report
from report import report_fixtures as fx


def _chromium():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def screenshot(browser, page, png, width=1200, height=1600):
    """Renders the file ``page`` with headless ``browser`` into ``png``; returns the process result."""
    return subprocess.run([browser, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--no-first-run", "--disable-extensions", f"--window-size={width},{height}",
                           f"--screenshot={png}", "file://" + os.path.abspath(page)],
                          capture_output=True, text=True, timeout=120, check=False)


def test_report_renders_in_headless_chromium():
    browser = _chromium()
    if browser is None:
        print("SKIPPED: chromium is not installed (Debian package chromium); the page was not rendered")
        return
    from PIL import Image  # python3-pil, a dependency of python3-matplotlib
    root = fx.temp_root()
    try:
        run_dir = fx.beam_run(root)
        path = report.write_report({"run_dir": run_dir})["path"]
        png = os.path.join(root, "shot.png")
        result = screenshot(browser, path, png)
        assert result.returncode == 0 and os.path.isfile(png), result.stderr[-2000:]
        image = Image.open(png).convert("RGB")
        assert image.size == (1200, 1600)
        pixels = list(image.resize((120, 160)).getdata())
        colors = len(set(pixels))
        not_white = sum(1 for p in pixels if min(p) < 235) / len(pixels)
        # A blank (or error) page is one colour; the report has text, cards and charts in colour.
        assert colors > 50 and not_white > 0.05, (colors, not_white)
        assert any(abs(r - g) > 60 or abs(g - b) > 60 for r, g, b in pixels), "no coloured chart pixels"
    finally:
        fx.remove(root)
