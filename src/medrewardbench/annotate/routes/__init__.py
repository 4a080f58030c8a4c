"""The app's routers, one per audience.

:mod:`.login` (the only public page), :mod:`.pages` (an annotator's pages), :mod:`.admin` (the
organisers' pages) and :mod:`.api` (the JSON API under ``/api/v1``).
"""
