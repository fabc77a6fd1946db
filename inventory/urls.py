from django.urls import path

from inventory import views

app_name = "inventory"

urlpatterns = [
    path("objects/", views.object_list, name="list"),
    # ARKs hold slashes (ark:/99999/fk4...): the rest of the path is the ARK.
    path("objects/<path:ark>/", views.object_detail, name="detail"),
]
