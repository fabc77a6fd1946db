from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from .forms import SubmitForm
from .submission import SubmissionError, Upload, submit


@login_required
def submit_form(request):
    form = SubmitForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        f = form.cleaned_data.get("file")
        upload = Upload(f.name, f, f.size) if f else None
        try:
            result = submit(form.service_data(request.user.get_username()), upload)
        except SubmissionError as e:
            for problem in e.problems:
                form.add_error(None, problem)
        else:
            note = "already submitted as" if result.duplicate else "submitted as"
            messages.success(request, f"Batch {note} {result.bid}.")
            return redirect("batches:submit")
    return render(request, "batches/submit.html", {"form": form})
