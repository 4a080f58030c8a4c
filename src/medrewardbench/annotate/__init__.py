"""The expert annotation app: doctors screen questions and label pairs, blind, in a browser.

``medrewardbench annotate`` (see :mod:`medrewardbench.cli.annotate`) creates a project from
canonical cases, adds users, serves the web app and exports the labelled set. The modules:

* :mod:`.config`: the project directory (database URL, secret key); standard library only.
* :mod:`.db`: SQLAlchemy models, engines (SQLite in WAL mode, or PostgreSQL) and migrations.
* :mod:`.assign`: who labels what: K annotators per case with balanced load, gold cases,
  repeats in the swapped order, each annotator's own seeded A/B order.
* :mod:`.services`: one service per concern (accounts, auth, assignments, labelling, images,
  quality figures, adjudication, guidelines and audit log, creation), each checking the caller's
  identity itself; :mod:`.service`'s ``Project`` opens a project and puts them together.
* :mod:`.security`: passwords (argon2, a bounded number at once), CSRF tokens, API tokens, signatures.
* :mod:`.middleware`: the ASGI layers: trusted proxies, the request body cap, security headers.
* :mod:`.media`: images as annotators get them (pixels only, no metadata).
* :mod:`.stats`: the dashboard's figures for the command line.
* :mod:`.export`: canonical cases with per-annotator annotations, or the reference layout.
* :mod:`.web`: the FastAPI app: :mod:`.routes` (login, annotator pages, admin pages, the JSON
  API under ``/api/v1``), their shared dependencies (:mod:`.deps`), :mod:`.rendering` and the
  error answers (:mod:`.handlers`).

Importing this package is cheap: the web and database dependencies (the ``annotate`` extra)
are imported only by the modules that need them.
"""
