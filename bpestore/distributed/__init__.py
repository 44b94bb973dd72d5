"""Work spread over a Dask cluster: counting shards of a corpus, encoding shards of a dataset.

Needs the ``dask`` extra (``pip install 'bpestore[dask]'``). Nothing here is imported by
``import bpestore``; the CLI imports it only for ``--dask``.
"""
