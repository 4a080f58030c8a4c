"""Shared test code: builders, fixtures and test doubles used by tests in every folder.

``tests/`` is on ``sys.path`` (``pythonpath = ["tests"]`` in pyproject.toml), so a test imports
``from helpers.images import png_bytes`` wherever it lives. The modules that define fixtures are
pytest plugins, registered once in ``tests/conftest.py`` (``pytest_plugins``): a test names the
fixture as an argument and imports nothing for it.

* :mod:`helpers.images`: the one PNG builder (``png_bytes``, ``write_png``).
* :mod:`helpers.cases`: the one ``make_case``, ``make_benchmark`` and ``RecordingJudge``.
* :mod:`helpers.data` (plugin): reference-layout, canonical and Hub-cache datasets as real files;
  fixtures ``reference_dir``, ``canonical_file``.
* :mod:`helpers.api` (plugin): the session's local OpenAI-compatible server; fixtures
  ``api_server_session``, ``openai_server``.
* :mod:`helpers.models` (plugin): tiny random-weight models built once per session; fixtures
  ``tiny_models_dir``, ``tiny_qwen2_vl``, ``tiny_qwen2_5_vl``, ``tiny_llava``, ``tiny_text_llama``,
  ``tiny_vlm``.
* :mod:`helpers.runs` (plugin): a store with real runs for report tests; fixture ``runs_fixture``.
* :mod:`helpers.annotate` (plugin): the annotation app's PostgreSQL cluster, input files, projects
  and servers; fixtures ``pg_cluster``, ``db_url``, ``cases_file``, ``gold_file``,
  ``project_factory``, ``serve``.
* :mod:`helpers.curation` (plugin): the benchmark builder's servers, files and fake Hub cache; fixtures
  ``answer_server``, ``tiny_llava_dir``, ``fake_hf_home``.
* :mod:`helpers.sweep` (plugin): case and sweep files, a progress recorder, store readers and the
  command line of the sweep tests; fixtures ``sweep_cases``, ``ray_cluster``.
* :mod:`helpers.slow_judge_plugin`: a judge loaded into real ``eval`` subprocesses.
* :mod:`helpers.browser`: Debian's chromium through playwright as a phone (390 x 844, touch) and a
  desktop (1280 x 800), and what the screen tests measure: sideways overflow, elements off screen,
  touch targets under 44 px, tables cut off; stitched screenshots that keep the phone a touch screen.
"""
