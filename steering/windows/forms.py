"""The form that schedules a maintenance window, and every check of what it is given."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django import forms
from django.utils import timezone

from batches.models import Collection, Profile, mnemonic_problem
from merritt_queue.project.env import known_time_zone
from steering.models import MaintenanceWindow

# Longest one-off window, and longest weekly occurrence: a longer stop is a decision to take
# by hand (Pause the queue, Hold on a collection), not a window left to run out.
MAX_ONCE = timedelta(days=7)
MAX_WEEKLY = timedelta(hours=24)
MIN_LENGTH = timedelta(minutes=1)
LOCAL = "%Y-%m-%dT%H:%M"
# Each recurrence's own fields: the page shows one set, and the form refuses the other's.
ONCE_FIELDS = ("start", "end")
WEEKLY_FIELDS = ("weekday", "time_of_day", "duration_minutes")


class WindowForm(forms.Form):
    scope = forms.ChoiceField(choices=MaintenanceWindow.SCOPES, initial=MaintenanceWindow.QUEUE)
    collection = forms.CharField(required=False, max_length=100, help_text="its mnemonic")
    recurrence = forms.ChoiceField(
        choices=MaintenanceWindow.RECURRENCES, initial=MaintenanceWindow.ONCE
    )
    time_zone = forms.CharField(max_length=64, help_text="IANA name, e.g. America/Los_Angeles")
    start = forms.DateTimeField(
        required=False,
        input_formats=[LOCAL, "%Y-%m-%d %H:%M"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format=LOCAL),
        help_text="in the time zone above",
    )
    end = forms.DateTimeField(
        required=False,
        input_formats=[LOCAL, "%Y-%m-%d %H:%M"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}, format=LOCAL),
    )
    weekday = forms.TypedChoiceField(
        required=False,
        coerce=int,
        empty_value=None,
        choices=[("", "—")] + [(str(n), name) for n, name in MaintenanceWindow.WEEKDAYS],
    )
    time_of_day = forms.TimeField(
        required=False,
        label="Time of day",
        widget=forms.TimeInput(attrs={"type": "time"}, format="%H:%M"),
    )
    duration_minutes = forms.IntegerField(required=False, min_value=1, label="Duration (minutes)")
    reason = forms.CharField(widget=forms.Textarea(attrs={"rows": 3, "cols": 70}))

    def __init__(self, *args, now: datetime | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.now = now or timezone.now()

    def clean_reason(self) -> str:
        reason = self.cleaned_data["reason"].strip()
        if not reason:
            raise forms.ValidationError("a reason is required")
        return reason

    def clean_time_zone(self) -> str:
        name = self.cleaned_data["time_zone"].strip()
        if not known_time_zone(name):
            raise forms.ValidationError(f"{name!r} is not a time zone this host knows")
        return name

    def clean_collection(self) -> str:
        return self.cleaned_data["collection"].strip()

    def clean(self):
        data = super().clean()
        assert data is not None
        if self.errors:
            return data
        if data["scope"] == MaintenanceWindow.COLLECTION:
            self._check_collection(data["collection"])
        else:
            data["collection"] = ""
        weekly = data["recurrence"] == MaintenanceWindow.WEEKLY
        self._refuse_the_other_kinds_fields(data, weekly)
        if weekly:
            self._check_weekly(data)
        else:
            self._check_once(data)
        return data

    def _refuse_the_other_kinds_fields(self, data, weekly: bool) -> None:
        """A field of the other recurrence, filled in, is a contradiction to settle, never a
        value quietly dropped (the page hides and disables them when script runs)."""
        if weekly:
            given = [k for k in ONCE_FIELDS if data.get(k) is not None]
            why = "a weekly window takes a weekday, a time and a duration, not a {}: "
            why += "leave it empty, or choose once"
        else:
            given = [k for k in WEEKLY_FIELDS if data.get(k) is not None]
            why = "a one-off window runs from its start to its end and takes no {}: "
            why += "leave it empty, or choose weekly"
        for key in given:
            self.add_error(key, why.format((self.fields[key].label or key).lower()))

    def _check_collection(self, mnemonic: str) -> None:
        if not mnemonic:
            self.add_error("collection", "name the collection to hold")
        elif why := mnemonic_problem(mnemonic):
            self.add_error("collection", why)
        elif not (
            Collection.objects.filter(mnemonic=mnemonic).exists()
            or Profile.objects.filter(collection=mnemonic).exists()
        ):
            self.add_error("collection", f"no collection {mnemonic} is known to the queue")

    def _check_once(self, data) -> None:
        zone = ZoneInfo(data["time_zone"])
        for key in ("start", "end"):
            if data.get(key) is None:
                self.add_error(key, "a one-off window needs a start and an end")
                return
            # The form reads the wall clock of the zone it names, whatever the page's zone.
            data[key] = (
                timezone.make_naive(data[key]) if timezone.is_aware(data[key]) else data[key]
            )
            data[key] = data[key].replace(tzinfo=zone)
        start, end = data["start"], data["end"]
        if end <= start:
            self.add_error("end", "the end must come after the start")
        elif end - start < MIN_LENGTH:
            self.add_error("end", "a window lasts at least a minute")
        elif end - start > MAX_ONCE:
            self.add_error("end", f"a window lasts at most {MAX_ONCE.days} days")
        elif end <= self.now:
            self.add_error("end", "this window would be over already")

    def _check_weekly(self, data) -> None:
        missing = [k for k in ("weekday", "time_of_day", "duration_minutes") if data.get(k) is None]
        for key in missing:
            self.add_error(key, "a weekly window needs a weekday, a time and a duration")
        if missing:
            return
        length = timedelta(minutes=data["duration_minutes"])
        if length > MAX_WEEKLY:
            self.add_error(
                "duration_minutes", f"a weekly window lasts at most {MAX_WEEKLY} (24 hours)"
            )
        data["start"] = data["end"] = None

    def window(self, user) -> MaintenanceWindow:
        """The window the valid form describes, not saved."""
        data = self.cleaned_data
        weekly = data["recurrence"] == MaintenanceWindow.WEEKLY
        return MaintenanceWindow(
            scope=data["scope"],
            collection=data["collection"],
            recurrence=data["recurrence"],
            start=data.get("start"),
            end=data.get("end"),
            weekday=data["weekday"] if weekly else None,
            time_of_day=data["time_of_day"] if weekly else None,
            duration=timedelta(minutes=data["duration_minutes"]) if weekly else None,
            time_zone=data["time_zone"],
            reason=data["reason"],
            created_by=user,
            created_by_name=user.get_username(),
        )
