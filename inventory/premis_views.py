"""An object's or a version's history as PREMIS XML: from the object page (a signed-in
person) and from the API (a bearer token, ``door.premis_api``). Both only for who may read
the object's collection (``ui.reading_scope``): anyone else gets the answer an unknown ARK
gets, so the export cannot confirm that another collection's object exists.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_safe

from inventory import premisxml, provenance
from inventory.models import InventoryObject
from ui.reading_scope import may_read

CONTENT_TYPE = "application/xml; charset=utf-8"


def readable_export(user, ark: str, version: int | None) -> bytes | None:
    """The document, or None when ``user`` may not read the object or it has no such version."""
    obj = InventoryObject.objects.filter(ark=ark).first()
    if obj is None or not may_read(user, obj.collection):
        return None
    if version is not None and not obj.versions.filter(number=version).exists():
        return None
    return premisxml.document(provenance.object_history(obj, version))


def file_name(ark: str, version: int | None) -> str:
    name = "".join(c if c.isalnum() else "-" for c in ark.removeprefix("ark:/")).strip("-")
    return f"premis-{name}{f'-v{version}' if version is not None else ''}.xml"


def xml_response(body: bytes, ark: str, version: int | None) -> HttpResponse:
    response = HttpResponse(body, content_type=CONTENT_TYPE)
    response["Content-Disposition"] = f'inline; filename="{file_name(ark, version)}"'
    return response


@require_safe
@login_required
def object_premis(request, ark: str, version: int | None = None):
    body = readable_export(request.user, ark, version)
    if body is None:
        return render(request, "inventory/object_missing.html", {"ark": ark}, status=404)
    return xml_response(body, ark, version)
