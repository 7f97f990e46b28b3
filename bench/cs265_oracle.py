#!/usr/bin/env python3
"""Checks a CS265 server's replies against a replay of its workload.

    cs265_oracle.py WORKLOAD REPLIES      # prints one line of counts
    cs265_oracle.py --self-test

The oracle is a Python dict replayed line by line (`p K V`, `d K`, `g K`,
`r LO HI`), independent of every engine it judges. REPLIES holds one line
per `g` and `r` of WORKLOAD, in order (what `lamina exec`, `lamina client`
and the seed-004 client print: puts and deletes have no reply). Each wrong
get is counted by kind:

  deleted  a value of a key whose last operation was a delete
  stale    an older value of a key that was overwritten since
  missing  an empty reply for a key that holds a value
  other    anything else (a value never put for that key, not a number)

A range is wrong when its set of `k:v` pairs differs (their order is free).
Exits 1 when the replies do not line up with the queries, 2 on a workload
line it cannot model; wrong answers are counted, not an error.
"""

import sys

KINDS = ("deleted", "stale", "missing", "other")


class Misaligned(ValueError):
    """The replies do not line up with the workload's queries."""


class Unmodelled(ValueError):
    """A workload line the replay cannot model."""


def classify(expected, reply, earlier_values):
    """The kind of a wrong get, or None when the reply is right."""
    if reply == "":
        got = None
    else:
        try:
            got = int(reply)
        except ValueError:
            return "other"
    if got == expected:
        return None
    if got is None:
        return "missing"
    if got in earlier_values:
        return "deleted" if expected is None else "stale"
    return "other"


def check(workload_lines, reply_lines):
    """Replays the workload and returns the counts; raises Misaligned or
    Unmodelled."""
    current = {}  # key -> its value now
    earlier = {}  # key -> values it held before an overwrite or a delete
    counts = {"gets": 0, "wrong_gets": 0, "ranges": 0, "wrong_ranges": 0}
    counts.update({kind: 0 for kind in KINDS})
    replies = iter(reply_lines)
    for number, line in enumerate(workload_lines, 1):
        fields = line.split()
        if not fields:
            continue
        op, args = fields[0], fields[1:]
        try:
            nums = [int(a) for a in args]
        except ValueError:
            raise Unmodelled(f"workload line {number}: not numbers: {line.rstrip()}")
        if op == "p" and len(nums) == 2:
            key, value = nums
            old = current.get(key)
            if old is not None and old != value:
                earlier.setdefault(key, set()).add(old)
            current[key] = value
        elif op == "d" and len(nums) == 1:
            old = current.pop(nums[0], None)
            if old is not None:
                earlier.setdefault(nums[0], set()).add(old)
        elif op in ("g", "r"):
            reply = next(replies, None)
            if reply is None:
                raise Misaligned(f"the replies end before workload line {number} ({line.rstrip()})")
            reply = reply.rstrip("\n")
            if op == "g" and len(nums) == 1:
                counts["gets"] += 1
                kind = classify(current.get(nums[0]), reply.strip(), earlier.get(nums[0], ()))
                if kind is not None:
                    counts["wrong_gets"] += 1
                    counts[kind] += 1
            elif op == "r" and len(nums) == 2:
                counts["ranges"] += 1
                lo, hi = nums
                expected = {f"{k}:{v}" for k, v in current.items() if lo <= k < hi}
                if set(reply.split()) != expected:
                    counts["wrong_ranges"] += 1
            else:
                raise Unmodelled(f"workload line {number}: cannot model {line.rstrip()}")
        else:
            raise Unmodelled(f"workload line {number}: cannot model {line.rstrip()}")
    extra = sum(1 for _ in replies)
    if extra:
        raise Misaligned(f"{extra} replies more than the workload's gets and ranges")
    return counts


def format_counts(counts):
    return " ".join(f"{name}={value}" for name, value in counts.items())


def self_test():
    """The DSL's worked examples (CS265 project README), then one wrong reply
    of each kind."""
    get_example = "p 10 7\np 63 222\ng 10\ng 15\np 15 5\ng 15\n".splitlines()
    assert check(get_example, ["7", "", "5"])["wrong_gets"] == 0
    range_example = "p 10 7\np 13 2\np 17 99\np 12 22\nr 10 12\nr 10 15\nr 14 17\nr 0 100\n"
    replies = ["10:7", "10:7 12:22 13:2", "", "17:99 13:2 12:22 10:7"]
    counts = check(range_example.splitlines(), replies)
    assert counts["ranges"] == 4 and counts["wrong_ranges"] == 0, counts
    assert check(range_example.splitlines(), ["10:7", "10:7", "", ""])["wrong_ranges"] == 2
    delete_example = "p 10 7\np 12 5\ng 10\nd 10\ng 10\ng 12\n".splitlines()
    assert check(delete_example, ["7", "", "5"])["wrong_gets"] == 0
    counts = check(delete_example, ["7", "7", "5"])
    assert counts["wrong_gets"] == 1 and counts["deleted"] == 1, counts
    workload = "p 1 10\np 1 11\ng 1\np 2 5\ng 2\ng 3\ng 1\ng 1\n".splitlines()
    counts = check(workload, ["10", "", "4", "12", "x"])
    assert counts["gets"] == 5 and counts["wrong_gets"] == 5, counts
    assert (counts["stale"], counts["missing"], counts["other"]) == (1, 1, 3), counts
    # A value put again after a delete is the right answer, not a deleted one.
    assert check("p 1 10\nd 1\np 1 10\ng 1\n".splitlines(), ["10"])["wrong_gets"] == 0
    for replies in (["7", ""], ["7", "", "5", "5"]):
        try:
            check(get_example, replies)
        except Misaligned:
            continue
        raise AssertionError(f"misaligned replies {replies} were accepted")
    try:
        check(['l "file.dat"'], [])
    except Unmodelled:
        pass
    else:
        raise AssertionError("a load line was accepted")
    print("self-test passed")


def main(argv):
    if argv[1:] == ["--self-test"]:
        self_test()
        return 0
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    try:
        with open(argv[1]) as workload, open(argv[2]) as replies:
            counts = check(workload, replies)
    except Misaligned as error:
        print(f"cs265_oracle: {error}", file=sys.stderr)
        return 1
    except Unmodelled as error:
        print(f"cs265_oracle: {error}", file=sys.stderr)
        return 2
    print(format_counts(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
