package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/textlogger"
)

// here returns the line it is called from; here()+1 is the next line.
func here() int {
	_, _, line, _ := runtime.Caller(1)
	return line
}

// logSample logs one line of each kind and returns the lines of the calls.
func logSample(log *slog.Logger) []int {
	var lines []int
	lines = append(lines, here()+1)
	log.Info("registration socket created", "driver", "hostpath.csi.k8s.io", "retryIn", 1500*time.Millisecond, "count", 3, "ok", true)
	lines = append(lines, here()+1)
	log.Warn("no GetInfo from the kubelet", "waited", 2*time.Minute)
	lines = append(lines, here()+1)
	log.Error("kubelet rejected the registration", "err", errors.New(`label "zone" already set`), "outcome", "rejected")
	lines = append(lines, here()+1)
	log.Debug("GetInfo from the kubelet", "socket", "/registration/x-reg.sock")
	return lines
}

// logGroups logs lines with With and WithGroup, and one that needs escapes;
// it returns the lines of the calls.
func logGroups(log *slog.Logger) []int {
	first := here() + 1
	log.With("a", 1).WithGroup("g").With("b", 2).WithGroup("h").Info("m", "c", 3, slog.Group("inner", "d", 4), slog.Group("empty"))
	log.WithGroup("g").Info("no attrs")
	log.With("driver", "d").WithGroup("grp").Error("grouped error", "k", "v")
	log.Info("escapes", "s", "tab\tquote\" nl\n \x01 é")
	return []int{first, first + 1, first + 2, first + 3}
}

// TestTextFormatGolden: --logging-format=text writes klog's header format,
// byte for byte, and every line parses with a klog-format parser.
func TestTextFormatGolden(t *testing.T) {
	var buf bytes.Buffer
	fixed := time.Date(2026, 11, 23, 7, 6, 37, 611000000, time.Local)
	log := slog.New(newTextHandler(&buf, 5, textlogger.FixedTime(fixed)))
	calls := append(logSample(log), logGroups(log)...)
	pid := fmt.Sprintf("%7d", os.Getpid())
	want := []string{
		`I1123 07:06:37.611000 ` + pid + ` logging_test.go:%d] "registration socket created" driver="hostpath.csi.k8s.io" retryIn="1.5s" count=3 ok=true`,
		`W1123 07:06:37.611000 ` + pid + ` logging_test.go:%d] "no GetInfo from the kubelet" waited="2m0s"`,
		`E1123 07:06:37.611000 ` + pid + ` logging_test.go:%d] "kubelet rejected the registration" err="label \"zone\" already set" outcome="rejected"`,
		`I1123 07:06:37.611000 ` + pid + ` logging_test.go:%d] "GetInfo from the kubelet" socket="/registration/x-reg.sock"`,
		`I1123 07:06:37.611000 ` + pid + ` logging_test.go:%d] "m" a=1 g.b=2 g.h.c=3 g.h.inner={"d":4}`,
		`I1123 07:06:37.611000 ` + pid + ` logging_test.go:%d] "no attrs"`,
		`E1123 07:06:37.611000 ` + pid + ` logging_test.go:%d] "grouped error" driver="d" grp.k="v"`,
		`I1123 07:06:37.611000 ` + pid + ` logging_test.go:%d] "escapes" s="tab\tquote\" nl\n \x01 é"`,
	}
	got := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(got), len(want), buf.String())
	}
	for i := range want {
		if w := fmt.Sprintf(want[i], calls[i]); got[i] != w {
			t.Errorf("line %d:\n got %s\nwant %s", i, got[i], w)
		}
		l, err := parseKlog(got[i])
		if err != nil {
			t.Errorf("line %d does not parse as klog: %v", i, err)
			continue
		}
		if l.pid != os.Getpid() || l.file != "logging_test.go" || l.line != calls[i] || l.month != 11 || l.day != 23 || l.clock != "07:06:37.611000" {
			t.Errorf("line %d header: %+v", i, l)
		}
	}
	first, _ := parseKlog(got[0])
	if first.severity != 'I' || first.msg != "registration socket created" || first.values["retryIn"] != "1.5s" ||
		first.values["count"] != "3" || strings.Join(first.keys, ",") != "driver,retryIn,count,ok" {
		t.Errorf("first line parsed as %+v", first)
	}
	if e, _ := parseKlog(got[2]); e.severity != 'E' || e.values["err"] != `label "zone" already set` {
		t.Errorf("error line parsed as %+v", e)
	}
	if g, _ := parseKlog(got[4]); g.values["g.h.inner"] != `{"d":4}` || g.values["g.b"] != "2" {
		t.Errorf("group line parsed as %+v", g)
	}
	if e, _ := parseKlog(got[7]); e.values["s"] != "tab\tquote\" nl\n \x01 é" {
		t.Errorf("escapes line parsed as %+v", e)
	}
}

// TestTextFormatRealClock: without a fixed time the header carries the time
// of the call.
func TestTextFormatRealClock(t *testing.T) {
	var buf bytes.Buffer
	before := time.Now()
	slog.New(newTextHandler(&buf, 0)).Info("now")
	after := time.Now()
	l, err := parseKlog(strings.TrimSuffix(buf.String(), "\n"))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := time.ParseInLocation("2006 0102 15:04:05.000000",
		fmt.Sprintf("%d %02d%02d %s", before.Year(), l.month, l.day, l.clock), time.Local)
	if err != nil {
		t.Fatal(err)
	}
	if ts.Before(before.Truncate(time.Microsecond)) || ts.After(after) {
		t.Errorf("header time %v is not between %v and %v", ts, before, after)
	}
}

// jsonLine checks line against the JSON format of Kubernetes components
// (k8s.io/component-base/logs/json): an object whose first keys are ts (a
// number: milliseconds since the epoch), caller (dir/file.go:line) and msg (a
// string); v (a whole number) unless it is an error line (component-base puts
// it after the attributes of With, and inside a group of WithGroup: use
// jsonLine on lines without groups); err, when present, is a string; there
// is no time or level key.
func jsonLine(t *testing.T, line string, isError bool) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(line))
	d.UseNumber()
	var keys []string
	if tok, err := d.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %q", line)
	}
	for d.More() {
		k, err := d.Token()
		if err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
	}
	wantFirst := []string{"ts", "caller", "msg"}
	if len(keys) < len(wantFirst) || strings.Join(keys[:len(wantFirst)], ",") != strings.Join(wantFirst, ",") {
		t.Errorf("keys %v, want them to start with %v: %s", keys, wantFirst, line)
	}
	var m map[string]any
	d = json.NewDecoder(strings.NewReader(line))
	d.UseNumber()
	if err := d.Decode(&m); err != nil {
		t.Fatal(err)
	}
	if _, ok := m["ts"].(json.Number); !ok {
		t.Errorf("ts is not a number: %s", line)
	}
	if c, ok := m["caller"].(string); !ok || strings.Count(c, "/") != 1 || !strings.Contains(c, ".go:") {
		t.Errorf("caller is not dir/file.go:line: %s", line)
	}
	if _, ok := m["msg"].(string); !ok {
		t.Errorf("msg is not a string: %s", line)
	}
	if v, ok := m["v"]; ok == isError {
		t.Errorf("v present = %v on an error line = %v: %s", ok, isError, line)
	} else if ok {
		if n, err := v.(json.Number).Int64(); err != nil || n < 0 {
			t.Errorf("v is not a whole number ≥ 0: %s", line)
		}
	}
	if e, ok := m["err"]; ok {
		if _, isStr := e.(string); !isStr {
			t.Errorf("err is not a string: %s", line)
		}
	}
	for _, k := range []string{"time", "level"} {
		if _, ok := m[k]; ok {
			t.Errorf("key %q is not in the Kubernetes JSON format: %s", k, line)
		}
	}
	return m
}

// TestJSONFormatSchema: --logging-format=json writes the JSON format of
// Kubernetes components; every line passes jsonLine and carries the values
// logged, durations as strings.
func TestJSONFormatSchema(t *testing.T) {
	var buf bytes.Buffer
	before := float64(time.Now().UnixNano()) / 1e6
	calls := logSample(newLogger(logConfig{v: 5, format: "json"}, &buf))
	after := float64(time.Now().UnixNano()) / 1e6
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d lines, want 4:\n%s", len(lines), buf.String())
	}
	for i, want := range []struct {
		isError bool
		v       string
		msg     string
		fields  map[string]any
	}{
		{false, "0", "registration socket created", map[string]any{"driver": "hostpath.csi.k8s.io", "retryIn": "1.5s", "count": json.Number("3"), "ok": true}},
		{false, "0", "no GetInfo from the kubelet", map[string]any{"waited": "2m0s"}},
		{true, "", "kubelet rejected the registration", map[string]any{"err": `label "zone" already set`, "outcome": "rejected"}},
		{false, "4", "GetInfo from the kubelet", map[string]any{"socket": "/registration/x-reg.sock"}},
	} {
		m := jsonLine(t, lines[i], want.isError)
		ts, _ := m["ts"].(json.Number).Float64()
		if ts < before-1 || ts > after+1 {
			t.Errorf("line %d: ts %f ms is not between %f and %f", i, ts, before, after)
		}
		if c := fmt.Sprintf("csi-registrar/logging_test.go:%d", calls[i]); m["caller"] != c {
			t.Errorf("line %d: caller %v, want %s", i, m["caller"], c)
		}
		if m["msg"] != want.msg || !want.isError && m["v"] != json.Number(want.v) {
			t.Errorf("line %d: msg %v v %v, want %q %s", i, m["msg"], m["v"], want.msg, want.v)
		}
		for k, v := range want.fields {
			if m[k] != v {
				t.Errorf("line %d: %s = %#v, want %#v", i, k, m[k], v)
			}
		}
	}
}

// TestJSONHandlerGroups: attributes added before and after WithGroup land in
// the right objects, and empty groups leave no trace.
func TestJSONHandlerGroups(t *testing.T) {
	var buf bytes.Buffer
	logGroups(slog.New(newJSONHandler(&buf, 0)))
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	// As component-base writes them (TestJSONFormatMatchesComponentBase).
	want := []string{
		`"msg":"m","a":1,"g":{"b":2,"h":{"v":0,"c":3,"inner":{"d":4}}}}`,
		`"msg":"no attrs","g":{"v":0}}`,
		`"msg":"grouped error","driver":"d","grp":{"k":"v"}}`,
		`"s":"tab\tquote\" nl\n \u0001 é"}`,
	}
	for i, w := range want {
		if !strings.HasSuffix(lines[i], w) {
			t.Errorf("line %d = %s, want it to end with %s", i, lines[i], w)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(lines[i]), &m); err != nil {
			t.Errorf("line %d is not JSON: %v", i, err)
		}
	}
}

// TestVerbosity: -v=n writes V(0) to V(n) (slog levels 0 to -n) and drops
// the rest, as klog's -v does, in both formats.
func TestVerbosity(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		for _, v := range []int{0, 1, 4, 5} {
			var buf bytes.Buffer
			log := newLogger(logConfig{v: v, format: format}, &buf)
			for n := 0; n <= 6; n++ {
				log.Log(context.Background(), slog.Level(-n), fmt.Sprintf("V(%d)", n))
			}
			log.Error("error")
			for n := 0; n <= 6; n++ {
				if got, want := strings.Contains(buf.String(), fmt.Sprintf(`"V(%d)"`, n)), n <= v; got != want {
					t.Errorf("%s -v=%d: V(%d) written = %v, want %v", format, v, n, got, want)
				}
			}
			if !strings.Contains(buf.String(), `"error"`) {
				t.Errorf("%s -v=%d: error line missing", format, v)
			}
		}
	}
}

// TestLogFormatsFromCommandLine: the flags and their variables choose the
// format and verbosity of what the command itself writes.
func TestLogFormatsFromCommandLine(t *testing.T) {
	const kp = "--kubelet-registration-path=/var/lib/kubelet/plugins/x/csi.sock"
	// An unknown --mode is logged (a warning), then the registrar starts
	// (captured): the first line is the command's own.
	modeArgs := []string{"csi-registrar", "register", kp, "--mode=node"}
	firstLine := func(s string) string { return strings.SplitN(s, "\n", 2)[0] }
	t.Run("text", func(t *testing.T) {
		clearPrefixedEnv(t)
		var c capture
		res := runInProcess(t, c.roles(), modeArgs...)
		l, err := parseKlog(firstLine(res.stderr))
		if res.code != 0 || err != nil || l.severity != 'W' || l.file != "register.go" || !strings.Contains(l.msg, "unknown --mode value") {
			t.Fatalf("want a klog warning from register.go first: %v; %s", err, res)
		}
	})
	for name, setup := range map[string]func(t *testing.T) []string{
		"json flag": func(*testing.T) []string { return []string{"--logging-format=json"} },
		"json variable": func(t *testing.T) []string {
			t.Setenv("CSI_REGISTRAR_LOGGING_FORMAT", "json")
			return nil
		},
	} {
		t.Run(name, func(t *testing.T) {
			clearPrefixedEnv(t)
			var c capture
			res := runInProcess(t, c.roles(), append(modeArgs, setup(t)...)...)
			if res.code != 0 {
				t.Fatal(res)
			}
			m := jsonLine(t, firstLine(res.stderr), false)
			if c, _ := m["caller"].(string); !strings.HasPrefix(c, "csi-registrar/register.go:") {
				t.Errorf("caller %q", c)
			}
		})
	}
	for name, setup := range map[string]func(t *testing.T) []string{
		"-v 4":                   func(*testing.T) []string { return []string{"-v", "4"} },
		"--v=4":                  func(*testing.T) []string { return []string{"--v=4"} },
		"CSI_REGISTRAR_V=4":      func(t *testing.T) []string { t.Setenv("CSI_REGISTRAR_V", "4"); return nil },
		"CSI_REGISTRAR_V=0":      func(t *testing.T) []string { t.Setenv("CSI_REGISTRAR_V", "0"); return nil },
		"CSI_REGISTRAR_V=4 -v=0": func(t *testing.T) []string { t.Setenv("CSI_REGISTRAR_V", "4"); return []string{"-v=0"} },
	} {
		t.Run(name, func(t *testing.T) {
			clearPrefixedEnv(t)
			var c capture
			res := runInProcess(t, c.roles(), append([]string{"csi-registrar", "register", kp}, setup(t)...)...)
			if res.code != 0 || c.registerCalls != 1 {
				t.Fatal(res)
			}
			want := strings.HasSuffix(name, "4")
			if got := c.register[0].Logger.Enabled(context.Background(), slog.LevelDebug); got != want {
				t.Errorf("debug enabled = %v, want %v", got, want)
			}
		})
	}
}
