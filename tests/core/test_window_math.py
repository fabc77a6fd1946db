"""The arithmetic of maintenance windows (``steering.windows.timing``): no services needed."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta

from steering.windows.timing import Occurrence, Rule


def utc(*args) -> datetime:
    return datetime(*args, tzinfo=UTC)


ONE_OFF = Rule(start=utc(2026, 5, 4, 9), end=utc(2026, 5, 4, 11))
# Sundays 01:30 to 03:30 on Los Angeles' clock.
SUNDAY_NIGHTS = Rule(
    weekly=True,
    weekday=6,
    time_of_day=time(1, 30),
    duration=timedelta(hours=2),
    zone="America/Los_Angeles",
)


def test_a_one_off_window_is_on_from_its_start_to_just_before_its_end():
    assert ONE_OFF.active(utc(2026, 5, 4, 8, 59)) is None
    assert ONE_OFF.active(utc(2026, 5, 4, 9)) == Occurrence(utc(2026, 5, 4, 9), utc(2026, 5, 4, 11))
    assert ONE_OFF.active(utc(2026, 5, 4, 10, 59, 59)) is not None
    assert ONE_OFF.active(utc(2026, 5, 4, 11)) is None


def test_the_next_start_and_what_ended_while_nobody_looked():
    assert ONE_OFF.next_after(utc(2026, 5, 4, 8)).start == utc(2026, 5, 4, 9)
    assert ONE_OFF.next_after(utc(2026, 5, 4, 9)) is None
    assert ONE_OFF.ended_between(utc(2026, 5, 4, 8), utc(2026, 5, 4, 10)) == []
    assert len(ONE_OFF.ended_between(utc(2026, 5, 4, 8), utc(2026, 5, 4, 12))) == 1
    assert ONE_OFF.ended_between(utc(2026, 5, 4, 11), utc(2026, 5, 4, 12)) == []


def test_a_weekly_window_keeps_its_local_time_across_both_changes_of_daylight_saving():
    # 2026: clocks go forward on 8 March and back on 1 November in Los Angeles.
    got = SUNDAY_NIGHTS.occurrences(utc(2026, 2, 28), utc(2026, 3, 16))
    assert [o.start for o in got] == [
        utc(2026, 3, 1, 9, 30),  # PST, UTC-8
        utc(2026, 3, 8, 9, 30),  # 01:30 PST, before the change at 02:00
        utc(2026, 3, 15, 8, 30),  # PDT, UTC-7
    ]
    got = SUNDAY_NIGHTS.occurrences(utc(2026, 10, 24), utc(2026, 11, 9))
    assert [o.start for o in got] == [
        utc(2026, 10, 25, 8, 30),
        utc(2026, 11, 1, 8, 30),
        utc(2026, 11, 8, 9, 30),  # PST again
    ]
    # 01:30 happens twice on 1 November: the first (PDT) is the one; two real hours long.
    assert all(o.end - o.start == timedelta(hours=2) for o in got)


def test_a_weekly_start_the_clocks_skip_begins_an_hour_later_on_the_new_clock():
    rule = Rule(
        weekly=True,
        weekday=6,
        time_of_day=time(2, 30),
        duration=timedelta(minutes=30),
        zone="America/Los_Angeles",
    )
    (on_the_night,) = rule.occurrences(utc(2026, 3, 8), utc(2026, 3, 9))
    assert on_the_night.start == utc(2026, 3, 8, 10, 30)  # 03:30 PDT


def test_a_weekly_window_is_bounded_by_its_first_and_last_start():
    bounded = Rule(**{**SUNDAY_NIGHTS.__dict__, "start": utc(2026, 3, 10), "end": utc(2026, 3, 23)})
    got = bounded.occurrences(utc(2026, 3, 1), utc(2026, 4, 1))
    assert [o.start for o in got] == [utc(2026, 3, 15, 8, 30), utc(2026, 3, 22, 8, 30)]


def test_a_weekly_window_on_now_and_the_next_one():
    now = utc(2026, 3, 15, 9)  # 02:00 PDT, inside 01:30 to 03:30
    assert SUNDAY_NIGHTS.active(now) == Occurrence(
        utc(2026, 3, 15, 8, 30), utc(2026, 3, 15, 10, 30)
    )
    assert SUNDAY_NIGHTS.next_after(now).start == utc(2026, 3, 22, 8, 30)


def test_a_weekly_window_that_runs_past_midnight_is_on_the_next_day_too():
    late = Rule(weekly=True, weekday=5, time_of_day=time(23), duration=timedelta(hours=3))
    assert late.active(utc(2026, 5, 10, 1)) == Occurrence(utc(2026, 5, 9, 23), utc(2026, 5, 10, 2))


def test_overlaps():
    a = Occurrence(utc(2026, 5, 4, 9), utc(2026, 5, 4, 11))
    assert a.overlaps(Occurrence(utc(2026, 5, 4, 10), utc(2026, 5, 4, 12)))
    assert not a.overlaps(Occurrence(utc(2026, 5, 4, 11), utc(2026, 5, 4, 12)))  # end meets start
    assert a.overlaps(Occurrence(utc(2026, 5, 4, 9, 30), utc(2026, 5, 4, 9, 45)))


def test_weeks_that_ended_while_nobody_looked_are_each_found():
    missed = SUNDAY_NIGHTS.ended_between(utc(2026, 4, 1), utc(2026, 4, 20))
    assert [o.start.date().isoformat() for o in missed] == [
        "2026-04-05",
        "2026-04-12",
        "2026-04-19",
    ]
