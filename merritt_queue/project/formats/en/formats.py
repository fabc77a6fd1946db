"""The site's date formats, for what shows a date with Django's defaults (a datetime printed
as it is, the Django admin, a form's initial value): the same as the ``when`` filter
(``ui.cells.WHEN_FORMAT``), never "Nov. 27, 2026, 4:05 p.m."."""

DATETIME_FORMAT = "Y-m-d H:i:s T"
SHORT_DATETIME_FORMAT = "Y-m-d H:i:s T"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i:s"
