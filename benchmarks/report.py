"""The results as plain-text tables (the JSON file holds the same and every run)."""

from __future__ import annotations


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Columns padded to their widest cell; the first column left-aligned, the others right-aligned."""
    widths = [max(len(str(cell)) for cell in column) for column in zip(headers, *rows)]

    def line(cells) -> str:
        return "  ".join(str(cell).ljust(width) if i == 0 else str(cell).rjust(width)
                         for i, (cell, width) in enumerate(zip(cells, widths))).rstrip()

    return "\n".join([line(headers), line("-" * width for width in widths), *map(line, rows)])


def number(value, pattern: str = "{:,.2f}") -> str:
    return "" if value is None else pattern.format(value)


def spread(row: dict) -> str:
    times = row.get("seconds_all") or []
    if len(times) < 2:
        return f"{len(times)}"
    return f"{len(times)}: {min(times):.3g}-{max(times):.3g}"


def ratio(row: dict) -> str:
    if "bpestore_over_peer" in row:
        return number(row["bpestore_over_peer"], "{:.2f}x")
    return "1x" if row["tool"].startswith("bpestore") and "seconds" in row else ""


def shorten(text: str, limit: int = 110) -> str:
    text = text.splitlines()[0] if text else ""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def facts(name: str, row: dict) -> str:
    info = row.get("info") or {}
    if row["status"] != "ok":
        return shorten(f"{row['status'].upper()}: {row.get('reason', '')}")
    if name == "train":
        extra = f", asked {info['asked']:,} (no special)" if "asked" in info else ""
        shared = info.get("learned_tokens_shared_with_bpestore")
        shared = f", {shared:,} shared with bpestore" if shared is not None else ""
        return f"vocab {info['vocab_size']:,}, {info['merges']:,} merges{extra}{shared}"
    if "tokens" in info:
        return f"{info['tokens']:,} ids"
    if "cli_help_seconds" in info:
        return f"`bpestore --help` takes {info['cli_help_seconds']:.2f} s"
    return ""


MEMORY_HEADERS = ["peak RSS MiB", "tree PSS MiB"]


def memory(row: dict) -> list[str]:
    return [number(row.get("peak_rss_mb"), "{:,.0f}"), number(row.get("tree_pss_peak_mb"), "{:,.0f}")]


def section_table(result: dict) -> str:
    rows = result["rows"]
    if result["name"] == "pathological":
        return pathological_table(rows)
    if result["name"] == "peers":
        return peers_table(rows)
    with_speed = any("mb_per_s" in row for row in rows)
    headers = ["tool", "median s", *(["MB/s"] if with_speed else []), "runs: min-max", "CPU s", "bpestore/peer",
               *MEMORY_HEADERS, "facts"]
    cells = [[row["tool"], number(row.get("seconds"), "{:,.3f}"), *([number(row.get("mb_per_s"))] if with_speed else []),
              spread(row), number(row.get("cpu_seconds"), "{:,.2f}"), ratio(row), *memory(row), facts(result["name"], row)]
             for row in rows]
    return table(headers, cells)


def pathological_table(rows: list[dict]) -> str:
    """One line per input and n: each tool's time, time per character and growth when n doubles."""
    tools = list(dict.fromkeys(row["tool"] for row in rows))
    headers = ["input", "n"]
    for tool in tools:
        headers += [f"{tool} s", "us/char", "growth x2"]
    headers += ["bpestore/peer", "bpestore peak RSS MiB", "status"]
    cells = []
    for kind, n in dict.fromkeys((row["kind"], row["n"]) for row in rows):
        line, status = [kind, f"{n:,}"], []
        same = {row["tool"]: row for row in rows if row["kind"] == kind and row["n"] == n}
        for tool in tools:
            row = same.get(tool, {"status": "missing"})
            line += [number(row.get("seconds"), "{:,.3f}"), number(row.get("us_per_char"), "{:.3f}"),
                     number(row.get("growth"), "{:.2f}")]
            if row["status"] != "ok":
                status.append(f"{tool}: {shorten(row['status'] + ' ' + row.get('reason', ''), 60)}")
        peers = [row for row in same.values() if "bpestore_over_peer" in row]
        line += [", ".join(ratio(row) for row in peers), number(same.get("bpestore", {}).get("peak_rss_mb"), "{:,.0f}"),
                 "; ".join(status) or "ok"]
        cells.append(line)
    return table(headers, cells)


def peers_table(rows: list[dict]) -> str:
    """One line per text, vocabulary, tool and pass (cold, warm)."""
    headers = ["text", "vocab", "tool", "median s", "MB/s", "runs: min-max", "CPU s", "bpestore/peer", *MEMORY_HEADERS, "facts"]
    cells = [[row["text"], row["encoding"], row["tool"], number(row.get("seconds"), "{:,.3f}"), number(row.get("mb_per_s")),
              spread(row), number(row.get("cpu_seconds"), "{:,.2f}"), ratio(row), *memory(row), facts("peers", row)]
             for row in rows]
    return table(headers, cells)


def machine_lines(machine: dict) -> list[str]:
    libraries = ", ".join(f"{name} {version or '(not installed)'}" for name, version in machine["libraries"].items())
    load = " ".join(str(x) for x in machine["load_average_at_start"])
    return [
        f"machine: {machine['cpu']}, {machine['cores']} cores ({machine['usable_cores']} usable), "
        f"{machine['memory_gib']} GiB RAM, {machine['os']}, load average at start {load}",
        f"python {machine['python']}; {libraries}; bpestore repo at {machine['git_commit'] or '(no commit)'}",
    ]


def render(results: dict) -> str:
    settings = results["settings"]
    lines = [f"bpestore benchmarks, {results['started']}", *machine_lines(results["machine"]),
             f"corpus: {settings['corpus']} ({settings['corpus_bytes'] / 1e6:,.1f} MB)",
             "times are medians over fresh processes; bpestore/peer = bpestore's time / the peer's (above 1: bpestore "
             "is slower); peak RSS = ru_maxrss of the measuring process + its largest child; tree PSS = sampled peak "
             "of the whole process tree during the measured call"]
    for result in results["sections"]:
        lines += ["", f"== {result['name']} ==", section_table(result)]
        for item in result["checks"]:
            mark = "ok" if item["ok"] else ("MISMATCH" if item["fatal"] else "warning")
            lines.append(f"  [{mark}] {item['check']}: {item['detail']}")
        lines += [f"  note: {note}" for note in result["notes"]]
    return "\n".join(lines)
