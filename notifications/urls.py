from django.urls import path

from . import views

app_name = "notifications"
urlpatterns = [
    path("notifications/deliveries/<int:pk>/resend/", views.resend, name="resend"),
]
