"""Schemathesis hooks for voucherd's API tests (cmd/voucherd TestSchemathesis).

A voucher's validity window must be non-empty (startsAt before endsAt) and
must not have ended (endsAt after now): rules between two fields, and
between a field and the clock, that JSON Schema cannot state. A body that
breaks them is valid by the schema yet refused with 400. So before a body of
POST /vouchers or PATCH /vouchers/{code} is sent, its window is made usable:

- startsAt and endsAt in the wrong order are swapped;
- an endsAt before tomorrow becomes the last allowed day, and a startsAt
  not before endsAt the first;
- a PATCH with one date gets the other (one date alone may cross the
  voucher's stored date).

The `after` query parameter of the listings is a cursor the server issued
(the `next` of a previous page); any other string is refused with 400, and a
schema cannot say "a value the server gave you". So an `after` that is not
one (base64url of a JSON object) is left out of the request: the listing's
first page is asked for instead.

A reservation's replacesOrderId must differ from its orderId (a rule
between two fields): an equal one is changed in its last character.

A voucher's or campaign's discount is exactly one of discountAmount and
discountPercent, maxDiscountAmount only with discountPercent: a rule the
schema states in prose (so that client generators type the body) and the
server enforces with 400. A body of POST /vouchers or POST /campaigns that
breaks it keeps discountAmount when it has both (dropping discountPercent and
maxDiscountAmount), loses a maxDiscountAmount without discountPercent, and
gets discountAmount 1 when it has neither.

The number of codes a campaign request generates is capped at 100, so that
the run stays short (generation is measured by a benchmark instead). A body
of POST /campaigns/{id}/codes is exactly one of count and codes (a rule the
schema states in prose): one with both loses codes, one with neither gets
count 1.

A voucher's or campaign's schedule names a zone of the IANA database, each
window's from is before its to, and windows sharing a day do not overlap;
windowLimit needs a schedule: rules the schema states in prose (a zone name
is not a pattern, the others are between fields) and the server enforces
with 400. A body of POST /vouchers, POST /campaigns or PATCH
/vouchers/{code} that breaks them gets the zone UTC unless it names one of
a few known zones, a window's from and to in order (an empty window ends at
24:00), the days another window of the body already covers at the same
time dropped (and a window left with no day dropped, keeping at least the
first), and no windowLimit without a schedule (POST only: a PATCH of
windowLimit alone applies to the stored schedule).

Only these dates, cursors, replaced orderIds, discounts, code counts and
schedules change; every other part of every generated request is sent as
is.
"""
import base64
import json
import re
from datetime import datetime, timedelta, timezone

import schemathesis

EARLIEST = "1970-01-02T00:00:00Z"
LATEST = "9998-12-30T00:00:00Z"


def _instant(value):
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None


def _fix_window(body, patch):
    starts, ends = _instant(body.get("startsAt")), _instant(body.get("endsAt"))
    if patch and "startsAt" in body and "endsAt" not in body and starts is not None:
        body["endsAt"], ends = LATEST, _instant(LATEST)
    if patch and "endsAt" in body and "startsAt" not in body and ends is not None:
        body["startsAt"], starts = EARLIEST, _instant(EARLIEST)
    if starts is None or ends is None or starts.tzinfo is None or ends.tzinfo is None:
        return
    if starts > ends:
        body["startsAt"], body["endsAt"] = body["endsAt"], body["startsAt"]
        starts, ends = ends, starts
    if ends <= datetime.now(timezone.utc) + timedelta(days=1):
        body["endsAt"], ends = LATEST, _instant(LATEST)
    if starts >= ends:
        body["startsAt"] = EARLIEST


def _fix_discount(body):
    if "discountAmount" in body and "discountPercent" in body:
        del body["discountPercent"]
    if "maxDiscountAmount" in body and "discountPercent" not in body:
        del body["maxDiscountAmount"]
    if "discountAmount" not in body and "discountPercent" not in body:
        body["discountAmount"] = 1


KNOWN_ZONES = ("UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe")


def _minutes(hhmm):
    """Minutes of the day of "HH:MM" (00:00-24:00), None for anything else."""
    if not isinstance(hhmm, str) or not re.fullmatch(r"([01][0-9]|2[0-3]):[0-5][0-9]|24:00", hhmm):
        return None
    return int(hhmm[:2]) * 60 + int(hhmm[3:])


def _fix_schedule(body, patch):
    sched = body.get("schedule")
    if not isinstance(sched, dict):
        if not patch and "windowLimit" in body:
            del body["windowLimit"]
        return
    if sched.get("timeZone") not in KNOWN_ZONES:
        sched["timeZone"] = "UTC"
    windows = sched.get("windows")
    if not isinstance(windows, list):
        return
    taken = {}  # day -> [(from, to)]
    kept = []
    for w in windows:
        f, t = (_minutes(w.get("from")), _minutes(w.get("to"))) if isinstance(w, dict) else (None, None)
        if f is None or t is None:
            kept.append(w)
            continue
        if f > t:
            w["from"], w["to"], f, t = w["to"], w["from"], t, f
        if f == t:
            w["to"], t = "24:00", 24 * 60
        if f >= t:  # from was 24:00
            w["from"], f = "00:00", 0
        days = w.get("days")
        if isinstance(days, list) and all(isinstance(d, str) for d in days):
            free = [d for d in days if not any(f < b and a < t for a, b in taken.get(d, []))]
            if not free and kept:
                continue
            w["days"] = free or days[:1]
            for d in w["days"]:
                taken.setdefault(d, []).append((f, t))
        kept.append(w)
    sched["windows"] = kept


def _server_cursor(value):
    if not isinstance(value, str) or value == "":
        return False
    try:
        decoded = json.loads(base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))
    except (ValueError, TypeError):
        return False
    return isinstance(decoded, dict) and "l" in decoded


@schemathesis.hook
def before_call(ctx, case, kwargs):
    op = case.operation
    if isinstance(case.query, dict) and "after" in case.query and not _server_cursor(case.query["after"]):
        del case.query["after"]
        if isinstance(kwargs, dict) and isinstance(kwargs.get("params"), dict):
            kwargs["params"].pop("after", None)
    if not isinstance(case.body, dict):
        return
    replaces = case.body.get("replacesOrderId")
    if isinstance(replaces, str) and replaces != "" and replaces == case.body.get("orderId"):
        case.body["replacesOrderId"] = replaces[:-1] + ("x" if replaces[-1] != "x" else "y")
    if op.path in ("/vouchers", "/campaigns") and op.method.upper() == "POST":
        _fix_window(case.body, patch=False)
        _fix_discount(case.body)
        _fix_schedule(case.body, patch=False)
    # Generating codes is bounded work, not a rule; a small count keeps the
    # run short.
    if op.method.upper() == "POST":
        field = {"/campaigns": "codeCount", "/campaigns/{id}/codes": "count"}.get(op.path)
        value = case.body.get(field) if field else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and value > 100:
            case.body[field] = 100
        if op.path == "/campaigns/{id}/codes":
            if "count" in case.body and "codes" in case.body:
                del case.body["codes"]
            if "count" not in case.body and "codes" not in case.body:
                case.body["count"] = 1
    elif op.path == "/vouchers/{code}" and op.method.upper() == "PATCH":
        _fix_window(case.body, patch=True)
        _fix_schedule(case.body, patch=True)
    else:
        return
    if isinstance(kwargs, dict) and isinstance(kwargs.get("json"), dict):
        kwargs["json"] = case.body
