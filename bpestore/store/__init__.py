"""The tokenizer store: the database (:mod:`.database`), the fast read path (:mod:`.loader`), the
schema (:mod:`.schema`) and its alembic migrations (:mod:`.migrate`, ``migrations/``), references
``name@N`` (:mod:`.refs`).

Stage 4 of the pipeline. Kept free of imports here, so that the fast loader needs no SQLAlchemy.
"""
