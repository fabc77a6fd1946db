"""An object's or a version's history as PREMIS XML over the API, for a bearer token: the
export the object page links (``inventory.premis_views``), within the token's user's
reading scope. An object the user may not read answers 404, exactly like one the inventory
does not hold, as the status API does.
"""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.http import require_safe

from door.tokens import with_token_user
from inventory.premis_views import readable_export, xml_response


@require_safe
@with_token_user
def api_object_premis(request, user, ark: str, version: int | None = None):
    body = readable_export(user, ark, version)
    if body is None:
        what = f"object {ark[:200]!r}" + (f" version {version}" if version is not None else "")
        return JsonResponse(
            {
                "errors": [
                    f"no {what} is known to this token: the ARK may be wrong, or belong to a "
                    "collection the token's user may not read"
                ]
            },
            status=404,
        )
    return xml_response(body, ark, version)
