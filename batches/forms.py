from django import forms

from batches.models import Profile
from merritt_queue.core.planning import SUBMISSION_TYPES, TYPE_WORDS

TYPE_CHOICES = [(t, TYPE_WORDS[t]) for t in SUBMISSION_TYPES]


class SubmitForm(forms.Form):
    profile = forms.ModelChoiceField(Profile.objects.all(), to_field_name="name")
    type = forms.ChoiceField(choices=TYPE_CHOICES)
    payload_url = forms.URLField(required=False, assume_scheme="https")
    file = forms.FileField(required=False)
    batchID = forms.CharField(required=False, max_length=100, label="Batch id (optional)")
    erc_who = forms.CharField(required=False, label="Who (creator)")
    erc_what = forms.CharField(required=False, label="What (title)")
    erc_when = forms.CharField(required=False, label="When (date)")
    erc_where = forms.CharField(required=False, label="Where")
    local_id = forms.CharField(required=False)
    primary_id = forms.CharField(
        required=False,
        label="ARK (optional)",
        help_text="To add a version to one of the collection's objects by its ARK; "
        "leave empty to have a new object's ARK minted or found by its local id.",
    )
    digest_type = forms.CharField(required=False)
    digest_value = forms.CharField(required=False)
    submission_mode = forms.ChoiceField(choices=[("add", "add"), ("update", "update")])
    notify_url = forms.URLField(
        required=False,
        max_length=2048,
        assume_scheme="https",
        label="Notification endpoint (optional)",
        help_text="Sent this batch's events as signed JSON (the profile's secret).",
    )
    notify_events = forms.ChoiceField(
        required=False,
        choices=[("", "every event"), ("failures", "failures only"), ("completion", "completion")],
        label="Events to send",
    )
    notify_emails = forms.CharField(
        required=False,
        max_length=2000,
        label="E-mail addresses (optional)",
        help_text="Comma-separated; told of failures as they happen and of the batch's end.",
    )
    rerun = forms.BooleanField(
        required=False,
        label="Run again if this batch id is completed or failed",
        help_text="With a batch id whose batch has completed or failed: submit this again as "
        "a new batch (a new version of its objects, or a corrected manifest's run) instead "
        "of being shown the earlier one.",
    )

    def __init__(self, *args, collections: set[str] | None = None, **kwargs):
        """``collections``: the only ones whose profiles are offered (None: all)."""
        super().__init__(*args, **kwargs)
        field = self.fields["profile"]
        assert isinstance(field, forms.ModelChoiceField) and field.queryset is not None
        if collections is not None:
            field.queryset = field.queryset.filter(collection__in=collections)
        offered = list(field.queryset[:2])
        if len(offered) == 1:  # nothing to choose: shown chosen
            field.initial, field.empty_label = offered[0], None

    def service_data(self) -> dict:
        """The fields for ``submit``; the submitter is the logged-in user, passed as ``by``."""
        data = {k: v for k, v in self.cleaned_data.items() if k != "file" and v}
        data["profile"] = self.cleaned_data["profile"].name
        return data
