package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// klogLine is one line of klog's text format, as a log pipeline reads it:
//
//	I1123 07:06:37.611000       1 registrar.go:123] "msg" key="value" n=3 obj={"a":1}
type klogLine struct {
	severity   byte // I, W, E or F
	month, day int
	clock      string // hh:mm:ss.uuuuuu
	pid        int
	file       string
	line       int
	msg        string
	keys       []string          // in order
	values     map[string]string // quoted strings unquoted; numbers, booleans and JSON as written
}

// klogHeader is the header klog writes: severity, MMDD, time with
// microseconds, the thread (process) id right-aligned in 7 columns, file:line.
var klogHeader = regexp.MustCompile(`^([IWEF])(\d\d)(\d\d) (\d\d:\d\d:\d\d\.\d{6}) ([ \d]{7,}) ([^ :\]]+):(\d+)\] (.*)$`)

// parseKlog parses one line of klog's text format with structured key/value
// pairs (the format of klog.InfoS and of k8s.io/klog/v2/textlogger).
func parseKlog(s string) (klogLine, error) {
	m := klogHeader.FindStringSubmatch(s)
	if m == nil {
		return klogLine{}, fmt.Errorf("no klog header: %q", s)
	}
	l := klogLine{severity: m[1][0], clock: m[4], file: m[6], values: map[string]string{}}
	l.month, _ = strconv.Atoi(m[2])
	l.day, _ = strconv.Atoi(m[3])
	l.line, _ = strconv.Atoi(m[7])
	pid := strings.TrimLeft(m[5], " ")
	if len(m[5]) > 7 && len(pid) < len(m[5]) {
		return l, fmt.Errorf("thread id %q padded beyond 7 columns", m[5])
	}
	var err error
	if l.pid, err = strconv.Atoi(pid); err != nil {
		return l, fmt.Errorf("thread id %q: %v", m[5], err)
	}
	if l.month < 1 || l.month > 12 || l.day < 1 || l.day > 31 {
		return l, fmt.Errorf("bad date %s%s", m[2], m[3])
	}
	rest := m[8]
	q, err := strconv.QuotedPrefix(rest)
	if err != nil {
		return l, fmt.Errorf("message is not a quoted string: %q", rest)
	}
	l.msg, _ = strconv.Unquote(q)
	rest = rest[len(q):]
	for rest != "" {
		if rest[0] != ' ' {
			return l, fmt.Errorf("want a space before a key at %q", rest)
		}
		key, after, ok := strings.Cut(rest[1:], "=")
		if !ok || key == "" || strings.ContainsAny(key, " \"") {
			return l, fmt.Errorf("want key=value at %q", rest)
		}
		var raw, val string
		switch {
		case after == "":
			return l, fmt.Errorf("key %s has no value", key)
		case after[0] == '"':
			if raw, err = strconv.QuotedPrefix(after); err != nil {
				return l, fmt.Errorf("value of %s: %v", key, err)
			}
			val, _ = strconv.Unquote(raw)
		case after[0] == '{' || after[0] == '[':
			d := json.NewDecoder(strings.NewReader(after))
			var v json.RawMessage
			if err := d.Decode(&v); err != nil {
				return l, fmt.Errorf("value of %s is not JSON: %v", key, err)
			}
			raw = after[:d.InputOffset()]
			var b bytes.Buffer
			_ = json.Compact(&b, v)
			val = b.String()
		default:
			raw, _, _ = strings.Cut(after, " ")
			val = raw
		}
		if _, dup := l.values[key]; dup {
			return l, fmt.Errorf("key %s twice", key)
		}
		l.keys = append(l.keys, key)
		l.values[key] = val
		rest = after[len(raw):]
	}
	return l, nil
}

// parseLogLine parses a line of either format into its message and its
// key/value pairs as strings (JSON values other than strings as written).
func parseLogLine(s string) (msg string, kv map[string]string, ok bool) {
	if strings.HasPrefix(s, "{") {
		var m map[string]json.RawMessage
		if json.Unmarshal([]byte(s), &m) != nil {
			return "", nil, false
		}
		kv = map[string]string{}
		for k, raw := range m {
			var str string
			if json.Unmarshal(raw, &str) == nil {
				kv[k] = str
			} else {
				kv[k] = string(raw)
			}
		}
		return kv["msg"], kv, true
	}
	l, err := parseKlog(s)
	if err != nil {
		return "", nil, false
	}
	return l.msg, l.values, true
}
