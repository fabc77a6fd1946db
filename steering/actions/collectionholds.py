"""What the collection actions do through the core: a collection held, its hold lifted
(with the choices the confirmation page offers: also the holds another tool set, and
whether the items the hold caught are released or kept), its held items released."""

from __future__ import annotations

from merritt_queue.core.store import QueueStore
from steering.actions.results import Applied, done_or_already, note_of


def hold_collection(store: QueueStore, mnemonic: str, params, note) -> Applied:
    by, _, reason = note.partition(": ")
    return done_or_already(store.holds.hold_collection(mnemonic, by=by, reason=reason))


def release_collection(store: QueueStore, mnemonic: str, params, note) -> Applied:
    """Lift the holds this side placed; those Merritt's admin set only when the person
    ticked ``also_others`` on the confirmation page (``ALSO_OTHERS``). Then, as the person
    chose (``CAUGHT``), release the items the hold caught, or keep them Held saying so.

    Caught items are released only once no hold covers the collection: one still held by
    another tool would only hold them again, so they wait for that hold, as the dispatcher
    would have them wait (``follow_collection_holds``)."""
    also = bool(params.get(ALSO_OTHERS))
    changed = store.holds.release_collection(mnemonic, also_others=also)
    kept = [name for name, ours in store.holds.collection_holds(mnemonic).items() if not ours]
    words = ["done" if changed else "already so"]
    if kept:
        words.append(kept_words(kept))
    if params.get(CAUGHT) == KEEP_CAUGHT:
        result = store.held.keep_caught_items(
            mnemonic, note_of(note, "kept on hold when the hold was lifted")
        )
        words.append(f"kept {len(result.released)} item(s) its hold caught on hold")
    elif kept:
        words.append("the items its hold caught stay Held until those holds are lifted too")
        return Applied(None, "; ".join(words))
    else:
        result = store.held.release_collection_items(
            mnemonic, note_of(note, "released with the collection's hold"), by_hold_only=True
        )
        words.append(f"released {len(result.released)} item(s) its hold caught")
    if result.skipped:
        words.append(not_done(result.skipped))
    return Applied(None, "; ".join(words), tuple(result.moved))


def not_done(skipped: dict[str, str]) -> str:
    return "not done: " + "; ".join(f"{k}: {v}" for k, v in skipped.items())


# The confirmation page's checkbox: also lift the holds another tool placed.
ALSO_OTHERS = "also_others"
ALSO_OTHERS_REASON = "also lifting the holds Merritt's admin or another tool set"
# The confirmation page's choice for the items the hold caught: released with it (the
# default), or kept Held.
CAUGHT = "caught"
KEEP_CAUGHT = "keep"
KEEP_CAUGHT_REASON = "keeping on hold the items the hold caught"


def kept_words(names: list[str]) -> str:
    return (
        f"the hold(s) Merritt's admin or another tool set under {', '.join(names)} stay "
        "(tick the box on the confirmation page to lift them too)"
    )


def release_collection_items(store: QueueStore, mnemonic: str, params, note) -> Applied:
    result = store.held.release_collection_items(mnemonic, note_of(note, "released"))
    skipped = "; ".join(f"{k}: {v}" for k, v in result.skipped.items())
    return Applied(
        None,
        f"released {len(result.released)} item(s)"
        + (f"; not released: {skipped}" if skipped else ""),
        tuple(result.moved),
    )


def release_choices(form, params: dict, reason: str) -> str:
    """What the person chose on a collection release's confirmation page (``form``: its
    POST), put into ``params`` for ``release_collection``; the reason, saying so for the
    audit trail."""
    if form.get(ALSO_OTHERS):
        params[ALSO_OTHERS] = True
        reason = f"{reason} ({ALSO_OTHERS_REASON})"
    if form.get(CAUGHT) == KEEP_CAUGHT:
        params[CAUGHT] = KEEP_CAUGHT
        reason = f"{reason} ({KEEP_CAUGHT_REASON})"
    return reason
