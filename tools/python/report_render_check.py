"""Renders an `aspen report` page in headless Chromium (Debian's `chromium`) and prints
what a reader would see, as one JSON object:

  {"console": [...],            # every console message and uncaught error
   "charts": N,                 # <svg class="chart"> elements in the rendered DOM
   "chart_titles": [...],       # their aria-labels
   "size": [w, h],              # the screenshot's pixels
   "palette_pixels": {...},     # pixels of each series colour in the screenshot
   "non_white_fraction": f,
   "geometry": [{"title": t, "plot": [x, y, w, h], "legend": [x, y, w, h] or null}]}

"geometry" is the laid-out boxes (getBoundingClientRect, with the real fonts) of each
chart's plot area (.plot-area) and legend (.legend), measured by a probe script in a
copy of the page (REPORT.probe.html beside the screenshot): the report itself has no
scripts, and its screenshot is taken of the page as written.

usage: report_render_check.py REPORT.html SCREENSHOT.png
"""
import html
import json
import re
import subprocess
import sys
from pathlib import Path

from PIL import Image

PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd"]
BASE = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
        "--allow-file-access-from-files", "--enable-logging=stderr", "--v=0"]


# Appended to a copy of the report: writes each chart's boxes into the DOM as JSON, which
# --dump-dom then prints.
PROBE = """<script>
const box = e => { if (!e) return null; const r = e.getBoundingClientRect();
                   return [r.left, r.top, r.width, r.height]; };
const charts = [...document.querySelectorAll('svg.chart')].map(svg => ({
  title: svg.getAttribute('aria-label'),
  plot: box(svg.querySelector('.plot-area')), legend: box(svg.querySelector('.legend'))}));
const out = document.createElement('pre');
out.id = 'aspen-probe';
out.textContent = JSON.stringify(charts);
document.body.appendChild(out);
</script>"""


def run(args):
    return subprocess.run(BASE + args, capture_output=True, text=True, timeout=120)


def main():
    report, screenshot = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    url = report.as_uri()
    probe = screenshot.with_name(report.stem + ".probe.html")
    page = report.read_text()
    end = page.rindex("</body>")
    probe.write_text(page[:end] + PROBE + page[end:])
    dom = run(["--dump-dom", "--window-size=1200,2400", probe.as_uri()])
    found = re.search(r'<pre id="aspen-probe">(.*?)</pre>', dom.stdout, re.S)
    geometry = json.loads(html.unescape(found.group(1))) if found else None
    shot = run([f"--screenshot={screenshot}", "--window-size=1200,2400", url])
    console = [line for line in (dom.stderr + shot.stderr).splitlines()
               if ":CONSOLE" in line or "Uncaught" in line]
    titles = re.findall(r'<svg class="chart"[^>]*aria-label="([^"]*)"', dom.stdout)
    image = Image.open(screenshot).convert("RGB")
    pixels = list(image.getdata())
    counts = {}
    for colour in PALETTE:
        rgb = tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))
        counts[colour] = sum(1 for p in pixels if p == rgb)
    non_white = sum(1 for p in pixels if p != (255, 255, 255)) / len(pixels)
    json.dump({"console": console, "charts": len(titles), "chart_titles": titles,
               "size": list(image.size), "palette_pixels": counts,
               "non_white_fraction": non_white, "geometry": geometry,
               "chromium_exit": [dom.returncode, shot.returncode]}, sys.stdout)


if __name__ == "__main__":
    main()
