"""``python -m bpestore``: the same command line as the ``bpestore`` script."""

from .cli import main

if __name__ == "__main__":
    main(prog_name="bpestore")
