"""Helpers shared by the benchmark scripts: timing, the machine, result files, tables.

Every script puts this folder on ``sys.path`` (two lines at its top) and imports
``common``; nothing here imports napari_varblur at import time, so ``ab.py``'s workers
can still choose which source tree they import it from.

- Timing: :func:`timed` (one call), :func:`median_time` (median of repeats after a
  warm-up), :func:`interleaved` (several calls in turns, so a shared machine's drifts
  hit them alike).
- The machine: :func:`machine` (date, CPU, cores, load, GPU, versions, git commit),
  :func:`machine_slug` (``amd-epyc-2c``, ``nvidia-h200``).
- Result files: :func:`result_path` (``results/<date>_<machine>_<name>.json``; quick
  runs go to ``results/quick/``, which git ignores), :func:`write_result`,
  :func:`latest_result`.
- Markdown: :func:`md_table`, :func:`num`.

``python benchmarks/common.py path NAME [EXT] [--quick]`` prints where a result named
NAME would go on this machine today (``gpu/gpu_check.sh`` writes its log there).
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
RESULTS = BENCH / "results"
QUICK_RESULTS = RESULTS / "quick"
IMAGES = ROOT / "docs" / "images"

#: Distributions whose versions a result records (those installed).
VERSIONS = (
    "numpy", "scipy", "numba", "jax", "jaxlib", "dask", "zarr", "astropy", "napari",
    "opencv-python", "opencv-python-headless", "opencv-contrib-python",
)  # fmt: skip


# --------------------------------------------------------------------------- timing


def log(message: str) -> None:
    """Progress on stderr, so that stdout holds only the report."""
    print(message, file=sys.stderr, flush=True)


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds taken by one call of ``fn()``, and its result."""
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def median_time(
    fn: Callable[[], Any],
    repeats: int,
    *,
    warmup: int = 1,
    summary: Callable[[list[float]], float] = statistics.median,
) -> float:
    """Seconds of one call: ``summary`` (the median) of ``repeats`` calls after
    ``warmup`` untimed calls (compiling, or loading Numba's disk cache)."""
    for _ in range(warmup):
        fn()
    return summary([timed(fn)[0] for _ in range(repeats)])


def interleaved(
    calls: dict[str, Callable[[], Any]],
    repeats: int,
    *,
    rotate: bool = True,
    short: float | None = None,
    rest: float = 0.0,
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, list[float]]:
    """Each call's times over ``repeats`` rounds, after one warm-up round.

    Parameters
    ----------
    calls
        Name -> the call to time.
    repeats
        Timed rounds; each call runs once per round (see ``short``).
    rotate
        Rotate the order of the calls from round to round.
    short
        A call whose warm-up took under ``short`` seconds runs 5 times in each round and
        the round keeps their median (one preempted 10 ms call on a shared machine would
        otherwise move a ratio by 4x).
    rest
        Seconds of sleep before each timed call (Numba's OpenMP workers spin a few ms
        after a parallel loop and would slow whatever call comes next).
    clock
        ``time.perf_counter`` (wall) or ``time.process_time`` (CPU seconds).
    """
    names = list(calls)
    times: dict[str, list[float]] = {k: [] for k in names}
    inner = dict.fromkeys(names, 1)
    for rnd in range(repeats + 1):
        shift = rnd % len(names) if rotate else 0
        for k in names[shift:] + names[:shift]:
            runs = []
            for _ in range(inner[k]):
                time.sleep(rest)
                start = clock()
                calls[k]()
                runs.append(clock() - start)
            if rnd:
                times[k].append(statistics.median(runs))
            elif short is not None and runs[0] < short:
                inner[k] = 5
    return times


# --------------------------------------------------------------------------- machine


def _run(cmd: list[str], cwd: Path | str | None = None) -> str:
    """A command's stripped stdout; ``""`` when it cannot run or fails."""
    try:
        done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def gpu_name() -> str | None:
    """The first NVIDIA GPU's name (``nvidia-smi``), or None."""
    if not shutil.which("nvidia-smi"):
        return None
    names = _run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    return names.splitlines()[0].strip() if names else None


def versions(names: Iterable[str] = VERSIONS) -> dict[str, str]:
    """The installed versions of ``names`` (distributions; missing ones left out)."""
    out = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def git_info(path: Path | str) -> dict[str, Any]:
    """The commit, its subject, and whether ``path`` differs from it, when ``path`` lies
    in a git checkout (else ``{}``)."""
    log_line = _run(["git", "-C", str(path), "log", "-1", "--format=%H%n%s"])
    if not log_line:
        return {}
    commit, _, subject = log_line.partition("\n")
    dirty = bool(_run(["git", "-C", str(path), "status", "--porcelain", "--", "."]))
    return dict(commit=commit, subject=subject, dirty=dirty)


def package_info() -> dict[str, Any]:
    """The napari_varblur that is timed: version, folder, and its git commit."""
    import napari_varblur

    folder = Path(napari_varblur.__file__).resolve().parent
    info = dict(version=getattr(napari_varblur, "__version__", "?"), path=str(folder))
    return {**info, **git_info(folder)}


def installed(module: str) -> bool:
    """Whether ``module`` can be imported (an optional peer: OpenCV, matplotlib, ...)."""
    return importlib.util.find_spec(module) is not None


def machine(*, package: bool = True, threads: bool = True, **extra: Any) -> dict[str, Any]:
    """What a result needs to be read later: date, CPU, cores, load, GPU, versions,
    Numba's threads and the napari_varblur timed (``package``), the command line and
    ``extra``."""
    info: dict[str, Any] = dict(
        date=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        cpu=cpu_model(),
        cores=os.cpu_count(),
        usable_cores=len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        load=[round(x, 2) for x in os.getloadavg()],
        gpu=gpu_name(),
        platform=platform.platform(),
        python=platform.python_version(),
        versions=versions(),
        command=" ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
    )
    if threads:
        import numba

        info["numba_threads"] = numba.get_num_threads()
    if package:
        info["napari_varblur"] = package_info()
    return {**info, **extra}


def slug(text: str) -> str:
    """Lower case, ``(R)``/``(TM)``/``CPU``/``Processor``/clock left out, dashes."""
    text = re.sub(r"\((R|TM|tm|r)\)|\bCPU\b|\bProcessor\b|@.*$|\d+-Core", " ", text)
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "unknown"


def machine_slug(info: dict[str, Any]) -> str:
    """The machine in a file name: its GPU (``nvidia-h200``), else its CPU and cores
    (``amd-epyc-2c``)."""
    if info.get("gpu"):
        return slug(info["gpu"])
    return f"{slug(info.get('cpu', 'unknown'))}-{info.get('cores') or '?'}c"


def code_text(package: dict[str, Any]) -> str:
    """The timed napari_varblur in words: version, folder, commit, uncommitted changes."""
    text = f"napari_varblur {package.get('version', '?')} from `{package.get('path', '?')}`"
    if package.get("commit"):
        text += f" at {package['commit'][:10]}"
        text += " + uncommitted changes" if package.get("dirty") else ""
    return text


def describe_machine(info: dict[str, Any]) -> str:
    """One line for a report: date, CPU and cores, GPU, load, Numba's threads, versions
    and the timed napari_varblur (also from the older scripts' machine records)."""
    cpu = info.get("cpu") or info.get("cpu_model", "?")
    cores = info.get("cores") or info.get("nproc") or info.get("cpu_count", "?")
    text = f"{cpu}, {cores} cores"
    if info.get("usable_cores") not in (None, cores):
        text += f" ({info['usable_cores']} usable)"
    parts = [str(info.get("date", "?"))[:16].replace("T", " "), text]
    if info.get("gpu"):
        parts.append(info["gpu"])
    if info.get("load"):
        parts.append("load " + ", ".join(f"{x:.2f}" for x in info["load"]))
    if "numba_threads" in info:
        parts.append(f"{info['numba_threads']} Numba threads")
    libs = info.get("versions") or {k: info[k] for k in ("numpy", "scipy", "numba") if k in info}
    parts.append(
        f"Python {info.get('python', '?')}, " + ", ".join(f"{k} {v}" for k, v in libs.items())
    )
    package = info.get("napari_varblur")
    if isinstance(package, dict):
        parts.append(code_text(package))
    elif package:
        parts.append(f"napari_varblur {package}")
    return "; ".join(parts)


# --------------------------------------------------------------------------- results


def parser(doc: str, name: str, quick: str | None = None) -> argparse.ArgumentParser:
    """A script's command line, described by its docstring's first line, with the
    shared options: ``--out`` (the JSON's path instead of
    ``results/<date>_<machine>_<name>.json``) and, given its help, ``--quick``."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    if quick:
        p.add_argument("--quick", action="store_true", help=f"{quick}; to results/quick/")
    p.add_argument("--out", help=f"the JSON's path (default results/<date>_<machine>_{name}.json)")
    return p


def result_path(name: str, info: dict[str, Any], ext: str = "json", quick: bool = False) -> Path:
    """``results/<date>_<machine>_<name>.<ext>`` (``results/quick/...`` for a quick run)."""
    folder = QUICK_RESULTS if quick else RESULTS
    return folder / f"{info['date'][:10]}_{machine_slug(info)}_{name}.{ext}"


def write_result(
    name: str,
    payload: dict[str, Any],
    info: dict[str, Any],
    *,
    out: Path | str | None = None,
    markdown: str | None = None,
    quick: bool = False,
    quiet: bool = False,
) -> Path:
    """Write ``payload`` (with ``machine: info``) as JSON at ``out`` or
    :func:`result_path`, and ``markdown`` next to it (``.md``); say where on stderr
    unless ``quiet``; the JSON's path."""
    path = Path(out) if out else result_path(name, info, quick=quick)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"machine": info, **payload}, indent=1, default=str) + "\n")
    if markdown is not None:
        path.with_suffix(".md").write_text(markdown)
    if not quiet:
        log(f"wrote {path}" + (" and .md" if markdown is not None else ""))
    return path


def latest_result(name: str, ext: str = "json") -> Path | None:
    """The newest ``results/<date>_<machine>_<name>.<ext>`` (by date, then machine)."""
    pattern = re.compile(rf"\d{{4}}-\d\d-\d\d_[a-z0-9-]+_{re.escape(name)}\.{ext}")
    found = sorted(p for p in RESULTS.glob(f"*_{name}.{ext}") if pattern.fullmatch(p.name))
    return found[-1] if found else None


def result_label(path: Path) -> tuple[str, str]:
    """The date and machine a result file's name records."""
    date, machine_part, _ = path.name.split("_", 2)
    return date, machine_part


# --------------------------------------------------------------------------- markdown


def num(x: float | None, digits: int = 3) -> str:
    """A compact number: ``digits`` significant digits, no exponent above 1000."""
    if x is None:
        return "-"
    if abs(x) >= 1000:
        return f"{x:.0f}"
    return f"{x:.{digits}g}"


def md_table(head: Sequence[str], rows: Iterable[Sequence[Any]], align: str = "") -> list[str]:
    """A markdown table's lines; ``align`` has one letter a column (``l`` or ``r``)."""
    rule = ["---:" if a == "r" else "---" for a in align.ljust(len(head), "l")]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(rule) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def main(argv: list[str] | None = None) -> int:
    """``path NAME [EXT] [--quick]``: print where that result would go here today."""
    args = sys.argv[1:] if argv is None else list(argv)
    quick = "--quick" in args
    args = [a for a in args if a != "--quick"]
    if len(args) not in (2, 3) or args[0] != "path":
        print("usage: python benchmarks/common.py path NAME [EXT] [--quick]", file=sys.stderr)
        return 2
    info = machine(package=False, threads=False)
    print(result_path(args[1], info, *args[2:], quick=quick))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
