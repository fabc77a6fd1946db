"""State diagrams laid out from the state machines in ``merritt_queue.core.states``.

Nothing here is drawn by hand: the boxes are the machine's statuses and the
arrows its transitions, so a change to a table changes the picture. Layout:

- row 1: the success path from the first status (Pending -> ... -> Completed);
- row 0, left: statuses whose success step is the first one (Held);
- row 2: Deleted on the left, Failed as one wide box under every step that can
  fail (so each "fails" and "resumes" arrow is a short vertical line), and any
  other status (UpdateReporting) to the right of Failed.

The output is plain data (boxes, arrows with SVG path coordinates); the
template turns it into inline SVG.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from merritt_queue.core.states import Machine

BOX_W = 104
BOX_H = 46
COL_GAP = 26
ROW_Y = (0, 84, 190)
MARGIN = 10
PAIR_GAP = 7  # distance between the two arrows of a back-and-forth pair


@dataclass
class Box:
    status: str
    x: float
    y: float
    w: float
    h: float
    kind: str  # step, start, held, failed, deleted, done, other
    count: int = 0
    href: str = ""

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2

    @property
    def long(self) -> bool:
        """A name too long for the box at the normal size (UpdateReporting)."""
        return len(self.status) * 7.2 > self.w - 8

    @property
    def name_y(self) -> float:
        return self.y + 18

    @property
    def count_y(self) -> float:
        return self.y + 38


@dataclass
class Arrow:
    src: str
    dst: str
    kind: str  # success, fail, delete, other
    x1: float
    y1: float
    x2: float
    y2: float

    @property
    def d(self) -> str:
        return f"M{self.x1:.1f},{self.y1:.1f} L{self.x2:.1f},{self.y2:.1f}"


@dataclass
class Diagram:
    name: str
    width: float
    height: float
    boxes: list[Box] = field(default_factory=list)
    arrows: list[Arrow] = field(default_factory=list)

    @property
    def min_width(self) -> int:
        """Narrower than this the labels get too small: the page scrolls sideways instead."""
        return round(self.width * 0.75)

    @property
    def arrow_kinds(self) -> list[str]:
        return sorted({a.kind for a in self.arrows})

    def box(self, status: str) -> Box:
        return next(b for b in self.boxes if b.status == status)


def success_path(machine: Machine) -> list[str]:
    """The statuses an item walks when every step succeeds, from the machine's first status."""
    path = [machine.statuses[0]]
    while path[-1] in machine.success and machine.success[path[-1]] not in path:
        path.append(machine.success[path[-1]])
    return path


def _col_x(col: int) -> float:
    return MARGIN + col * (BOX_W + COL_GAP)


def _place(machine: Machine) -> list[Box]:
    main = success_path(machine)
    start = main[0]
    boxes: dict[str, Box] = {}
    for i, status in enumerate(main):
        kind = "start" if i == 0 else "done" if machine.is_terminal(status) else "step"
        boxes[status] = Box(status, _col_x(i + 1), ROW_Y[1], BOX_W, BOX_H, kind)
    for status in machine.statuses:
        if status not in boxes and machine.success.get(status) == start:
            boxes[status] = Box(status, _col_x(0), ROW_Y[0], BOX_W, BOX_H, "held")
    if machine.deleted not in boxes:
        boxes[machine.deleted] = Box(machine.deleted, _col_x(0), ROW_Y[2], BOX_W, BOX_H, "deleted")
    failing = [i + 1 for i, s in enumerate(main) if machine.can_move(s, machine.failed)]
    first, last = (min(failing), max(failing)) if failing else (1, 1)
    width = _col_x(last) + BOX_W - _col_x(first)
    boxes[machine.failed] = Box(machine.failed, _col_x(first), ROW_Y[2], width, BOX_H, "failed")
    col = last + 1
    for status in machine.statuses:
        if status not in boxes:
            boxes[status] = Box(status, _col_x(col), ROW_Y[2], BOX_W, BOX_H, "other")
            col += 1
    return [boxes[s] for s in machine.statuses]


def _overlap(a0: float, a1: float, b0: float, b1: float) -> tuple[float, float] | None:
    lo, hi = max(a0, b0), min(a1, b1)
    return (lo, hi) if hi - lo > 2 * PAIR_GAP else None


def _clip(box: Box, dx: float, dy: float) -> tuple[float, float]:
    """Where the ray from the box's centre in direction (dx, dy) leaves the box."""
    sx = (box.w / 2) / abs(dx) if dx else math.inf
    sy = (box.h / 2) / abs(dy) if dy else math.inf
    s = min(sx, sy)
    return box.cx + dx * s, box.cy + dy * s


def _ends(a: Box, b: Box, shift: float) -> tuple[float, float, float, float]:
    """A straight arrow from box a to box b, moved sideways by ``shift`` (for pairs)."""
    xs = _overlap(a.x, a.x + a.w, b.x, b.x + b.w)
    if xs:  # one above the other: vertical
        x = (b.cx if b.w <= a.w else a.cx) + shift
        y1, y2 = (a.y + a.h, b.y) if a.y < b.y else (a.y, b.y + b.h)
        return x, y1, x, y2
    ys = _overlap(a.y, a.y + a.h, b.y, b.y + b.h)
    if ys:  # side by side: horizontal
        y = (ys[0] + ys[1]) / 2 + shift
        x1, x2 = (a.x + a.w, b.x) if a.x < b.x else (a.x, b.x + b.w)
        return x1, y, x2, y
    dx, dy = b.cx - a.cx, b.cy - a.cy
    length = math.hypot(dx, dy)
    # The sideways direction is the pair's (from its top-left box), not this arrow's, so that
    # the opposite signs of the two shifts put them on opposite sides.
    cdx, cdy = (dx, dy) if (a.y, a.x) < (b.y, b.x) else (-dx, -dy)
    nx, ny = -cdy / length * shift, cdx / length * shift
    x1, y1 = _clip(a, dx, dy)
    x2, y2 = _clip(b, -dx, -dy)
    return x1 + nx, y1 + ny, x2 + nx, y2 + ny


def _arrow_kind(machine: Machine, src: str, dst: str) -> str:
    if dst == machine.failed:
        return "fail"
    if dst == machine.deleted:
        return "delete"
    if machine.success.get(src) == dst:
        return "success"
    return "other"


def diagram(machine: Machine, counts: dict[str, int], href: Callable[[str], str]) -> Diagram:
    """The machine as boxes (with ``counts`` and a link ``href(status)``) and arrows."""
    boxes = _place(machine)
    for box in boxes:
        box.count = counts.get(box.status, 0)
        box.href = href(box.status)
    by_status = {b.status: b for b in boxes}
    arrows = []
    for src in machine.statuses:
        for dst in sorted(machine.transitions.get(src, ()), key=machine.statuses.index):
            pair = machine.can_move(dst, src)
            # The two arrows of a pair are shifted to opposite sides, so they run side by side.
            shift = PAIR_GAP / 2 if pair else 0.0
            forward = machine.statuses.index(src) < machine.statuses.index(dst)
            x1, y1, x2, y2 = _ends(by_status[src], by_status[dst], shift if forward else -shift)
            arrows.append(Arrow(src, dst, _arrow_kind(machine, src, dst), x1, y1, x2, y2))
    width = max(b.x + b.w for b in boxes) + MARGIN
    height = max(b.y + b.h for b in boxes) + MARGIN
    return Diagram(machine.name, width, height, boxes, arrows)
