"""Build a benchmark text that stands for the world: real running text in many languages and scripts.

The text comes from two public sources, neither kept in this repository (the recipe rebuilds it):

* **LibreOffice's help**, as Debian packages it (``libreoffice-help-LANG``, MPL-2.0): the same
  manual translated by people into 32 languages: Latin-script languages with diacritics (Czech,
  Vietnamese, Turkish, Hungarian, Polish, ...), Greek, Cyrillic, Devanagari, Tibetan (Dzongkha),
  Khmer, Chinese (simplified and traditional), Japanese and Korean. The packages are fetched with
  ``apt-get download`` (Debian's registry), unpacked with ``dpkg-deb -x``, and the text of each
  page's paragraphs, headings, list items and table cells is kept.
* **The Bible corpus** of Christodoulopoulos and Steedman (CC0; a git repository
  ``christos-c/bible-corpus``), optional: ``--bible DIR`` names a checkout (or a bare git
  directory) of it, and adds the scripts LibreOffice's help lacks: Gujarati, Armenian, Syriac,
  Coptic, Cherokee, Canadian syllabics (Ojibwa), Ukrainian, and several African and American
  languages in Latin script.

Nothing is repeated or generated: within a language every paragraph is kept once; a paragraph that
also appears in the English help is dropped from the other languages (an untranslated string is
English, not the language it claims to be). Each language contributes at most ``--per-language``
bytes, cut at a paragraph boundary; languages follow one another, separated by a line holding
``<|endoftext|>`` as in the shared corpora.

    python3 benchmarks/world_corpus.py --out /tmp/world.txt [--bible /path/to/bible-corpus] [--per-language 300000]
"""

from __future__ import annotations

import argparse
import html.parser
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator
from pathlib import Path

# Debian's libreoffice-help packages, by the language folder each one installs.
LIBREOFFICE_LANGUAGES = {
    "en-us": "en-US", "ca": "ca", "cs": "cs", "da": "da", "de": "de", "dz": "dz", "el": "el", "es": "es",
    "et": "et", "eu": "eu", "fi": "fi", "fr": "fr", "gl": "gl", "hi": "hi", "hu": "hu", "id": "id",
    "it": "it", "ja": "ja", "km": "km", "ko": "ko", "nl": "nl", "om": "om", "pl": "pl", "pt": "pt",
    "pt-br": "pt-BR", "ru": "ru", "sk": "sk", "sl": "sl", "sv": "sv", "tr": "tr", "vi": "vi",
    "zh-cn": "zh-CN", "zh-tw": "zh-TW",
}
# Files of the Bible corpus small enough to be in its snapshot, for scripts the help lacks.
BIBLE_FILES = [
    "Gujarati-NT.xml", "Armenian-PART.xml", "Syriac-NT.xml", "Coptic-NT.xml", "Cherokee-NT.xml",
    "Ojibwa-NT.xml", "Ukranian-NT.xml", "Swahili-NT.xml", "Zulu-NT.xml", "Wolof-NT.xml", "Kabyle-NT.xml",
    "Latvian-NT.xml", "Basque-NT.xml",
]
_BLOCK_TAGS = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "li", "td", "th", "dd", "dt"}
_SPACE = re.compile(r"\s+")
SEPARATOR = "<|endoftext|>"


class _Paragraphs(html.parser.HTMLParser):
    """The text of a help page's block elements, one string each, outside scripts and the page's chrome."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self._depth = 0  # inside a block element (nested blocks are read as one)
        self._inside_display = False
        self._skip = 0
        self._parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "div" and dict(attrs).get("id") == "DisplayArea":
            self._inside_display = True
        if tag in ("script", "style"):
            self._skip += 1
        if tag in _BLOCK_TAGS and self._inside_display:
            self._depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style"):
            self._skip = max(0, self._skip - 1)
        if tag in _BLOCK_TAGS and self._depth:
            self._depth -= 1
            if not self._depth:
                text = _SPACE.sub(" ", "".join(self._parts)).strip()
                self._parts = []
                if len(text) >= 20:  # labels and one-word cells are not running text
                    self.paragraphs.append(text)

    def handle_data(self, data: str) -> None:
        if self._depth and not self._skip:
            self._parts.append(data)


def help_paragraphs(folder: Path) -> Iterator[str]:
    """Every paragraph of the help pages under ``folder``, in a stable (sorted) order."""
    for page in sorted(folder.rglob("*.html")):
        parser = _Paragraphs()
        parser.feed(page.read_text(encoding="utf-8", errors="replace"))
        yield from parser.paragraphs


def bible_paragraphs(xml_text: str) -> Iterator[str]:
    """The verses of a Bible corpus file, one string each."""
    for seg in ET.fromstring(xml_text).iter("seg"):
        text = _SPACE.sub(" ", seg.text or "").strip()
        if text:
            yield text


def take(paragraphs: Iterable[str], budget: int, exclude: set[str]) -> list[str]:
    """Distinct paragraphs not in ``exclude``, in order, until ``budget`` bytes of UTF-8."""
    seen: set[str] = set()
    kept: list[str] = []
    size = 0
    for text in paragraphs:
        if text in seen or text in exclude:
            continue
        seen.add(text)
        size += len(text.encode("utf-8")) + 1
        if size > budget:
            break
        kept.append(text)
    return kept


def libreoffice_help(work: Path) -> Path:
    """Download and unpack Debian's LibreOffice help packages into ``work``; the help's root folder."""
    packages = [f"libreoffice-help-{code}" for code in LIBREOFFICE_LANGUAGES]
    downloaded = subprocess.run(["apt-get", "download", "-q", *packages], cwd=work, stdout=subprocess.DEVNULL)
    if downloaded.returncode != 0:
        # (most often package lists older than the mirror, which has moved on to a newer build)
        raise SystemExit(
            f"error: apt-get download of the LibreOffice help packages failed (exit {downloaded.returncode}); "
            "if it said 404 Not Found, run `apt-get update` and try again"
        )
    root = work / "root"
    for deb in sorted(work.glob("*.deb")):
        subprocess.run(["dpkg-deb", "-x", str(deb), str(root)], check=True)
    return root / "usr/share/libreoffice/help"


def read_bible_file(bible: Path, name: str) -> str | None:
    """A file of the Bible corpus from a checkout or a bare git directory; None when absent."""
    plain = bible / "bibles" / name
    if plain.is_file():
        return plain.read_text(encoding="utf-8")
    shown = subprocess.run(["git", "--git-dir", str(bible), "show", f"HEAD:bibles/{name}"], capture_output=True)
    return shown.stdout.decode("utf-8") if shown.returncode == 0 else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, type=Path, help="the text file to write")
    parser.add_argument("--per-language", type=int, default=300_000, help="bytes of text per language at most")
    parser.add_argument("--help-root", type=Path, help="an unpacked usr/share/libreoffice/help (else downloaded)")
    parser.add_argument("--bible", type=Path, help="a checkout or bare git directory of christos-c/bible-corpus")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory() as scratch:
        root = args.help_root or libreoffice_help(Path(scratch))
        english = take(help_paragraphs(root / "en-US"), 1 << 40, set())
        english_set = set(english)
        sections: list[tuple[str, list[str]]] = [("en-US", take(english, args.per_language, set()))]
        for folder in LIBREOFFICE_LANGUAGES.values():
            if folder != "en-US":
                sections.append((folder, take(help_paragraphs(root / folder), args.per_language, english_set)))
    if args.bible:
        for name in BIBLE_FILES:
            text = read_bible_file(args.bible, name)
            if text is not None:
                sections.append((name.split("-")[0], take(bible_paragraphs(text), args.per_language, set())))
    sections = [(name, kept) for name, kept in sections if kept]
    temporary = args.out.with_name(args.out.name + ".partial")
    with open(temporary, "w", encoding="utf-8", newline="\n") as out:
        for index, (_, kept) in enumerate(sections):
            if index:
                out.write(SEPARATOR + "\n")
            out.write("\n".join(kept) + "\n")
    temporary.replace(args.out)
    for name, kept in sections:
        print(f"{name:10} {sum(len(t.encode()) + 1 for t in kept):>9} bytes {len(kept):>6} paragraphs", file=sys.stderr)
    print(f"{len(sections)} languages, {args.out.stat().st_size} bytes: {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
