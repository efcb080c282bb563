#!/usr/bin/env python3
"""Checks JUnit XML reports against the rules of the common junit-10.xsd.

junit-10.xsd is the schema the Jenkins xUnit plugin validates JUnit reports
with; the JUnit readers of GitLab and GitHub accept what it accepts. This
checker implements its rules (written for walcut from the schema's element
and attribute declarations, no schema library needed):

  testsuites   attributes name, time, tests, failures, errors (all optional);
               children: testsuite only
  testsuite    attributes name, tests, failures, errors (required), group,
               time, skipped, timestamp, hostname, id, package, file, log, url;
               children, any order: testsuite, properties, testcase,
               system-out, system-err
  properties   children: property only
  property     attributes name, value (required); empty
  testcase     attributes name (required), time, classname, group; children,
               any order: skipped, error, failure, rerunFailure, rerunError,
               flakyFailure, flakyError, system-out, system-err
  failure, error, skipped
               attributes type, message; text content
  rerunFailure, rerunError, flakyFailure, flakyError
               attributes message, type (required); text and the children
               stackTrace, system-out, system-err (each at most once, in that order)
  system-out, system-err, stackTrace
               text only
  time         (testsuite, testsuites) the SUREFIRE_TIME pattern

The document must be well-formed XML 1.0 in UTF-8 (no characters XML cannot
carry) with testsuites or testsuite as its root. Beyond the schema, which
types the counts as strings, the counts must be what the reporters compute:
tests, failures, errors and skipped are non-negative integers and, on a
testsuite, equal the numbers of its own testcases, of those with a failure,
with an error and with a skipped element; on testsuites they are the sums
over its testsuites.

Usage: junit_check.py FILE_OR_DIR...   (a directory: every *.xml below it)
Exit status 0 when every report passes, 1 otherwise (one line per problem).
"""

import os
import re
import sys
import xml.etree.ElementTree as ET

TIME = re.compile(r"^(([0-9]{0,3},)*[0-9]{3}|[0-9]{0,3})*(\.[0-9]*)?$")
COUNT = re.compile(r"^[0-9]+$")

# element -> (allowed attributes, required attributes, allowed children, text allowed)
TEXT_ONLY = (set(), set(), set(), True)
RULES = {
    "testsuites": ({"name", "time", "tests", "failures", "errors"}, set(), {"testsuite"}, False),
    "testsuite": (
        {"name", "tests", "failures", "errors", "group", "time", "skipped", "timestamp", "hostname", "id", "package",
         "file", "log", "url"},
        {"name", "tests", "failures", "errors"},
        {"testsuite", "properties", "testcase", "system-out", "system-err"},
        False,
    ),
    "properties": (set(), set(), {"property"}, False),
    "property": ({"name", "value"}, {"name", "value"}, set(), False),
    "testcase": (
        {"name", "time", "classname", "group"},
        {"name"},
        {"skipped", "error", "failure", "rerunFailure", "rerunError", "flakyFailure", "flakyError", "system-out",
         "system-err"},
        False,
    ),
    "failure": ({"type", "message"}, set(), set(), True),
    "error": ({"type", "message"}, set(), set(), True),
    "skipped": ({"type", "message"}, set(), set(), True),
    "system-out": TEXT_ONLY,
    "system-err": TEXT_ONLY,
    "stackTrace": TEXT_ONLY,
}
RERUN = ({"message", "type"}, {"type"}, {"stackTrace", "system-out", "system-err"}, True)
for _name in ("rerunFailure", "rerunError", "flakyFailure", "flakyError"):
    RULES[_name] = RERUN
RERUN_ORDER = ["stackTrace", "system-out", "system-err"]


def check_element(el, where, problems):
    rules = RULES.get(el.tag)
    if rules is None:
        problems.append(f"{where}: element <{el.tag}> is not in junit-10.xsd")
        return
    allowed, required, children, text_ok = rules
    for a in sorted(el.attrib):
        if a not in allowed:
            problems.append(f"{where}: <{el.tag}> has attribute {a!r}, which junit-10.xsd does not allow")
    for a in sorted(required):
        if a not in el.attrib:
            problems.append(f"{where}: <{el.tag}> lacks the required attribute {a!r}")
    if "time" in el.attrib and el.tag in ("testsuite", "testsuites") and not TIME.match(el.attrib["time"]):
        problems.append(f"{where}: <{el.tag}> time={el.attrib['time']!r} is not a SUREFIRE_TIME")
    if not text_ok:
        texts = [el.text] + [c.tail for c in el]
        if any(t is not None and t.strip() for t in texts):
            problems.append(f"{where}: <{el.tag}> holds text, junit-10.xsd allows only elements in it")
    if el.tag in ("rerunFailure", "rerunError", "flakyFailure", "flakyError"):
        order = [RERUN_ORDER.index(c.tag) for c in el if c.tag in RERUN_ORDER]
        if order != sorted(set(order)):
            problems.append(f"{where}: <{el.tag}> children must be stackTrace, system-out, system-err, each at most once")
    for i, c in enumerate(el):
        cw = f"{where}/{c.tag}[{i}]"
        if c.tag not in RULES:
            problems.append(f"{cw}: element <{c.tag}> is not in junit-10.xsd")
            continue
        if c.tag not in children:
            problems.append(f"{cw}: <{c.tag}> is not allowed inside <{el.tag}>")
            continue
        check_element(c, cw, problems)


def count(el, attr, where, problems):
    v = el.attrib.get(attr)
    if v is None:
        return None
    if not COUNT.match(v):
        problems.append(f"{where}: <{el.tag}> {attr}={v!r} is not a non-negative integer")
        return None
    return int(v)


def check_counts(el, where, problems):
    """The counts a reporter computes, compared with the attributes; returns them."""
    got = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for i, c in enumerate(el):
        if c.tag == "testsuite":
            sub = check_counts(c, f"{where}/testsuite[{i}]", problems)
            if el.tag == "testsuites":
                for k in got:
                    got[k] += sub[k]
        elif c.tag == "testcase":
            got["tests"] += 1
            kinds = {k.tag for k in c}
            got["failures"] += "failure" in kinds
            got["errors"] += "error" in kinds
            got["skipped"] += "skipped" in kinds
    for attr in ("tests", "failures", "errors", "skipped"):
        if attr == "skipped" and el.tag == "testsuites":
            continue  # not an attribute of testsuites
        v = count(el, attr, where, problems)
        if v is not None and v != got[attr]:
            problems.append(f"{where}: <{el.tag}> says {attr}=\"{v}\", its testcases make {got[attr]}")
    return got


def check_text(data, name):
    problems = []
    try:
        root = ET.fromstring(data)
    except ET.ParseError as e:
        return [f"{name}: not well-formed XML: {e}"]
    if root.tag not in ("testsuites", "testsuite"):
        return [f"{name}: the root is <{root.tag}>, expected <testsuites> or <testsuite>"]
    check_element(root, f"{name}: /{root.tag}", problems)
    if not problems:
        check_counts(root, f"{name}: /{root.tag}", problems)
    return problems


def check_file(path):
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        return [f"{path}: cannot read: {e.strerror}"]
    return check_text(data, path)


def main(argv):
    if len(argv) < 2:
        print("usage: junit_check.py FILE_OR_DIR...", file=sys.stderr)
        return 2
    files = []
    for arg in argv[1:]:
        if os.path.isdir(arg):
            for root, _, names in os.walk(arg):
                files += [os.path.join(root, n) for n in sorted(names) if n.endswith(".xml")]
        else:
            files.append(arg)
    problems = []
    for f in sorted(files):
        problems += check_file(f)
    for p in problems:
        print(p)
    if not problems:
        print(f"{len(files)} JUnit report{' passes' if len(files) == 1 else 's pass'} the junit-10.xsd rules")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
