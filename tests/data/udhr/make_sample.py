"""How the parallel sample in this directory was made (run once; the tests read the files it wrote).

    python3 tests/data/udhr/make_sample.py udhr2.zip

``udhr2.zip`` is NLTK's "Universal Declaration of Human Rights Corpus (Unicode Version)" (the
``nltk_data`` repository on GitHub, ``packages/corpora/udhr2.zip``; public domain). Each language's
file holds the Declaration a paragraph a line, every article after a heading of its own
("Article 1", "Статья 1", "第一条", ...; Japanese's lacks the heading of article 23). The sample takes articles 1 to 10 of each language as its
training text (``train/LANG.txt``) and articles 11 to 15 as its development text (``dev/LANG.txt``),
each paragraph a line, headings left out (they number the articles in each language's own way).
"""

from __future__ import annotations

import re
import sys
import zipfile
from pathlib import Path

# Each language: its file in udhr2.zip, and the start of its articles' headings.
LANGUAGES = {
    "eng": ("eng", r"Article \d+$"),
    "deu": ("deu", r"Artikel \d+$"),
    "fra": ("fra", r"Article (premier|\d+)$"),
    "spa": ("spa", r"Artículo \d+$"),
    "pol": ("pol", r"Artykuł \d+$"),
    "tur": ("tur", r"Madde \d+$"),
    "vie": ("vie", r"Đi\S+ \d+:$"),  # (its letters decomposed: e, then the combining marks)
    "rus": ("rus", r"Статья \d+$"),
    "ell": ("ell_monotonic", r"ΑΡΘΡΟ \d+$"),
    "arb": ("arb", r"المادة \d+$"),
    "heb": ("heb", r"סעיף \S+\.$"),
    "hin": ("hin", r"अनुच्छेद \S+\.$"),
    "tha": ("tha", r"ข้อ \d+$"),
    "cmn": ("cmn_hans", r"第\S+条$"),
    "jpn": ("jpn", r"第\S+条$"),
    "kor": ("kor", r"제 \d+ 조$"),
}
TRAIN = range(0, 10)  # articles 1-10
DEV = range(10, 15)  # articles 11-15


def articles(text: str, heading: str) -> list[list[str]]:
    """The articles of a Declaration, each a list of its paragraphs (heading left out)."""
    found: list[list[str]] = []
    for line in (line.strip() for line in text.splitlines()):
        if re.match(heading, line):
            found.append([])
        elif line and found:
            found[-1].append(line)
    return found


def main(zip_path: str) -> None:
    here = Path(__file__).parent
    with zipfile.ZipFile(zip_path) as archive:
        for code, (name, heading) in LANGUAGES.items():
            found = articles(archive.read(f"udhr2/{name}.txt").decode("utf-8"), heading)
            assert len(found) >= 29, (code, len(found))  # (Japanese's lacks article 23's heading: one article of two)
            for part, numbers in (("train", TRAIN), ("dev", DEV)):
                (here / part).mkdir(exist_ok=True)
                lines = [line for number in numbers for line in found[number]]
                (here / part / f"{code}.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1])
