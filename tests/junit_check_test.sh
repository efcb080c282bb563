#!/usr/bin/env bash
# tests/junit_check.py rejects each kind of report junit-10.xsd rejects, accepts
# a report using every element and attribute it allows, and accepts the
# golden JUnit reports of the test suite.
set -uo pipefail
src=$1
check="python3 $src/tests/junit_check.py"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

good='<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="all" time="1.5" tests="3" failures="1" errors="1">
  <testsuite name="s" tests="3" failures="1" errors="1" skipped="1" time="0.25" timestamp="t" hostname="h" id="1"
             package="p" file="f" log="l" url="u" group="g">
    <properties><property name="k" value="v"/></properties>
    <testcase name="a" classname="c" time="0.1" group="g"><failure message="m" type="t">text</failure>
      <system-out>out</system-out><system-err>err</system-err></testcase>
    <testcase name="b"><error message="m" type="t"/>
      <rerunFailure type="t" message="m"><stackTrace>st</stackTrace><system-out>o</system-out></rerunFailure></testcase>
    <testcase name="c"><skipped message="why"/></testcase>
    <system-out>suite out</system-out>
  </testsuite>
</testsuites>'
printf '%s\n' "$good" >"$tmp/good.xml"
if ! $check "$tmp/good.xml"; then echo "FAIL: a report within junit-10.xsd was rejected"; fail=1; fi

# name|expected message part|report
bad_cases=(
  'skipped on testsuites|attribute '\''skipped'\''|<testsuites tests="0" failures="0" errors="0" skipped="0"/>'
  'unknown element|is not in junit-10.xsd|<testsuites><testsuite name="s" tests="0" failures="0" errors="0"><note/></testsuite></testsuites>'
  'testcase outside a testsuite|not allowed inside <testsuites>|<testsuites><testcase name="a"/></testsuites>'
  'assertions on testcase|attribute '\''assertions'\''|<testsuite name="s" tests="1" failures="0" errors="0"><testcase name="a" assertions="1"/></testsuite>'
  'disabled on testsuites|attribute '\''disabled'\''|<testsuites disabled="0"/>'
  'testcase without a name|required attribute '\''name'\''|<testsuite name="s" tests="1" failures="0" errors="0"><testcase classname="c"/></testsuite>'
  'testsuite without errors|required attribute '\''errors'\''|<testsuite name="s" tests="0" failures="0"/>'
  'property without a value|required attribute '\''value'\''|<testsuite name="s" tests="0" failures="0" errors="0"><properties><property name="k"/></properties></testsuite>'
  'text in a testsuite|holds text|<testsuite name="s" tests="0" failures="0" errors="0">loose text</testsuite>'
  'a bad time|SUREFIRE_TIME|<testsuite name="s" tests="0" failures="0" errors="0" time="1s"/>'
  'rerunFailure without a type|required attribute '\''type'\''|<testsuite name="s" tests="1" failures="0" errors="0"><testcase name="a"><rerunFailure/></testcase></testsuite>'
  'wrong tests count|says tests="2", its testcases make 1|<testsuite name="s" tests="2" failures="0" errors="0"><testcase name="a"/></testsuite>'
  'wrong failures count|says failures="0", its testcases make 1|<testsuite name="s" tests="1" failures="0" errors="0"><testcase name="a"><failure/></testcase></testsuite>'
  'wrong skipped count|says skipped="0", its testcases make 1|<testsuite name="s" tests="1" failures="0" errors="0" skipped="0"><testcase name="a"><skipped/></testcase></testsuite>'
  'testsuites sum|says tests="5", its testcases make 1|<testsuites tests="5"><testsuite name="s" tests="1" failures="0" errors="0"><testcase name="a"/></testsuite></testsuites>'
  'another root|expected <testsuites> or <testsuite>|<report/>'
  'not well-formed|not well-formed XML|<testsuites><testsuite></testsuites>'
)
for c in "${bad_cases[@]}"; do
  IFS='|' read -r name want xml <<<"$c"
  printf '%s\n' "$xml" >"$tmp/bad.xml"
  out=$($check "$tmp/bad.xml")
  rc=$?
  if [[ $rc -ne 1 || $out != *"$want"* ]]; then
    echo "FAIL: $name: exit $rc, expected 1 and a line with '$want'; got: $out"
    fail=1
  fi
done

# Bytes XML 1.0 cannot carry: a control character, a byte that is not UTF-8.
printf '<testsuites name="a\001b"/>\n' >"$tmp/ctl.xml"
printf '<testsuites name="a\377b"/>\n' >"$tmp/utf8.xml"
printf '<testsuites name="a&#1;b"/>\n' >"$tmp/ref.xml"
for f in ctl utf8 ref; do
  if out=$($check "$tmp/$f.xml"); then echo "FAIL: $f.xml accepted: $out"; fail=1; fi
done

# The golden reports of the test suite.
if ! $check "$src/tests/golden"; then echo "FAIL: a golden JUnit report fails the checker"; fail=1; fi
exit $fail
