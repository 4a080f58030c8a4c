"""The annotation project's services, one per concern, each checking its caller's identity.

* :mod:`.base`: the caller's :class:`~.base.Identity`, the open project (:class:`~.base.ProjectContext`),
  the access checks and the audit log every service shares.
* :mod:`.accounts`: users and API tokens. :mod:`.auth`: logins, sessions, bearer tokens.
* :mod:`.assignments`: who labels what, and each annotator's own queue and case views.
* :mod:`.labelling`: saving an annotator's answers. :mod:`.images`: images, checked and rendered.
* :mod:`.quality`: the dashboard's figures and item reviews. :mod:`.adjudication`: admin decisions.
* :mod:`.records`: guidelines and the audit log. :mod:`.creation`: making a project.

:class:`medrewardbench.annotate.service.Project` puts them together for the web app, the command
line and the exporter.
"""
