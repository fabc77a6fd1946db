"""The Django project: settings, URLs, WSGI, system checks, and the process's store
(``runtime``)."""
