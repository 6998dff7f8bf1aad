#!/usr/bin/env python3
"""Screenshots of the archive page (issue 37's closing note), of an archive that kevolve's own writers filled.

    python scripts/screenshot_archive.py [--out .eng/screenshots] [--work DIR] [--run RUN_FOLDER]

Fills a fresh archive (a SQLite file under --work) with real verdicts on this machine's CPU: `kevolve optimize
tests/fixtures/problems/relu.py --llm demo --device cpu --max-candidates 8` (stored live by optimize's archive
ingest; with --run, an optimize run folder already made is imported instead, `kevolve archive import`) and `kevolve
bench` over the fixture suite's levels 1 and 2 (stored by bench's ingest). Then serves it (`kevolve archive serve`)
and saves from headless Chromium (Debian's chromium and chromedriver, as tests/integration/test_archive_browser.py
drives them; KEVOLVE_CHROMIUM / KEVOLVE_CHROMEDRIVER name others):

    list.png           the kernel list as it opens (ok kernels, fastest first)
    list-filtered.png  every outcome of the demo run, shortest runtime first (the filter and sort menus)
    problem.png        the ReLU problem: its leaderboard and its speedups plotted over the generations
    lineage.png        a mutation: its labelled lineage and the diff against its parent
    log.png            the demo's first draft: its compiler log unfolded in full

Needs the test extras (selenium). Prints the paths; exits 1 with one line when something is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
FIX = ROOT / "tests" / "fixtures"
KEVOLVE = [sys.executable, "-m", "kevolve.cli"]


class Failed(Exception):
    """One line for the user."""


def kevolve(args: list[str], env: dict[str, str], answers: tuple[int, ...] = (0,)) -> str:
    """Run a kevolve command; its stdout, or Failed with its last lines."""
    p = subprocess.run(KEVOLVE + args, env=env, cwd=ROOT, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if p.returncode not in answers:
        raise Failed(f"kevolve {' '.join(args[:2])} exited {p.returncode}: {(p.stderr or p.stdout).strip()[-400:]}")
    return p.stdout


def fill(work: Path, env: dict[str, str], run: Path | None) -> Path:
    """The archive filled by optimize's and bench's writers; the optimize run's folder."""
    if run is None:
        print("optimize --llm demo (a few minutes on 2 cores) …", flush=True)
        kevolve(["optimize", str(FIX / "problems" / "relu.py"), "--llm", "demo", "--device", "cpu",
                 "--max-candidates", "8", "--runs-dir", str(work / "runs"), "--no-cache"], env, answers=(0, 4))
        run = next((work / "runs").iterdir())
    else:
        kevolve(["archive", "import", str(run)], env)
    print("bench over the fixture suite …", flush=True)
    kevolve(["bench", "--suite", str(FIX / "suite"), "--level", "1,2", "--solutions", str(FIX / "suite_solutions"),
             "--device", "cpu", "--trials", "5", "--max-timing-s", "0.5", "--compile-baseline", "off",
             "--run-dir", str(work / "bench"), "--archive-ingest", "all"], env, answers=(0, 4, 5))
    return run


def picks(run: Path) -> dict[str, str]:
    """From the run's own records: its problem, its first (broken) draft, and the evaluated mutation (else any child)
    whose parent has the most children (the fullest lineage to draw)."""
    trials = [json.loads(x) for x in (run / "trials.jsonl").read_text().splitlines()]
    broken = next(t["candidate"] for t in trials if t["outcome"] == "compile_error")
    kids = [t for t in trials if t["parents"] and t["status"] == "evaluated"]
    family = {p: sum(p in k["parents"] for k in kids) for k in kids for p in k["parents"]}
    child = max(kids, key=lambda t: (t["operator"] in ("mutate", "crossover"), max(family[p] for p in t["parents"])))
    problem = json.loads((run / "problem.json").read_text())["id"]
    return {"broken": broken, "child": child["candidate"], "problem": problem, "run": run.name}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def browser(profile: Path) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    found = os.environ.get("KEVOLVE_CHROMIUM") or shutil.which("chromium")
    driver = os.environ.get("KEVOLVE_CHROMEDRIVER") or shutil.which("chromedriver")
    if not found or not driver:
        raise Failed("needs chromium and chromedriver (apt-get install chromium chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = found
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
                 "--disable-component-update", "--disable-sync", "--hide-scrollbars", "--window-size=1300,900",
                 f"--user-data-dir={profile}"):
        opts.add_argument(flag)
    d = webdriver.Chrome(service=Service(driver), options=opts)
    d.set_page_load_timeout(60)
    return d


def ready(d: Any, hash_: str, css: str) -> None:
    """Wait until the page shows `hash_` rendered and holding `css`."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(d, 30).until(lambda d: d.execute_script(
        "return location.hash === arguments[0] && document.body.dataset.ready === '1' && "
        "document.querySelector(arguments[1]) !== null", hash_, css))


def shoot(d: Any, path: Path) -> None:
    """The whole page (up to 3,000 px tall), not only the window."""
    height = min(3000, int(d.execute_script("return document.documentElement.scrollHeight")) + 20)
    d.set_window_size(1300, max(900, height))
    time.sleep(0.3)
    d.save_screenshot(str(path))
    d.set_window_size(1300, 900)
    print(path, flush=True)


def screenshots(base: str, out: Path, pick: dict[str, str], profile: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    d = browser(profile)
    try:
        d.get(base + "/#/")
        ready(d, "#/", "#kernels")
        shoot(d, out / "list.png")
        Select(d.find_element(By.ID, "outcome")).select_by_value("")
        Select(d.find_element(By.ID, "sort")).select_by_value("runtime")
        Select(d.find_element(By.ID, "run")).select_by_value(pick["run"])
        d.find_element(By.ID, "search-btn").click()
        WebDriverWait(d, 30).until(lambda d: d.execute_script("return document.body.dataset.ready") == "1" and
                                   "in run" in d.find_element(By.CSS_SELECTOR, "h2").text)
        shoot(d, out / "list-filtered.png")
        for name, hash_, css in (("problem", f"#/problem/{pick['problem']}", "#speedup-plot"),
                                 ("lineage", f"#/kernel/{pick['child']}", "#diff-code"),
                                 ("log", f"#/kernel/{pick['broken']}", "#evaluations tr.log details")):
            d.get(base + "/" + hash_)
            ready(d, hash_, css)
            if name == "log":
                d.find_element(By.CSS_SELECTOR, "#evaluations tr.log details summary").click()
            shoot(d, out / f"{name}.png")
    finally:
        d.quit()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=ROOT / ".eng" / "screenshots")
    ap.add_argument("--work", type=Path, help="where the archive and runs go (default: a new temporary folder)")
    ap.add_argument("--run", type=Path, help="an optimize run folder of --llm demo to import instead of running it")
    a = ap.parse_args()
    work = (a.work or Path(tempfile.mkdtemp(prefix="kevolve-shots-"))).resolve()
    work.mkdir(parents=True, exist_ok=True)
    a.out.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI", "ANTHROPIC", "KEVOLVE_DB", "KEVOLVE_HOME"))}
    env.update(KEVOLVE_HOME=str(work / "home"), KEVOLVE_DB=f"sqlite:///{work / 'archive.db'}", NO_COLOR="1")
    server = None
    try:
        if a.run is not None and not (a.run / "trials.jsonl").is_file():
            raise Failed(f"{a.run}: not an optimize run folder (no trials.jsonl)")
        pick = picks(fill(work, env, a.run.resolve() if a.run else None))
        port = free_port()
        server = subprocess.Popen(KEVOLVE + ["archive", "serve", "--port", str(port)], env=env, cwd=ROOT,
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        base = f"http://127.0.0.1:{port}"
        for _ in range(120):
            try:
                urllib.request.urlopen(base + "/api/stats", timeout=5).read()
                break
            except OSError:
                if server.poll() is not None:
                    raise Failed(f"archive serve exited: {server.stderr.read()[-400:] if server.stderr else ''}") \
                        from None
                time.sleep(0.5)
        screenshots(base, a.out, pick, work / "chrome")
    except (Failed, ModuleNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
