"""The collection scope's form in the Django admin: the collections are ticked from those the
queue knows (its profiles' and the collections its items named), not typed as JSON.

A mnemonic already in a scope stays offered even if nothing else names it any more, so saving
a scope never drops it unseen.
"""

from __future__ import annotations

from django import forms

from batches.models import Collection, Profile
from steering.models import CollectionScope


def known_collections(*kept: str) -> list[tuple[str, str]]:
    names = set(Profile.objects.values_list("collection", flat=True))
    names |= set(Collection.objects.values_list("mnemonic", flat=True))
    names |= {k for k in kept if k}
    return [(n, n) for n in sorted(names)]


class CollectionScopeForm(forms.ModelForm):
    collections = forms.MultipleChoiceField(
        choices=(),
        required=False,
        widget=forms.CheckboxSelectMultiple,
        help_text="The collections this person acts on and, as a depositor, submits to and "
        "reads. None ticked: a depositor may submit to no collection.",
    )

    class Meta:
        model = CollectionScope
        fields = ("user", "collections")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        current = self.instance.collections if self.instance.pk else []
        field = self.fields["collections"]
        assert isinstance(field, forms.MultipleChoiceField)
        field.choices = known_collections(*(current if isinstance(current, list) else []))
        if not field.choices:
            field.help_text = "No collection is known yet: add its profile (Profiles) first."
