"""The HTML report (`snakemake --report`): every table and figure of every study, with
caption, category and labels, and a headless Chromium that renders it and opens a figure.

The fast tests read the report flags of the parsed workflow for the paper config,
the demo and a demo with a custom task; the others build the demo once, write the
single-file report and look at it the way a reader does.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml
from workflow_helpers import REPO, UNTRAINED, copy_workflow, install_demo_zoo, snakemake

pytestmark = pytest.mark.workflow

STUDIES = ("riskscores", "nextword", "subgroups", "labelbias", "decisionrisk")
CATEGORIES = (*STUDIES, "profile")
"""The report's pages: a study each, and the models' uncertainty profile across them."""
SHOWN = {"figures": ".png", "tables": ".csv"}  # the one file of each result the report carries
CAPTIONS = REPO / "workflow" / "report"

# Loads the workflow without running anything and prints, for every output of
# every rule, its report flag and the caption rendered as Snakemake renders it
# (Jinja, then docutils), with undefined Jinja names an error.
FLAGS = r"""
import json, sys
from pathlib import Path
from types import SimpleNamespace

from docutils.core import publish_parts
from jinja2 import Environment, StrictUndefined
from snakemake.api import SnakemakeApi
from snakemake.io import get_flag_value, is_flagged
from snakemake.settings.types import ConfigSettings, ResourceSettings

env = Environment(trim_blocks=True, lstrip_blocks=True, undefined=StrictUndefined)
with SnakemakeApi() as api:
    configs = ConfigSettings(configfiles=[Path(a) for a in sys.argv[1:]])
    workflow = api.workflow(ResourceSettings(), configs, snakefile=Path("Snakefile"), workdir=Path.cwd())._workflow
    out = []
    for rule in workflow.rules:
        for f in rule.output:
            entry = {"rule": rule.name, "path": str(f)}
            if is_flagged(f, "report"):
                flag = get_flag_value(f, "report")
                caption = Path(flag.caption.get_path_or_uri(secret_free=True)).resolve()
                try:
                    text = env.from_string(caption.read_text()).render(
                        snakemake=SimpleNamespace(config=workflow.config, params=rule.params, wildcards={})
                    )
                except Exception as err:
                    sys.exit(f"caption {caption} of {f} (rule {rule.name}): {type(err).__name__}: {err}")
                entry |= {
                    "caption": str(caption),
                    "html": publish_parts(text, writer_name="html")["body"],
                    "category": flag.category,
                    "subcategory": flag.subcategory,
                    "labels": flag.labels,
                }
            out.append(entry)
print("FLAGS " + json.dumps(out))
"""


def report_flags(workdir: Path, *configfiles: str) -> list[dict[str, object]]:
    """Every output of every rule, with its report flag and rendered caption where it has one."""
    run = subprocess.run(
        [sys.executable, "-c", FLAGS, *configfiles], cwd=workdir, capture_output=True, text=True, timeout=600
    )
    assert run.returncode == 0, run.stderr[-3000:]
    line = next(line for line in run.stdout.splitlines() if line.startswith("FLAGS "))
    flags: list[dict[str, object]] = json.loads(line.removeprefix("FLAGS "))
    return flags


def study_result(path: str) -> tuple[str, str] | None:
    """(study, kind) of a path the report must carry: a study's figure PNG or table CSV,
    or its provenance record (kind ``provenance``)."""
    m = re.fullmatch(r"results/([^/]+)/(figures|tables)/[^/]+", path)
    if m and path.endswith(SHOWN[m.group(2)]):
        return m.group(1), m.group(2)
    m = re.fullmatch(r"results/([^/]+)/provenance\.json", path)
    return (m.group(1), "provenance") if m else None


def first_label(kind: str, path: str) -> tuple[str, str]:
    """The label a result must carry first: its figure or table name, or ``record: provenance``."""
    return ("record", "provenance") if kind == "provenance" else (kind[:-1], Path(path).stem)


def text_of(fragment: str) -> str:
    """The visible words of an HTML fragment."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def toggles(labels: list[dict[str, str]]) -> list[str]:
    """The labels the report may turn into a toggle (abstract_results.js, Snakemake 9).

    Any label but the first whose values are exactly two, each on half the
    results, hides every row whose value is not the selected one: a result that
    no toggle setting shows.
    """
    names = list(dict.fromkeys(k for entry in labels for k in entry))
    found = []
    for name in names[1:]:
        counts = Counter(entry[name] for entry in labels if name in entry)
        if len(counts) == 2 and all(2 * c == len(labels) for c in counts.values()):
            found.append(name)
    return found


# ----------------------------------------------------------------------------- fast: the flags


@pytest.fixture(scope="module")
def flags(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, object]]]:
    """Report flags under the paper config, the demo, and the demo with a custom riskscores task."""
    work = copy_workflow(tmp_path_factory.mktemp("flags") / "repo")
    demo = yaml.safe_load((work / "config" / "demo.yaml").read_text())
    risk = demo["studies"]["riskscores"]
    risk["custom_tasks"] = {"ACSIncomeCAGraduates": {"based_on": "ACSIncome", "filters": ["SCHL=21..24", "ST=6"]}}
    risk["tasks"] = [*risk["tasks"], "ACSIncomeCAGraduates"]
    (work / "custom.yaml").write_text(yaml.safe_dump(demo))
    return {
        "paper": report_flags(work),
        "demo": report_flags(work, "config/demo.yaml"),
        "custom": report_flags(work, "custom.yaml"),
    }


@pytest.mark.parametrize("config", ["paper", "demo", "custom"])
def test_every_figure_and_table_is_flagged_with_its_study(
    flags: dict[str, list[dict[str, object]]], config: str
) -> None:
    outputs = flags[config]
    flagged = {str(e["path"]): e for e in outputs if "caption" in e}
    must = {str(e["path"]): where for e in outputs if (where := study_result(str(e["path"]))) is not None}
    assert set(must) == set(flagged), (
        f"not flagged for the report: {sorted(set(must) - set(flagged))}; "
        f"flagged but not a figure PNG or table CSV: {sorted(set(flagged) - set(must))}"
    )
    assert {study for study, _ in must.values()} == set(CATEGORIES)
    for path, (study, kind) in must.items():
        entry = flagged[path]
        assert (entry["category"], entry["subcategory"]) == (study, kind), path
        labels = entry["labels"]
        assert isinstance(labels, dict)
        assert next(iter(labels.items())) == first_label(kind, path), f"{path}: first label {labels}"
        assert all(isinstance(v, str) and v for v in labels.values()), f"{path}: empty label in {labels}"


@pytest.mark.parametrize("config", ["paper", "demo", "custom"])
def test_captions_render_to_text_without_errors(flags: dict[str, list[dict[str, object]]], config: str) -> None:
    for entry in flags[config]:
        if "caption" not in entry:
            continue
        caption = Path(str(entry["caption"]))
        assert "/workflow/report/" in caption.as_posix(), f"{entry['path']}: caption {caption} outside workflow/report"
        words = text_of(str(entry["html"]))
        assert len(words.split()) >= 15, f"{entry['path']}: caption {caption.name} says too little: {words!r}"
        assert "System Message" not in words, f"{entry['path']}: caption {caption.name} is not valid rst: {words}"
        assert "{{" not in words and "{%" not in words, f"{entry['path']}: unrendered Jinja in {caption.name}"


@pytest.mark.parametrize("config", ["paper", "demo", "custom"])
def test_no_label_becomes_a_toggle_that_hides_results(flags: dict[str, list[dict[str, object]]], config: str) -> None:
    groups: dict[tuple[str, str], list[dict[str, str]]] = {}
    for entry in flags[config]:
        if "caption" in entry:
            groups.setdefault((str(entry["category"]), str(entry["subcategory"])), []).append(entry["labels"])  # type: ignore[arg-type]
    for key, labels in groups.items():
        assert not toggles(labels), f"{key}: label(s) {toggles(labels)} would hide results in the report"


def test_every_caption_file_is_used_and_every_used_one_exists(flags: dict[str, list[dict[str, object]]]) -> None:
    used = {str(e["caption"]).split("/workflow/report/")[-1] for c in flags.values() for e in c if "caption" in e}
    written = {p.relative_to(CAPTIONS).as_posix() for p in [*CAPTIONS.glob("*/*.rst"), CAPTIONS / "provenance.rst"]}
    assert used <= written, f"captions referenced but missing: {sorted(used - written)}"
    assert written <= used, f"caption files no rule uses (paper, demo, custom task): {sorted(written - used)}"
    assert (CAPTIONS / "workflow.rst").is_file()
    assert 'report: "workflow/report/workflow.rst"' in (REPO / "Snakefile").read_text()


# ----------------------------------------------------------------------------- the demo's report


@dataclass
class Report:
    root: Path
    html: Path
    results: dict[str, dict[str, object]]
    categories: dict[str, dict[str, list[str]]]
    description: str


def embedded(page: str, name: str) -> object:
    """A JSON variable the single-file report embeds (``var results = {...};`` and the like)."""
    m = re.search(rf'<script id="{name}">\s*var \w+ = (.*?);\s*</script>', page, re.S)
    assert m, f"report has no embedded {name!r}"
    return json.loads(m.group(1))


@pytest.fixture(scope="module")
def demo_report(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Report:
    """The single-file HTML report of a finished demo: ``make demo``'s own ``results/report.html``,
    when ``$UNSURE_DEMO_RESULTS`` names its ``results/`` (``make test`` runs the demo first; the
    report is written beside it when ``make demo`` did not), else that of the demo built once in
    a throwaway copy (its untrained zoo the session's)."""
    out = tmp_path_factory.mktemp("report")
    given = os.environ.get("UNSURE_DEMO_RESULTS")
    start = time.monotonic()
    if given:
        root, configs = Path(given).resolve().parent, ["--configfile", "config/demo.yaml"]
        assert (root / "Snakefile").is_file(), f"UNSURE_DEMO_RESULTS={given} is not a workflow's results/"
    else:
        root, configs = copy_workflow(out / "repo"), ["--configfile", "config/demo.yaml", UNTRAINED]
        install_demo_zoo(root, request.getfixturevalue("demo_zoo"))
        run = snakemake("all", "-c2", *configs, cwd=root, timeout=1800)
        assert run.returncode == 0, run.stderr[-5000:]
    built = time.monotonic()
    made = root / "results" / "report.html" if given else None
    path = made if made is not None and made.is_file() else out / "report.html"
    if path != made:
        run = snakemake("--report", str(path), *configs, cwd=root, timeout=600)
        assert run.returncode == 0, run.stderr[-5000:]
    print(
        f"\ndemo {built - start:.0f} s, report {time.monotonic() - built:.0f} s, "
        f"{path} {path.stat().st_size / 2**20:.1f} MiB"
    )
    page = path.read_text()
    return Report(
        root,
        path,
        embedded(page, "results"),  # type: ignore[arg-type]
        embedded(page, "categories"),  # type: ignore[arg-type]
        embedded(page, "workflow-desc"),  # type: ignore[arg-type]
    )


def test_report_carries_every_figure_and_table_of_the_run(demo_report: Report) -> None:
    on_disk = {
        p.relative_to(demo_report.root).as_posix()
        for kind, suffix in SHOWN.items()
        for p in (demo_report.root / "results").glob(f"*/{kind}/*{suffix}")
    } | {p.relative_to(demo_report.root).as_posix() for p in (demo_report.root / "results").glob("*/provenance.json")}
    assert set(demo_report.results) == on_disk, (
        f"in results/ but not in the report: {sorted(on_disk - set(demo_report.results))}; "
        f"in the report only: {sorted(set(demo_report.results) - on_disk)}"
    )
    assert set(demo_report.categories) == set(CATEGORIES)
    placed = {}
    for category, subcategories in demo_report.categories.items():
        for subcategory, paths in subcategories.items():
            for path in paths:
                placed[path] = (category, subcategory)
    for path, result in demo_report.results.items():
        study, kind = study_result(path) or ("", "")
        assert placed[path] == (study, kind), f"{path} filed under {placed[path]}"
        caption = text_of(str(result["caption"]))
        assert len(caption.split()) >= 15, f"{path}: caption {caption!r}"
        assert "System Message" not in caption and "{{" not in caption, f"{path}: caption {caption!r}"
        mime = {"figures": "image/png", "tables": "text/csv", "provenance": "application/json"}[kind]
        assert result["mime_type"] == mime, path
        assert str(result["data_uri"]).startswith(f"data:{result['mime_type']};"), path
        labels = result["labels"]
        assert isinstance(labels, dict), f"{path}: labels {labels}"
        assert next(iter(labels.items())) == first_label(kind, path), f"{path}: labels {labels}"


def test_workflow_description_names_every_study_and_warns_of_the_demo(demo_report: Report) -> None:
    words = text_of(demo_report.description)
    assert "System Message" not in words
    for study in STUDIES:
        assert study in words
        assert f"javascript:app.showCategory('{study}')" in demo_report.description, f"no link to {study}"
    # the untrained zoo's warning (this module's own demo) or the trained one's (make demo's)
    assert ("noise" in words or "no number here is a finding" in words) and "config/demo.yaml" in words


# ----------------------------------------------------------------------------- in a browser


@pytest.fixture(scope="module")
def chromium() -> str:
    """Debian's ``chromium`` (CI installs it); the browser tests skip without one."""
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("no chromium or chromium-browser on PATH (Debian: apt-get install chromium)")
    return found


def browse(chromium: str, page: Path, out: Path) -> tuple[Path, str]:
    """Screenshot and DOM (after the page's scripts ran) of ``page``, as headless Chromium renders it."""
    shot = out / f"{page.stem}.png"
    url = page.resolve().as_uri()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        # a fresh profile each time: a profile still held by a browser that is
        # shutting down would hand the page to that browser
        profile = tempfile.mkdtemp(prefix="chromium-", dir=out)
        command = [chromium, "--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
        command += [f"--user-data-dir={profile}", "--window-size=1400,1000", "--virtual-time-budget=20000"]
        return subprocess.run([*command, *args, url], capture_output=True, text=True, timeout=300)

    shoot = run(f"--screenshot={shot}")
    assert shoot.returncode == 0 and shot.is_file(), shoot.stderr[-3000:]
    dump = run("--dump-dom")
    assert dump.returncode == 0 and "</html>" in dump.stdout, dump.stderr[-3000:]
    print(f"\nscreenshot of {page.name}: {shot}")
    return shot, dump.stdout


class VisibleText(HTMLParser):
    """The text a reader could see: everything outside script and style elements and hidden blocks."""

    def __init__(self) -> None:
        super().__init__()
        self.skip: list[str] = []
        self.words: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        hidden = "display: none" in (dict(attrs).get("style") or "")
        if self.skip or tag in ("script", "style") or hidden:
            self.skip.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if self.skip and self.skip[-1] == tag:
            self.skip.pop()

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.words.extend(data.split())


def visible_text(dom: str) -> str:
    parser = VisibleText()
    parser.feed(dom)
    return " ".join(parser.words)


def colours(png: Path) -> tuple[int, float]:
    """Distinct colours in the right half of a screenshot (where the report draws figures
    and the rule graph, away from the menu) and the share of its pixels that are not white."""
    from PIL import Image

    with Image.open(png) as image:
        assert image.size == (1400, 1000), f"{png}: {image.size}"
        right = image.convert("RGB").crop((700, 0, 1400, 1000))
    counts = {colour: n for n, colour in right.getcolors(maxcolors=700 * 1000) or []}
    return len(counts), 1 - counts.get((255, 255, 255), 0) / (700 * 1000)


ERROR_TEXT = ("System Message", "ERR_", "can’t be reached", "isn’t working", "Error rendering", "Traceback")


def test_report_renders_in_chromium(demo_report: Report, chromium: str, tmp_path: Path) -> None:
    shot, dom = browse(chromium, demo_report.html, tmp_path)
    words = visible_text(dom)
    for study in STUDIES:
        assert study in words, f"the report's menu does not show {study}: {words[:500]}"
    assert "five studies" in words, "the workflow description is not shown"
    assert "Loading Snakemake Report" not in words and "enable Javascript" not in words, words[:500]
    assert not [t for t in ERROR_TEXT if t in words], words[:1000]
    distinct, drawn = colours(shot)
    assert distinct >= 100 and drawn >= 0.01, f"{shot}: {distinct} colours, {drawn:.1%} not white: no rule graph"


# Walks the report as a reader does, clicking the menu: every study, every
# subcategory (rows counted), then the view button of FIGURE in STUDY's figures
# and its info button (the caption); the outcome, and any script error, goes
# into <pre id="unsure-check">. Every study has figures and tables, so a click
# on a study lists its subcategories.
WALK = """
<script>
window.__errors = [];
window.addEventListener("error", (e) => window.__errors.push(String(e.message)));
const consoleError = console.error;
console.error = (...args) => { window.__errors.push(args.map(String).join(" ")); consoleError(...args); };
</script>
"""
CLICK = """
<script>
(async () => {
  const tick = () => new Promise((resolve) => setTimeout(resolve, 100));
  const click = async (text) => {
    const span = [...document.querySelectorAll("a span")].find((s) => s.textContent === text);
    if (!span) { throw new Error(`no link ${text} in the menu`); }
    span.closest("a").click();
    await tick();
  };
  const check = {rows: {}};
  try {
    await tick();
    for (const category of Object.keys(categories)) {
      for (const subcategory of Object.keys(categories[category])) {
        app.setView({navbarMode: "menu"});  // the home breadcrumb
        await tick();
        await click(category);
        await click(subcategory);
        check.rows[category + "/" + subcategory] = document.querySelectorAll("tbody tr").length;
      }
    }
    app.setView({navbarMode: "menu"});
    await tick();
    await click(STUDY);
    await click("figures");
    const row = [...document.querySelectorAll("tbody tr")].find((r) => r.cells[0].textContent === FIGURE);
    const buttons = row.cells[row.cells.length - 1].querySelectorAll("a");
    buttons[0].click();
    await tick();
    buttons[1].click();
    await tick();
    // no waiting for the image to decode: virtual time may run out first; the
    // screenshot shows whether it was drawn
    const img = document.querySelector("img[src^='data:image/png']");
    check.image = img ? img.getAttribute("src") === results[app.state.resultPath].data_uri : null;
    check.shown = app.state.resultPath;
  } catch (err) {
    check.failure = String(err);
  }
  check.errors = window.__errors;
  const pre = document.createElement("pre");
  pre.id = "unsure-check";
  pre.textContent = JSON.stringify(check);
  document.body.appendChild(pre);
})();
</script>
"""


@pytest.mark.parametrize("study", STUDIES)
def test_chromium_draws_a_figure_of_each_study_with_its_caption(
    demo_report: Report, chromium: str, tmp_path: Path, study: str
) -> None:
    figures = sorted(Path(p).stem for p in demo_report.categories[study]["figures"])
    figure = figures[0]
    page = demo_report.html.read_text()
    head = page.index("<head>") + len("<head>")
    body = page.rindex("</body>")
    click = CLICK.replace("STUDY", json.dumps(study)).replace("FIGURE", json.dumps(figure))
    walk = tmp_path / f"report-{study}-{figure}.html"
    walk.write_text(page[:head] + WALK + page[head:body] + click + page[body:])
    shot, dom = browse(chromium, walk, tmp_path)
    m = re.search(r'<pre id="unsure-check">(.*?)</pre>', dom, re.S)
    assert m, "the walk through the report did not finish"
    check = json.loads(html.unescape(m.group(1)))
    assert "failure" not in check, check
    assert check["errors"] == [], check["errors"]
    expected = {f"{c}/{s}": len(paths) for c, subs in demo_report.categories.items() for s, paths in subs.items()}
    assert check["rows"] == expected, "a subcategory does not list every one of its results"
    assert check["shown"] == f"results/{study}/figures/{figure}.png"
    assert check["image"], "the figure's image is not on the page"
    words = visible_text(dom)
    caption = text_of(str(demo_report.results[check["shown"]]["caption"]))
    assert caption[:60] in words, f"caption of {figure} not shown: {caption[:60]!r}"
    assert not [t for t in ERROR_TEXT if t in words], words[:1000]
    distinct, drawn = colours(shot)
    assert distinct >= 100 and drawn >= 0.01, f"{shot}: {distinct} colours, {drawn:.1%} not white: no figure"
