"""``{% object_ark ark %}``: an ARK, linked to its object page when the inventory holds it."""

from django import template

from inventory.models import InventoryObject
from inventory.tables import object_link

register = template.Library()


@register.simple_tag
def object_ark(ark: str | None):
    if ark and InventoryObject.objects.filter(ark=ark).exists():
        return object_link(ark)
    return ark or "—"
