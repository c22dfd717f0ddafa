"""check_json.py FILE COMMAND [MIN_ROWS] -- the JSON lines a `w8a8` command wrote follow docs/CLI.md's schema.

Every line is one JSON object (json.loads, which refuses NaN only with parse_constant: done below); the
first is the header of COMMAND; every "row" carries the common keys with their types; the percentiles are
ordered. Exits 1 with the first problem, naming the line. Python 3.9+, the standard library only.
"""
import json
import sys

HEADER = {"type": str, "schema": int, "command": str, "version": str, "build": str, "date": str, "host": str,
          "arch": (str, type(None)), "os": (str, type(None)), "cpu": (str, type(None)), "cpus": int,
          "cuda_devices": int, "argv": str}
NUM = (int, float)
OPT_NUM = (int, float, type(None))
OPT_STR = (str, type(None))
OPT_INT = (int, type(None))
ROW = {"type": str, "command": str, "impl": str, "op": str, "device": str, "device_kind": str, "dtype": str,
       "M": OPT_INT, "N": OPT_INT, "K": OPT_INT, "kernel": OPT_STR, "config": OPT_STR, "iters": int, "warmup": int,
       "p20_us": OPT_NUM, "p50_us": OPT_NUM, "p80_us": OPT_NUM, "tflops": OPT_NUM, "wrong": int}


def no_constants(name):
    raise ValueError("%s is not JSON" % name)


def check(path, command, min_rows):
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")  # a JSON text is UTF-8
    except UnicodeDecodeError as e:
        return "not UTF-8: %s" % e
    lines = text.splitlines()
    if not lines:
        return "no lines"
    rows = 0
    for i, line in enumerate(lines, 1):
        try:
            obj = json.loads(line, parse_constant=no_constants)
        except ValueError as e:
            return "line %d: not JSON: %s: %.120s" % (i, e, line)
        if not isinstance(obj, dict):
            return "line %d: not an object" % i
        want = HEADER if i == 1 else ROW if obj.get("type") == "row" else None
        if i == 1 and obj.get("type") != "header":
            return "line 1: not the header object: %.120s" % line
        if want is None:
            continue  # a summary object (tp-stack)
        for key, types in want.items():
            if key not in obj:
                return "line %d: no key %r" % (i, key)
            if isinstance(obj[key], bool) or not isinstance(obj[key], types):
                return "line %d: %r is %r" % (i, key, obj[key])
        if obj["command"] != command:
            return "line %d: command %r, not %r" % (i, obj["command"], command)
        if i == 1:
            if obj["schema"] != 1:
                return "line 1: schema %r" % obj["schema"]
            continue
        rows += 1
        if obj["device_kind"] not in ("cpu", "gpu"):
            return "line %d: device_kind %r" % (i, obj["device_kind"])
        p = [obj["p20_us"], obj["p50_us"], obj["p80_us"]]
        if None not in p and not (0 <= p[0] <= p[1] <= p[2]):
            return "line %d: percentiles out of order: %r" % (i, p)
        if obj["wrong"] != 0 and obj["impl"].startswith("w8a8"):  # (a baseline's wrong rows are its own)
            return "line %d: %d wrong elements" % (i, obj["wrong"])
    if rows < min_rows:
        return "%d rows, expected at least %d" % (rows, min_rows)
    return None


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: check_json.py FILE COMMAND [MIN_ROWS]")
    err = check(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 1)
    if err:
        print("check_json: %s: %s" % (sys.argv[1], err))
        sys.exit(1)
    print("check_json: %s: ok" % sys.argv[1])
