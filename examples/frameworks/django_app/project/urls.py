from django.urls import path
from shop import views

urlpatterns = [
    path("orders", views.place_order),
    path("orders/on-commit", views.place_order_on_commit),
    path("orders/<int:order_id>", views.show_order),
]
