from django.urls import path

from inventory import premis_views, views

app_name = "inventory"

urlpatterns = [
    path("objects/", views.object_list, name="list"),
    # ARKs hold slashes (ark:/99999/fk4...): the rest of the path is the ARK. The exports
    # come first, a version's before the object's, whose ARK would otherwise swallow it.
    path(
        "objects/<path:ark>/versions/<int:version>/premis.xml",
        premis_views.object_premis,
        name="version-premis",
    ),
    path("objects/<path:ark>/premis.xml", premis_views.object_premis, name="premis"),
    path("objects/<path:ark>/", views.object_detail, name="detail"),
]
